// Device memory (through gpu_alloc.h) and its statistics, pinned host
// memory, synchronous and stream-ordered copies.
//
// The synchronous copies synchronize the device before and after: the
// contract orders them after all work already enqueued on any of the
// device's streams (which are non-blocking, so a plain cudaMemcpy would not
// wait for them), and they return only once the data has arrived.
#include <string>

#include "error.h"
#include "gpu_alloc.h"
#include "gpu_api.h"
#include "gpu_state.h"
#include "gpu_trace.h"

namespace spora::gpu {
namespace {

using spora::plugin::guard;

spora_plugin_error_t* check(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? nullptr : runtime_error(what, e);
}

spora_plugin_error_t* sync_copy(const char* what, int32_t device, void* dst, const void* src, size_t size,
                                int kind) {
  if (size == 0) return nullptr;
  if (!dst || !src) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  if (auto* err = use_device(what, device)) return err;
  if (auto* err = check(std::string(what) + ": cudaDeviceSynchronize", cudaDeviceSynchronize())) return err;
  if (auto* err = check(std::string(what) + ": cudaMemcpy",
                        cudaMemcpy(dst, src, size, static_cast<decltype(cudaMemcpyHostToDevice)>(kind))))
    return err;
  return check(std::string(what) + ": cudaDeviceSynchronize", cudaDeviceSynchronize());
}

spora_plugin_error_t* async_copy(const char* what, spora_stream_t* stream, void* dst, const void* src, size_t size,
                                 int kind) {
  std::shared_ptr<Stream> s;
  if (auto* err = get_stream(what, stream, &s)) return err;
  if (size == 0) return nullptr;
  if (!dst || !src) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  // The profiler's copy spans are named as the sim plugin's: h2d, d2h, d2d.
  const char* name = kind == static_cast<int>(cudaMemcpyHostToDevice)   ? "h2d"
                     : kind == static_cast<int>(cudaMemcpyDeviceToHost) ? "d2h"
                                                                         : "d2d";
  StreamTrace::Mark mark;
  if (s->trace) mark = s->trace->before(s->stream, StreamTrace::Kind::kCopy, name);
  const cudaError_t e =
      cudaMemcpyAsync(dst, src, size, static_cast<decltype(cudaMemcpyHostToDevice)>(kind), s->stream);
  if (s->trace) s->trace->after(mark, s->stream);
  return check(std::string(what) + ": cudaMemcpyAsync", e);
}

}  // namespace

// Device memory comes from the stream-ordered caching allocator (gpu_alloc.h).
spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "mem_alloc: out is NULL");
    if (auto* err = use_device("mem_alloc", device)) return err;
    void* p = nullptr;
    if (auto* err = alloc::allocate(device, size, &p)) return err;
    *out = p;
    return nullptr;
  });
}

spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!ptr) return nullptr;
    if (auto* err = use_device("mem_free", device)) return err;
    return alloc::release(device, ptr);
  });
}

spora_plugin_error_t* memory_stats(int32_t device, spora_memory_stats_t* out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    // Counters only: no device call that a failed device would refuse.
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (device < 0 || device >= static_cast<int32_t>(state->devices.size()))
      return plugin_error(SPORA_PLUGIN_NOT_FOUND, "memory_stats: no device " + std::to_string(device));
    return alloc::stats(device, out);
  });
}

spora_plugin_error_t* reset_peak_memory_stats(int32_t device) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (device < 0 || device >= static_cast<int32_t>(state->devices.size()))
      return plugin_error(SPORA_PLUGIN_NOT_FOUND, "reset_peak_memory_stats: no device " + std::to_string(device));
    return alloc::reset_peak(device);
  });
}

spora_plugin_error_t* host_alloc_pinned(size_t size, void** out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "host_alloc_pinned: out is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    void* p = nullptr;
    if (auto* err = check("host_alloc_pinned(" + std::to_string(size) + " bytes)",
                          cudaHostAlloc(&p, size ? size : 1, cudaHostAllocDefault)))
      return err;
    *out = p;
    return nullptr;
  });
}

spora_plugin_error_t* host_free_pinned(void* ptr) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!ptr) return nullptr;
    return check("host_free_pinned", cudaFreeHost(ptr));
  });
}

spora_plugin_error_t* copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return guard(kPluginName, [&] { return sync_copy("copy_h2d", device, dst, src, size, cudaMemcpyHostToDevice); });
}

spora_plugin_error_t* copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return guard(kPluginName, [&] { return sync_copy("copy_d2h", device, dst, src, size, cudaMemcpyDeviceToHost); });
}

spora_plugin_error_t* copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard(kPluginName, [&] { return sync_copy("copy_d2d", device, dst, src, size, cudaMemcpyDeviceToDevice); });
}

spora_plugin_error_t* memset_sync(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (size == 0) return nullptr;
    if (!dst) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "memset: NULL buffer");
    if (auto* err = use_device("memset", device)) return err;
    if (auto* err = check("memset: cudaDeviceSynchronize", cudaDeviceSynchronize())) return err;
    if (auto* err = check("memset: cudaMemset", cudaMemset(dst, byte, size))) return err;
    return check("memset: cudaDeviceSynchronize", cudaDeviceSynchronize());
  });
}

spora_plugin_error_t* copy_h2d_async(spora_stream_t* stream, spora_devptr_t dst, const void* src, size_t size) {
  return guard(kPluginName, [&] { return async_copy("copy_h2d_async", stream, dst, src, size, cudaMemcpyHostToDevice); });
}

spora_plugin_error_t* copy_d2h_async(spora_stream_t* stream, void* dst, spora_devptr_t src, size_t size) {
  return guard(kPluginName, [&] { return async_copy("copy_d2h_async", stream, dst, src, size, cudaMemcpyDeviceToHost); });
}

spora_plugin_error_t* copy_d2d_async(spora_stream_t* stream, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard(kPluginName,
               [&] { return async_copy("copy_d2d_async", stream, dst, src, size, cudaMemcpyDeviceToDevice); });
}

spora_plugin_error_t* memset_async(spora_stream_t* stream, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("memset_async", stream, &s)) return err;
    if (size == 0) return nullptr;
    if (!dst) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "memset_async: NULL buffer");
    StreamTrace::Mark mark;
    if (s->trace) mark = s->trace->before(s->stream, StreamTrace::Kind::kCopy, "memset");
    const cudaError_t e = cudaMemsetAsync(dst, byte, size, s->stream);
    if (s->trace) s->trace->after(mark, s->stream);
    return check("memset_async: cudaMemsetAsync", e);
  });
}

}  // namespace spora::gpu
