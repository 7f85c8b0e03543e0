// Allocation and data movement: mem_alloc/free and their statistics, pinned host memory,
// synchronous and asynchronous copies and memsets. Every device address is
// translated (and so validated) when the call is made; the host memory
// behind it stays mapped until shutdown, and mem_free waits for queued work,
// so a translated pointer stays valid until the queued copy runs.
//
// Host memory of asynchronous copies is treated as CUDA treats it:
// - pinned memory (host_alloc_pinned) is read (h2d) or written (d2h) by the
//   copy engine when the stream reaches the copy;
// - pageable memory is staged: copy_h2d_async snapshots the source during
//   the call (a host callback queued earlier that writes it is not seen),
//   and copy_d2h_async returns only once the copy has completed.
// Synchronous copies, memset and mem_free wait for the device's queued
// work; they are refused on the device's callback thread, where that wait
// could never end. On a failed device every call returns the sticky error.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "error.h"
#include "sim_api.h"
#include "sim_state.h"
#include "trace_hooks.h"

namespace spora::sim {
namespace {

using spora::plugin::guard;
using spora::plugin::make_error;

uint64_t address(spora_devptr_t p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

spora_plugin_error_t* check_host(const char* fn, const char* arg, const void* p, size_t size) {
  if (p || size == 0) return nullptr;
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[sim] ") + fn + ": host pointer " + arg +
                                                       " is NULL but size is " + std::to_string(size));
}

// Validates the device and translates one device range of it.
spora_plugin_error_t* device_range(const char* what, int32_t device, spora_devptr_t p, size_t size,
                                   void** out) {
  Arena* arena = nullptr;
  if (auto* err = get_arena(what, device, &arena)) return err;
  return arena->translate(address(p), size, what, out);
}

// Resolves `stream` and translates a range on the stream's device.
spora_plugin_error_t* stream_range(const char* what, spora_stream_t* handle, spora_devptr_t p, size_t size,
                                   std::shared_ptr<Stream>* stream, void** out) {
  if (auto* err = get_stream(what, handle, stream)) return err;
  return device_range(what, (*stream)->device(), p, size, out);
}

// Validates `device`, refuses the device's callback thread (`fn` waits for
// queued work) and a failed device.
spora_plugin_error_t* may_wait(const char* fn, int32_t device, std::shared_ptr<Device>* out) {
  if (auto* err = get_device(fn, device, out)) return err;
  if (auto* err = refuse_in_callback(fn, device)) return err;
  if (auto* err = refuse_in_capture(fn, device)) return err;
  return (*out)->sticky_error(fn);
}

// Runs a synchronous operation after the device's queued work; the device
// may fail while it drains.
template <class Fn>
spora_plugin_error_t* after_queued_work(const char* fn, Device& device, Fn&& op) {
  drain_device(device.index());
  if (auto* err = device.sticky_error(fn)) return err;
  op();
  return nullptr;
}

}  // namespace

spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] mem_alloc: out is NULL");
    Arena* arena = nullptr;
    std::shared_ptr<Device> d;
    if (auto* err = get_arena("mem_alloc", device, &arena)) return err;
    if (auto* err = get_device("mem_alloc", device, &d)) return err;
    if (auto* err = d->sticky_error("mem_alloc")) return err;
    if (auto* err = refuse_in_capture("mem_alloc", device)) return err;
    uint64_t addr = 0;
    if (auto* err = arena->allocate(size, &addr)) return err;
    *out = reinterpret_cast<spora_devptr_t>(static_cast<uintptr_t>(addr));
    return nullptr;
  });
}

spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    Arena* arena = nullptr;
    std::shared_ptr<Device> d;
    if (auto* err = get_arena("mem_free", device, &arena)) return err;
    if (!ptr) return nullptr;
    if (auto* err = get_device("mem_free", device, &d)) return err;
    if (auto* err = refuse_in_callback("mem_free", device)) return err;
    if (auto* err = refuse_in_capture("mem_free", device)) return err;
    // Queued work may still read or write the block: let it finish first.
    drain_device(device);
    if (auto* err = arena->release(address(ptr))) return err;
    // Freed all the same, so the host can tear down a failed device.
    return d->sticky_error("mem_free");
  });
}

// Counted at the calls, as a GPU's allocator counts them: a block counts as
// freed when mem_free returns (here, after the queued work that used it).
spora_plugin_error_t* memory_stats(int32_t device, spora_memory_stats_t* out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    Arena* arena = nullptr;
    if (auto* err = get_arena("memory_stats", device, &arena)) return err;
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] memory_stats: out is NULL");
    arena->stats(out);
    return nullptr;
  });
}

spora_plugin_error_t* reset_peak_memory_stats(int32_t device) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    Arena* arena = nullptr;
    if (auto* err = get_arena("reset_peak_memory_stats", device, &arena)) return err;
    arena->reset_peak();
    return nullptr;
  });
}

spora_plugin_error_t* host_alloc_pinned(size_t size, void** out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] host_alloc_pinned: out is NULL");
    return PinnedRegistry::get().allocate(size, out);
  });
}

spora_plugin_error_t* host_free_pinned(void* ptr) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!ptr) return nullptr;
    // Like cudaFreeHost, wait for queued copies that may still use it; not
    // from a callback, where that wait could never end.
    const int32_t cb = callback_device_of_this_thread();
    if (cb >= 0) {
      if (auto* err = refuse_in_callback("host_free_pinned", cb)) return err;
    }
    drain_all_devices();
    return PinnedRegistry::get().release(ptr);
  });
}

// ---- synchronous: ordered after all work queued on the device's streams ----

spora_plugin_error_t* copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    std::shared_ptr<Device> dev;
    if (auto* err = check_host("copy_h2d", "src", src, size)) return err;
    if (auto* err = device_range("copy_h2d dst", device, dst, size, &d)) return err;
    if (auto* err = may_wait("copy_h2d", device, &dev)) return err;
    return after_queued_work("copy_h2d", *dev, [&] {
      if (size) std::memcpy(d, src, size);
    });
  });
}

spora_plugin_error_t* copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* s = nullptr;
    std::shared_ptr<Device> dev;
    if (auto* err = check_host("copy_d2h", "dst", dst, size)) return err;
    if (auto* err = device_range("copy_d2h src", device, src, size, &s)) return err;
    if (auto* err = may_wait("copy_d2h", device, &dev)) return err;
    return after_queued_work("copy_d2h", *dev, [&] {
      if (size) std::memcpy(dst, s, size);
    });
  });
}

spora_plugin_error_t* copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    void* s = nullptr;
    if (auto* err = device_range("copy_d2d dst", device, dst, size, &d)) return err;
    if (auto* err = device_range("copy_d2d src", device, src, size, &s)) return err;
    std::shared_ptr<Device> dev;
    if (auto* err = may_wait("copy_d2d", device, &dev)) return err;
    return after_queued_work("copy_d2d", *dev, [&] {
      if (size) std::memmove(d, s, size);  // sub-buffers of one allocation may overlap
    });
  });
}

spora_plugin_error_t* memset_sync(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    if (auto* err = device_range("memset dst", device, dst, size, &d)) return err;
    std::shared_ptr<Device> dev;
    if (auto* err = may_wait("memset", device, &dev)) return err;
    return after_queued_work("memset", *dev, [&] {
      if (size) std::memset(d, byte & 0xff, size);  // like memset: the low byte
    });
  });
}

// ---- asynchronous: enqueued on the stream ----

namespace {
// A queued copy as the host's profiler sees it: a "sim.copy" span on the
// copy engine's thread (trace_hooks.h).
class CopySpan {
 public:
  explicit CopySpan(const char* what)
      : host_(g_host.load(std::memory_order_acquire)), id_(spora::plugin::trace_begin(host_, "sim.copy", what)) {}
  ~CopySpan() { spora::plugin::trace_end(host_, id_); }
  CopySpan(const CopySpan&) = delete;
  CopySpan& operator=(const CopySpan&) = delete;

 private:
  const spora_host_t* host_;
  uint64_t id_;
};
}  // namespace

spora_plugin_error_t* copy_h2d_async(spora_stream_t* stream, spora_devptr_t dst, const void* src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* d = nullptr;
    if (auto* err = check_host("copy_h2d_async", "src", src, size)) return err;
    if (auto* err = stream_range("copy_h2d_async dst", stream, dst, size, &s, &d)) return err;
    if (auto* err = s->device_state().sticky_error("copy_h2d_async")) return err;
    if (size == 0 || PinnedRegistry::get().contains(src, size)) {
      // Pinned: read when the stream reaches the copy.
      return s->enqueue(
          [d, src, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
            const CopySpan span("h2d");
            if (size) std::memcpy(d, src, size);
            return nullptr;
          },
          Stream::Where::kCopyEngine);
    }
    if (auto* err = s->refuse_capture("copy_h2d_async from pageable host memory")) return err;
    // Pageable: staged now, as cudaMemcpyAsync does; later writes to `src`
    // (by the host or by a callback queued before this copy) are not sent.
    auto staged = std::shared_ptr<char[]>(new char[size]);
    std::memcpy(staged.get(), src, size);
    return s->enqueue(
        [d, staged, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          const CopySpan span("h2d");
          std::memcpy(d, staged.get(), size);
          return nullptr;
        },
        Stream::Where::kCopyEngine);
  });
}

spora_plugin_error_t* copy_d2h_async(spora_stream_t* stream, void* dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* from = nullptr;
    if (auto* err = check_host("copy_d2h_async", "dst", dst, size)) return err;
    if (auto* err = stream_range("copy_d2h_async src", stream, src, size, &s, &from)) return err;
    Device& dev = s->device_state();
    if (auto* err = dev.sticky_error("copy_d2h_async")) return err;
    const bool pinned = size == 0 || PinnedRegistry::get().contains(dst, size);
    // Pageable: like CUDA, the call returns only after the copy completed,
    // which the device's own callback thread could never see happen.
    if (!pinned) {
      if (auto* err = refuse_in_callback("copy_d2h_async to pageable memory", dev.index())) return err;
    }
    uint64_t ticket = 0;
    if (auto* err = s->enqueue(
            [dst, from, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
              const CopySpan span("d2h");
              if (size) std::memcpy(dst, from, size);
              return nullptr;
            },
            Stream::Where::kCopyEngine, /*wants_status=*/false, &ticket)) {
      return err;
    }
    if (pinned) return nullptr;  // written when the stream reaches the copy
    s->wait_for(ticket);
    return dev.sticky_error("copy_d2h_async");
  });
}

spora_plugin_error_t* copy_d2d_async(spora_stream_t* stream, spora_devptr_t dst, spora_devptr_t src,
                                     size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* d = nullptr;
    void* from = nullptr;
    if (auto* err = stream_range("copy_d2d_async dst", stream, dst, size, &s, &d)) return err;
    if (auto* err = device_range("copy_d2d_async src", s->device(), src, size, &from)) return err;
    if (auto* err = s->device_state().sticky_error("copy_d2d_async")) return err;
    return s->enqueue(
        [d, from, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          const CopySpan span("d2d");
          if (size) std::memmove(d, from, size);
          return nullptr;
        },
        Stream::Where::kCopyEngine, false, nullptr,
        {{address(dst), size, "copy_d2d_async dst"}, {address(src), size, "copy_d2d_async src"}});
  });
}

spora_plugin_error_t* memset_async(spora_stream_t* stream, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* d = nullptr;
    if (auto* err = stream_range("memset_async dst", stream, dst, size, &s, &d)) return err;
    if (auto* err = s->device_state().sticky_error("memset_async")) return err;
    // A memset is a kernel on a GPU: it runs on the stream's worker.
    return s->enqueue(
        [d, byte, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          if (size) std::memset(d, byte & 0xff, size);
          return nullptr;
        },
        Stream::Where::kWorker, false, nullptr, {{address(dst), size, "memset_async dst"}});
  });
}

}  // namespace spora::sim
