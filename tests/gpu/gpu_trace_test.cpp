// The CUDA plugin's profiler trace (plugins/cuda/gpu_trace.cpp) against a
// model of the CUDA runtime's events (fake_cuda/) and a host services table
// that logs the trace hooks: no GPU and no toolkit needed. Checks the calls
// the host's profiler turns into device spans and flow arrows, as it does
// for the sim plugin: "cuda.launch" begun on the launching thread and ended
// on the stream's watcher thread once the work's start event is reached,
// then the "cuda.kernel" / "cuda.copy" span there until its end event; no
// event and no thread while no profiler runs; events reused; the watcher
// drains before the stream goes.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_trace.h"

// ---- the runtime model: one stream whose work completes when the test says ----

struct CUevent_st {
  uint64_t seq = 0;  // position in the stream when recorded; 0: never recorded
};

namespace {

struct FakeGpu {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;  // events recorded so far (their stream positions)
  uint64_t reached = 0;   // the stream ran up to here
  int created = 0, destroyed = 0;
  bool fail_record = false;
};
FakeGpu g_gpu;

// The stream reaches its n-th recorded event.
void reach(uint64_t n) {
  std::lock_guard<std::mutex> lock(g_gpu.mu);
  g_gpu.reached = n;
  g_gpu.cv.notify_all();
}

}  // namespace

extern "C" {
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  std::lock_guard<std::mutex> lock(g_gpu.mu);
  *event = new CUevent_st;
  ++g_gpu.created;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(g_gpu.mu);
  delete event;
  ++g_gpu.destroyed;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  std::lock_guard<std::mutex> lock(g_gpu.mu);
  if (g_gpu.fail_record) return cudaErrorInvalidValue;
  event->seq = ++g_gpu.recorded;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::unique_lock<std::mutex> lock(g_gpu.mu);
  g_gpu.cv.wait(lock, [&] { return g_gpu.reached >= event->seq; });
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
}

namespace {

// ---- the host's trace hooks, logged ----

struct Call {
  bool begin = false;
  uint64_t id = 0;
  std::string category, name, thread;  // begin only: category and name
  std::thread::id tid;
};

struct HostLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Call> calls;
  std::atomic<bool> on{true};
  uint64_t next = 1;
};
HostLog g_log;

std::string this_thread_name() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

uint64_t log_begin(void*, const char* category, const char* name) {
  if (!g_log.on) return 0;
  std::lock_guard<std::mutex> lock(g_log.mu);
  Call c;
  c.begin = true;
  c.id = g_log.next++;
  c.category = category;
  c.name = name;
  c.thread = this_thread_name();
  c.tid = std::this_thread::get_id();
  g_log.calls.push_back(c);
  g_log.cv.notify_all();
  return c.id;
}

void log_end(void*, uint64_t id) {
  std::lock_guard<std::mutex> lock(g_log.mu);
  Call c;
  c.id = id;
  c.thread = this_thread_name();
  c.tid = std::this_thread::get_id();
  g_log.calls.push_back(c);
  g_log.cv.notify_all();
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

class GpuTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard<std::mutex> a(g_gpu.mu);
    std::lock_guard<std::mutex> b(g_log.mu);
    g_gpu.recorded = g_gpu.reached = 0;
    g_gpu.created = g_gpu.destroyed = 0;
    g_gpu.fail_record = false;
    g_log.calls.clear();
    g_log.on = true;
  }
  cudaStream_t stream_ = reinterpret_cast<cudaStream_t>(0x1000);
};

using spora::gpu::StreamTrace;

void launch(StreamTrace& t, cudaStream_t s, StreamTrace::Kind kind, const char* name) {
  StreamTrace::Mark m = t.before(s, kind, name);
  t.after(m, s);
}

TEST_F(GpuTrace, NoProfilerNoEventsNoThread) {
  g_log.on = false;
  {
    StreamTrace t(&g_host, 0, "cuda0-s1");
    StreamTrace::Mark m = t.before(stream_, StreamTrace::Kind::kKernel, "matmul");
    EXPECT_EQ(m.launch, 0u);
    EXPECT_EQ(m.start, nullptr);
    t.after(m, stream_);
  }
  EXPECT_EQ(g_gpu.created, 0);
  EXPECT_EQ(g_gpu.recorded, 0u);
  EXPECT_TRUE(g_log.calls.empty());
}

TEST_F(GpuTrace, SpansFollowTheStreamsEventsOnTheWatcherThread) {
  const std::thread::id caller = std::this_thread::get_id();
  {
    StreamTrace t(&g_host, 0, "cuda0-s7");
    launch(t, stream_, StreamTrace::Kind::kKernel, "matmul");  // events 1, 2
    launch(t, stream_, StreamTrace::Kind::kKernel, "add");     // events 3, 4
    EXPECT_EQ(g_gpu.created, 4);
    {
      std::vector<Call> c = wait_calls(2);
      ASSERT_EQ(c.size(), 2u);  // nothing is reached: the watcher waits on matmul's start
      EXPECT_TRUE(c[0].begin && c[0].category == "cuda.launch" && c[0].name == "matmul" && c[0].tid == caller);
      EXPECT_TRUE(c[1].begin && c[1].category == "cuda.launch" && c[1].name == "add" && c[1].tid == caller);
    }
    reach(1);  // matmul starts: the launch span ends on the watcher, the kernel span opens there
    std::vector<Call> c = wait_calls(4);
    ASSERT_EQ(c.size(), 4u);
    EXPECT_FALSE(c[2].begin);
    EXPECT_EQ(c[2].id, c[0].id);
    EXPECT_NE(c[2].tid, caller);
    EXPECT_EQ(c[2].thread, "cuda0-s7");
    EXPECT_TRUE(c[3].begin && c[3].category == "cuda.kernel" && c[3].name == "matmul");
    EXPECT_EQ(c[3].tid, c[2].tid);
    reach(4);  // matmul ends, add starts and ends
    c = wait_calls(8);
    ASSERT_EQ(c.size(), 8u);
    EXPECT_TRUE(!c[4].begin && c[4].id == c[3].id);                                      // kernel matmul
    EXPECT_TRUE(!c[5].begin && c[5].id == c[1].id);                                      // launch add
    EXPECT_TRUE(c[6].begin && c[6].category == "cuda.kernel" && c[6].name == "add");
    EXPECT_TRUE(!c[7].begin && c[7].id == c[6].id);
    for (size_t i = 2; i < 8; ++i) EXPECT_EQ(c[i].tid, c[2].tid) << i;

    // The events went back to the pool: a copy reuses them.
    launch(t, stream_, StreamTrace::Kind::kCopy, "h2d");
    EXPECT_EQ(g_gpu.created, 4);
    reach(6);
    c = wait_calls(12);
    ASSERT_EQ(c.size(), 12u);
    EXPECT_TRUE(c[10].begin && c[10].category == "cuda.copy" && c[10].name == "h2d");
  }
  EXPECT_EQ(g_gpu.destroyed, 4);
}

TEST_F(GpuTrace, DestroyingTheStreamWaitsForTheWatchedWork) {
  std::thread device;
  {
    StreamTrace t(&g_host, 0, "cuda0-s2");
    for (const char* op : {"relu", "mul", "sum"}) launch(t, stream_, StreamTrace::Kind::kKernel, op);
    // The stream runs its work while the StreamTrace is being destroyed.
    device = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      reach(6);
    });
  }
  device.join();
  std::lock_guard<std::mutex> lock(g_log.mu);
  ASSERT_EQ(g_log.calls.size(), 12u);  // 3 x (launch begin, launch end, kernel begin, kernel end)
  int kernels_ended = 0;
  for (const Call& e : g_log.calls)
    if (!e.begin)
      for (const Call& b : g_log.calls)
        if (b.begin && b.id == e.id && b.category == "cuda.kernel") ++kernels_ended;
  EXPECT_EQ(kernels_ended, 3);
  EXPECT_EQ(g_gpu.destroyed, g_gpu.created);
}

TEST_F(GpuTrace, WorkWhoseEventsCouldNotBeRecordedStillClosesItsSpans) {
  {
    StreamTrace t(&g_host, 0, "cuda0-s3");
    g_gpu.fail_record = true;
    launch(t, stream_, StreamTrace::Kind::kKernel, "conv");
    std::vector<Call> c = wait_calls(4);
    ASSERT_EQ(c.size(), 4u);
    EXPECT_TRUE(c[0].begin && c[0].category == "cuda.launch");
    EXPECT_TRUE(!c[1].begin && c[1].id == c[0].id);
    EXPECT_TRUE(c[2].begin && c[2].category == "cuda.kernel" && c[2].name == "conv");
    EXPECT_TRUE(!c[3].begin && c[3].id == c[2].id);
  }
  EXPECT_EQ(g_gpu.destroyed, g_gpu.created);  // the unrecorded event went back to the pool
}

}  // namespace
