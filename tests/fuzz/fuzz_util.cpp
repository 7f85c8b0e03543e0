#include "fuzz_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace spora::fuzz {

std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = [] {
    const int f = memfd_create("spora-fuzz-input", 0);
    if (f < 0) {
      std::perror("spora fuzz: memfd_create");
      std::abort();
    }
    return f;
  }();
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    std::perror("spora fuzz: writing the input file");
    std::abort();
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

void report_escape(const char* target, const char* what) {
  std::fprintf(stderr, "spora fuzz %s: an exception other than spora::Error escaped the loader: %s\n", target, what);
  std::abort();
}

void report_refusal(const char* target, const char* what) {
  static const bool verbose = std::getenv("SPORA_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "spora fuzz %s: refused: %s\n", target, what);
}

}  // namespace spora::fuzz
