// C API: the profiler (runtime/profiler.h).
#include "abi/abi.h"
#include "runtime/profiler.h"

using spora::abi::guard;
using spora::abi::need;

extern "C" {

spora_status_t spora_profiler_start(void) {
  return guard([] { spora::profiler::start(); });
}

spora_status_t spora_profiler_stop(void) {
  return guard([] { spora::profiler::stop(); });
}

spora_status_t spora_profiler_running(int32_t* out) {
  return guard([&] { *need(out, "spora_profiler_running", "out") = spora::profiler::running() ? 1 : 0; });
}

spora_status_t spora_profiler_write_trace(const char* path) {
  return guard([&] { spora::profiler::write_trace(need(path, "spora_profiler_write_trace", "path")); });
}

spora_status_t spora_profiler_summary(const char** out) {
  return guard([&] {
    need(out, "spora_profiler_summary", "out");
    thread_local std::string text;
    text = spora::profiler::summary();
    *out = text.c_str();
  });
}

spora_status_t spora_profiler_range_begin(const char* category, const char* name, uint64_t* out) {
  return guard([&] {
    need(name, "spora_profiler_range_begin", "name");
    *need(out, "spora_profiler_range_begin", "out") = spora::profiler::range_begin(category ? category : "range", name);
  });
}

spora_status_t spora_profiler_range_end(uint64_t id) {
  return guard([&] { spora::profiler::range_end(id); });
}

}  // extern "C"
