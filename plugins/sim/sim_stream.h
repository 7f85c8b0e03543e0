// Streams and events of the simulated accelerator.
//
// A Stream is an in-order queue served by its own worker thread. Each task
// returns NULL or an error; the first error since the last synchronize is
// kept for stream_synchronize and shown to later callbacks. An Event is a
// generation counter: recording bumps the target generation and enqueues a
// task that marks it reached (with a timestamp) when the worker gets there.
#pragma once
#include <spora/plugin.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace spora::sim {

class Stream {
 public:
  // `status` is NULL, or (for tasks enqueued with wants_status) the stream's
  // first error so far, valid for the duration of the call.
  using Task = std::function<spora_plugin_error_t*(const spora_plugin_error_t* status)>;

  explicit Stream(int32_t device);  // starts the worker thread
  ~Stream();                        // close(), dropping any pending error

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device() const { return device_; }

  // Appends a task. Fails only once the stream is closing.
  spora_plugin_error_t* enqueue(Task task, bool wants_status = false);
  // Waits until every task enqueued before the call has finished. A no-op on
  // the worker thread itself (it cannot wait for its own queue).
  void drain();
  // drain(), then hands over (and clears) the first error.
  spora_plugin_error_t* synchronize();
  // True when every enqueued task has finished.
  bool idle() const;
  // Drains, stops and joins the worker. Returns the unreported first error,
  // if any. Idempotent.
  spora_plugin_error_t* close();
  // True when called from this stream's worker (e.g. inside a callback).
  bool on_worker_thread() const;

 private:
  struct Item {
    Task task;
    bool wants_status;
  };
  void run();

  const int32_t device_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // worker: queue non-empty or stopping
  std::condition_variable done_cv_;  // waiters: completed_ advanced
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;   // tasks ever enqueued
  uint64_t completed_ = 0;  // tasks finished (tasks finish in order)
  spora_plugin_error_t* first_error_ = nullptr;
  bool stopping_ = false;
  std::mutex join_mu_;  // serialises close()
  std::thread worker_;
};

class Event {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Event(int32_t device) : device_(device) {}
  int32_t device() const { return device_; }

  // Moves the recorded point: returns the new target generation, which the
  // record task passes to mark_reached.
  uint64_t begin_record();
  // The worker reached generation `gen` at time `when`.
  void mark_reached(uint64_t gen, Clock::time_point when);
  // The generation a waiter must wait for right now (0 = never recorded).
  uint64_t target() const;
  bool reached(uint64_t gen) const;
  // Blocks until generation `gen` is reached.
  void wait(uint64_t gen) const;
  // True (and *out set) when the event was recorded and its point reached.
  bool timestamp(Clock::time_point* out) const;

 private:
  const int32_t device_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t target_ = 0;
  // Highest generation reached. Generations only grow, so when an event is
  // re-recorded on another stream a waiter on an older generation is released
  // once any newer one is reached; the newest record is what counts.
  uint64_t reached_ = 0;
  Clock::time_point when_{};
};

}  // namespace spora::sim
