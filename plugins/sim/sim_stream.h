// Streams and events of the simulated accelerator.
//
// A Stream is an in-order queue served by its own worker thread (named
// "sim<d>-s<n>"); workers of different streams share no lock while they run
// work, so streams overlap. Each item says where it runs: kernels and
// memsets on the worker itself, copies on the device's copy engine, host
// callbacks on the device's callback thread (sim_device.h); the worker hands
// those over and waits, so the stream still moves in order. Event records
// and waits are markers, run on the worker.
//
// With sim.lag_us set, no item starts before lag_us after it was enqueued,
// unless the host already waits for it (wait_for, drain): the host runs
// ahead of the device, and a host that waits properly loses no time.
// Once the device has failed (a sticky fault), items are skipped: kernels
// and copies do not run and host callbacks are dropped, never called, as
// CUDA does; markers still run so event waiters are released.
//
// Each item returns NULL or an error; the first error since the last
// synchronize is kept for stream_synchronize and shown to later callbacks.
// An Event is a generation counter: recording bumps the target generation
// and enqueues a marker that marks it reached (with a timestamp) when the
// worker gets there.
#pragma once
#include <spora/plugin.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim_device.h"

namespace spora::sim {

class Stream {
 public:
  // `status` is NULL, or (for tasks enqueued with wants_status) the stream's
  // first error so far, valid for the duration of the call.
  using Task = std::function<spora_plugin_error_t*(const spora_plugin_error_t* status)>;

  // Where an item runs (see the file comment).
  enum class Where { kWorker, kCopyEngine, kCallbackThread, kMarker };

  explicit Stream(std::shared_ptr<Device> device);  // starts the worker thread
  ~Stream();                                        // close(), dropping any pending error

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device() const { return device_->index(); }
  Device& device_state() const { return *device_; }

  // A device range a queued item touches: a replay of a capture checks it
  // is still allocated (sim_capture.cpp).
  struct Range {
    uint64_t address;
    size_t size;
    std::string what;
  };
  // Work recorded while the stream captured.
  struct Recorded {
    Task task;
    Where where;
    std::vector<Range> ranges;
  };

  // Appends an item. Fails only once the stream is closing. *ticket (if
  // given) is the item's position, for wait_for. While the stream captures
  // (begin_capture), kernels, copies and memsets are recorded instead, with
  // `ranges`; a host callback, an event marker or an item the caller means
  // to wait for (ticket) breaks the capture and fails, as CUDA refuses
  // them in capture mode.
  spora_plugin_error_t* enqueue(Task task, Where where, bool wants_status = false, uint64_t* ticket = nullptr,
                                std::vector<Range> ranges = {});

  // ---- capture (plugin.h, ABI 1.2) ----
  // Starts recording; fails if the stream already captures.
  spora_plugin_error_t* begin_capture();
  // Stops recording: the recorded work, or (error returned) why the capture
  // broke. Fails if the stream was not capturing.
  spora_plugin_error_t* end_capture(std::vector<Recorded>* out);
  bool capturing() const;
  // Breaks the running capture (if any) for `why`, and returns the error
  // the refused call reports (NULL when the stream does not capture).
  spora_plugin_error_t* refuse_capture(const std::string& why);
  // Waits until the item with `ticket` (and so every earlier one) finished.
  void wait_for(uint64_t ticket);
  // Waits until every item enqueued before the call has finished. Callers
  // refuse first to wait from the device's callback thread
  // (refuse_in_callback); no plugin code waits on a stream worker.
  void drain();
  // drain(), then hands over (and clears) the first error.
  spora_plugin_error_t* synchronize();
  // True when every enqueued task has finished.
  bool idle() const;
  // Drains, stops and joins the worker. Returns the unreported first error,
  // if any. Idempotent.
  spora_plugin_error_t* close();

 private:
  struct Item {
    Task task;
    Where where;
    bool wants_status;
    std::chrono::steady_clock::time_point due;  // enqueue time + lag
  };
  void run();
  spora_plugin_error_t* execute(Item& item, uint64_t ticket, const spora_plugin_error_t* status);

  const std::shared_ptr<Device> device_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // worker: queue non-empty or stopping
  std::condition_variable done_cv_;  // waiters: completed_ advanced
  std::condition_variable lag_cv_;   // worker: hurry_ advanced or stopping
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;   // tasks ever enqueued
  uint64_t completed_ = 0;  // tasks finished (tasks finish in order)
  uint64_t hurry_ = 0;      // tasks up to this one are waited for: no lag
  spora_plugin_error_t* first_error_ = nullptr;
  bool stopping_ = false;
  bool capturing_ = false;
  std::string capture_broken_;  // why the running capture broke ("" = intact)
  std::vector<Recorded> recorded_;
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
