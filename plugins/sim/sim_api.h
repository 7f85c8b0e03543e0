// The functions behind the sim plugin's spora_device_api_t table, by the file
// that defines them; members not listed stay NULL (graph_*, and
// stream_native_handle: no native stream for a collective plugin to use).
// Each catches every exception (guard) and reports "[sim] ..." errors.
#pragma once
#include <spora/sdk/plugin_table.h>

#define SPORA_SIM_DEVICE_FUNCTIONS(X)                                                        \
  /* sim_entry.cpp: lifecycle and device queries */                                          \
  X(initialize) X(device_count) X(device_properties) X(shutdown)                             \
  /* sim_copy.cpp: allocation, pinned host memory and data movement */                       \
  X(mem_alloc) X(mem_free) X(host_alloc_pinned) X(host_free_pinned) X(copy_h2d) X(copy_d2h)  \
  X(copy_d2d) X(memset, memset_sync) X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async)   \
  X(memset_async) X(memory_stats) X(reset_peak_memory_stats)                                \
  /* sim_stream_api.cpp: streams and events */                                               \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(stream_query) X(stream_wait_event) \
  X(stream_add_callback) X(event_create) X(event_destroy) X(event_record) X(event_query)     \
  X(event_synchronize) X(event_elapsed_ms)                                                   \
  /* sim_kernels.cpp: kernels, run by the reference implementations */                       \
  X(kernel_ops) X(kernel_create) X(kernel_destroy) X(kernel_launch)                          \
  /* sim_capture.cpp: stream capture (ABI 1.2) */                                            \
  X(capture_begin) X(capture_end) X(captured_launch) X(captured_destroy)

namespace spora::sim {
SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(SPORA_SIM_DEVICE_FUNCTIONS)
}  // namespace spora::sim
