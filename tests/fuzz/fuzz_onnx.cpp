// ONNX import (io/onnx_import.h): protobuf wire decoding, the ONNX schema,
// initializers and every op converter, from bytes in memory (external data
// refused: no model directory).
#include "fuzz_util.h"
#include "io/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spora::fuzz::expect_clean("onnx", [&] { spora::io::onnx::import_bytes(data, size, "fuzz.onnx", ""); });
  return 0;
}
