// The functions behind the CUDA/ROCm plugin's spora_device_api_t table, by
// the file that defines them; graph_* stay NULL. Each catches every
// exception (guard) and reports "[cuda] ..." / "[rocm] ..." errors.
#pragma once
#include <spora/sdk/plugin_table.h>

#define SPORA_GPU_DEVICE_FUNCTIONS(X)                                                          \
  /* gpu_entry.cpp: lifecycle and device queries */                                            \
  X(initialize) X(device_count) X(device_properties) X(shutdown)                               \
  /* gpu_memory.cpp: allocation (gpu_alloc.cpp's pools), statistics, data movement */          \
  X(mem_alloc) X(mem_free) X(host_alloc_pinned) X(host_free_pinned) X(copy_h2d) X(copy_d2h)    \
  X(copy_d2d) X(memset, memset_sync) X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async)     \
  X(memset_async) X(memory_stats) X(reset_peak_memory_stats)                                  \
  /* gpu_stream.cpp: streams (with their native cudaStream_t for nccl) and events */           \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(stream_query) X(stream_wait_event) \
  X(stream_add_callback) X(stream_native_handle) X(event_create) X(event_destroy)              \
  X(event_record) X(event_query) X(event_synchronize) X(event_elapsed_ms)                      \
  /* gpu_kernels.cpp: planning and launching the CUDA/HIP kernels of kernels/ */                \
  X(kernel_ops) X(kernel_create) X(kernel_destroy) X(kernel_launch)                            \
  /* gpu_capture.cpp: stream capture as CUDA/HIP graphs (ABI 1.2) */                            \
  X(capture_begin) X(capture_end) X(captured_launch) X(captured_destroy)

namespace spora::gpu {
SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(SPORA_GPU_DEVICE_FUNCTIONS)
}  // namespace spora::gpu
