// What a real GPU runtime (CUDA) has per device, beside memory and streams,
// and which the sim device imitates so that host bugs a GPU shows also show
// here (issue 11, DESIGN.md section 7):
//
// - a copy engine: one thread per device that performs every asynchronous
//   copy (h2d, d2h, d2d), in each stream's order. A stream worker hands the
//   copy over and waits, so a copy completes later and on another thread
//   than the kernels, as DMA engines do;
// - a host-callback thread: one per device, shared by all its streams (CUDA
//   runs host functions on one runtime thread). A callback that waits for
//   its device's queued work is refused (refuse_in_callback) instead of
//   deadlocking;
// - latency (sim.lag_us / SPORA_SIM_LAG_US): no queued item starts earlier
//   than lag_us after it was enqueued unless the host already waits for it,
//   so the host runs ahead of the device (sim_stream.h);
// - kernel time (sim.kernel_us / SPORA_SIM_KERNEL_US): each kernel lasts at
//   least kernel_us on its stream, sleeping, so host threads (a collective's)
//   run beside it as they would beside a GPU kernel;
// - sticky failures (sim.fault_after_launches /
//   SPORA_SIM_FAULT_AFTER_LAUNCHES=N): the N-th kernel launch on the device
//   faults like an illegal address; from then on the device is failed and
//   every call on it returns that error (sticky_error).
//
// Pinned host memory (host_alloc_pinned) is tracked by PinnedRegistry: copies
// read or write it when the stream reaches them, while pageable memory is
// staged when the call is made (see sim_copy.cpp).
#pragma once
#include <spora/plugin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace spora::sim {

// One thread serving a FIFO of jobs. run() blocks its caller until the job
// has run on that thread.
class EngineThread {
 public:
  // Starts the thread, which calls `on_start` first (naming, thread-locals).
  EngineThread(std::function<void()> on_start);
  ~EngineThread();  // stop()
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  // Runs `job` on the thread and returns when it finished. After stop() the
  // job runs on the caller (only shutdown races get there).
  void run(const std::function<void()>& job);
  // Lets queued jobs finish, then joins the thread. Idempotent.
  void stop();

 private:
  struct Job {
    const std::function<void()>* fn;
    bool done = false;
  };
  void loop(const std::function<void()>& on_start);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Job*> queue_;
  bool stopping_ = false;
  std::mutex join_mu_;
  std::thread thread_;
};

struct DeviceConfig {
  uint64_t lag_us = 0;                // 0 = the device starts each item at once
  uint64_t fault_after_launches = 0;  // 0 = never inject a fault
  // Each kernel takes at least this long on the device (its stream worker
  // sleeps the rest), without using a host core: what overlap benchmarks
  // need to stand for a GPU's kernel time.
  uint64_t kernel_us = 0;
};

// The engines and the failure state of one simulated device.
class Device {
 public:
  Device(int32_t index, DeviceConfig config);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int32_t index() const { return index_; }
  const DeviceConfig& config() const { return config_; }
  std::chrono::microseconds lag() const { return std::chrono::microseconds(config_.lag_us); }
  EngineThread& copy_engine() { return copy_engine_; }
  EngineThread& callbacks() { return callbacks_; }

  // Counts a kernel launch (from 1) and returns its number.
  uint64_t count_launch() { return launches_.fetch_add(1, std::memory_order_relaxed) + 1; }

  // Marks the device failed with `message` (the first failure wins).
  void fail(const std::string& message);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The sticky error (SPORA_PLUGIN_UNAVAILABLE, naming the fault and `fn`),
  // or NULL while the device is healthy.
  spora_plugin_error_t* sticky_error(const char* fn) const;

  // Joins the engine threads (after every stream is closed).
  void stop();

 private:
  const int32_t index_;
  const DeviceConfig config_;
  std::atomic<uint64_t> launches_{0};
  std::atomic<bool> failed_{false};
  mutable std::mutex fault_mu_;
  std::string fault_;
  EngineThread copy_engine_;
  EngineThread callbacks_;
};

// The device whose host-callback thread is the calling thread, or -1.
int32_t callback_device_of_this_thread();
// An error when the calling thread is `device`'s host-callback thread: `fn`
// would wait for work queued behind the running callback, which can never
// finish before the callback returns. NULL otherwise.
spora_plugin_error_t* refuse_in_callback(const char* fn, int32_t device);

// Page-locked host memory handed out by host_alloc_pinned. Process-wide and
// thread-safe; it outlives shutdown, so the host may free late.
class PinnedRegistry {
 public:
  static PinnedRegistry& get();
  spora_plugin_error_t* allocate(size_t size, void** out);
  // Frees a pointer allocate returned; anything else is an error naming it.
  spora_plugin_error_t* release(void* ptr);
  // True when [p, p + size) lies inside one live pinned allocation.
  bool contains(const void* p, size_t size) const;

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> live_;  // start -> size
};

}  // namespace spora::sim
