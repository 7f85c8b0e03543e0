// The host's trace hooks (plugin.h, spora_host_services_t.trace_begin /
// trace_end) as the in-tree plugins use them: a span's category is
// "<plugin>.<kind>" ("cpu.kernel", "sim.kernel", "sim.copy"); work queued on
// one thread and run on another is marked with a "<plugin>.launch" span begun
// where it is queued and ended where it starts, which the host's profiler
// draws as an arrow from the launching op to the work. Both calls cost an
// indirect call and a load when no profiler runs (the host returns 0).
#pragma once
#include <spora/plugin.h>

#include <cstdint>

namespace spora::plugin {

inline const spora_host_services_t* trace_services(const spora_host_t* host) {
  const spora_host_services_t* s = SPORA_STRUCT_HAS(host, spora_host_t, services) ? host->services : nullptr;
  return SPORA_STRUCT_HAS(s, spora_host_services_t, trace_end) && s->trace_begin && s->trace_end ? s : nullptr;
}

// A span id, or 0 when the host does not trace.
inline uint64_t trace_begin(const spora_host_t* host, const char* category, const char* name) {
  const spora_host_services_t* s = trace_services(host);
  return s ? s->trace_begin(s->ctx, category, name) : 0;
}

inline void trace_end(const spora_host_t* host, uint64_t id) {
  if (id == 0) return;
  if (const spora_host_services_t* s = trace_services(host)) s->trace_end(s->ctx, id);
}

}  // namespace spora::plugin
