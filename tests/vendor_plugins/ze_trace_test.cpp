// The ze plugin's profiler trace (plugins/ze/ze_trace.cpp) for real, against
// the fake Level Zero driver (fake_ze_driver.cpp: each immediate command list
// a host thread running its commands in order) and a host services table
// that logs the trace hooks. Checks the calls the host's profiler turns into
// device spans and flow arrows: "ze.launch" begun on the launching thread
// and ended on the stream's watcher thread ("ze<device>-s<n>") once the
// stream reached the work, then "ze.kernel" / "ze.copy" there until the
// work is done; one hook call and no thread while no profiler runs; events
// recycled, also when their barrier could not be appended (the spans then
// close at once); the watcher drained and gone when the stream is destroyed.
// (The profiler's own side, spans and arrows in the written trace, is
// checked from Python in test_ze_profiler.py.)
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <spora/plugin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// ---- the host's trace hooks, logged ----

struct Call {
  bool begin = false;
  uint64_t id = 0;
  std::string category, name, thread;  // begin only: category and name
  std::thread::id tid;
  std::chrono::steady_clock::time_point t;
  uint64_t launches = 0;  // kernels the fake had run by then
};

struct HostLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Call> calls;
  std::atomic<bool> on{false};
  std::atomic<int> begins_off{0};  // trace_begin calls answered 0
  std::atomic<bool> slow_ends{false};  // trace_end off the main thread sleeps 10 ms
  uint64_t next = 1;
  uint64_t (*launches)() = nullptr;
};
HostLog g_log;

std::string this_thread_name() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

// Logs `c` as made now on this thread; returns its id (a begin's new one).
uint64_t log_call(Call c) {
  c.thread = this_thread_name();
  c.tid = std::this_thread::get_id();
  c.t = std::chrono::steady_clock::now();
  c.launches = g_log.launches ? g_log.launches() : 0;
  std::lock_guard<std::mutex> lock(g_log.mu);
  if (c.begin) c.id = g_log.next++;
  g_log.calls.push_back(c);
  g_log.cv.notify_all();
  return c.id;
}

uint64_t log_begin(void*, const char* category, const char* name) {
  if (!g_log.on) {
    ++g_log.begins_off;
    return 0;
  }
  Call c;
  c.begin = true;
  c.category = category;
  c.name = name;
  return log_call(c);
}

std::thread::id g_main = std::this_thread::get_id();

void log_end(void*, uint64_t id) {
  if (g_log.slow_ends && std::this_thread::get_id() != g_main)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Call c;
  c.id = id;
  log_call(c);
}

spora_host_services_t g_services = [] {
  spora_host_services_t s{};
  s.struct_size = sizeof s;
  s.trace_begin = log_begin;
  s.trace_end = log_end;
  return s;
}();
spora_host_t g_host = [] {
  spora_host_t h{};
  h.struct_size = sizeof h;
  h.abi_major = SPORA_PLUGIN_ABI_MAJOR;
  h.abi_minor = SPORA_PLUGIN_ABI_MINOR;
  h.services = &g_services;
  return h;
}();

// Waits (up to a minute, so that a bug fails instead of hanging) until the
// log has `n` calls; returns a copy.
std::vector<Call> wait_calls(size_t n) {
  std::unique_lock<std::mutex> lock(g_log.mu);
  g_log.cv.wait_for(lock, std::chrono::seconds(60), [&] { return g_log.calls.size() >= n; });
  return g_log.calls;
}

std::vector<Call> calls_now() {
  std::lock_guard<std::mutex> lock(g_log.mu);
  return g_log.calls;
}

// Names of this process's threads that are ze stream watchers ("ze0-s3").
std::vector<std::string> watcher_threads() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(f, name);
    int device = -1, number = -1, end = 0;
    if (std::sscanf(name.c_str(), "ze%d-s%d%n", &device, &number, &end) == 2 && name[end] == '\0')
      out.push_back(name);
  }
  closedir(d);
  return out;
}

// True once no watcher thread is left (a joined thread's /proc entry may
// outlive the join by a moment); false after ten seconds.
bool no_watchers() {
  for (int i = 0; i < 1000; ++i) {
    if (watcher_threads().empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// ---- the plugin over the fake driver ----

struct Plugin {
  const spora_device_api_t* api = nullptr;
  int64_t (*event_pools)() = nullptr;
  void (*fail_signal_barriers)(int) = nullptr;
};

const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin p;
    void* h = dlopen(SPORA_ZE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) return p;
    auto entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(h, SPORA_PLUGIN_ENTRY_SYMBOL));
    spora_plugin_info_t info{};
    info.struct_size = sizeof info;
    if (!entry || entry(&g_host, &info)) return p;
    p.api = static_cast<const spora_device_api_t*>(info.api);
    if (spora_plugin_error_t* e = p.api->initialize()) {
      std::fprintf(stderr, "initialize: %s\n", e->message);
      e->destroy(e);
      p.api = nullptr;
      return p;
    }
    static const spora_device_api_t* api = p.api;
    if (api->shutdown) std::atexit([] { api->shutdown(); });
    if (void* f = dlopen(std::getenv("ZE_ENABLE_ALT_DRIVERS"), RTLD_NOW | RTLD_NOLOAD)) {
      g_log.launches = reinterpret_cast<uint64_t (*)()>(dlsym(f, "spora_fake_ze_launches"));
      p.event_pools = reinterpret_cast<int64_t (*)()>(dlsym(f, "spora_fake_ze_event_pools"));
      p.fail_signal_barriers = reinterpret_cast<void (*)(int)>(dlsym(f, "spora_fake_ze_fail_signal_barriers"));
    }
    return p;
  }();
  return p;
}

void ok(spora_plugin_error_t* e, const std::string& what) {
  if (e) {
    ADD_FAILURE() << what << ": " << e->message;
    e->destroy(e);
  }
}

constexpr int64_t kN = 256;

// An elementwise kernel on f32[kN] (relu: one input; add: two).
spora_kernel_t* make_kernel(const char* op, int inputs) {
  const Plugin& p = plugin();
  static const int64_t dims[] = {kN};
  spora_tensor_desc_t t{};
  t.struct_size = sizeof t;
  t.dtype = SPORA_DTYPE_F32;
  t.rank = 1;
  t.dims = dims;
  const spora_tensor_desc_t in[2] = {t, t};
  spora_kernel_desc_t kd{};
  kd.struct_size = sizeof kd;
  kd.op = op;
  kd.num_inputs = static_cast<size_t>(inputs);
  kd.inputs = in;
  kd.num_outputs = 1;
  kd.outputs = &t;
  spora_kernel_t* k = nullptr;
  ok(p.api->kernel_create(0, &kd, &k, nullptr), std::string("kernel_create ") + op);
  return k;
}

// A stream whose work waits, behind a host callback, until release().
class Gate {
 public:
  void hold(spora_stream_t* s) { ok(plugin().api->stream_add_callback(s, &Gate::run, this), "stream_add_callback"); }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  static void run(void* self, const spora_plugin_error_t*) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock<std::mutex> lock(g->mu_);
    g->cv_.wait(lock, [&] { return g->open_; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class ZeTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    const Plugin& p = plugin();
    ASSERT_NE(p.api, nullptr);
    ASSERT_NE(g_log.launches, nullptr);
    ASSERT_NE(p.event_pools, nullptr);
    ASSERT_NE(p.fail_signal_barriers, nullptr);
    {
      std::lock_guard<std::mutex> lock(g_log.mu);
      g_log.calls.clear();
    }
    g_log.begins_off = 0;
    g_log.on = false;
    g_log.slow_ends = false;
    ASSERT_TRUE(no_watchers()) << "a watcher thread left by an earlier test";
    relu_ = make_kernel("relu", 1);
    add_ = make_kernel("add", 2);
    for (spora_devptr_t* b : {&a_, &b_, &c_}) ok(p.api->mem_alloc(0, kN * sizeof(float), b), "mem_alloc");
    ok(p.api->host_alloc_pinned(kN * sizeof(float), &host_), "host_alloc_pinned");
  }
  void TearDown() override {
    const Plugin& p = plugin();
    gate_.release();  // a test that stopped early may have left its stream held
    g_log.on = false;
    for (spora_devptr_t b : {a_, b_, c_}) ok(p.api->mem_free(0, b), "mem_free");
    ok(p.api->host_free_pinned(host_), "host_free_pinned");
    ok(p.api->kernel_destroy(relu_), "kernel_destroy");
    ok(p.api->kernel_destroy(add_), "kernel_destroy");
  }

  // relu, h2d, add, memset, d2h on `s`: 2 kernels, 3 copies.
  void enqueue_work(spora_stream_t* s) {
    const Plugin& p = plugin();
    const spora_devptr_t ab[2] = {a_, b_};
    ok(p.api->kernel_launch(relu_, &a_, &b_, nullptr, s), "kernel_launch relu");
    ok(p.api->copy_h2d_async(s, a_, host_, kN * sizeof(float)), "copy_h2d_async");
    ok(p.api->kernel_launch(add_, ab, &c_, nullptr, s), "kernel_launch add");
    ok(p.api->memset_async(s, b_, 0, kN * sizeof(float)), "memset_async");
    ok(p.api->copy_d2h_async(s, host_, c_, kN * sizeof(float)), "copy_d2h_async");
  }

  Gate gate_;  // holds a stream's work while a test looks (outlives the streams)
  spora_kernel_t* relu_ = nullptr;
  spora_kernel_t* add_ = nullptr;
  spora_devptr_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  void* host_ = nullptr;
};

TEST_F(ZeTrace, NoSessionOneHookCallPerWorkNoSpansNoThread) {
  const Plugin& p = plugin();
  const uint64_t launched = g_log.launches();
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  enqueue_work(s);
  ok(p.api->stream_synchronize(s), "stream_synchronize");
  EXPECT_EQ(g_log.launches() - launched, 2u);  // the work ran
  EXPECT_EQ(g_log.begins_off.load(), 5);      // one trace_begin per piece of work, answered 0
  EXPECT_TRUE(calls_now().empty());
  EXPECT_TRUE(no_watchers());
  ok(p.api->stream_destroy(s), "stream_destroy");
}

TEST_F(ZeTrace, SpansFollowTheStreamOnItsWatcherTrack) {
  const Plugin& p = plugin();
  const std::thread::id caller = std::this_thread::get_id();
  const uint64_t launched = g_log.launches();
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  g_log.on = true;
  gate_.hold(s);  // nothing on the stream runs until the gate opens
  enqueue_work(s);
  const auto enqueued = std::chrono::steady_clock::now();
  std::vector<Call> c = calls_now();
  ASSERT_EQ(c.size(), 5u);
  const char* names[] = {"relu", "h2d", "add", "memset", "d2h"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(c[i].begin && c[i].category == "ze.launch" && c[i].name == names[i] && c[i].tid == caller) << i;
  }
  // The watcher started with the first traced work and waits for the stream.
  const std::vector<std::string> watchers = watcher_threads();
  ASSERT_EQ(watchers.size(), 1u);
  EXPECT_EQ(watchers[0].rfind("ze0-s", 0), 0u) << watchers[0];
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls_now().size(), 5u) << "a launch span ended before the stream reached its work";
  EXPECT_EQ(g_log.launches(), launched);

  gate_.release();
  c = wait_calls(20);
  ASSERT_EQ(c.size(), 20u);
  // On the watcher, in stream order: the launch span ends (the hand-off),
  // then the work's span opens and closes.
  const char* categories[] = {"ze.kernel", "ze.copy", "ze.kernel", "ze.copy", "ze.copy"};
  const std::thread::id watcher = c[5].tid;
  EXPECT_NE(watcher, caller);
  for (size_t i = 0; i < 5; ++i) {
    const Call& launch_end = c[5 + 3 * i];
    const Call& work_begin = c[6 + 3 * i];
    const Call& work_end = c[7 + 3 * i];
    SCOPED_TRACE(names[i]);
    EXPECT_TRUE(!launch_end.begin && launch_end.id == c[i].id);
    EXPECT_TRUE(work_begin.begin && work_begin.category == categories[i] && work_begin.name == names[i]);
    EXPECT_TRUE(!work_end.begin && work_end.id == work_begin.id);
    for (const Call* x : {&launch_end, &work_begin, &work_end}) {
      EXPECT_EQ(x->tid, watcher);
      EXPECT_EQ(x->thread, watchers[0]);
    }
    // The work's span begins after its launch began, and after the gate
    // opened (the stream reached it).
    EXPECT_GE(work_begin.t, c[i].t);
    EXPECT_GE(work_begin.t, enqueued);
  }
  // Each kernel span ends once the fake ran the kernel.
  EXPECT_GE(c[7].launches, launched + 1);   // relu
  EXPECT_GE(c[13].launches, launched + 2);  // add

  ok(p.api->stream_destroy(s), "stream_destroy");
  EXPECT_TRUE(no_watchers()) << "the watcher outlived its stream";
}

TEST_F(ZeTrace, DestroyingTheStreamDrainsTheWatcher) {
  const Plugin& p = plugin();
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  g_log.on = true;
  gate_.hold(s);
  enqueue_work(s);
  g_log.slow_ends = true;  // the watcher lags behind the stream
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate_.release();
  });
  ok(p.api->stream_destroy(s), "stream_destroy");  // waits for the stream, then for the watcher
  opener.join();
  const std::vector<Call> c = calls_now();  // no waiting: everything was reported
  ASSERT_EQ(c.size(), 20u);
  int ended = 0;
  for (const Call& e : c)
    if (!e.begin)
      for (const Call& b : c)
        if (b.begin && b.id == e.id && b.category != "ze.launch") ++ended;
  EXPECT_EQ(ended, 5);
  EXPECT_TRUE(no_watchers());
}

TEST_F(ZeTrace, EachStreamHasItsOwnTrack) {
  const Plugin& p = plugin();
  spora_stream_t* s1 = nullptr;
  spora_stream_t* s2 = nullptr;
  ok(p.api->stream_create(0, &s1), "stream_create");
  ok(p.api->stream_create(0, &s2), "stream_create");
  g_log.on = true;
  ok(p.api->kernel_launch(relu_, &a_, &b_, nullptr, s1), "kernel_launch relu");
  ok(p.api->copy_h2d_async(s2, a_, host_, kN * sizeof(float)), "copy_h2d_async");
  const std::vector<Call> c = wait_calls(8);
  ASSERT_EQ(c.size(), 8u);
  std::string relu_track, h2d_track;
  for (const Call& x : c) {
    if (x.begin && x.category == "ze.kernel") relu_track = x.thread;
    if (x.begin && x.category == "ze.copy") h2d_track = x.thread;
  }
  EXPECT_EQ(relu_track.rfind("ze0-s", 0), 0u) << relu_track;
  EXPECT_EQ(h2d_track.rfind("ze0-s", 0), 0u) << h2d_track;
  EXPECT_NE(relu_track, h2d_track);
  EXPECT_EQ(watcher_threads().size(), 2u);
  ok(p.api->stream_destroy(s1), "stream_destroy");
  ok(p.api->stream_destroy(s2), "stream_destroy");
  EXPECT_TRUE(no_watchers());
}

TEST_F(ZeTrace, EventsAreRecycled) {
  const Plugin& p = plugin();
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  g_log.on = true;
  size_t calls = 0;
  int64_t pools = 0;
  // Two events per launch, 64 per pool: leaking them would need new pools
  // within 32 launches. Each launch is seen through before the next, so at
  // most a few events are held at a time.
  for (int i = 0; i < 200; ++i) {
    ok(p.api->kernel_launch(relu_, &a_, &b_, nullptr, s), "kernel_launch relu");
    ok(p.api->stream_synchronize(s), "stream_synchronize");
    calls += 4;
    ASSERT_EQ(wait_calls(calls).size(), calls);
    if (i == 0) pools = p.event_pools();
  }
  EXPECT_EQ(p.event_pools(), pools);
  ok(p.api->stream_destroy(s), "stream_destroy");
}

TEST_F(ZeTrace, WorkWhosePointsCouldNotBeAppendedStillClosesItsSpans) {
  const Plugin& p = plugin();
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  ok(p.api->stream_synchronize(s), "stream_synchronize");
  const int64_t pools = p.event_pools();
  g_log.on = true;
  const uint64_t launched = g_log.launches();
  p.fail_signal_barriers(1);
  for (int i = 0; i < 100; ++i) ok(p.api->kernel_launch(relu_, &a_, &b_, nullptr, s), "kernel_launch relu");
  p.fail_signal_barriers(0);
  // Nothing to wait for: each work's spans close at once, in order.
  const std::vector<Call> c = wait_calls(400);
  ASSERT_EQ(c.size(), 400u);
  std::vector<Call> watcher;  // the launch spans begin on this thread meanwhile
  for (const Call& x : c)
    if (x.tid != std::this_thread::get_id()) watcher.push_back(x);
  ASSERT_EQ(watcher.size(), 300u);
  for (size_t i = 0; i < 300; i += 3) {
    EXPECT_FALSE(watcher[i].begin);  // the launch span
    EXPECT_TRUE(watcher[i + 1].begin && watcher[i + 1].category == "ze.kernel");
    EXPECT_TRUE(!watcher[i + 2].begin && watcher[i + 2].id == watcher[i + 1].id) << i;
  }
  ok(p.api->stream_synchronize(s), "stream_synchronize");
  EXPECT_EQ(g_log.launches() - launched, 100u);  // the work itself ran
  // 100 start events taken and given back at once (no end point is taken
  // without a start): kept, they would have needed a second pool of 64.
  EXPECT_EQ(p.event_pools(), pools);
  ok(p.api->stream_destroy(s), "stream_destroy");
}

}  // namespace
