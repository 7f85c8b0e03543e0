// .npy files (NumPy's array format, versions 1-3) for the `spora` tool:
// read an input, write an output. Only what Spora tensors hold: little-
// endian f32, f64, f16, i32, i64, u8 and bool, C order. bf16 has no NumPy
// dtype and is written as f32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <spora/spora.h>

namespace spora::cli {

struct NpyArray {
  spora_dtype_t dtype = SPORA_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // dense row-major, little-endian
};

// Reads `path`. Throws std::runtime_error naming the file for anything it
// cannot take: not a .npy file, a header that does not parse, big-endian or
// unsupported dtypes, Fortran order, a shape past SPORA_MAX_NDIM or whose
// byte count overflows, and data shorter or longer than the shape needs
// (checked against the file size before reading the data).
NpyArray read_npy(const std::string& path);

// Writes `a` as a version-1 .npy file (bf16 converted to f32). Throws
// std::runtime_error naming the file on I/O errors.
void write_npy(const std::string& path, const NpyArray& a);

}  // namespace spora::cli
