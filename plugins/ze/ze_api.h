// The functions behind the ze plugin's spora_device_api_t table, by the file
// that defines them; graph_* stay NULL (no on-device graph compiler yet: the
// host runs graphs op by op through the kernels). Each catches every
// exception (guard) and reports "[ze] ..." errors.
#pragma once
#include <spora/sdk/plugin_table.h>

#define SPORA_ZE_DEVICE_FUNCTIONS(X)                                                           \
  /* ze_entry.cpp: lifecycle and device queries */                                              \
  X(initialize) X(device_count) X(device_properties) X(shutdown)                               \
  /* ze_memory.cpp: zeMemAlloc* memory and copies through immediate command lists */           \
  X(mem_alloc) X(mem_free) X(host_alloc_pinned) X(host_free_pinned) X(copy_h2d) X(copy_d2h)    \
  X(copy_d2d) X(memset, memset_sync) X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async)     \
  X(memset_async)                                                                              \
  /* ze_stream_api.cpp: streams (command lists), events (ze events and timestamps) */           \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(stream_query) X(stream_wait_event) \
  X(stream_add_callback) X(stream_native_handle) X(event_create) X(event_destroy)              \
  X(event_record) X(event_query) X(event_synchronize) X(event_elapsed_ms)                      \
  /* ze_kernels.cpp: kernels from the embedded SPIR-V module */                                 \
  X(kernel_ops) X(kernel_create) X(kernel_destroy) X(kernel_launch)

namespace spora::ze {
SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(SPORA_ZE_DEVICE_FUNCTIONS)
}  // namespace spora::ze
