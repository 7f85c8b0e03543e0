// spora._C's profiler functions (spora_profiler_*), behind spora.Profiler.
#include <nanobind/stl/string.h>

#include "common.h"

namespace spora_py {

// Read by eager_call (dispatch.cpp) on every op: while set, eager ops carry
// the user's source line (a frame walk per op, paid only while profiling).
bool g_profile_locations = false;

void bind_profiler(nb::module_& m) {
  m.def("_profiler_start", [] {
    check(spora_profiler_start(), false);
    g_profile_locations = true;
  });
  m.def("_profiler_stop", [] {
    g_profile_locations = false;
    check(spora_profiler_stop(), false);
  });
  m.def("_profiler_running", [] {
    int32_t on = 0;
    check(spora_profiler_running(&on), false);
    return on != 0;
  });
  m.def("_profiler_write_trace",
        [](const std::string& path) { check(spora_profiler_write_trace(path.c_str()), false); });
  m.def("_profiler_summary", [] {
    const char* text = nullptr;
    check(spora_profiler_summary(&text), false);
    return std::string(text);
  });
  m.def("_profiler_range_begin", [](const std::string& category, const std::string& name) {
    uint64_t id = 0;
    check(spora_profiler_range_begin(category.c_str(), name.c_str(), &id), false);
    return id;
  });
  m.def("_profiler_range_end", [](uint64_t id) { check(spora_profiler_range_end(id), false); });
}

}  // namespace spora_py
