// Device memory (zeMemAllocDevice), pinned host memory (zeMemAllocHost), and
// copies/memsets: synchronous ones on the device's synchronous immediate
// list after draining its streams, asynchronous ones on the stream's list.
#include <initializer_list>
#include <string>

#include "error.h"
#include "ze_api.h"
#include "ze_state.h"
#include "ze_stream.h"

namespace spora::ze {

using spora::plugin::guard;

namespace {

constexpr size_t kAlignment = 256;

// Fill patterns with static storage: an asynchronous fill may read its
// pattern after the call returned, so it must never point at a local.
struct Patterns {
  uint8_t bytes[256];
  Patterns() {
    for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
  }
};
const uint8_t* pattern_of(int32_t byte) {
  static const Patterns p;
  return &p.bytes[static_cast<uint8_t>(byte)];
}

// Runs one command on the device's synchronous list, after every stream of
// the device drained (plugin.h orders sync copies after enqueued work).
// Device-side ranges a copy touches: (pointer, "dst"/"src").
struct Range {
  const void* ptr;
  const char* name;
};

template <class Append>
spora_plugin_error_t* run_sync(const char* what, int32_t device, size_t size, std::initializer_list<Range> ranges,
                               Append&& append) {
  Device* d = nullptr;
  if (auto* e = get_device(what, device, &d)) return e;
  for (const Range& r : ranges)
    if (auto* e = check_range(d, r.ptr, size, std::string(what) + " " + r.name)) return e;
  if (auto* e = drain_device(device)) return e;
  std::lock_guard<std::mutex> lock(d->sync_mu);
  SPORA_ZE_CHECK(append(d->sync_list), what);
  return nullptr;
}

// `span`: the profiler's name for the copy ("h2d", "d2h", "d2d", "memset",
// as the other plugins name theirs).
template <class Append>
spora_plugin_error_t* run_async(const char* what, const char* span, spora_stream_t* stream, size_t size,
                                std::initializer_list<Range> ranges, Append&& append, const char* call) {
  std::shared_ptr<Stream> s;
  if (auto* e = get_stream(what, stream, &s)) return e;
  Device* d = nullptr;
  if (auto* e = get_device(what, s->device(), &d)) return e;
  for (const Range& r : ranges)
    if (auto* e = check_range(d, r.ptr, size, std::string(what) + " " + r.name)) return e;
  Traced traced(*s, StreamTrace::Kind::kCopy, span);
  return s->enqueue(what, append, call);
}

}  // namespace

spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("mem_alloc: out is NULL");
    Device* d = nullptr;
    if (auto* e = get_device("mem_alloc", device, &d)) return e;
    if (d->memory_bytes > 0 && size > d->memory_bytes)
      return spora::plugin::make_error(SPORA_PLUGIN_OUT_OF_MEMORY,
                                       "[ze] mem_alloc of " + std::to_string(size) + " bytes: the device has " +
                                           std::to_string(d->memory_bytes));
    ze_device_mem_alloc_desc_t md{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    void* p = nullptr;
    // Size 0 still gets a unique address (plugin.h).
    const size_t bytes = size ? size : 1;
    SPORA_ZE_CHECK(zeMemAllocDevice(d->context, &md, bytes, kAlignment, d->device, &p),
                   "mem_alloc of " + std::to_string(size) + " bytes");
    {
      std::lock_guard<std::mutex> lock(d->alloc_mu);
      d->allocs[reinterpret_cast<uintptr_t>(p)] = bytes;
    }
    *out = p;
    return nullptr;
  });
}

spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!ptr) return nullptr;
    Device* d = nullptr;
    if (auto* e = get_device("mem_free", device, &d)) return e;
    {
      std::lock_guard<std::mutex> lock(d->alloc_mu);
      if (!d->allocs.count(reinterpret_cast<uintptr_t>(ptr)))
        return invalid("mem_free: not an address mem_alloc returned for device " + std::to_string(device));
    }
    // zeMemFree does not wait for the device: drain the streams first.
    if (auto* e = drain_device(device)) return e;
    {
      std::lock_guard<std::mutex> lock(d->alloc_mu);
      d->allocs.erase(reinterpret_cast<uintptr_t>(ptr));
    }
    SPORA_ZE_CHECK(zeMemFree(d->context, ptr), "mem_free");
    return nullptr;
  });
}

spora_plugin_error_t* host_alloc_pinned(size_t size, void** out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("host_alloc_pinned: out is NULL");
    Device* d = nullptr;
    if (auto* e = get_device("host_alloc_pinned", 0, &d)) return e;
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    SPORA_ZE_CHECK(zeMemAllocHost(d->context, &hd, size ? size : 1, kAlignment, out), "host_alloc_pinned");
    return nullptr;
  });
}

spora_plugin_error_t* host_free_pinned(void* ptr) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!ptr) return nullptr;
    Device* d = nullptr;
    if (auto* e = get_device("host_free_pinned", 0, &d)) return e;
    SPORA_ZE_CHECK(zeMemFree(d->context, ptr), "host_free_pinned");
    return nullptr;
  });
}

spora_plugin_error_t* copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (size && !src) return invalid("copy_h2d: the host pointer src is NULL");
    return run_sync("copy_h2d", device, size, {{dst, "dst"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    });
  });
}

spora_plugin_error_t* copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (size && !dst) return invalid("copy_d2h: the host pointer dst is NULL");
    return run_sync("copy_d2h", device, size, {{src, "src"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    });
  });
}

spora_plugin_error_t* copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard("ze", [&] {
    return run_sync("copy_d2d", device, size, {{dst, "dst"}, {src, "src"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    });
  });
}

spora_plugin_error_t* memset_sync(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("ze", [&] {
    return run_sync("memset", device, size, {{dst, "dst"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryFill(l, dst, pattern_of(byte), 1, size, nullptr, 0, nullptr);
    });
  });
}

spora_plugin_error_t* copy_h2d_async(spora_stream_t* stream, spora_devptr_t dst, const void* src, size_t size) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (size && !src) return invalid("copy_h2d_async: the host pointer src is NULL");
    return run_async("copy_h2d_async", "h2d", stream, size, {{dst, "dst"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryCopy");
  });
}

spora_plugin_error_t* copy_d2h_async(spora_stream_t* stream, void* dst, spora_devptr_t src, size_t size) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (size && !dst) return invalid("copy_d2h_async: the host pointer dst is NULL");
    return run_async("copy_d2h_async", "d2h", stream, size, {{src, "src"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryCopy");
  });
}

spora_plugin_error_t* copy_d2d_async(spora_stream_t* stream, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return guard("ze", [&] {
    return run_async("copy_d2d_async", "d2d", stream, size, {{dst, "dst"}, {src, "src"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryCopy(l, dst, src, size, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryCopy");
  });
}

spora_plugin_error_t* memset_async(spora_stream_t* stream, spora_devptr_t dst, int32_t byte, size_t size) {
  return guard("ze", [&] {
    return run_async("memset_async", "memset", stream, size, {{dst, "dst"}}, [&](ze_command_list_handle_t l) {
      return zeCommandListAppendMemoryFill(l, dst, pattern_of(byte), 1, size, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryFill");
  });
}

}  // namespace spora::ze
