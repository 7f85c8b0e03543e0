// Checkpoint files (io/checkpoint.h): open and validate the safetensors
// layout, parse the user metadata, read and CRC-check every tensor (onto the
// sim device when there is one).
#include "fuzz_util.h"
#include "io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = spora::fuzz::as_file(data, size);
  spora::fuzz::expect_clean("checkpoint", [&] {
    spora::io::Checkpoint ck(path);
    spora::Device* d = spora::fuzz::device();
    for (const spora::io::TensorInfo& t : ck.entries()) {
      spora::fuzz::expect_clean("checkpoint", [&] {
        if (d) ck.read(t.name, d);
      });
    }
  });
  // The layer below, without a device: every tensor's bytes and CRC.
  spora::fuzz::expect_clean("checkpoint", [&] {
    spora::io::SafetensorsFile f(path, "checkpoint");
    for (const spora::io::TensorInfo& t : f.tensors())
      spora::fuzz::expect_clean("checkpoint", [&] { f.read(t); });
  });
  return 0;
}
