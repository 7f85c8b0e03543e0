// The stream-ordered caching allocator (see gpu_alloc.h for the ordering
// rules that keep a reused block away from queued work).
#include "gpu_alloc.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu_state.h"

namespace spora::gpu::alloc {
namespace {

// Requests are rounded up to this (properties.alignment): consecutive
// blocks carved out of one pool chunk then stay aligned.
constexpr size_t kGranule = 256;

// The host-side block cache (see DeviceAllocator::cached): blocks up to this
// size, this many bytes in all. Small blocks are where the runtime calls
// dominate an op; larger ones run kernels that dwarf them.
constexpr size_t kCacheBlockMax = size_t{1} << 20;
constexpr uint64_t kCacheBytesMax = uint64_t{64} << 20;

size_t rounded(size_t size) { return size == 0 ? kGranule : (size + kGranule - 1) / kGranule * kGranule; }

spora_plugin_error_t* check(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? nullptr : runtime_error(what, e);
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

struct LiveStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t mark = nullptr;  // re-recorded whenever the allocator orders itself after this stream
};

// One device's allocator; every member is guarded by `mu`.
struct DeviceAllocator {
  uint64_t memory_bytes = 0;  // the device's total memory (0 = unknown)
  std::mutex mu;
  bool ready = false;
  bool use_pool = false;
  cudaMemPool_t pool = nullptr;
  cudaStream_t own = nullptr;  // the allocator's stream, created when several streams (or none) are live
  cudaEvent_t own_mark = nullptr;
  std::vector<LiveStream> streams;
  std::unordered_map<void*, size_t> sizes;  // live block -> size requested
  std::vector<void*> deferred;              // freed while a stream was being captured
  // Blocks freed while exactly one stream was live (that stream, as in
  // free_ordered's one-stream case), by rounded size, handed out again by
  // allocate without a runtime call: cudaMallocFromPoolAsync and
  // cudaFreeAsync cost more host time per eager op than the rest of its
  // dispatch. Safe for the same reason stream-ordered reuse on that stream
  // is: the old owner's work was queued on it before the free, the new
  // owner's is queued after the allocation. Emptied into `deferred` before
  // the set of live streams changes or when memory runs out.
  cudaStream_t cache_stream = nullptr;
  std::unordered_map<size_t, std::vector<void*>> cached;
  uint64_t cached_bytes = 0;
  uint64_t allocated = 0, peak_allocated = 0;
  uint64_t malloc_reserved = 0, malloc_peak_reserved = 0;  // "malloc" mode: what cudaMalloc holds for us
};

std::once_flag g_once;
std::vector<std::unique_ptr<DeviceAllocator>>* g_devices = nullptr;

spora_plugin_error_t* get(const char* what, int32_t device, DeviceAllocator** out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  // Sized once, at the first call after initialize; never freed (frees may
  // arrive from destructors at exit).
  std::call_once(g_once, [&] {
    auto* v = new std::vector<std::unique_ptr<DeviceAllocator>>();
    for (const Device& d : state->devices) {
      v->push_back(std::make_unique<DeviceAllocator>());
      v->back()->memory_bytes = d.memory_bytes;
    }
    g_devices = v;
  });
  if (device < 0 || static_cast<size_t>(device) >= g_devices->size())
    return plugin_error(SPORA_PLUGIN_NOT_FOUND, std::string(what) + ": no device " + std::to_string(device) + " (" +
                                                    std::to_string(g_devices->size()) + " present)");
  *out = (*g_devices)[static_cast<size_t>(device)].get();
  return nullptr;
}

// "pool" (default) or "malloc", from the host's config.
spora_plugin_error_t* configured_mode(bool* use_pool) {
  *use_pool = true;
  const spora_host_t* host = g_host.load(std::memory_order_acquire);
  if (!host || !SPORA_STRUCT_HAS(host, spora_host_t, services) || !host->services ||
      !SPORA_STRUCT_HAS(host->services, spora_host_services_t, config_get) || !host->services->config_get)
    return nullptr;
  const std::string key = std::string(kPluginName) + ".allocator";
  char buf[32] = {};
  const int64_t n = host->services->config_get(host->services->ctx, key.c_str(), buf, sizeof buf);
  if (n < 0) return nullptr;
  const std::string v = static_cast<size_t>(n) < sizeof buf ? std::string(buf) : std::string(buf) + "...";
  if (v == "pool") return nullptr;
  if (v == "malloc") {
    *use_pool = false;
    return nullptr;
  }
  std::string env = "SPORA_" + key;
  for (char& c : env) c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, key + " (" + env + ") is '" + v +
                                                         "': expected 'pool' (the caching allocator, default) or "
                                                         "'malloc' (cudaMalloc/cudaFree per block)");
}

// Creates the pool on first use. Called with a.mu held and `device` current.
spora_plugin_error_t* ensure_ready(int32_t device, DeviceAllocator& a) {
  if (a.ready) return nullptr;
  bool want_pool = true;
  if (auto* err = configured_mode(&want_pool)) return err;
  if (want_pool) {
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) supported = 0;
    if (!supported) {
      (void)cudaGetLastError();  // the attribute query's error is not the next call's
      host_log(SPORA_LOG_WARN, "device " + std::to_string(device) +
                                   " has no stream-ordered memory pools: every tensor is cudaMalloc'ed and freed "
                                   "with cudaFree (which waits for the device)");
      want_pool = false;
    }
  }
  if (want_pool) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    if (auto* err = check("mem_alloc: cudaMemPoolCreate on device " + std::to_string(device),
                          cudaMemPoolCreate(&a.pool, &props)))
      return err;
    // Keep every freed block for reuse: without a threshold the pool gives
    // memory back to the driver at each synchronization.
    uint64_t keep = UINT64_MAX;
    if (auto* err = check("mem_alloc: cudaMemPoolSetAttribute(release threshold)",
                          cudaMemPoolSetAttribute(a.pool, cudaMemPoolAttrReleaseThreshold, &keep)))
      return err;
  }
  a.use_pool = want_pool;
  a.ready = true;
  return nullptr;
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

bool any_capturing(const DeviceAllocator& a) {
  for (const LiveStream& s : a.streams)
    if (capturing(s.stream)) return true;
  return false;
}

spora_plugin_error_t* ensure_own_stream(DeviceAllocator& a) {
  if (a.own) return nullptr;
  if (auto* err = check("allocator stream: cudaStreamCreateWithFlags",
                        cudaStreamCreateWithFlags(&a.own, cudaStreamNonBlocking)))
    return err;
  return check("allocator stream: cudaEventCreateWithFlags", cudaEventCreateWithFlags(&a.own_mark, cudaEventDisableTiming));
}

// Makes the allocator's stream wait for everything queued so far on every
// live stream.
spora_plugin_error_t* own_after_all(DeviceAllocator& a) {
  if (auto* err = ensure_own_stream(a)) return err;
  for (LiveStream& s : a.streams) {
    if (auto* err = check("mem_free: cudaEventRecord", cudaEventRecord(s.mark, s.stream))) return err;
    if (auto* err = check("mem_free: cudaStreamWaitEvent", cudaStreamWaitEvent(a.own, s.mark, 0))) return err;
  }
  return nullptr;
}

// Frees `p` (pool mode, no stream capturing) after all queued work.
spora_plugin_error_t* free_ordered(DeviceAllocator& a, void* p) {
  if (a.streams.size() == 1) return check("mem_free: cudaFreeAsync", cudaFreeAsync(p, a.streams[0].stream));
  if (auto* err = own_after_all(a)) return err;
  return check("mem_free: cudaFreeAsync", cudaFreeAsync(p, a.own));
}

spora_plugin_error_t* flush_deferred(DeviceAllocator& a) {
  while (!a.deferred.empty()) {
    if (auto* err = free_ordered(a, a.deferred.back())) return err;
    a.deferred.pop_back();
  }
  return nullptr;
}

// Gives every cached block back to the pool: queued as deferred frees, and
// freed now unless a stream is capturing (then at the next call outside
// the capture). Called while the stream the blocks were cached for is still
// the only live one, so the frees need no events.
spora_plugin_error_t* empty_cache(DeviceAllocator& a) {
  if (a.cached_bytes == 0 && a.cached.empty()) return nullptr;
  for (auto& [bytes, blocks] : a.cached) a.deferred.insert(a.deferred.end(), blocks.begin(), blocks.end());
  a.cached.clear();
  a.cached_bytes = 0;
  a.cache_stream = nullptr;
  return any_capturing(a) ? nullptr : flush_deferred(a);
}

// Whether blocks may enter or leave the cache now: exactly one live stream,
// the one the cache holds blocks for, and no capture.
bool cache_usable(DeviceAllocator& a, bool capture) {
  if (capture || a.streams.size() != 1) return false;
  return a.cache_stream == nullptr || a.cache_stream == a.streams[0].stream;
}

// A cached block of `bytes` (rounded), or null.
void* from_cache(DeviceAllocator& a, size_t bytes) {
  auto it = a.cached.find(bytes);
  if (it == a.cached.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  a.cached_bytes -= bytes;
  return p;
}

// One pool allocation ordered before any later use on any live stream.
cudaError_t pool_alloc(DeviceAllocator& a, size_t bytes, bool capture, void** p, spora_plugin_error_t** err) {
  if (!capture && a.streams.size() == 1) return cudaMallocFromPoolAsync(p, bytes, a.pool, a.streams[0].stream);
  if ((*err = ensure_own_stream(a))) return cudaSuccess;
  const cudaError_t e = cudaMallocFromPoolAsync(p, bytes, a.pool, a.own);
  if (e != cudaSuccess) return e;
  if (capture) {
    // A capturing stream cannot wait for an event recorded outside the
    // capture: let the allocation complete instead.
    *err = check("mem_alloc: cudaStreamSynchronize(allocator stream)", cudaStreamSynchronize(a.own));
    return cudaSuccess;
  }
  if ((*err = check("mem_alloc: cudaEventRecord", cudaEventRecord(a.own_mark, a.own)))) return cudaSuccess;
  for (LiveStream& s : a.streams)
    if ((*err = check("mem_alloc: cudaStreamWaitEvent", cudaStreamWaitEvent(s.stream, a.own_mark, 0))))
      return cudaSuccess;
  return cudaSuccess;
}

void count_alloc(DeviceAllocator& a, size_t size) {
  a.allocated += size;
  a.peak_allocated = std::max(a.peak_allocated, a.allocated);
}

}  // namespace

spora_plugin_error_t* allocate(int32_t device, size_t size, void** out) {
  DeviceAllocator* ap = nullptr;
  if (auto* err = get("mem_alloc", device, &ap)) return err;
  DeviceAllocator& a = *ap;
  // Built only on failure: allocations are on every eager op's path.
  auto what = [&] { return "mem_alloc(" + std::to_string(size) + " bytes) on device " + std::to_string(device); };
  // Refused before the runtime sees it (which may call a huge request an
  // invalid value rather than out of memory).
  if (size > SIZE_MAX - kGranule || (a.memory_bytes && size > a.memory_bytes))
    return plugin_error(SPORA_PLUGIN_OUT_OF_MEMORY,
                        what() + ": more than the device's " + std::to_string(a.memory_bytes) + " bytes of memory");
  const size_t bytes = rounded(size);
  std::unique_lock<std::mutex> lock(a.mu);
  if (auto* err = ensure_ready(device, a)) return err;
  void* p = nullptr;
  if (!a.use_pool) {
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return runtime_error(what(), e);
    a.malloc_reserved += bytes;
    a.malloc_peak_reserved = std::max(a.malloc_peak_reserved, a.malloc_reserved);
  } else {
    const bool capture = any_capturing(a);
    if (!capture) {
      if (auto* err = flush_deferred(a)) return err;
    }
    if (cache_usable(a, capture)) p = from_cache(a, bytes);
    spora_plugin_error_t* err = nullptr;
    cudaError_t e = p ? cudaSuccess : pool_alloc(a, bytes, capture, &p, &err);
    if (err) return err;
    if (e == cudaErrorMemoryAllocation && !capture) {
      // Blocks whose frees are still queued behind running work cannot be
      // handed out yet, nor can cached blocks of other sizes: give those
      // back, wait for the device, then the pool has them. Not under the
      // lock: queued host callbacks may free memory.
      (void)cudaGetLastError();
      if ((err = empty_cache(a))) return err;
      lock.unlock();
      const cudaError_t sync = cudaDeviceSynchronize();
      lock.lock();
      if ((err = check(what() + ": cudaDeviceSynchronize before retrying", sync))) return err;
      e = pool_alloc(a, bytes, any_capturing(a), &p, &err);
      if (err) return err;
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky: keep it off the next call
      return runtime_error(what() + " (" + std::to_string(a.allocated) + " bytes allocated by Spora on it)", e);
    }
  }
  if (reinterpret_cast<uintptr_t>(p) % kGranule != 0) {
    // properties.alignment promises 256; never hand out less. The block
    // goes back with the next frees.
    if (a.use_pool) a.deferred.push_back(p);
    else (void)cudaFree(p);
    return plugin_error(SPORA_PLUGIN_INTERNAL, what() + ": the runtime returned " + hex(p) + ", not " +
                                                   std::to_string(kGranule) + "-byte aligned (set " +
                                                   std::string(kPluginName) + ".allocator=malloc to avoid the pool)");
  }
  a.sizes.emplace(p, size);
  count_alloc(a, size);
  *out = p;
  return nullptr;
}

spora_plugin_error_t* release(int32_t device, void* ptr) {
  DeviceAllocator* ap = nullptr;
  if (auto* err = get("mem_free", device, &ap)) return err;
  DeviceAllocator& a = *ap;
  std::unique_lock<std::mutex> lock(a.mu);
  auto it = a.sizes.find(ptr);
  if (it == a.sizes.end())
    return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "mem_free of " + hex(ptr) + " on device " +
                                                           std::to_string(device) +
                                                           ", which is not a live allocation of it (a double free, "
                                                           "an address inside a block, or another device's)");
  const size_t size = it->second;
  a.sizes.erase(it);
  a.allocated -= size;
  if (!a.use_pool) {
    a.malloc_reserved -= rounded(size);
    lock.unlock();  // cudaFree waits for the device's outstanding work (and host callbacks) first
    return check("mem_free", cudaFree(ptr));
  }
  if (any_capturing(a)) {
    a.deferred.push_back(ptr);
    return nullptr;
  }
  if (auto* err = flush_deferred(a)) return err;
  const size_t bytes = rounded(size);
  if (cache_usable(a, false) && bytes <= kCacheBlockMax && a.cached_bytes + bytes <= kCacheBytesMax) {
    a.cache_stream = a.streams[0].stream;
    a.cached[bytes].push_back(ptr);
    a.cached_bytes += bytes;
    return nullptr;
  }
  return free_ordered(a, ptr);
}

spora_plugin_error_t* stream_added(int32_t device, cudaStream_t stream) {
  DeviceAllocator* ap = nullptr;
  if (auto* err = get("stream_create", device, &ap)) return err;
  DeviceAllocator& a = *ap;
  LiveStream s;
  s.stream = stream;
  if (auto* err = check("stream_create: cudaEventCreateWithFlags", cudaEventCreateWithFlags(&s.mark, cudaEventDisableTiming)))
    return err;
  std::lock_guard<std::mutex> lock(a.mu);
  // Cached blocks are only safe to reuse while one stream is live: free
  // them on it while it still is.
  if (auto* err = empty_cache(a)) {
    (void)cudaEventDestroy(s.mark);
    return err;
  }
  // Blocks allocated so far are ready once the streams that allocated them
  // (and the allocator's own) reach their current ends.
  std::vector<cudaStream_t> before;
  for (const LiveStream& o : a.streams) before.push_back(o.stream);
  if (a.own) before.push_back(a.own);
  for (cudaStream_t o : before) {
    if (capturing(o)) continue;  // its captured work runs later, when launched
    spora_plugin_error_t* err = check("stream_create: cudaEventRecord", cudaEventRecord(s.mark, o));
    if (!err) err = check("stream_create: cudaStreamWaitEvent", cudaStreamWaitEvent(stream, s.mark, 0));
    if (err) {
      (void)cudaEventDestroy(s.mark);
      return err;
    }
  }
  a.streams.push_back(s);
  return nullptr;
}

void stream_removed(int32_t device, cudaStream_t stream) {
  DeviceAllocator* ap = nullptr;
  if (spora_plugin_error_t* err = get("stream_destroy", device, &ap)) {
    err->destroy(err);
    return;
  }
  DeviceAllocator& a = *ap;
  std::lock_guard<std::mutex> lock(a.mu);
  // Freed on the stream they were cached for, which is still valid here.
  if (spora_plugin_error_t* err = empty_cache(a)) {
    host_log(SPORA_LOG_WARN, std::string("stream_destroy: returning cached blocks to the pool failed: ") +
                                 (err->message ? err->message : ""));
    err->destroy(err);
  }
  for (auto it = a.streams.begin(); it != a.streams.end(); ++it) {
    if (it->stream != stream) continue;
    (void)cudaEventDestroy(it->mark);  // its work has finished (stream_destroy synchronized it)
    a.streams.erase(it);
    return;
  }
}

spora_plugin_error_t* stats(int32_t device, spora_memory_stats_t* out) {
  if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "memory_stats: out is NULL");
  DeviceAllocator* ap = nullptr;
  if (auto* err = get("memory_stats", device, &ap)) return err;
  DeviceAllocator& a = *ap;
  std::lock_guard<std::mutex> lock(a.mu);
  uint64_t reserved = a.malloc_reserved, peak_reserved = a.malloc_peak_reserved;
  if (a.use_pool) {
    if (auto* err = check("memory_stats: cudaMemPoolGetAttribute(reserved)",
                          cudaMemPoolGetAttribute(a.pool, cudaMemPoolAttrReservedMemCurrent, &reserved)))
      return err;
    if (auto* err = check("memory_stats: cudaMemPoolGetAttribute(reserved high)",
                          cudaMemPoolGetAttribute(a.pool, cudaMemPoolAttrReservedMemHigh, &peak_reserved)))
      return err;
  }
  using S = spora_memory_stats_t;
  if (SPORA_STRUCT_HAS(out, S, allocated_bytes)) out->allocated_bytes = a.allocated;
  if (SPORA_STRUCT_HAS(out, S, peak_allocated_bytes)) out->peak_allocated_bytes = a.peak_allocated;
  // Blocks are rounded and the pool reserves whole chunks: never below the
  // requested sizes.
  if (SPORA_STRUCT_HAS(out, S, reserved_bytes)) out->reserved_bytes = std::max(reserved, a.allocated);
  if (SPORA_STRUCT_HAS(out, S, peak_reserved_bytes))
    out->peak_reserved_bytes = std::max({peak_reserved, reserved, a.allocated});
  return nullptr;
}

spora_plugin_error_t* reset_peak(int32_t device) {
  DeviceAllocator* ap = nullptr;
  if (auto* err = get("reset_peak_memory_stats", device, &ap)) return err;
  DeviceAllocator& a = *ap;
  std::lock_guard<std::mutex> lock(a.mu);
  a.peak_allocated = a.allocated;
  a.malloc_peak_reserved = a.malloc_reserved;
  if (a.use_pool) {
    uint64_t zero = 0;  // the only value the runtime accepts: the high mark restarts from the current value
    if (auto* err = check("reset_peak_memory_stats: cudaMemPoolSetAttribute(reserved high)",
                          cudaMemPoolSetAttribute(a.pool, cudaMemPoolAttrReservedMemHigh, &zero)))
      return err;
  }
  return nullptr;
}

}  // namespace spora::gpu::alloc
