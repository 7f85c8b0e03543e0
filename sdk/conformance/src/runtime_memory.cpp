// Runtime part of the kit, first half: initialisation, device properties,
// allocation, memory statistics and synchronous copies on device 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "checks.h"

namespace spora::conformance {
namespace {

constexpr const char* kPart = "runtime";

spora_devptr_t offset(spora_devptr_t p, size_t bytes) { return static_cast<char*>(p) + bytes; }

// Allocates or throws CheckFailed.
spora_devptr_t alloc(Rt& rt, size_t n) {
  spora_devptr_t p = nullptr;
  must(call(rt.api->mem_alloc(rt.device, n, &p), "mem_alloc"), "mem_alloc(" + std::to_string(n) + ")");
  if (!p) throw CheckFailed("mem_alloc(" + std::to_string(n) + ") succeeded but returned NULL");
  return p;
}

void release(Rt& rt, spora_devptr_t p) { must(call(rt.api->mem_free(rt.device, p), "mem_free"), "mem_free"); }

}  // namespace

std::vector<unsigned char> pattern(size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

std::string compare_bytes(const unsigned char* got, const unsigned char* want, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      size_t bad = 0;
      for (size_t j = i; j < n; ++j) bad += got[j] != want[j];
      return "byte " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]) +
             " (" + std::to_string(bad) + " of " + std::to_string(n) + " bytes differ)";
    }
  return "";
}

void check_memory(Rt& rt) {
  const spora_device_api_t* api = rt.api;
  const uint32_t align = rt.props.alignment ? rt.props.alignment : 1;

  run_check(rt.ch, kPart, "mem_alloc/mem_free: sizes 1 B to 3 MiB, distinct, aligned", [&] {
    const size_t sizes[] = {1, 7, 64, 4096, 1 << 20, (3u << 20) + 5};
    std::vector<spora_devptr_t> ptrs;
    for (size_t n : sizes) {
      spora_devptr_t p = alloc(rt, n);
      if (reinterpret_cast<uintptr_t>(p) % align != 0)
        throw CheckFailed("mem_alloc(" + std::to_string(n) + ") returned an address not aligned to " +
                          std::to_string(align) + " bytes (properties.alignment)");
      for (spora_devptr_t q : ptrs)
        if (q == p) throw CheckFailed("mem_alloc returned the same address twice for live allocations");
      ptrs.push_back(p);
    }
    for (spora_devptr_t p : ptrs) release(rt, p);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "mem_alloc of 0 bytes: unique non-NULL addresses", [&] {
    spora_devptr_t a = alloc(rt, 0), b = alloc(rt, 0);
    if (a == b) throw CheckFailed("two live zero-byte allocations share the address; each must be unique");
    release(rt, a);
    release(rt, b);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "mem_free(NULL) is a no-op", [&] {
    const Call c = call(api->mem_free(rt.device, nullptr), "mem_free(NULL)");
    return c.ok ? Outcome::pass() : Outcome::fail("returned an error: " + c.text);
  });

  run_check(rt.ch, kPart, "mem_alloc of an impossible size fails cleanly", [&] {
    std::string detail;
    for (size_t n : {std::numeric_limits<size_t>::max(), (std::numeric_limits<size_t>::max() >> 1) + 1}) {
      spora_devptr_t p = nullptr;
      const Call c = call(api->mem_alloc(rt.device, n, &p), "mem_alloc(huge)");
      if (c.ok) {
        if (p) api->mem_free(rt.device, p);
        return Outcome::fail("mem_alloc(" + std::to_string(n) + ") succeeded; it must return an error "
                             "(SPORA_PLUGIN_OUT_OF_MEMORY), and beware of size overflow when rounding");
      }
      if (c.code != SPORA_PLUGIN_OUT_OF_MEMORY && c.code != SPORA_PLUGIN_INVALID_ARGUMENT)
        return Outcome::fail("mem_alloc(" + std::to_string(n) + ") failed with " + c.text +
                             "; expected OUT_OF_MEMORY");
      if (detail.empty()) detail = c.text;
    }
    return Outcome::pass(detail);
  });

  const size_t n = (1u << 20) + 13;
  run_check(rt.ch, kPart, "copy_h2d / copy_d2h / copy_d2d round trip (1 MiB + 13 B)", [&] {
    const auto src = pattern(n, 1);
    std::vector<unsigned char> back(n, 0);
    spora_devptr_t a = alloc(rt, n), b = alloc(rt, n);
    must(call(api->copy_h2d(rt.device, a, src.data(), n), "copy_h2d"), "copy_h2d");
    must(call(api->copy_d2h(rt.device, back.data(), a, n), "copy_d2h"), "copy_d2h");
    std::string bad = compare_bytes(back.data(), src.data(), n);
    if (!bad.empty()) throw CheckFailed("copy_h2d then copy_d2h: " + bad);
    must(call(api->copy_d2d(rt.device, b, a, n), "copy_d2d"), "copy_d2d");
    std::fill(back.begin(), back.end(), 0);
    must(call(api->copy_d2h(rt.device, back.data(), b, n), "copy_d2h"), "copy_d2h");
    bad = compare_bytes(back.data(), src.data(), n);
    if (!bad.empty()) throw CheckFailed("after copy_d2d: " + bad);
    release(rt, a);
    release(rt, b);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "copies at byte offsets inside an allocation", [&] {
    // The host passes sub-buffers as base + offset.
    auto want = pattern(n, 2);
    const auto part = pattern(1000, 3);
    std::vector<unsigned char> back(n, 0);
    spora_devptr_t a = alloc(rt, n), b = alloc(rt, n);
    must(call(api->copy_h2d(rt.device, a, want.data(), n), "copy_h2d"), "copy_h2d");
    must(call(api->copy_h2d(rt.device, offset(a, 4099), part.data(), part.size()), "copy_h2d"), "copy_h2d at +4099");
    std::memcpy(want.data() + 4099, part.data(), part.size());
    must(call(api->copy_d2d(rt.device, offset(b, 17), offset(a, 17), n - 17), "copy_d2d"), "copy_d2d at +17");
    must(call(api->copy_d2h(rt.device, back.data() + 17, offset(b, 17), n - 17), "copy_d2h"), "copy_d2h at +17");
    const std::string bad = compare_bytes(back.data() + 17, want.data() + 17, n - 17);
    if (!bad.empty()) throw CheckFailed(bad);
    release(rt, a);
    release(rt, b);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "zero-byte copies and memset succeed", [&] {
    unsigned char host[4] = {};
    spora_devptr_t a = alloc(rt, 16);
    must(call(api->copy_h2d(rt.device, a, host, 0), "copy_h2d"), "copy_h2d of 0 bytes");
    must(call(api->copy_d2h(rt.device, host, a, 0), "copy_d2h"), "copy_d2h of 0 bytes");
    must(call(api->copy_d2d(rt.device, a, a, 0), "copy_d2d"), "copy_d2d of 0 bytes");
    must(call(api->memset(rt.device, a, 0, 0), "memset"), "memset of 0 bytes");
    release(rt, a);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "memset writes exactly its range", [&] {
    auto want = pattern(n, 4);
    std::vector<unsigned char> back(n, 0);
    spora_devptr_t a = alloc(rt, n);
    must(call(api->copy_h2d(rt.device, a, want.data(), n), "copy_h2d"), "copy_h2d");
    must(call(api->memset(rt.device, offset(a, 5), 0xA5, 100000), "memset"), "memset(+5, 0xA5, 100000)");
    std::memset(want.data() + 5, 0xA5, 100000);
    must(call(api->copy_d2h(rt.device, back.data(), a, n), "copy_d2h"), "copy_d2h");
    const std::string bad = compare_bytes(back.data(), want.data(), n);
    if (!bad.empty()) throw CheckFailed(bad);
    release(rt, a);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "unified memory: device addresses are host pointers", [&] {
    if (!rt.props.unified_memory) return Outcome::skip("properties.unified_memory is 0");
    const auto want = pattern(4096, 5);
    spora_devptr_t a = alloc(rt, 4096);
    must(call(api->copy_h2d(rt.device, a, want.data(), 4096), "copy_h2d"), "copy_h2d");
    const std::string bad = compare_bytes(static_cast<const unsigned char*>(a), want.data(), 4096);
    if (!bad.empty()) throw CheckFailed("reading the device address as host memory: " + bad);
    release(rt, a);
    return Outcome::pass();
  });

  // Optional; the ABI part already reports it absent.
  if (api->host_alloc_pinned && api->host_free_pinned) run_check(rt.ch, kPart, "pinned host memory", [&] {
    void* h = nullptr;
    must(call(api->host_alloc_pinned(1 << 20, &h), "host_alloc_pinned"), "host_alloc_pinned(1 MiB)");
    if (!h) throw CheckFailed("host_alloc_pinned succeeded but returned NULL");
    const auto want = pattern(1 << 20, 6);
    std::memcpy(h, want.data(), want.size());
    spora_devptr_t a = alloc(rt, 1 << 20);
    must(call(api->copy_h2d(rt.device, a, h, 1 << 20), "copy_h2d"), "copy_h2d from pinned memory");
    std::memset(h, 0, 1 << 20);
    must(call(api->copy_d2h(rt.device, h, a, 1 << 20), "copy_d2h"), "copy_d2h to pinned memory");
    const std::string bad = compare_bytes(static_cast<const unsigned char*>(h), want.data(), want.size());
    if (!bad.empty()) throw CheckFailed(bad);
    release(rt, a);
    must(call(api->host_free_pinned(h), "host_free_pinned"), "host_free_pinned");
    return Outcome::pass();
  });
}

void check_memory_stats(Rt& rt) {
  const spora_device_api_t* api = rt.api;
  const bool has = SPORA_STRUCT_HAS(api, spora_device_api_t, memory_stats) && api->memory_stats &&
                   SPORA_STRUCT_HAS(api, spora_device_api_t, reset_peak_memory_stats) && api->reset_peak_memory_stats;
  if (!has) return;  // optional; the ABI part reports it absent (or half present)
  auto stats = [&](const char* when) {
    spora_memory_stats_t s{};
    s.struct_size = sizeof(s);
    must(call(api->memory_stats(rt.device, &s), "memory_stats"), std::string("memory_stats ") + when);
    if (s.struct_size != sizeof(s)) throw CheckFailed("memory_stats changed struct_size; the host sets it");
    if (s.peak_allocated_bytes < s.allocated_bytes || s.reserved_bytes < s.allocated_bytes ||
        s.peak_reserved_bytes < s.reserved_bytes)
      throw CheckFailed(std::string("memory_stats ") + when + ": allocated " + std::to_string(s.allocated_bytes) +
                        ", peak " + std::to_string(s.peak_allocated_bytes) + ", reserved " +
                        std::to_string(s.reserved_bytes) + ", peak reserved " + std::to_string(s.peak_reserved_bytes) +
                        ": every peak must be at least its current value, and reserved at least allocated");
    return s;
  };
  auto expect_allocated = [](const spora_memory_stats_t& s, uint64_t want, const std::string& when) {
    if (s.allocated_bytes != want)
      throw CheckFailed("allocated_bytes " + when + " is " + std::to_string(s.allocated_bytes) + ", expected " +
                        std::to_string(want) + " (the sizes requested by live allocations, summed)");
  };

  run_check(rt.ch, kPart, "memory statistics follow mem_alloc, mem_free and reset_peak_memory_stats", [&] {
    const size_t na = (1u << 20) + 13, nb = 3u << 20;
    const spora_memory_stats_t s0 = stats("at the start");
    spora_devptr_t a = alloc(rt, na), b = alloc(rt, nb);
    const spora_memory_stats_t s1 = stats("with two live allocations");
    expect_allocated(s1, s0.allocated_bytes + na + nb, "after allocating " + std::to_string(na) + " and " +
                                                           std::to_string(nb) + " bytes");
    release(rt, b);
    const spora_memory_stats_t s2 = stats("after a free");
    expect_allocated(s2, s0.allocated_bytes + na, "after freeing " + std::to_string(nb) + " bytes");
    if (s2.peak_allocated_bytes < s1.allocated_bytes)
      throw CheckFailed("peak_allocated_bytes fell to " + std::to_string(s2.peak_allocated_bytes) + " after a free; " +
                        "it was " + std::to_string(s1.allocated_bytes) + " and must stay until a reset");
    must(call(api->reset_peak_memory_stats(rt.device), "reset_peak_memory_stats"), "reset_peak_memory_stats");
    const spora_memory_stats_t s3 = stats("after reset_peak_memory_stats");
    if (s3.peak_allocated_bytes != s3.allocated_bytes)
      throw CheckFailed("after reset_peak_memory_stats, peak_allocated_bytes is " +
                        std::to_string(s3.peak_allocated_bytes) + " but allocated_bytes is " +
                        std::to_string(s3.allocated_bytes));
    release(rt, a);
    const spora_memory_stats_t s4 = stats("after freeing everything");
    expect_allocated(s4, s0.allocated_bytes, "after freeing both");
    return Outcome::pass("allocated +" + std::to_string(na + nb) + " then back; reserved " +
                         std::to_string(s1.reserved_bytes) + " bytes with both live");
  });

  run_check(rt.ch, kPart, "memory_stats writes only what struct_size covers, and refuses bad arguments", [&] {
    // A host built against a smaller struct: only allocated_bytes is its.
    spora_memory_stats_t s;
    std::memset(&s, 0xAB, sizeof s);
    s.struct_size = offsetof(spora_memory_stats_t, peak_allocated_bytes);
    must(call(api->memory_stats(rt.device, &s), "memory_stats"), "memory_stats with a smaller struct");
    const unsigned char* tail = reinterpret_cast<const unsigned char*>(&s) + s.struct_size;
    for (size_t i = 0; i < sizeof s - offsetof(spora_memory_stats_t, peak_allocated_bytes); ++i)
      if (tail[i] != 0xAB)
        throw CheckFailed("memory_stats wrote byte " + std::to_string(s.struct_size + i) +
                          ", past the struct_size the host set; check SPORA_STRUCT_HAS before each field");
    const Call null_out = call(api->memory_stats(rt.device, nullptr), "memory_stats(device, NULL)");
    if (null_out.ok) throw CheckFailed("memory_stats(device, NULL) succeeded");
    spora_memory_stats_t t{};
    t.struct_size = sizeof t;
    const Call bad = call(api->memory_stats(rt.device_count, &t), "memory_stats(device_count)");
    if (bad.ok) throw CheckFailed("memory_stats of device " + std::to_string(rt.device_count) + " succeeded");
    const Call bad_reset = call(api->reset_peak_memory_stats(rt.device_count), "reset_peak_memory_stats(device_count)");
    if (bad_reset.ok) throw CheckFailed("reset_peak_memory_stats of device " + std::to_string(rt.device_count) + " succeeded");
    return Outcome::pass();
  });
}

void check_runtime(Channel& ch, const AbiState& st) {
  if (!st.device) {
    if (st.collective)
      ch.result(kPart, "collective semantics", Status::kSkip,
                "the kit checks device plugins at run time; collectives need a multi-rank harness (not part of it yet)");
    return;
  }
  if (!st.can_run) {
    ch.result(kPart, "runtime checks", Status::kSkip, "the probe says the plugin cannot run on this machine");
    return;
  }
  if (!st.runtime_ready) {
    ch.result(kPart, "runtime checks", Status::kSkip, "required functions are missing (see above); nothing was called");
    return;
  }
  Rt rt{ch, st.device};
  bool ready = false;
  run_check(ch, kPart, "initialize", [&] {
    const Call c = call(st.device->initialize(), "initialize");
    if (!c.ok)
      return Outcome::fail(c.text + (c.code == SPORA_PLUGIN_UNAVAILABLE ? " (the plugin cannot run on this machine)" : ""));
    ready = true;
    return Outcome::pass();
  });
  if (!ready) return;
  run_check(ch, kPart, "device_count", [&] {
    must(call(st.device->device_count(&rt.device_count), "device_count"), "device_count");
    if (rt.device_count < 1) {
      ready = false;
      return Outcome::fail("reports " + std::to_string(rt.device_count) + " devices after a successful initialize; "
                           "fail initialize with SPORA_PLUGIN_UNAVAILABLE and a reason instead");
    }
    return Outcome::pass(std::to_string(rt.device_count) + " device(s); checking device 0");
  });
  if (!ready) return;
  run_check(ch, kPart, "device_properties", [&] {
    rt.props = spora_device_properties_t{};
    rt.props.struct_size = sizeof(rt.props);
    must(call(st.device->device_properties(0, &rt.props), "device_properties"), "device_properties(0)");
    if (rt.props.struct_size != sizeof(rt.props))
      return Outcome::fail("changed struct_size; the host sets it, the plugin only reads it");
    const uint32_t a = rt.props.alignment;
    if (a & (a - 1)) return Outcome::fail("alignment " + std::to_string(a) + " is not a power of two");
    if (rt.props.unified_memory != 0 && rt.props.unified_memory != 1)
      return Outcome::fail("unified_memory is " + std::to_string(rt.props.unified_memory) + ", not 0 or 1");
    const std::string name = rt.props.name ? rt.props.name : "";
    ch.fact("device", {{"name", name},
                       {"vendor", rt.props.vendor ? rt.props.vendor : ""},
                       {"unified_memory", rt.props.unified_memory},
                       {"alignment", a}});
    if (name.empty()) return Outcome::warn("name is empty; users see it in `spora devices`");
    if (a == 0) return Outcome::warn("alignment is 0; report the minimum alignment of mem_alloc");
    return Outcome::pass("\"" + name + "\", alignment " + std::to_string(a) +
                         (rt.props.unified_memory ? ", unified memory" : ""));
  });
  run_check(ch, kPart, "device_properties of a device that does not exist", [&] {
    spora_device_properties_t p{};
    p.struct_size = sizeof(p);
    const Call c = call(st.device->device_properties(rt.device_count, &p), "device_properties(count)");
    if (c.ok) return Outcome::fail("device_properties(" + std::to_string(rt.device_count) + ") succeeded");
    return Outcome::pass(c.text);
  });
  check_memory(rt);
  check_memory_stats(rt);
  check_streams(rt);
  check_capture(rt);
  check_bad_handles(rt);
  run_check(ch, kPart, "shutdown", [&] {
    if (!st.device->shutdown) return Outcome::not_implemented("optional");
    st.device->shutdown();
    return Outcome::pass("returned");
  });
}

}  // namespace spora::conformance
