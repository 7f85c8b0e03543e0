// Replaying a plan's launches as one captured graph (plugin ABI 1.2 stream
// capture; CUDA graphs on the cuda plugin): a training step of a few
// hundred small kernels costs one launch instead of one per kernel.
//
// A plan qualifies when its device can capture, every step is a device
// kernel (no cpu-placed step, collective or control flow, which need the
// host between launches) and SPORA_GRAPH_CAPTURE is not 0. The first run
// runs as usual (kernels initialise lazily, libraries pick algorithms).
// Later runs replay a recording whose bound addresses they bind:
//  - the first four recordings bind every input and weight where it is, so
//    a loop over a few batches, or an allocator handing the same blocks
//    back, replays with no copy and no staging memory;
//  - after that, a recording binds only the params that kept their address
//    since the previous run (weights a training step updates in place) and
//    reads the others from staging copies (one buffer per param, shared by
//    the recordings), so it replays whatever those bind;
//  - outputs that are not a bound weight's memory (a donated update) are
//    written to staging buffers and copied out; the least recently used of
//    six recordings is dropped for a new one.
// A plan that needed eight recordings, or whose capture failed (the plugin
// refused a call inside a kernel launch), launches kernel by kernel again.
#pragma once
#include <memory>
#include <vector>

#include "runtime/tensor.h"
#include "sched/plan.h"

namespace spora::sched {

struct CaptureState;
// Frees the recorded graph (and its staging buffers) of a plan.
void destroy_capture_state(CaptureState* s);

// Runs `p` as a replay when it qualifies (see above), recording first when
// needed; false means the caller runs the plan itself (nothing was
// enqueued). Arguments as run_plan's, already checked.
bool run_captured(ExecutionPlan& p, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs);

// Replays of the plan so far and recordings made (for tests and the log).
struct CaptureCounts {
  uint64_t replays = 0, captures = 0;
  bool disabled = false;
};
CaptureCounts capture_counts(const ExecutionPlan& p);

}  // namespace spora::sched
