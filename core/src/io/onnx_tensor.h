// ONNX TensorProto -> dense host bytes in a Spora dtype: raw_data, the
// typed fields (float_data, int32_data, ...) and external data files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/onnx_proto.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace spora::io::onnx {

struct HostTensor {
  DType dtype = SPORA_DTYPE_INVALID;
  Shape shape;
  std::vector<uint8_t> bytes;  // dense row-major, little-endian
};

// The Spora dtype of an ONNX element type, or SPORA_DTYPE_INVALID.
DType spora_dtype(int32_t onnx_type);

// Decodes `t`. Every size is checked against the bytes actually present (in
// the file, or in the external file) before anything is allocated. External
// data ("location" relative to `model_dir`) must stay inside that directory
// after resolving symlinks, and its offset/length must lie inside the file.
// `what` names the model file in errors, which also name the tensor.
HostTensor decode_tensor(const TensorProto& t, const std::string& what, const std::string& model_dir);

}  // namespace spora::io::onnx
