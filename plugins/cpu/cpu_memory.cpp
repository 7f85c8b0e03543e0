// Memory of the cpu device: aligned host allocations; copies are memcpy;
// allocated/reserved byte counters for memory_stats.
//
// Large buffers are cached by size and reused. Fresh pages from the kernel
// cost a fault per 4 KiB: for a 1024x1024 f32 matmul the first touch of its
// 4 MB output took more time than the matmul's own arithmetic misses, and
// training loops allocate the same sizes every step.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_state.h"
#include "error.h"

namespace spora::cpu {
namespace {

using plugin::make_error;
constexpr size_t kAlign = 64;

spora_plugin_error_t* check_device(int32_t device, const char* what) {
  if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, std::string("[cpu] ") + what + ": no device " +
                                                                 std::to_string(device));
  return nullptr;
}

// Every block starts with a kAlign-byte header holding its payload size
// (and, for mem_alloc's blocks, the size requested), so frees need no
// lookup; blocks of kCacheMin bytes and more go back to a per-size free list
// (up to kCacheCap bytes in all) instead of the OS.
constexpr size_t kCacheMin = 64 << 10;
constexpr size_t kCacheCap = size_t{1} << 30;
constexpr size_t kRequestedAt = sizeof(size_t);  // header offset of the requested size

// A byte count and its high-water mark (memory_stats): relaxed atomics, as
// they are read while other threads allocate.
struct Counter {
  std::atomic<uint64_t> now{0};
  std::atomic<uint64_t> peak{0};
  void add(uint64_t n) {
    const uint64_t v = now.fetch_add(n, std::memory_order_relaxed) + n;
    uint64_t p = peak.load(std::memory_order_relaxed);
    while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
    }
  }
  void sub(uint64_t n) { now.fetch_sub(n, std::memory_order_relaxed); }
  void reset_peak() { peak.store(now.load(std::memory_order_relaxed), std::memory_order_relaxed); }
};
Counter g_allocated;  // sizes requested by live mem_alloc blocks
Counter g_reserved;   // whole blocks (header included) held from the OS: live and cached

struct BlockCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  size_t cached = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // outlives every tensor freed at exit
  return *c;
}

void* raw_alloc(size_t payload) {
  if (payload >= kCacheMin) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(payload);
    if (it != c.free.end() && !it->second.empty()) {
      void* base = it->second.back();
      it->second.pop_back();
      c.cached -= payload;
      return static_cast<char*>(base) + kAlign;
    }
  }
  void* base = std::aligned_alloc(kAlign, payload + kAlign);
  if (!base) return nullptr;
  g_reserved.add(payload + kAlign);
  std::memcpy(base, &payload, sizeof payload);
  return static_cast<char*>(base) + kAlign;
}

void raw_free(void* p) {
  if (!p) return;
  void* base = static_cast<char*>(p) - kAlign;
  size_t payload;
  std::memcpy(&payload, base, sizeof payload);
  if (payload >= kCacheMin) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cached + payload <= kCacheCap) {
      c.free[payload].push_back(base);
      c.cached += payload;
      return;
    }
  }
  g_reserved.sub(payload + kAlign);
  std::free(base);
}

spora_plugin_error_t* copy(void* dst, const void* src, size_t size, const char* what) {
  if (size == 0) return nullptr;
  if (!dst || !src) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[cpu] ") + what + ": null pointer");
  std::memmove(dst, src, size);
  return nullptr;
}

}  // namespace

spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  if (auto* e = check_device(device, "mem_alloc")) return e;
  if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] mem_alloc: null output");
  if (size > (size_t{1} << 60)) return make_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[cpu] cannot allocate " + std::to_string(size) + " bytes");
  const size_t rounded = size == 0 ? kAlign : (size + kAlign - 1) / kAlign * kAlign;
  void* p = raw_alloc(rounded);
  if (!p)
    return make_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[cpu] cannot allocate " + std::to_string(size) + " bytes");
  std::memcpy(static_cast<char*>(p) - kAlign + kRequestedAt, &size, sizeof size);
  g_allocated.add(size);
  *out = p;
  return nullptr;
}

spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr) {
  if (auto* e = check_device(device, "mem_free")) return e;
  if (!ptr) return nullptr;
  size_t requested;
  std::memcpy(&requested, static_cast<char*>(ptr) - kAlign + kRequestedAt, sizeof requested);
  g_allocated.sub(requested);
  raw_free(ptr);
  return nullptr;
}

spora_plugin_error_t* memory_stats(int32_t device, spora_memory_stats_t* out) {
  if (auto* e = check_device(device, "memory_stats")) return e;
  if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] memory_stats: out is NULL");
  using S = spora_memory_stats_t;
  // Read while other threads allocate: a peak is reported no lower than the
  // current value read with it.
  const uint64_t peak_allocated = g_allocated.peak.load(std::memory_order_relaxed);
  const uint64_t peak_reserved = g_reserved.peak.load(std::memory_order_relaxed);
  const uint64_t allocated = g_allocated.now.load(std::memory_order_relaxed);
  const uint64_t reserved = g_reserved.now.load(std::memory_order_relaxed);
  if (SPORA_STRUCT_HAS(out, S, allocated_bytes)) out->allocated_bytes = allocated;
  if (SPORA_STRUCT_HAS(out, S, peak_allocated_bytes)) out->peak_allocated_bytes = std::max(peak_allocated, allocated);
  if (SPORA_STRUCT_HAS(out, S, reserved_bytes)) out->reserved_bytes = reserved;
  if (SPORA_STRUCT_HAS(out, S, peak_reserved_bytes)) out->peak_reserved_bytes = std::max(peak_reserved, reserved);
  return nullptr;
}

spora_plugin_error_t* reset_peak_memory_stats(int32_t device) {
  if (auto* e = check_device(device, "reset_peak_memory_stats")) return e;
  g_allocated.reset_peak();
  g_reserved.reset_peak();
  return nullptr;
}

spora_plugin_error_t* copy_h2d(int32_t d, spora_devptr_t dst, const void* src, size_t n) {
  if (auto* e = check_device(d, "copy_h2d")) return e;
  return copy(dst, src, n, "copy_h2d");
}
spora_plugin_error_t* copy_d2h(int32_t d, void* dst, spora_devptr_t src, size_t n) {
  if (auto* e = check_device(d, "copy_d2h")) return e;
  return copy(dst, src, n, "copy_d2h");
}
spora_plugin_error_t* copy_d2d(int32_t d, spora_devptr_t dst, spora_devptr_t src, size_t n) {
  if (auto* e = check_device(d, "copy_d2d")) return e;
  return copy(dst, src, n, "copy_d2d");
}
spora_plugin_error_t* memset_sync(int32_t d, spora_devptr_t dst, int32_t byte, size_t n) {
  if (auto* e = check_device(d, "memset")) return e;
  if (n == 0) return nullptr;
  if (!dst) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] memset: null pointer");
  std::memset(dst, byte, n);
  return nullptr;
}

// Streams run inline, so the async forms complete before returning.
spora_plugin_error_t* copy_h2d_async(spora_stream_t*, spora_devptr_t dst, const void* src, size_t n) {
  return copy(dst, src, n, "copy_h2d_async");
}
spora_plugin_error_t* copy_d2h_async(spora_stream_t*, void* dst, spora_devptr_t src, size_t n) {
  return copy(dst, src, n, "copy_d2h_async");
}
spora_plugin_error_t* copy_d2d_async(spora_stream_t*, spora_devptr_t dst, spora_devptr_t src, size_t n) {
  return copy(dst, src, n, "copy_d2d_async");
}
spora_plugin_error_t* memset_async(spora_stream_t*, spora_devptr_t dst, int32_t byte, size_t n) {
  return memset_sync(0, dst, byte, n);
}

}  // namespace spora::cpu
