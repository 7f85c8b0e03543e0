// Replaying a plan's launches as one captured graph (plugin ABI 1.2 stream
// capture; CUDA graphs on the cuda plugin): a training step of a few
// hundred small kernels costs one launch instead of one per kernel.
//
// A plan qualifies when its device can capture, every step is a device
// kernel (no cpu-placed step, collective or control flow, which need the
// host between launches) and SPORA_GRAPH_CAPTURE is not 0. The first run
// runs as usual (kernels initialise lazily, libraries pick algorithms).
// The second records the launches, with each input or weight bound at its
// address when it is the address the first run had (weights a training
// step updates in place) and read from a staging copy otherwise (a new
// batch each step); outputs are written to staging buffers unless they are
// a bound weight's memory (a donated update). Every later run whose bound
// addresses and donated outputs are the same replays it: the staging copies
// in, one launch, the copies out. A run that binds other addresses records
// again; a plan that needed kMaxCaptures recordings, or whose capture
// failed (the plugin refused a call inside a kernel launch), goes back to
// launching kernel by kernel.
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
