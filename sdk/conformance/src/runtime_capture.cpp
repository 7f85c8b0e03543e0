// Runtime part of the kit: stream capture (plugin ABI 1.2), when the plugin
// has it. A recording runs nothing; each replay runs the recorded work, in
// order, on the recorded addresses, reading what they hold at replay time;
// a synchronization on the recording stream breaks the capture.
#include <cstring>
#include <string>
#include <vector>

#include "checks.h"

namespace spora::conformance {
namespace {

constexpr const char* kPart = "runtime";

spora_devptr_t offset(spora_devptr_t p, size_t bytes) { return static_cast<char*>(p) + bytes; }

bool has_capture(const spora_device_api_t* api) {
  return SPORA_STRUCT_HAS(api, spora_device_api_t, captured_destroy) && api->capture_begin && api->capture_end &&
         api->captured_launch && api->captured_destroy;
}

// Device memory and a stream for one check, released at the end.
struct Owned {
  Rt& rt;
  std::vector<spora_devptr_t> buffers;
  spora_stream_t* stream = nullptr;
  spora_captured_t* captured = nullptr;
  ~Owned() {
    if (captured) call(rt.api->captured_destroy(captured), "captured_destroy");
    if (stream) call(rt.api->stream_destroy(stream), "stream_destroy");
    for (spora_devptr_t p : buffers) call(rt.api->mem_free(rt.device, p), "mem_free");
  }
  spora_devptr_t alloc(size_t n) {
    spora_devptr_t p = nullptr;
    must(call(rt.api->mem_alloc(rt.device, n, &p), "mem_alloc"), "mem_alloc(" + std::to_string(n) + ")");
    buffers.push_back(p);
    return p;
  }
};

std::vector<unsigned char> read(Rt& rt, spora_devptr_t p, size_t n) {
  std::vector<unsigned char> v(n);
  must(call(rt.api->copy_d2h(rt.device, v.data(), p, n), "copy_d2h"), "copy_d2h");
  return v;
}

void expect(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, const std::string& what) {
  const std::string bad = compare_bytes(got.data(), want.data(), want.size());
  if (!bad.empty()) throw CheckFailed(what + ": " + bad);
}

}  // namespace

void check_capture(Rt& rt) {
  const spora_device_api_t* api = rt.api;
  const size_t n = 1u << 20;

  run_check(rt.ch, kPart, "stream capture: recording runs nothing, each replay runs the work in order", [&] {
    if (!has_capture(api)) return Outcome::not_implemented("optional (ABI 1.2)");
    Owned o{rt};
    spora_devptr_t a = o.alloc(n), b = o.alloc(n);
    const auto first = pattern(n, 91), second = pattern(n, 92);
    const std::vector<unsigned char> zeros(n, 0);
    must(call(api->copy_h2d(rt.device, a, first.data(), n), "copy_h2d"), "copy_h2d");
    must(call(api->copy_h2d(rt.device, b, zeros.data(), n), "copy_h2d"), "copy_h2d");
    must(call(api->stream_create(rt.device, &o.stream), "stream_create"), "stream_create");
    spora_stream_t* rec = nullptr;
    must(call(api->capture_begin(rt.device, &rec), "capture_begin"), "capture_begin");
    if (!rec) throw CheckFailed("capture_begin succeeded but returned no recording stream");
    // b = a, then bytes [1000, 4000) of b set to 0x5A: order matters.
    const Call c1 = call(api->copy_d2d_async(rec, b, a, n), "copy_d2d_async");
    const Call c2 = call(api->memset_async(rec, offset(b, 1000), 0x5A, 3000), "memset_async");
    const Call end = call(api->capture_end(rec, &o.captured), "capture_end");
    must(c1, "copy_d2d_async while recording");
    must(c2, "memset_async while recording");
    must(end, "capture_end");
    if (!o.captured) throw CheckFailed("capture_end succeeded but returned no recording");
    expect(read(rt, b, n), zeros, "recording ran the work: b changed before any replay");
    auto want = first;
    std::memset(want.data() + 1000, 0x5A, 3000);
    must(call(api->captured_launch(o.captured, o.stream), "captured_launch"), "captured_launch");
    must(call(api->stream_synchronize(o.stream), "stream_synchronize"), "stream_synchronize");
    expect(read(rt, b, n), want, "first replay");
    // A replay reads the recorded addresses as they are now.
    must(call(api->copy_h2d(rt.device, a, second.data(), n), "copy_h2d"), "copy_h2d");
    want = second;
    std::memset(want.data() + 1000, 0x5A, 3000);
    must(call(api->captured_launch(o.captured, o.stream), "captured_launch"), "captured_launch");
    must(call(api->stream_synchronize(o.stream), "stream_synchronize"), "stream_synchronize");
    expect(read(rt, b, n), want, "second replay, after a changed");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "stream capture: synchronizing the recording stream breaks the capture", [&] {
    if (!has_capture(api)) return Outcome::not_implemented("optional (ABI 1.2)");
    Owned o{rt};
    spora_devptr_t a = o.alloc(n);
    spora_stream_t* rec = nullptr;
    must(call(api->capture_begin(rt.device, &rec), "capture_begin"), "capture_begin");
    const Call memset = call(api->memset_async(rec, a, 0, n), "memset_async");
    const Call sync = call(api->stream_synchronize(rec), "stream_synchronize");
    const Call end = call(api->capture_end(rec, &o.captured), "capture_end");
    must(memset, "memset_async while recording");
    if (end.ok) return Outcome::fail("capture_end succeeded after stream_synchronize on the recording stream");
    if (o.captured) return Outcome::fail("capture_end failed but returned a recording");
    return Outcome::pass(std::string(sync.ok ? "the synchronize returned success; " : "") + "capture_end: " + end.text);
  });
}

}  // namespace spora::conformance
