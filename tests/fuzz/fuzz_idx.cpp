// IDX files, plain (data/idx.h): the input is the file.
#include "data/idx.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = spora::fuzz::as_file(data, size);
  spora::fuzz::expect_clean("idx", [&] { spora::data::read_idx(path); });
  return 0;
}
