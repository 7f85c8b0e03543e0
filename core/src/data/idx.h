// Reader for the IDX files MNIST and Fashion-MNIST ship in (plain or gzip).
//
// An IDX file is two zero bytes, a type code, the number of dimensions, one
// big-endian uint32 per dimension, then the values big-endian in C order.
#pragma once
#include <string>

#include "data/column.h"

namespace spora::data {

// The whole file as one column whose first dimension is the sample count.
// Types map to Spora's: u8 -> u8; i8, i16, i32 -> i32; f32 -> f32;
// f64 -> f64. Everything is checked before the data is trusted: a missing
// file is kNotFound, an unreadable one kIo, a bad magic number, unknown type
// code, header promising more bytes than the file holds (truncated download
// or cut-off gzip stream) or trailing garbage is kInvalidArgument; every
// message starts with "[dataset] <path>:".
Column read_idx(const std::string& path);

}  // namespace spora::data
