// The functions behind the cpu plugin's spora_device_api_t table, by the file
// that defines them. Members not listed stay NULL: no pinned memory (device
// memory is host memory), no native stream, no graph compiler.
#pragma once
#include <spora/sdk/plugin_table.h>

#define SPORA_CPU_DEVICE_FUNCTIONS(X)                                                            \
  /* cpu_entry.cpp: lifecycle and the one device (the host) */                                   \
  X(initialize) X(device_count) X(device_properties) X(shutdown)                                 \
  /* cpu_memory.cpp: aligned host allocations, memmove copies (async ones complete inline) */   \
  X(mem_alloc) X(mem_free) X(copy_h2d) X(copy_d2h) X(copy_d2d) X(memset, memset_sync)             \
  X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async) X(memset_async)                          \
  X(memory_stats) X(reset_peak_memory_stats)                                                     \
  /* cpu_stream.cpp: inline streams, timestamp events */                                         \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(stream_query) X(stream_wait_event)  \
  X(stream_add_callback) X(event_create) X(event_destroy) X(event_record) X(event_query)         \
  X(event_synchronize) X(event_elapsed_ms)                                                       \
  /* cpu_kernels.cpp: oneDNN and reference kernels */                                            \
  X(kernel_ops) X(kernel_create) X(kernel_destroy) X(kernel_launch)

namespace spora::cpu {
SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(SPORA_CPU_DEVICE_FUNCTIONS)
}  // namespace spora::cpu
