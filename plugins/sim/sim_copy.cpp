// Allocation and data movement: mem_alloc/free, synchronous and asynchronous
// copies and memsets. Every device address is translated (and so validated)
// when the call is made; the host memory behind it stays mapped until
// shutdown, and mem_free waits for queued work, so a translated pointer stays
// valid until the queued copy runs.
#include <cstring>
#include <string>

#include "error.h"
#include "sim_api.h"
#include "sim_state.h"

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

}  // namespace

spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] mem_alloc: out is NULL");
    Arena* arena = nullptr;
    if (auto* err = get_arena("mem_alloc", device, &arena)) return err;
    uint64_t addr = 0;
    if (auto* err = arena->allocate(size, &addr)) return err;
    *out = reinterpret_cast<spora_devptr_t>(static_cast<uintptr_t>(addr));
    return nullptr;
  });
}

spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    Arena* arena = nullptr;
    if (auto* err = get_arena("mem_free", device, &arena)) return err;
    if (!ptr) return nullptr;
    // Queued work may still read or write the block: let it finish first.
    drain_device(device);
    return arena->release(address(ptr));
  });
}

// ---- synchronous: ordered after all work queued on the device's streams ----

spora_plugin_error_t* copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    if (auto* err = check_host("copy_h2d", "src", src, size)) return err;
    if (auto* err = device_range("copy_h2d dst", device, dst, size, &d)) return err;
    drain_device(device);
    if (size) std::memcpy(d, src, size);
    return nullptr;
  });
}

spora_plugin_error_t* copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* s = nullptr;
    if (auto* err = check_host("copy_d2h", "dst", dst, size)) return err;
    if (auto* err = device_range("copy_d2h src", device, src, size, &s)) return err;
    drain_device(device);
    if (size) std::memcpy(dst, s, size);
    return nullptr;
  });
}

spora_plugin_error_t* copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    void* s = nullptr;
    if (auto* err = device_range("copy_d2d dst", device, dst, size, &d)) return err;
    if (auto* err = device_range("copy_d2d src", device, src, size, &s)) return err;
    drain_device(device);
    if (size) std::memmove(d, s, size);  // sub-buffers of one allocation may overlap
    return nullptr;
  });
}

spora_plugin_error_t* memset_sync(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    void* d = nullptr;
    if (auto* err = device_range("memset dst", device, dst, size, &d)) return err;
    drain_device(device);
    if (size) std::memset(d, byte & 0xff, size);  // like memset: the low byte
    return nullptr;
  });
}

// ---- asynchronous: enqueued on the stream ----

spora_plugin_error_t* copy_h2d_async(spora_stream_t* stream, spora_devptr_t dst, const void* src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* d = nullptr;
    if (auto* err = check_host("copy_h2d_async", "src", src, size)) return err;
    if (auto* err = stream_range("copy_h2d_async dst", stream, dst, size, &s, &d)) return err;
    return s->enqueue([d, src, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
      if (size) std::memcpy(d, src, size);
      return nullptr;
    });
  });
}

spora_plugin_error_t* copy_d2h_async(spora_stream_t* stream, void* dst, spora_devptr_t src, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* from = nullptr;
    if (auto* err = check_host("copy_d2h_async", "dst", dst, size)) return err;
    if (auto* err = stream_range("copy_d2h_async src", stream, src, size, &s, &from)) return err;
    return s->enqueue([dst, from, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
      if (size) std::memcpy(dst, from, size);
      return nullptr;
    });
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
    return s->enqueue([d, from, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
      if (size) std::memmove(d, from, size);
      return nullptr;
    });
  });
}

spora_plugin_error_t* memset_async(spora_stream_t* stream, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    void* d = nullptr;
    if (auto* err = stream_range("memset_async dst", stream, dst, size, &s, &d)) return err;
    return s->enqueue([d, byte, size](const spora_plugin_error_t*) -> spora_plugin_error_t* {
      if (size) std::memset(d, byte & 0xff, size);
      return nullptr;
    });
  });
}

}  // namespace spora::sim
