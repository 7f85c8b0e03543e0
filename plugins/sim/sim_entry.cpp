// Exported entry points, the device table, and the lifecycle/device queries.
//
// The sim plugin is a simulated accelerator: device memory lives in a private
// arena behind non-dereferenceable addresses, every stream is a worker
// thread, and kernels run the shared reference implementations. It always
// loads, so tests and CI can exercise the whole device path without hardware.
//
// It is as strict as a real GPU runtime (CUDA) where host code can go wrong
// (DESIGN.md section 7, docs/plugin-guide.md "What sim enforces"): pageable
// host memory is staged when an async copy is made while pinned memory is
// read when the stream gets there; copies run on a per-device copy engine
// and host callbacks on a per-device callback thread, which may not wait
// for the device; sim.lag_us keeps the device behind the host; and
// sim.fault_after_launches injects a sticky device failure.
//
// Remaining gaps (sim is kinder than CUDA here):
// - a kernel that fails on its data (a reference kernel throwing, e.g. an
//   index out of range) is an ordinary stream error reported by the next
//   synchronize, not a sticky device failure as an illegal address is on a
//   GPU; only the injected fault is sticky;
// - host callbacks may enqueue work (kernels, async copies, callbacks);
//   CUDA forbids any runtime call from a host function;
// - the copy engine is one thread for every direction and stream, so copies
//   of different streams never overlap one another (they do overlap kernels);
// - device memory is checked at allocation granularity: an out-of-range
//   access inside a live allocation, or a race between streams on one
//   buffer, is not detected;
// - pinned memory is ordinary page-aligned heap memory, and host reads of a
//   pinned d2h destination before synchronizing are not detected (lag_us
//   makes them likely to see stale bytes).
#include <string>

#include "error.h"
#include "sim_api.h"
#include "sim_state.h"

namespace spora::sim {
namespace {

using spora::plugin::guard;
using spora::plugin::make_error;

#if defined(__clang__)
constexpr const char* kBuild = "clang " __clang_version__;
#elif defined(__GNUC__)
constexpr const char* kBuild = "g++ " __VERSION__;
#else
constexpr const char* kBuild = "unknown compiler";
#endif

constexpr spora_device_api_t kTable = SPORA_SDK_TABLE(spora_device_api_t, SPORA_SIM_DEVICE_FUNCTIONS);

}  // namespace

spora_plugin_error_t* initialize() {
  return guard("sim", [] { return create_state(); });
}

spora_plugin_error_t* device_count(int32_t* out_count) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out_count) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] device_count: out_count is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    *out_count = static_cast<int32_t>(state->arenas.size());
    return nullptr;
  });
}

spora_plugin_error_t* device_properties(int32_t device, spora_device_properties_t* out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] device_properties: out is NULL");
    Arena* arena = nullptr;
    if (auto* err = get_arena("device_properties", device, &arena)) return err;
    using P = spora_device_properties_t;
    if (SPORA_STRUCT_HAS(out, P, name)) out->name = "Spora simulated accelerator";
    if (SPORA_STRUCT_HAS(out, P, vendor)) out->vendor = "Spora";
    if (SPORA_STRUCT_HAS(out, P, arch)) out->arch = "sim";
    if (SPORA_STRUCT_HAS(out, P, memory_bytes)) out->memory_bytes = arena->capacity();
    if (SPORA_STRUCT_HAS(out, P, compute_units)) out->compute_units = 1;
    if (SPORA_STRUCT_HAS(out, P, unified_memory)) out->unified_memory = 0;
    if (SPORA_STRUCT_HAS(out, P, max_streams)) out->max_streams = 0;
    if (SPORA_STRUCT_HAS(out, P, alignment)) out->alignment = static_cast<uint32_t>(kAlignment);
    return nullptr;
  });
}

void shutdown() {
  // Nothing to report to: a failure here can only be logged.
  if (spora_plugin_error_t* err = guard("sim", [] {
        destroy_state();
        return static_cast<spora_plugin_error_t*>(nullptr);
      })) {
    host_log(SPORA_LOG_ERROR, std::string("[sim] shutdown failed: ") + err->message);
    err->destroy(err);
  }
}

}  // namespace spora::sim

extern "C" {

// Pure computation: the simulator needs nothing from the machine.
SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) { spora_sdk_probe_answer(out, 50, ""); }

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, "sim", why, sizeof why))
    return spora::plugin::make_error(code, why);
  spora::sim::g_host.store(host, std::memory_order_release);
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, "sim", "0.1.0", spora::sim::kBuild, &spora::sim::kTable);
  return nullptr;
}

}  // extern "C"
