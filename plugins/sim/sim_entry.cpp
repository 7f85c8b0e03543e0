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

// graph_* and stream_native_handle stay NULL: the sim device has no graph
// compiler and no native stream for a collective plugin to use. It has
// pinned memory, which async copies treat differently from pageable memory
// (sim_copy.cpp).
spora_device_api_t make_table() {
  spora_device_api_t t{};
  t.struct_size = sizeof(spora_device_api_t);
  t.extensions = nullptr;
  t.initialize = initialize;
  t.device_count = device_count;
  t.device_properties = device_properties;
  t.mem_alloc = mem_alloc;
  t.mem_free = mem_free;
  t.host_alloc_pinned = host_alloc_pinned;
  t.host_free_pinned = host_free_pinned;
  t.copy_h2d = copy_h2d;
  t.copy_d2h = copy_d2h;
  t.copy_d2d = copy_d2d;
  t.memset = memset_sync;
  t.copy_h2d_async = copy_h2d_async;
  t.copy_d2h_async = copy_d2h_async;
  t.copy_d2d_async = copy_d2d_async;
  t.memset_async = memset_async;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_synchronize = stream_synchronize;
  t.stream_query = stream_query;
  t.stream_wait_event = stream_wait_event;
  t.stream_add_callback = stream_add_callback;
  t.event_create = event_create;
  t.event_destroy = event_destroy;
  t.event_record = event_record;
  t.event_query = event_query;
  t.event_synchronize = event_synchronize;
  t.event_elapsed_ms = event_elapsed_ms;
  t.kernel_ops = kernel_ops;
  t.kernel_create = kernel_create;
  t.kernel_destroy = kernel_destroy;
  t.kernel_launch = kernel_launch;
  t.shutdown = shutdown;
  return t;
}

const spora_device_api_t* device_table() {
  static const spora_device_api_t table = make_table();
  return &table;
}

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

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  // Pure computation: the simulator needs nothing from the machine.
  if (!SPORA_STRUCT_HAS(out, spora_probe_result_t, score)) return;
  out->score = 50;
  if (SPORA_STRUCT_HAS(out, spora_probe_result_t, reason)) out->reason[0] = '\0';
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host,
                                                                spora_plugin_info_t* out) {
  using spora::plugin::make_error;
  return spora::plugin::guard("sim", [&]() -> spora_plugin_error_t* {
    if (!SPORA_STRUCT_HAS(host, spora_host_t, abi_major)) {
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] entry: host is NULL or too small");
    }
    if (host->abi_major != SPORA_PLUGIN_ABI_MAJOR) {
      return make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[sim] host ABI major " + std::to_string(host->abi_major) +
                                                        ", plugin built for " +
                                                        std::to_string(SPORA_PLUGIN_ABI_MAJOR));
    }
    if (!SPORA_STRUCT_HAS(out, spora_plugin_info_t, api)) {
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] entry: plugin info is NULL or too small");
    }
    spora::sim::g_host.store(host, std::memory_order_release);
    out->abi_major = SPORA_PLUGIN_ABI_MAJOR;
    out->abi_minor = SPORA_PLUGIN_ABI_MINOR;
    out->kind = SPORA_PLUGIN_KIND_DEVICE;
    out->name = "sim";
    out->version = "0.1.0";
    out->build = spora::sim::kBuild;
    out->api = spora::sim::device_table();
    if (SPORA_STRUCT_HAS(out, spora_plugin_info_t, extensions)) out->extensions = nullptr;
    return nullptr;
  });
}

}  // extern "C"
