// The unit of data flowing through a pipeline: a row is one sample, made of
// named columns (e.g. "image", "label"); a column is a dense host array.
//
// Rows live on the host until the iterator hands a batch out as spora
// tensors, so transforms and workers never touch a device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace spora::data {

struct Column {
  DType dtype = SPORA_DTYPE_INVALID;
  std::vector<int64_t> shape;  // empty = a scalar
  std::vector<uint8_t> bytes;  // numel * dtype_size, row-major

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
};

using Row = std::vector<Column>;

// "(28, 28, 1)" for messages.
std::string shape_str(const std::vector<int64_t>& shape);

// A new column of `dtype` and `shape`, zero-filled.
Column make_column(DType dtype, std::vector<int64_t> shape);

}  // namespace spora::data
