// One stream's device work for the host's profiler, through the trace hooks
// of plugin.h with trace_hooks.h's convention (as the sim and cuda plugins
// report theirs): while a profiler session runs, each kernel launch and
// async copy is bracketed by two Level Zero events, each signalled by a
// barrier appended to the stream's command list (reached once every earlier
// command finished). A watcher thread per stream (named "ze<device>-s<n>",
// the profiler's device track) waits for them on the host in stream order
// and
//   - ends the "ze.launch" span begun on the enqueuing thread once the start
//     event is reached: the host draws the flow arrow from the launching op
//     to the work, and records its wait in the stream (queued_us);
//   - opens the "ze.kernel" / "ze.copy" span there and closes it once the
//     end event is reached.
//
// The times are host-observed: a span covers the watcher seeing its start
// and end events reached (zeEventHostSynchronize returning), the device's
// time give or take the watcher's wake-up; work that finished before the
// watcher got to it shows late and short. The device's own kernel
// timestamps (zeEventQueryKernelTimestamp on events of a
// ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP pool) are not used: the hooks take no
// times (each one stamps the host clock when called), so they could not
// reach the trace.
//
// Off (no profiler session) a piece of work pays one indirect call
// (trace_begin returning 0): no event, no command, no thread. The events
// come from the device's EventAllocator (pooled, recycled) and go back to it
// once the watcher saw them signalled; the thread starts at the first
// traced work and is joined when the stream goes.
#pragma once
#include <spora/plugin.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "ze_state.h"

namespace spora::ze {

class StreamTrace {
 public:
  // `host`: the host's table (trace hooks); `events`: the stream's device's
  // allocator; `track`: the watcher thread's name.
  StreamTrace(const spora_host_t* host, EventAllocator* events, std::string track);
  // Waits until the watcher has seen all the work handed to it (the stream
  // must have run it: Stream synchronizes first), then stops it.
  ~StreamTrace();
  StreamTrace(const StreamTrace&) = delete;
  StreamTrace& operator=(const StreamTrace&) = delete;

  enum class Kind { kKernel, kCopy };
  // One traced piece of work, from begin() to hand_over().
  struct Mark {
    uint64_t launch = 0;  // the "ze.launch" span; 0: not traced
    ze_event_handle_t start = nullptr;
    Kind kind = Kind::kKernel;
    const char* name = "";
  };
  // Begins the "ze.launch" span: the only call made when no session runs.
  Mark begin(Kind kind, const char* name);
  // Appends a barrier to `list` that signals a fresh event once the list
  // reached this point; returns it, or null when that failed (the work is
  // then traced without waiting for it). The caller holds the list's lock.
  ze_event_handle_t signal_point(ze_command_list_handle_t list);
  // Hands the work (its start and end points, either may be null) to the
  // watcher, starting it if needed.
  void hand_over(Mark& mark, ze_event_handle_t end);

  // "ze.kernel" / "ze.copy".
  static const char* category(Kind kind);

 private:
  struct Item {
    uint64_t launch = 0;
    Kind kind = Kind::kKernel;
    std::string name;
    ze_event_handle_t start = nullptr, end = nullptr;
  };
  void watch();

  const spora_host_t* host_;
  EventAllocator* events_;
  std::string track_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stop_ = false;
  std::thread watcher_;  // started by the first traced work
};

}  // namespace spora::ze
