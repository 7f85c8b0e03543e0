// .npy files (frontends/cli/npy.h, the `spora run` tool's input reader). It
// reports bad files as std::runtime_error naming the file, so that is the
// one exception allowed here.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "fuzz_util.h"
#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = spora::fuzz::as_file(data, size);
  try {
    spora::cli::read_npy(path);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind(path, 0) != 0)
      spora::fuzz::report_escape("npy (a message that does not start with the file)", e.what());
  } catch (const std::exception& e) {
    spora::fuzz::report_escape("npy", e.what());
  }
  return 0;
}
