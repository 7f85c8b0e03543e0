// One stream's device work for the host's profiler, through the trace hooks
// of plugin.h with trace_hooks.h's convention, as the sim plugin reports its
// kernels: each piece of work (a kernel, an async copy, a graph replay) is
// bracketed by two events recorded on its stream; a watcher thread per
// stream (named "<plugin><device>-s<n>", the profiler's device track) waits
// for them in stream order and
//   - ends the "<plugin>.launch" span begun where the work was enqueued,
//     once the start event is reached: the host draws the flow arrow from
//     the launching op to the work, and its wait in the stream (queued_us);
//   - opens the "<plugin>.kernel" / "<plugin>.copy" span there and closes it
//     when the end event is reached.
// So a span covers the time between the watcher seeing its start and end
// events reached: the device's time for the work, give or take the
// watcher's wake-up (cudaEventSynchronize, microseconds); work finished
// before the watcher got to it shows late and short.
//
// Off (no profiler session) a launch pays one indirect call (trace_begin
// returning 0): no event, no thread. Events come from a per-stream pool and
// go back to it once the watcher has seen them; the thread starts at the
// first traced work. Streams that record a capture have no StreamTrace (a
// captured kernel runs at each replay; the replay is traced as one piece).
#pragma once
#include <spora/plugin.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_runtime.h"

namespace spora::gpu {

class StreamTrace {
 public:
  // `host`: the host's table (trace hooks); `device`: the stream's device;
  // `track`: the watcher thread's name.
  StreamTrace(const spora_host_t* host, int32_t device, std::string track);
  // Waits until the watcher has seen all the work handed to it, then stops.
  ~StreamTrace();
  StreamTrace(const StreamTrace&) = delete;
  StreamTrace& operator=(const StreamTrace&) = delete;

  enum class Kind { kKernel, kCopy };
  // Around enqueuing one piece of work on `stream` (the stream's device
  // current):
  //   Mark m = trace.before(stream, Kind::kKernel, op);
  //   ... enqueue ...
  //   trace.after(m, stream);
  // Inactive unless a profiler session runs.
  struct Mark {
    uint64_t launch = 0;  // the "<plugin>.launch" span; 0: not traced
    cudaEvent_t start = nullptr;
    Kind kind = Kind::kKernel;
    const char* name = "";
  };
  Mark before(cudaStream_t stream, Kind kind, const char* name);
  void after(Mark& mark, cudaStream_t stream);

  // "cuda.kernel" / "rocm.copy" ...
  static const char* category(Kind kind);

 private:
  struct Item {
    uint64_t launch = 0;
    Kind kind = Kind::kKernel;
    std::string name;
    cudaEvent_t start = nullptr, end = nullptr;  // null: not recorded (the enqueue failed)
  };
  cudaEvent_t take_event();
  void give_back(cudaEvent_t e);
  void watch();

  const spora_host_t* host_;
  int32_t device_;
  std::string track_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  std::vector<cudaEvent_t> pool_;
  bool stop_ = false;
  std::thread watcher_;  // started by the first traced work
};

}  // namespace spora::gpu
