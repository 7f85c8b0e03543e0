// The device memory allocator of the CUDA/ROCm plugin (mem_alloc, mem_free,
// memory_stats): a stream-ordered caching allocator over the runtime's
// memory pools (cudaMallocFromPoolAsync / cudaFreeAsync on a plugin-owned
// pool per device that keeps freed memory for reuse instead of returning it
// to the driver), with byte counters per device.
//
// mem_free has no stream argument, yet must not let queued work see its
// block reused. The allocator therefore knows the device's live streams
// (gpu_stream.cpp registers them) and orders every allocation and free
// after all of them:
//  - one live stream (the host's usual case): blocks are allocated and
//    freed on that stream itself, so stream order alone keeps a reused block
//    away from the work queued before its free -- no event, no wait;
//    small freed blocks (up to 1 MiB, 64 MiB in all) are even kept by the
//    allocator and handed out again for the same rounded size without a
//    runtime call (an eager op's output costs no cudaMallocFromPoolAsync /
//    cudaFreeAsync), and given back to the pool on that stream before the
//    set of live streams changes or when memory runs out;
//  - several live streams: a free first makes the allocator's own stream
//    wait for an event recorded on every live stream, then frees there; an
//    allocation is made on that stream and every live stream waits for it;
//  - a new stream waits for the ends of the existing ones, so it cannot
//    touch a block before the stream that allocated it reached the
//    allocation;
//  - while a stream is being captured into a CUDA graph, frees are
//    deferred to the next allocator call made outside capture, and
//    allocations are made on the allocator's stream and waited for.
// `<plugin>.allocator` (SPORA_CUDA_ALLOCATOR / SPORA_ROCM_ALLOCATOR) =
// "malloc" selects cudaMalloc/cudaFree per block instead (cudaFree waits for
// the whole device), for comparison and debugging; devices without memory
// pools use it too. The allocator never holds its lock while it waits for
// the device (host callbacks may free memory), except for an allocation
// made during a capture.
#pragma once
#include <spora/plugin.h>

#include <cstddef>
#include <cstdint>

#include "gpu_runtime.h"

namespace spora::gpu::alloc {

// Both called with `device` current (use_device). `size` 0 still gives a
// unique address.
spora_plugin_error_t* allocate(int32_t device, size_t size, void** out);
// Refuses an address allocate did not return, or one already freed.
spora_plugin_error_t* release(int32_t device, void* ptr);

// gpu_stream.cpp: `stream` was created on `device` (current), or is about to
// be destroyed (after its work finished).
spora_plugin_error_t* stream_added(int32_t device, cudaStream_t stream);
void stream_removed(int32_t device, cudaStream_t stream);

spora_plugin_error_t* stats(int32_t device, spora_memory_stats_t* out);
spora_plugin_error_t* reset_peak(int32_t device);

}  // namespace spora::gpu::alloc
