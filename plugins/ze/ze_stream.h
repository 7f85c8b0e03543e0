// Streams and events over Level Zero.
//
// A spora stream is one immediate command list. Level Zero (API 1.4, the
// version Debian's loader headers speak) does not promise that commands of
// one list run in order, so every command is followed by a barrier: that is
// what makes the list a stream. A spora event is a host-visible ze_event
// plus a host-memory slot that zeCommandListAppendWriteGlobalTimestamp
// fills, so elapsed times come from the device's own clock.
//
// Level Zero has no host callbacks. stream_add_callback appends "signal A,
// wait for B" to the list; a host thread per stream (started on the first
// callback) waits for A on the host, runs the callback, then signals B from
// the host. Cost per callback: two events, one host thread wake-up, and the
// stream's later work stalls until the callback returned, like CUDA's
// cudaLaunchHostFunc.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ze_state.h"
#include "ze_trace.h"

namespace spora::ze {

// Host-visible events in pools of 64, recycled through a free list.
class EventAllocator {
 public:
  EventAllocator(ze_context_handle_t ctx, ze_device_handle_t dev) : ctx_(ctx), dev_(dev) {}
  ~EventAllocator();
  spora_plugin_error_t* acquire(ze_event_handle_t* out);
  void release(ze_event_handle_t ev);

 private:
  ze_context_handle_t ctx_;
  ze_device_handle_t dev_;
  std::mutex mu_;
  std::vector<ze_event_pool_handle_t> pools_;
  std::vector<ze_event_handle_t> all_, free_;
};

class Stream {
 public:
  Stream(int32_t device, Device* dev) : device_(device), dev_(dev) {}
  ~Stream();
  spora_plugin_error_t* create();
  int32_t device() const { return device_; }
  ze_command_list_handle_t list() const { return list_; }

  // Appends one command with `append(list)` and a barrier after it, under the
  // stream's lock (immediate lists are not thread-safe).
  spora_plugin_error_t* enqueue(const char* what, const std::function<ze_result_t(ze_command_list_handle_t)>& append,
                                const char* call);
  spora_plugin_error_t* synchronize();
  spora_plugin_error_t* query(int32_t* done);
  spora_plugin_error_t* wait_event(ze_event_handle_t ev);
  spora_plugin_error_t* add_callback(spora_host_callback_fn fn, void* user_data);
  // Runs `fn(list)` under the stream lock (event record needs two commands).
  spora_plugin_error_t* locked(const std::function<spora_plugin_error_t*(ze_command_list_handle_t)>& fn);

  // Around the work one call enqueues, for the profiler (ze_trace.h; Traced
  // below does both): a "ze.launch" span and, while a session runs, a start
  // point appended to the list; then the end point, handed to the watcher.
  StreamTrace::Mark trace_before(StreamTrace::Kind kind, const char* name);
  void trace_after(StreamTrace::Mark& mark);

 private:
  struct Callback {
    ze_event_handle_t reached, release;
    spora_host_callback_fn fn;
    void* user_data;
  };
  void worker();

  // Moves `ev` to retired_: a signal the device still owes may land on it,
  // so it goes back to the allocator only after the next synchronize.
  void retire(ze_event_handle_t ev);

  int32_t device_;
  Device* dev_;
  ze_command_list_handle_t list_ = nullptr;
  ze_event_handle_t sync_event_ = nullptr;
  // stream_query's point: reused while no command was appended since.
  ze_event_handle_t query_event_ = nullptr;
  uint64_t appended_ = 0, query_appended_ = 0;
  std::mutex mu_;
  // Callback thread and its queue; `retired_` events go back to the
  // allocator once the stream is known to be past them (synchronize).
  std::mutex cb_mu_;
  std::condition_variable cb_cv_;
  std::deque<Callback> cb_queue_;
  std::vector<ze_event_handle_t> retired_;
  bool cb_stop_ = false;
  std::thread cb_thread_;
  // The stream's device track for the profiler (created with the list).
  std::unique_ptr<StreamTrace> trace_;
};

// Traces the work enqueued on `s` during its lifetime as one "ze.kernel" or
// "ze.copy" span named `name` (which must outlive it), on every return path.
class Traced {
 public:
  Traced(Stream& s, StreamTrace::Kind kind, const char* name) : s_(s), mark_(s.trace_before(kind, name)) {}
  ~Traced() { s_.trace_after(mark_); }
  Traced(const Traced&) = delete;
  Traced& operator=(const Traced&) = delete;

 private:
  Stream& s_;
  StreamTrace::Mark mark_;
};

class Event {
 public:
  explicit Event(Device* dev) : dev_(dev) {}
  ~Event();
  spora_plugin_error_t* create();
  spora_plugin_error_t* record(Stream& s);
  spora_plugin_error_t* query(int32_t* done);
  spora_plugin_error_t* synchronize();
  // Device ticks at the recorded point (after synchronize).
  uint64_t ticks() const { return *stamp_; }
  ze_event_handle_t handle() const { return ev_; }
  bool recorded() const { return recorded_.load(); }
  Device* dev() const { return dev_; }

 private:
  Device* dev_;
  ze_event_handle_t ev_ = nullptr;
  uint64_t* stamp_ = nullptr;  // host USM, written by the device
  std::atomic<bool> recorded_{false};
};

}  // namespace spora::ze
