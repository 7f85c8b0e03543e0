// Runtime part of the kit, second half: asynchronous copies, stream order,
// events across streams, host callbacks, pinned memory ordered by the stream
// around host callbacks, deferred frees and the reuse of freed blocks,
// asynchronous errors, concurrent use and errors on bad handles.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "checks.h"

namespace spora::conformance {
namespace {

constexpr const char* kPart = "runtime";

spora_devptr_t offset(spora_devptr_t p, size_t bytes) { return static_cast<char*>(p) + bytes; }

// Owns device memory, streams and events for one check, so an early
// CheckFailed does not leak them into the next check. Release errors are
// collected, not thrown (destructors).
class Scope {
 public:
  explicit Scope(Rt& rt) : rt_(rt) {}
  ~Scope() {
    for (spora_stream_t* s : streams_) call(rt_.api->stream_destroy(s), "stream_destroy");
    for (spora_event_t* e : events_) call(rt_.api->event_destroy(e), "event_destroy");
    for (spora_devptr_t p : buffers_) call(rt_.api->mem_free(rt_.device, p), "mem_free");
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  spora_devptr_t alloc(size_t n) {
    spora_devptr_t p = nullptr;
    must(call(rt_.api->mem_alloc(rt_.device, n, &p), "mem_alloc"), "mem_alloc(" + std::to_string(n) + ")");
    buffers_.push_back(p);
    return p;
  }
  spora_stream_t* stream() {
    spora_stream_t* s = nullptr;
    must(call(rt_.api->stream_create(rt_.device, &s), "stream_create"), "stream_create");
    if (!s) throw CheckFailed("stream_create succeeded but returned NULL");
    streams_.push_back(s);
    return s;
  }
  spora_event_t* event() {
    spora_event_t* e = nullptr;
    must(call(rt_.api->event_create(rt_.device, &e), "event_create"), "event_create");
    if (!e) throw CheckFailed("event_create succeeded but returned NULL");
    events_.push_back(e);
    return e;
  }
  // Destroys `s` now (the check itself is about destroying).
  void destroy(spora_stream_t* s) {
    streams_.erase(std::find(streams_.begin(), streams_.end(), s));
    must(call(rt_.api->stream_destroy(s), "stream_destroy"), "stream_destroy");
  }
  void forget(spora_devptr_t p) { buffers_.erase(std::find(buffers_.begin(), buffers_.end(), p)); }

 private:
  Rt& rt_;
  std::vector<spora_devptr_t> buffers_;
  std::vector<spora_stream_t*> streams_;
  std::vector<spora_event_t*> events_;
};

void sync(Rt& rt, spora_stream_t* s, const std::string& what) {
  must(call(rt.api->stream_synchronize(s), "stream_synchronize"), what);
}

void expect_bytes(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, const std::string& what) {
  const std::string bad = compare_bytes(got.data(), want.data(), want.size());
  if (!bad.empty()) throw CheckFailed(what + ": " + bad);
}

// What host callbacks saw.
struct CallbackLog {
  std::mutex mu;
  std::vector<int> order;
  int with_status = 0;
  // For the first callback: the host buffer an earlier d2h_async filled.
  const std::vector<unsigned char>* watch = nullptr;
  const std::vector<unsigned char>* expect = nullptr;
  bool data_ready = false;
};
struct CallbackArg {
  CallbackLog* log;
  int id;
};
void record_callback(void* user, const spora_plugin_error_t* status) {
  auto* a = static_cast<CallbackArg*>(user);
  std::lock_guard<std::mutex> lock(a->log->mu);
  a->log->order.push_back(a->id);
  if (status) ++a->log->with_status;
  if (a->id == 1 && a->log->watch)
    a->log->data_ready = std::memcmp(a->log->watch->data(), a->log->expect->data(), a->log->expect->size()) == 0;
}

// Pinned host memory from the plugin, freed when the check ends.
class Pinned {
 public:
  Pinned(Rt& rt, size_t n) : rt_(rt) {
    must(call(rt.api->host_alloc_pinned(n, &p_), "host_alloc_pinned"), "host_alloc_pinned(" + std::to_string(n) + ")");
    if (!p_) throw CheckFailed("host_alloc_pinned succeeded but returned NULL");
  }
  ~Pinned() { call(rt_.api->host_free_pinned(p_), "host_free_pinned"); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p_); }

 private:
  Rt& rt_;
  void* p_ = nullptr;
};

// A host callback that copies `n` bytes from `from` to `to` (fills pinned
// memory before an h2d copy, or saves what a d2h copy wrote).
struct HostCopy {
  const unsigned char* from;
  unsigned char* to;
  size_t n;
  std::atomic<int> ran{0};
  static void callback(void* user, const spora_plugin_error_t*) {
    auto* c = static_cast<HostCopy*>(user);
    std::memcpy(c->to, c->from, c->n);
    ++c->ran;
  }
};

// A host callback that sleeps, holding back the work queued after it.
struct HoldStream {
  int ms;
  static void callback(void* user, const spora_plugin_error_t*) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<HoldStream*>(user)->ms));
  }
};

constexpr const char* kNoPinned = "no pinned memory: the host orders such copies with synchronous copies";

}  // namespace

void check_streams(Rt& rt) {
  const spora_device_api_t* api = rt.api;
  const size_t big = 4u << 20;  // large enough that a real device's copies take time

  run_check(rt.ch, kPart, "async copies and memset on one stream land in order", [&] {
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p1 = pattern(big, 10);
    auto want = p1;
    spora_devptr_t a = sc.alloc(big), b = sc.alloc(big);
    std::vector<unsigned char> back(big, 0);
    must(call(api->copy_h2d_async(s, a, p1.data(), big), "copy_h2d_async"), "copy_h2d_async");
    must(call(api->memset_async(s, offset(a, 1000), 0x5A, 3000), "memset_async"), "memset_async");
    std::memset(want.data() + 1000, 0x5A, 3000);
    must(call(api->copy_d2d_async(s, b, a, big), "copy_d2d_async"), "copy_d2d_async");
    must(call(api->copy_d2h_async(s, back.data(), b, big), "copy_d2h_async"), "copy_d2h_async");
    sync(rt, s, "stream_synchronize");
    expect_bytes(back, want, "h2d_async, memset_async, d2d_async, d2h_async");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "a sequence of async copies into one buffer keeps stream order", [&] {
    // Each round overwrites A and snapshots it into B[i]: any reordering
    // leaves a snapshot holding another round's data.
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const int rounds = 6;
    std::vector<std::vector<unsigned char>> src, back;
    spora_devptr_t a = sc.alloc(big);
    std::vector<spora_devptr_t> snap;
    for (int i = 0; i < rounds; ++i) {
      src.push_back(pattern(big, 20 + static_cast<uint32_t>(i)));
      back.emplace_back(big, 0);
      snap.push_back(sc.alloc(big));
    }
    for (int i = 0; i < rounds; ++i) {
      must(call(api->copy_h2d_async(s, a, src[i].data(), big), "copy_h2d_async"), "copy_h2d_async");
      must(call(api->copy_d2d_async(s, snap[i], a, big), "copy_d2d_async"), "copy_d2d_async");
    }
    for (int i = 0; i < rounds; ++i)
      must(call(api->copy_d2h_async(s, back[i].data(), snap[i], big), "copy_d2h_async"), "copy_d2h_async");
    int32_t done = -1;
    must(call(api->stream_query(s, &done), "stream_query"), "stream_query while work is queued");
    sync(rt, s, "stream_synchronize");
    for (int i = 0; i < rounds; ++i) expect_bytes(back[i], src[i], "round " + std::to_string(i));
    done = -1;
    must(call(api->stream_query(s, &done), "stream_query"), "stream_query");
    if (done != 1) throw CheckFailed("stream_query reports " + std::to_string(done) + " after stream_synchronize; expected 1");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "an event never recorded counts as reached", [&] {
    Scope sc(rt);
    spora_event_t* e = sc.event();
    int32_t done = -1;
    must(call(api->event_query(e, &done), "event_query"), "event_query");
    if (done != 1) throw CheckFailed("event_query of a fresh event reports " + std::to_string(done) + "; expected 1");
    must(call(api->event_synchronize(e), "event_synchronize"), "event_synchronize of a fresh event");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "events order work across streams (record, stream_wait_event)", [&] {
    Scope sc(rt);
    spora_stream_t* s1 = sc.stream();
    spora_stream_t* s2 = sc.stream();
    spora_event_t* e = sc.event();
    const auto p = pattern(big, 30);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t a = sc.alloc(big);
    must(call(api->copy_h2d_async(s1, a, p.data(), big), "copy_h2d_async"), "copy_h2d_async on stream 1");
    must(call(api->event_record(e, s1), "event_record"), "event_record on stream 1");
    must(call(api->stream_wait_event(s2, e), "stream_wait_event"), "stream_wait_event on stream 2");
    must(call(api->copy_d2h_async(s2, back.data(), a, big), "copy_d2h_async"), "copy_d2h_async on stream 2");
    sync(rt, s2, "stream_synchronize(stream 2)");
    expect_bytes(back, p, "stream 2 read before stream 1's write reached the event");
    must(call(api->event_synchronize(e), "event_synchronize"), "event_synchronize");
    int32_t done = -1;
    must(call(api->event_query(e, &done), "event_query"), "event_query");
    if (done != 1) throw CheckFailed("event_query after event_synchronize reports " + std::to_string(done));
    // Re-recording moves the point.
    const auto p2 = pattern(big, 31);
    must(call(api->copy_h2d_async(s1, a, p2.data(), big), "copy_h2d_async"), "copy_h2d_async on stream 1");
    must(call(api->event_record(e, s1), "event_record"), "event_record again");
    must(call(api->event_synchronize(e), "event_synchronize"), "event_synchronize after re-recording");
    must(call(api->copy_d2h(rt.device, back.data(), a, big), "copy_d2h"), "copy_d2h");
    expect_bytes(back, p2, "after event_synchronize of the re-recorded event");
    sync(rt, s1, "stream_synchronize(stream 1)");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "event_elapsed_ms", [&] {
    if (!api->event_elapsed_ms) return Outcome::not_implemented("optional");
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    spora_event_t* start = sc.event();
    spora_event_t* end = sc.event();
    const auto p = pattern(big, 40);
    spora_devptr_t a = sc.alloc(big);
    must(call(api->event_record(start, s), "event_record"), "event_record(start)");
    must(call(api->copy_h2d_async(s, a, p.data(), big), "copy_h2d_async"), "copy_h2d_async");
    must(call(api->event_record(end, s), "event_record"), "event_record(end)");
    must(call(api->event_synchronize(end), "event_synchronize"), "event_synchronize(end)");
    double ms = -1;
    must(call(api->event_elapsed_ms(start, end, &ms), "event_elapsed_ms"), "event_elapsed_ms");
    if (!std::isfinite(ms) || ms < 0) throw CheckFailed("elapsed " + std::to_string(ms) + " ms; expected a finite value >= 0");
    sync(rt, s, "stream_synchronize");
    return Outcome::pass(std::to_string(ms) + " ms for a 4 MiB copy");
  });

  run_check(rt.ch, kPart, "host callbacks run after earlier work, in order", [&] {
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p = pattern(big, 50);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t a = sc.alloc(big);
    CallbackLog log;
    log.watch = &back;
    log.expect = &p;
    CallbackArg args[3] = {{&log, 1}, {&log, 2}, {&log, 3}};
    must(call(api->copy_h2d_async(s, a, p.data(), big), "copy_h2d_async"), "copy_h2d_async");
    must(call(api->copy_d2h_async(s, back.data(), a, big), "copy_d2h_async"), "copy_d2h_async");
    for (auto& arg : args)
      must(call(api->stream_add_callback(s, record_callback, &arg), "stream_add_callback"), "stream_add_callback");
    sync(rt, s, "stream_synchronize");
    std::lock_guard<std::mutex> lock(log.mu);
    if (log.order.size() != 3)
      throw CheckFailed(std::to_string(log.order.size()) + " of 3 callbacks had run when stream_synchronize returned");
    if (log.order != std::vector<int>{1, 2, 3})
      throw CheckFailed("callbacks ran in the order " + std::to_string(log.order[0]) + ", " +
                        std::to_string(log.order[1]) + ", " + std::to_string(log.order[2]));
    if (!log.data_ready) throw CheckFailed("the first callback ran before the copy enqueued ahead of it had finished");
    if (log.with_status) throw CheckFailed("callbacks after successful work got a non-NULL status");
    return Outcome::pass();
  });

  // The plugin.h ordering contract for pinned memory: a callback queued
  // before an h2d copy may produce its bytes (CUDA's cudaMemcpyAsync reads
  // pinned memory when the stream gets there, pageable memory at the call).
  const bool has_pinned = api->host_alloc_pinned && api->host_free_pinned;
  run_check(rt.ch, kPart, "pinned h2d after host callback", [&] {
    if (!has_pinned) return Outcome::skip(kNoPinned);
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p = pattern(big, 55);
    Pinned pin(rt, big);
    std::memset(pin.get(), 0, big);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t a = sc.alloc(big);
    HostCopy fill{p.data(), pin.get(), big};
    must(call(api->stream_add_callback(s, HostCopy::callback, &fill), "stream_add_callback"),
         "stream_add_callback (writes the pinned buffer)");
    must(call(api->copy_h2d_async(s, a, pin.get(), big), "copy_h2d_async"), "copy_h2d_async from pinned memory");
    sync(rt, s, "stream_synchronize");
    if (fill.ran != 1) throw CheckFailed("the callback had not run when stream_synchronize returned");
    must(call(api->copy_d2h(rt.device, back.data(), a, big), "copy_d2h"), "copy_d2h");
    const std::string bad = compare_bytes(back.data(), p.data(), big);
    if (!bad.empty())
      throw CheckFailed("the device did not receive what the callback queued before the copy wrote into pinned "
                        "memory (read before the stream reached the copy?): " + bad);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "pinned d2h before host callback", [&] {
    if (!has_pinned) return Outcome::skip(kNoPinned);
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p = pattern(big, 56);
    Pinned pin(rt, big);
    std::memset(pin.get(), 0, big);
    std::vector<unsigned char> seen(big, 0);
    spora_devptr_t a = sc.alloc(big);
    must(call(api->copy_h2d(rt.device, a, p.data(), big), "copy_h2d"), "copy_h2d");
    must(call(api->copy_d2h_async(s, pin.get(), a, big), "copy_d2h_async"), "copy_d2h_async to pinned memory");
    HostCopy save{pin.get(), seen.data(), big};
    must(call(api->stream_add_callback(s, HostCopy::callback, &save), "stream_add_callback"),
         "stream_add_callback (reads the pinned buffer)");
    sync(rt, s, "stream_synchronize");
    if (save.ran != 1) throw CheckFailed("the callback had not run when stream_synchronize returned");
    const std::string bad = compare_bytes(seen.data(), p.data(), big);
    if (!bad.empty())
      throw CheckFailed("a callback queued after a d2h copy into pinned memory did not see the device's bytes: " + bad);
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "stream_destroy waits for enqueued work", [&] {
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p = pattern(big, 60);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t a = sc.alloc(big);
    CallbackLog log;
    CallbackArg arg{&log, 7};
    must(call(api->copy_h2d_async(s, a, p.data(), big), "copy_h2d_async"), "copy_h2d_async");
    must(call(api->copy_d2h_async(s, back.data(), a, big), "copy_d2h_async"), "copy_d2h_async");
    must(call(api->stream_add_callback(s, record_callback, &arg), "stream_add_callback"), "stream_add_callback");
    sc.destroy(s);
    std::lock_guard<std::mutex> lock(log.mu);
    if (log.order.size() != 1) throw CheckFailed("the callback enqueued before stream_destroy had not run when it returned");
    expect_bytes(back, p, "data copied before stream_destroy");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "mem_free waits for queued work that uses the buffer", [&] {
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    const auto p = pattern(big, 70);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t a = sc.alloc(big);
    must(call(api->copy_h2d_async(s, a, p.data(), big), "copy_h2d_async"), "copy_h2d_async");
    must(call(api->copy_d2h_async(s, back.data(), a, big), "copy_d2h_async"), "copy_d2h_async");
    sc.forget(a);
    must(call(api->mem_free(rt.device, a), "mem_free"), "mem_free while a copy from it is queued");
    sync(rt, s, "stream_synchronize");
    expect_bytes(back, p, "the queued copy out of the freed buffer");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "a freed block is not reused under queued work that reads it (two streams)", [&] {
    // A caching allocator hands a freed block out again at once; the new
    // owner's writes, on another stream, must not land before the work
    // queued on the first stream has read the old contents.
    Scope sc(rt);
    spora_stream_t* s1 = sc.stream();
    spora_stream_t* s2 = sc.stream();
    const auto p = pattern(big, 90);
    const auto junk = pattern(big, 91);
    std::vector<unsigned char> back(big, 0);
    spora_devptr_t b = sc.alloc(big);
    spora_devptr_t a = sc.alloc(big);
    must(call(api->copy_h2d(rt.device, a, p.data(), big), "copy_h2d"), "copy_h2d");
    // Holds s1 back, so that the copy out of `a` is still queued when `a`
    // is freed and its successors are written.
    HoldStream hold{200};
    must(call(api->stream_add_callback(s1, HoldStream::callback, &hold), "stream_add_callback"), "stream_add_callback");
    must(call(api->copy_d2d_async(s1, b, a, big), "copy_d2d_async"), "copy_d2d_async out of the block to be freed");
    sc.forget(a);
    must(call(api->mem_free(rt.device, a), "mem_free"), "mem_free while a copy from it is queued");
    for (int i = 0; i < 3; ++i) {
      spora_devptr_t c = sc.alloc(big);
      must(call(api->copy_h2d_async(s2, c, junk.data(), big), "copy_h2d_async"), "copy_h2d_async into a new block");
    }
    sync(rt, s2, "stream_synchronize");
    sync(rt, s1, "stream_synchronize");
    must(call(api->copy_d2h(rt.device, back.data(), b, big), "copy_d2h"), "copy_d2h");
    expect_bytes(back, p, "what the queued copy read out of the freed block");
    return Outcome::pass();
  });

  run_check(rt.ch, kPart, "asynchronous errors are reported and cleared", [&] {
    if (rt.props.unified_memory)
      return Outcome::skip("device addresses are host pointers: an out-of-range copy cannot be made safely");
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    spora_devptr_t a = sc.alloc(4096);
    const auto p = pattern(8192, 80);
    // Runs 4 KiB past the end of the allocation.
    const Call enq = call(api->copy_h2d_async(s, offset(a, 4096), p.data(), 4096), "copy_h2d_async (out of range)");
    const Call first = call(api->stream_synchronize(s), "stream_synchronize");
    const Call second = call(api->stream_synchronize(s), "stream_synchronize");
    if (!enq.ok) {
      if (!first.ok) return Outcome::fail("reported when enqueued AND again by stream_synchronize: " + first.text);
      return Outcome::pass("an out-of-range copy was refused when enqueued: " + enq.text);
    }
    if (first.ok) return Outcome::warn("an out-of-range copy was accepted and stream_synchronize reported nothing");
    if (!second.ok)
      return Outcome::fail("the error was not cleared: the next stream_synchronize reported it again: " + second.text);
    return Outcome::pass("reported by stream_synchronize: " + first.text);
  });

  run_check(rt.ch, kPart, "concurrent use from 4 threads", [&] {
    std::atomic<int> failures{0};
    std::mutex mu;
    std::string first;
    auto worker = [&](int t) {
      try {
        for (int i = 0; i < 25; ++i) {
          const size_t n = 65536 + static_cast<size_t>(t) * 512 + static_cast<size_t>(i);
          const auto p = pattern(n, 100 + static_cast<uint32_t>(t * 100 + i));
          std::vector<unsigned char> back(n, 0);
          Scope sc(rt);
          spora_stream_t* s = sc.stream();
          spora_devptr_t a = sc.alloc(n);
          must(call(api->copy_h2d_async(s, a, p.data(), n), "copy_h2d_async"), "copy_h2d_async");
          must(call(api->copy_d2h_async(s, back.data(), a, n), "copy_d2h_async"), "copy_d2h_async");
          sync(rt, s, "stream_synchronize");
          expect_bytes(back, p, "thread " + std::to_string(t) + " round " + std::to_string(i));
        }
      } catch (const std::exception& e) {
        ++failures;
        std::lock_guard<std::mutex> lock(mu);
        if (first.empty()) first = e.what();
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
    for (auto& th : threads) th.join();
    if (failures) throw CheckFailed(std::to_string(failures.load()) + " of 4 threads failed; first: " + first);
    return Outcome::pass("alloc, stream, async copies, synchronize, free: 100 rounds");
  });
}

void check_bad_handles(Rt& rt) {
  // Last: a plugin that crashes here takes only the checks after it along.
  const spora_device_api_t* api = rt.api;
  run_check(rt.ch, kPart, "NULL handles, NULL outputs and bad device indices return errors", [&] {
    Scope sc(rt);
    spora_stream_t* s = sc.stream();
    spora_event_t* e = sc.event();
    spora_devptr_t buf = sc.alloc(64);
    const int32_t bad = rt.device_count;
    int32_t done = 0;
    spora_stream_t* s_out = nullptr;
    spora_event_t* e_out = nullptr;
    spora_devptr_t p_out = nullptr;
    CallbackLog log;
    CallbackArg arg{&log, 1};
    std::string accepted;
    auto expect_error = [&](const char* what, auto&& fn) {
      rt.ch.begin(std::string("bad handle: ") + what);
      const Call c = call(fn(), what);
      if (c.ok) accepted += (accepted.empty() ? "" : ", ") + std::string(what);
    };
    expect_error("stream_synchronize(NULL)", [&] { return api->stream_synchronize(nullptr); });
    expect_error("stream_query(NULL, &done)", [&] { return api->stream_query(nullptr, &done); });
    expect_error("stream_wait_event(NULL, event)", [&] { return api->stream_wait_event(nullptr, e); });
    expect_error("stream_add_callback(NULL, fn, arg)", [&] { return api->stream_add_callback(nullptr, record_callback, &arg); });
    expect_error("event_record(NULL, stream)", [&] { return api->event_record(nullptr, s); });
    expect_error("event_query(NULL, &done)", [&] { return api->event_query(nullptr, &done); });
    expect_error("event_synchronize(NULL)", [&] { return api->event_synchronize(nullptr); });
    expect_error("stream_create(device, NULL)", [&] { return api->stream_create(rt.device, nullptr); });
    expect_error("event_create(device, NULL)", [&] { return api->event_create(rt.device, nullptr); });
    expect_error("mem_alloc(device, 16, NULL)", [&] { return api->mem_alloc(rt.device, 16, nullptr); });
    expect_error("mem_alloc(device_count, 16, &p)", [&] { return api->mem_alloc(bad, 16, &p_out); });
    expect_error("stream_create(device_count, &s)", [&] { return api->stream_create(bad, &s_out); });
    expect_error("event_create(device_count, &e)", [&] { return api->event_create(bad, &e_out); });
    expect_error("copy_h2d(device, buf, NULL, 16)", [&] { return api->copy_h2d(rt.device, buf, nullptr, 16); });
    expect_error("copy_d2h(device, NULL, buf, 16)", [&] { return api->copy_d2h(rt.device, nullptr, buf, 16); });
    // Whatever was wrongly created is not ours to free safely; leak it.
    if (!log.order.empty()) accepted += " (and the callback ran)";
    if (!accepted.empty()) return Outcome::fail("accepted: " + accepted);
    return Outcome::pass("15 calls, each an error object");
  });
}

}  // namespace spora::conformance
