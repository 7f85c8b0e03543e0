// Shared by the libFuzzer targets of tests/fuzz: the input as a file (the
// loaders take paths), the device the loaders read onto, and the rule for
// what a loader may throw.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace spora {
class Device;
}

namespace spora::fuzz {

// Writes the bytes to this process's one in-memory file (memfd) and returns
// a path that opens it afresh ("/proc/self/fd/N"): no disk, no leftovers.
std::string as_file(const uint8_t* data, size_t size);

// The sim device of the plugin directory SPORA_FUZZ_PLUGIN_DIR (run.sh sets
// it to the normal build's), or nullptr when there is none; the targets then
// stop before the steps that need a device. The probe sandbox is switched
// off: its helper is not beside a fuzz binary, and a fork per start of the
// fuzzer is not what is being tested.
Device* device();

// Runs `body`; spora::Error is the loaders' documented way to refuse input
// (printed when SPORA_FUZZ_VERBOSE is set: to see why a seed is refused).
// Anything else that escapes (std::out_of_range, a JSON library exception,
// std::bad_alloc from a size the loader trusted) is a finding: it is printed
// and the process aborts, so libFuzzer records the input.
template <class F>
void expect_clean(const char* target, F&& body);

void report_escape(const char* target, const char* what);
void report_refusal(const char* target, const char* what);

}  // namespace spora::fuzz

#include "support/error.h"

template <class F>
void spora::fuzz::expect_clean(const char* target, F&& body) {
  try {
    body();
  } catch (const spora::Error& e) {
    report_refusal(target, e.what());
  } catch (const std::exception& e) {
    report_escape(target, e.what());
  }
}
