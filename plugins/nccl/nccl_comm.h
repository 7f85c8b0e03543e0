// One NCCL communicator and what makes the plugin's timeouts and aborts work.
//
// Communicators are created non-blocking (ncclConfig_t.blocking = 0): NCCL
// calls then return at once and the plugin polls ncclCommGetAsyncError, so
// no thread is ever stuck inside NCCL and comm_abort can always get through.
// Every NCCL call on the communicator holds `use_` shared; comm_abort sets
// the flag, takes `use_` exclusively and calls ncclCommAbort, so it never
// frees the communicator under another thread's call.
//
// Timeouts: a call with a native stream and timeout_ms >= 0 records a CUDA
// event after the enqueued work and hands it to the communicator's watchdog
// thread, which polls the event and the async error and aborts the
// communicator when the deadline passes (later calls and comm_async_error
// then report SPORA_PLUGIN_TIMEOUT). A call without a stream runs on the
// communicator's own stream and polls the same way before returning.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "nccl_lib.h"

namespace spora::nccl {

class Comm {
 public:
  Comm(ncclComm_t comm, int32_t device) : comm_(comm), device_(device) {}
  ~Comm();

  // Waits until a non-blocking NCCL call on this communicator finished
  // issuing (async error no longer ncclInProgress); deadline < 0 = none.
  spora_plugin_error_t* wait_issued(const char* what, int64_t timeout_ms);
  // Issues `issue(stream)` under the use lock, then waits or hands the
  // work to the watchdog as described above.
  spora_plugin_error_t* run(const char* what, void* native_stream, int64_t timeout_ms,
                            const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& issue);
  // comm_abort: makes every pending and future call fail promptly.
  void abort(int32_t code, const std::string& why);
  // The sticky error (abort, timeout, async failure) as a new error object,
  // or the communicator's async error, or NULL.
  spora_plugin_error_t* health();
  spora_plugin_error_t* rank(int32_t* rank, int32_t* size);
  // Splits; runs under the use lock.
  spora_plugin_error_t* split(int32_t color, int32_t key, ncclComm_t* out);
  // Destroys the NCCL communicator (unless aborted) and stops the watchdog.
  spora_plugin_error_t* destroy();
  int32_t device() const { return device_; }
  // A 4-byte device buffer for barrier (an all-reduce of one float).
  spora_plugin_error_t* barrier_buffer(void** out);

 private:
  struct Pending {
    cudaEvent_t done;
    std::chrono::steady_clock::time_point deadline;
    std::string what;
    int64_t timeout_ms;
  };
  spora_plugin_error_t* sticky();
  void watchdog();

  ncclComm_t comm_;
  int32_t device_;
  std::shared_mutex use_;
  std::atomic<bool> aborted_{false};
  std::mutex err_mu_;
  int32_t err_code_ = 0;
  std::string err_;
  cudaStream_t own_stream_ = nullptr;
  void* barrier_buf_ = nullptr;
  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  std::deque<Pending> pending_;
  bool wd_stop_ = false;
  std::thread wd_;
};

// Polls `done()` until it returns true, the deadline passes (-> false, with
// *timed_out set), or `fail()` returns an error.
using Clock = std::chrono::steady_clock;
inline Clock::time_point deadline_after(int64_t timeout_ms) {
  return timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
}

}  // namespace spora::nccl
