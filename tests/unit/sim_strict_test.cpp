// The sim device is as strict as a real GPU runtime (issue 11, DESIGN.md
// section 7): pinned vs pageable host memory in async copies, d2h copies to
// pageable memory that block, copies and host callbacks on their own
// per-device threads, callbacks that may not wait for their device, device
// lag, and streams that truly overlap. Driven through the C table only.
#include <dirent.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sim_test_host.h"

namespace simtest {
// A lag of 2 ms makes "the host runs ahead of the device" visible; the
// ordering tests below do not rely on timing, they use gates.
const std::map<std::string, std::string>& config_overrides() {
  static const std::map<std::string, std::string> m = {{"sim.lag_us", "2000"}, {"sim.fault_after_launches", "0"}};
  return m;
}
}  // namespace simtest

namespace {

using simtest::api;
using simtest::take;
using simtest::take_err;

::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new simtest::Environment);

pid_t this_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

std::string thread_name(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// Every thread of the process: tid -> name.
std::map<pid_t, std::string> all_threads() {
  std::map<pid_t, std::string> out;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      out[tid] = thread_name(tid);
    }
    closedir(dir);
  }
  return out;
}

// A host callback that blocks its stream until the test opens the gate.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  void let_through() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  // Waits (up to 10 s) until the callback has started; false on timeout.
  bool wait_entered() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered; });
  }
  static void callback(void* user, const spora_plugin_error_t*) {
    auto* g = static_cast<Gate*>(user);
    std::unique_lock<std::mutex> lock(g->mu);
    g->entered = true;
    g->cv.notify_all();
    g->cv.wait(lock, [&] { return g->open; });
  }
};

// Writes `value` into every float of `buf` (n floats).
struct Fill {
  float* buf;
  size_t n;
  float value;
  static void callback(void* user, const spora_plugin_error_t*) {
    auto* f = static_cast<Fill*>(user);
    for (size_t i = 0; i < f->n; ++i) f->buf[i] = f->value;
  }
};

class SimStrict : public ::testing::Test {
 protected:
  static constexpr size_t kN = 1024;
  static constexpr size_t kBytes = kN * sizeof(float);

  void SetUp() override {
    ASSERT_NE(api, nullptr) << simtest::setup_error;
    SIM_OK(api->stream_create(0, &stream_));
    SIM_OK(api->mem_alloc(0, kBytes, &dev_));
  }
  void TearDown() override {
    if (!api) return;
    for (void* p : pinned_) EXPECT_EQ(take(api->host_free_pinned(p)), "");
    if (stream_) EXPECT_EQ(take(api->stream_destroy(stream_)), "");
    if (dev_) EXPECT_EQ(take(api->mem_free(0, dev_)), "");
  }
  float* pinned(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(take(api->host_alloc_pinned(n * sizeof(float), &p)), "");
    if (p) pinned_.push_back(p);
    return static_cast<float*>(p);
  }
  std::vector<float> read_back() {
    std::vector<float> v(kN, -1.f);
    EXPECT_EQ(take(api->copy_d2h(0, v.data(), dev_, kBytes)), "");
    return v;
  }

  spora_stream_t* stream_ = nullptr;
  spora_devptr_t dev_ = nullptr;
  std::vector<void*> pinned_;
};

// ---- pinned memory ----

TEST_F(SimStrict, PinnedAllocationsAreTrackedAndFreedOnce) {
  ASSERT_NE(api->host_alloc_pinned, nullptr);
  ASSERT_NE(api->host_free_pinned, nullptr);
  void *a = nullptr, *b = nullptr, *z1 = nullptr, *z2 = nullptr;
  SIM_OK(api->host_alloc_pinned(1000, &a));
  SIM_OK(api->host_alloc_pinned(1 << 20, &b));
  SIM_OK(api->host_alloc_pinned(0, &z1));
  SIM_OK(api->host_alloc_pinned(0, &z2));
  ASSERT_NE(a, nullptr);
  EXPECT_NE(z1, nullptr);
  EXPECT_NE(z1, z2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 4096, 0u);
  std::memset(a, 1, 1000);  // usable host memory
  std::memset(b, 2, 1 << 20);
  for (void* p : {a, b, z1, z2}) SIM_OK(api->host_free_pinned(p));
  SIM_OK(api->host_free_pinned(nullptr));

  // Freeing twice, or a pointer it never returned, names the pointer.
  const simtest::Err twice = take_err(api->host_free_pinned(a));
  EXPECT_EQ(twice.code, SPORA_PLUGIN_INVALID_ARGUMENT);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", a);
  EXPECT_NE(twice.message.find(std::string("host_free_pinned: ") + buf), std::string::npos) << twice.message;
  EXPECT_NE(twice.message.find("not returned by host_alloc_pinned"), std::string::npos) << twice.message;
  int on_stack = 0;
  EXPECT_EQ(take_err(api->host_free_pinned(&on_stack)).code, SPORA_PLUGIN_INVALID_ARGUMENT);
  EXPECT_EQ(take_err(api->host_alloc_pinned(16, nullptr)).code, SPORA_PLUGIN_INVALID_ARGUMENT);
}

// Issue 11: a callback queued before an h2d copy writes the copy's source.
// Pinned memory is read when the stream reaches the copy, so the device gets
// the callback's bytes; pageable memory is staged during the call (as
// cudaMemcpyAsync does), so the device gets the old bytes.
TEST_F(SimStrict, H2dAfterCallbackSeesPinnedButNotPageableWrites) {
  float* pin = pinned(kN);
  ASSERT_NE(pin, nullptr);
  std::vector<float> pageable(kN, 7.f);
  for (size_t i = 0; i < kN; ++i) pin[i] = 7.f;

  Fill fill_pinned{pin, kN, 42.f};
  SIM_OK(api->stream_add_callback(stream_, Fill::callback, &fill_pinned));
  SIM_OK(api->copy_h2d_async(stream_, dev_, pin, kBytes));
  SIM_OK(api->stream_synchronize(stream_));
  EXPECT_EQ(read_back(), std::vector<float>(kN, 42.f)) << "pinned source must be read when the stream gets there";

  Fill fill_pageable{pageable.data(), kN, 42.f};
  SIM_OK(api->stream_add_callback(stream_, Fill::callback, &fill_pageable));
  SIM_OK(api->copy_h2d_async(stream_, dev_, pageable.data(), kBytes));
  SIM_OK(api->stream_synchronize(stream_));
  EXPECT_EQ(pageable, std::vector<float>(kN, 42.f));  // the callback did run
  EXPECT_EQ(read_back(), std::vector<float>(kN, 7.f)) << "pageable source must be staged when the copy is enqueued";
}

// The same with the host writing after the call while the stream is held
// back by a gate: pinned sees the late write, pageable does not.
TEST_F(SimStrict, H2dSourceWrittenByTheHostAfterTheCall) {
  float* pin = pinned(kN);
  ASSERT_NE(pin, nullptr);
  for (int pass = 0; pass < 2; ++pass) {
    const bool use_pinned = pass == 0;
    std::vector<float> pageable(kN, 7.f);
    float* src = use_pinned ? pin : pageable.data();
    for (size_t i = 0; i < kN; ++i) src[i] = 7.f;
    Gate gate;
    SIM_OK(api->stream_add_callback(stream_, Gate::callback, &gate));
    SIM_OK(api->copy_h2d_async(stream_, dev_, src, kBytes));
    for (size_t i = 0; i < kN; ++i) src[i] = 99.f;  // the stream has not reached the copy
    gate.let_through();
    SIM_OK(api->stream_synchronize(stream_));
    EXPECT_EQ(read_back(), std::vector<float>(kN, use_pinned ? 99.f : 7.f)) << (use_pinned ? "pinned" : "pageable");
  }
}

// d2h into pinned memory is written when the stream gets there; a callback
// queued after it reads the device's bytes.
TEST_F(SimStrict, D2hToPinnedIsWrittenInStreamOrder) {
  float* pin = pinned(kN);
  ASSERT_NE(pin, nullptr);
  std::vector<float> data(kN, 5.f);
  SIM_OK(api->copy_h2d(0, dev_, data.data(), kBytes));
  for (size_t i = 0; i < kN; ++i) pin[i] = -1.f;

  Gate gate;
  SIM_OK(api->stream_add_callback(stream_, Gate::callback, &gate));
  std::atomic<bool> returned{false};
  std::thread t([&] {
    EXPECT_EQ(take(api->copy_d2h_async(stream_, pin, dev_, kBytes)), "");
    returned = true;
  });
  // It returns while the stream is still held at the gate ...
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!returned && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(returned.load()) << "copy_d2h_async to pinned memory must not wait for the stream";
  EXPECT_EQ(pin[0], -1.f) << "written before the stream reached the copy";
  gate.let_through();
  t.join();
  // ... and a callback queued after it sees the device's bytes.
  struct Seen {
    const float* buf;
    float first = 0.f;
    static void callback(void* user, const spora_plugin_error_t*) {
      auto* s = static_cast<Seen*>(user);
      s->first = s->buf[0];
    }
  } seen{pin};
  SIM_OK(api->stream_add_callback(stream_, Seen::callback, &seen));
  SIM_OK(api->stream_synchronize(stream_));
  EXPECT_EQ(seen.first, 5.f);
  EXPECT_EQ(std::vector<float>(pin, pin + kN), data);
}

// d2h into pageable memory returns only once the copy has completed.
TEST_F(SimStrict, D2hToPageableBlocksUntilDone) {
  std::vector<float> data(kN, 3.f), out(kN, -1.f);
  SIM_OK(api->copy_h2d(0, dev_, data.data(), kBytes));
  Gate gate;
  SIM_OK(api->stream_add_callback(stream_, Gate::callback, &gate));
  ASSERT_TRUE(gate.wait_entered());
  std::atomic<bool> returned{false};
  std::thread t([&] {
    EXPECT_EQ(take(api->copy_d2h_async(stream_, out.data(), dev_, kBytes)), "");
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load()) << "copy_d2h_async to pageable memory returned before the stream reached it";
  gate.let_through();
  t.join();
  EXPECT_EQ(out, data);  // complete when the call returned, without a synchronize
  SIM_OK(api->stream_synchronize(stream_));
}

// ---- threads ----

struct ThreadLog {
  std::mutex mu;
  std::vector<pid_t> tids;
  std::vector<std::string> names;
  static void callback(void* user, const spora_plugin_error_t*) {
    auto* log = static_cast<ThreadLog*>(user);
    const pid_t tid = this_tid();
    std::lock_guard<std::mutex> lock(log->mu);
    log->tids.push_back(tid);
    log->names.push_back(thread_name(tid));
  }
};

TEST_F(SimStrict, CallbacksRunOnOneDeviceThreadApartFromKernelsAndCopies) {
  spora_stream_t* other = nullptr;
  SIM_OK(api->stream_create(0, &other));
  const int64_t n[1] = {static_cast<int64_t>(kN)};
  spora_kernel_t* add = nullptr;
  SIM_OK(simtest::create_add(n, &add));
  spora_devptr_t y = nullptr;
  SIM_OK(api->mem_alloc(0, kBytes, &y));
  std::vector<float> host(kN, 1.f);

  ThreadLog log;
  const spora_devptr_t ins[2] = {dev_, dev_};
  for (spora_stream_t* s : {stream_, other}) {
    SIM_OK(api->copy_h2d_async(s, dev_, host.data(), kBytes));
    SIM_OK(api->kernel_launch(add, ins, &y, nullptr, s));
    SIM_OK(api->stream_add_callback(s, ThreadLog::callback, &log));
  }
  SIM_OK(api->stream_synchronize(stream_));
  SIM_OK(api->stream_synchronize(other));

  ASSERT_EQ(log.tids.size(), 2u);
  EXPECT_EQ(log.tids[0], log.tids[1]) << "both streams' callbacks must run on the device's one callback thread";
  EXPECT_EQ(log.names[0], "sim0-callback");
  EXPECT_NE(log.tids[0], this_tid());

  // The stream workers (which run kernels) and the copy engine are other
  // threads, each named for its role.
  const auto threads = all_threads();
  std::set<pid_t> workers, copy_engines, callback_threads;
  for (const auto& [tid, name] : threads) {
    if (name.rfind("sim0-s", 0) == 0) workers.insert(tid);
    if (name == "sim0-copy") copy_engines.insert(tid);
    if (name == "sim0-callback") callback_threads.insert(tid);
  }
  EXPECT_GE(workers.size(), 2u);
  EXPECT_EQ(copy_engines.size(), 1u);
  EXPECT_EQ(callback_threads, std::set<pid_t>{log.tids[0]});
  EXPECT_EQ(workers.count(log.tids[0]), 0u);
  EXPECT_EQ(copy_engines.count(log.tids[0]), 0u);
  for (pid_t w : workers) EXPECT_EQ(copy_engines.count(w), 0u);

  SIM_OK(api->stream_destroy(other));
  SIM_OK(api->kernel_destroy(add));
  SIM_OK(api->mem_free(0, y));
  EXPECT_EQ(std::vector<float>(read_back()), host);
}

// A callback that would wait for its own device gets an error, not a hang.
struct Waiter {
  spora_stream_t* own = nullptr;
  spora_stream_t* other = nullptr;  // another stream of the same device
  spora_event_t* event = nullptr;
  spora_devptr_t dev = nullptr;
  void* pinned = nullptr;
  std::vector<std::pair<std::string, simtest::Err>> results;
  simtest::Err enqueue_pinned_d2h, enqueue_pageable_h2d;
  std::vector<char> host = std::vector<char>(64, 0);

  static void callback(void* user, const spora_plugin_error_t*) {
    auto* w = static_cast<Waiter*>(user);
    auto check = [&](const char* fn, spora_plugin_error_t* err) { w->results.emplace_back(fn, take_err(err)); };
    check("stream_synchronize", api->stream_synchronize(w->own));
    check("stream_synchronize", api->stream_synchronize(w->other));
    check("copy_h2d", api->copy_h2d(0, w->dev, w->host.data(), 64));
    check("copy_d2h", api->copy_d2h(0, w->host.data(), w->dev, 64));
    check("copy_d2d", api->copy_d2d(0, w->dev, w->dev, 64));
    check("memset", api->memset(0, w->dev, 0, 64));
    check("mem_free", api->mem_free(0, w->dev));
    check("event_synchronize", api->event_synchronize(w->event));
    check("copy_d2h_async to pageable memory", api->copy_d2h_async(w->own, w->host.data(), w->dev, 64));
    check("host_free_pinned", api->host_free_pinned(w->pinned));
    check("stream_destroy", api->stream_destroy(w->other));
    // Enqueuing does not wait: allowed (pinned d2h, pageable h2d).
    w->enqueue_pinned_d2h = take_err(api->copy_d2h_async(w->own, w->pinned, w->dev, 64));
    w->enqueue_pageable_h2d = take_err(api->copy_h2d_async(w->own, w->dev, w->host.data(), 64));
  }
};

TEST_F(SimStrict, CallbackThatWaitsForItsDeviceGetsAnError) {
  Waiter w;
  w.own = stream_;
  SIM_OK(api->stream_create(0, &w.other));
  SIM_OK(api->event_create(0, &w.event));
  SIM_OK(api->event_record(w.event, w.other));
  w.dev = dev_;
  SIM_OK(api->host_alloc_pinned(64, &w.pinned));
  SIM_OK(api->stream_add_callback(stream_, Waiter::callback, &w));
  SIM_OK(api->stream_synchronize(stream_));

  ASSERT_EQ(w.results.size(), 11u);
  for (const auto& [fn, err] : w.results) {
    EXPECT_EQ(err.code, SPORA_PLUGIN_INVALID_ARGUMENT) << fn << ": " << err.message;
    EXPECT_EQ(err.message.rfind("[sim] " + fn + " called from a host callback: a real runtime forbids", 0), 0u)
        << fn << ": " << err.message;
  }
  EXPECT_EQ(w.enqueue_pinned_d2h.message, "");
  EXPECT_EQ(w.enqueue_pageable_h2d.message, "");
  // Nothing the refused calls would have done happened.
  SIM_OK(api->stream_synchronize(w.other));
  SIM_OK(api->stream_destroy(w.other));
  SIM_OK(api->event_destroy(w.event));
  SIM_OK(api->host_free_pinned(w.pinned));
}

// ---- lag ----

// With sim.lag_us = 2000 the device starts nothing earlier than 2 ms after
// it was enqueued unless the host waits for it: a host that reads a pinned
// d2h result without waiting sees stale bytes.
TEST_F(SimStrict, LagKeepsTheDeviceBehindTheHost) {
  float* pin = pinned(kN);
  ASSERT_NE(pin, nullptr);
  std::vector<float> data(kN, 8.f);
  SIM_OK(api->copy_h2d(0, dev_, data.data(), kBytes));
  for (size_t i = 0; i < kN; ++i) pin[i] = -1.f;
  const auto t0 = std::chrono::steady_clock::now();
  SIM_OK(api->copy_d2h_async(stream_, pin, dev_, kBytes));
  int32_t done = -1;
  SIM_OK(api->stream_query(stream_, &done));
  const float early = pin[0];
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  if (elapsed < std::chrono::microseconds(1500)) {  // else this thread was descheduled: no conclusion
    EXPECT_EQ(done, 0);
    EXPECT_EQ(early, -1.f);
  }
  // Polling does not hurry the device: the copy lands 2 ms after the call.
  const auto deadline = t0 + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < deadline) SIM_OK(api->stream_query(stream_, &done));
  EXPECT_EQ(done, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::microseconds(2000));
  EXPECT_EQ(pin[0], 8.f);

  // A host that waits loses nothing: synchronize cuts the lag short (not
  // timed here: that would be flaky on a loaded machine).
  SIM_OK(api->copy_d2h_async(stream_, pin, dev_, kBytes));
  SIM_OK(api->stream_synchronize(stream_));
  EXPECT_EQ(pin[0], 8.f);
}

// ---- overlap ----

// Two streams of one device overlap: stream A is blocked in a wait for an
// event that stream B records only after A has started waiting, and B then
// waits for an event A records after its wait. A global lock around stream
// work would deadlock here.
TEST_F(SimStrict, TwoStreamsOverlap) {
  spora_stream_t *a = nullptr, *b = nullptr;
  spora_event_t *from_b = nullptr, *from_a = nullptr;
  SIM_OK(api->stream_create(0, &a));
  SIM_OK(api->stream_create(0, &b));
  SIM_OK(api->event_create(0, &from_b));
  SIM_OK(api->event_create(0, &from_a));
  std::vector<float> ones(kN, 1.f), out(kN, 0.f);
  spora_devptr_t buf = nullptr;
  SIM_OK(api->mem_alloc(0, kBytes, &buf));

  const int rounds = 5;
  for (int r = 0; r < rounds; ++r) {
    Gate gate;
    SIM_OK(api->stream_add_callback(b, Gate::callback, &gate));  // holds B
    SIM_OK(api->copy_h2d_async(b, buf, ones.data(), kBytes));
    SIM_OK(api->event_record(from_b, b));   // target set now, reached once B gets past the gate
    SIM_OK(api->stream_wait_event(a, from_b));
    SIM_OK(api->event_record(from_a, a));
    SIM_OK(api->stream_wait_event(b, from_a));
    SIM_OK(api->copy_d2d_async(b, dev_, buf, kBytes));
    ASSERT_TRUE(gate.wait_entered());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // A is now waiting (lag 2 ms)
    gate.let_through();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int32_t done_a = 0, done_b = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      SIM_OK(api->stream_query(a, &done_a));
      SIM_OK(api->stream_query(b, &done_b));
      if (done_a && done_b) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done_a || !done_b) {
      ADD_FAILURE() << "round " << r << ": streams deadlocked (A done " << done_a << ", B done " << done_b
                    << "): stream work is serialised";
      std::_Exit(1);  // the workers are stuck; do not hang in teardown
    }
  }
  SIM_OK(api->stream_synchronize(a));
  SIM_OK(api->stream_synchronize(b));
  EXPECT_EQ(read_back(), ones);
  SIM_OK(api->stream_destroy(a));
  SIM_OK(api->stream_destroy(b));
  SIM_OK(api->event_destroy(from_a));
  SIM_OK(api->event_destroy(from_b));
  SIM_OK(api->mem_free(0, buf));
}

}  // namespace
