// An execution plan: everything compiling a graph for one device decides
// once -- where each node runs, each kernel planned, where each value's
// bytes live, the copies cpu-placed ops need, scratch sizes -- so that a run
// (executor.h) only binds buffers and launches (oneDNN's primitive_desc /
// primitive split). The stages of plan_build.h fill it in; a finished plan
// is immutable, and one plan serves one run at a time (its arenas hold that
// run's intermediates).
//
// Overlap (plan_overlap.cpp): a collective whose outputs are not read by
// the next step is started asynchronously -- on the device's communication
// lane for a device-bound communicator (NCCL), else on the communicator's
// own thread -- and the first step reading its outputs waits for it
// (Step::waits); the lifetimes of its operands reach that step, so no
// kernel in between reuses their memory.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/graph.h"
#include "runtime/device.h"
#include "runtime/tensor.h"
#include "support/error.h"

namespace spora::sched {

struct ExecutionPlan;
struct CaptureState;  // plan_capture.h

// Where a value's bytes are at run time.
struct Slot {
  // kHostOnly: made and read by cpu-placed ops only; it lives in the host
  // arena and has no device memory.
  enum Kind { kParam, kConstant, kArena, kOutput, kAlias, kHostOnly } kind = kArena;
  int32_t index = 0;    // param position, constant index, output position
  uint64_t offset = 0;  // arena offset (kArena)
  ir::Value alias;      // kAlias: the value whose memory this is (a view); its alias root once planned
};

// A copy between a device value and its copy in the host arena.
struct HostCopy {
  ir::Value value;  // the device-side value (an alias root)
  uint64_t host_offset = 0;
  uint64_t bytes = 0;
};

struct Step {
  enum Kind { kKernel, kHostKernel, kIf, kWhile, kCollective } kind = kKernel;
  int32_t node = 0;
  // kCollective: the communicator id ("group") and reduce op of all_reduce.
  int64_t group = 0;
  int32_t reduce_op = 0;
  // kCollective started without waiting (see above): its index among the
  // plan's async collectives, else -1. Any step: the async collectives it
  // waits for before it runs.
  int32_t async_slot = -1;
  std::vector<int32_t> waits;
  KernelRef kernel;  // kKernel; kHostKernel: planned on the cpu device
  std::vector<ir::Value> inputs;
  std::vector<ir::Value> outputs;
  // kIf: then, else. kWhile: cond, body. Nested plans for the same device.
  std::unique_ptr<ExecutionPlan> sub[2];
  // kWhile: the cond's result and the second set of loop-carried buffers.
  Tensor flag;
  std::vector<Tensor> scratch;
  // kHostKernel: device values copied to cpu before the launch and back
  // after it; the launch's cpu addresses are fixed when planning.
  std::vector<HostCopy> copy_in, copy_out;
  spora_devptr_t host_in[kMaxOpInputs] = {};
  spora_devptr_t host_out[kMaxOpOutputs] = {};
  Device* host = nullptr;
  ExecutionPlan* owner = nullptr;  // kHostKernel: the plan whose graph names its failure
};

struct ExecutionPlan {
  ExecutionPlan() = default;
  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;
  // Waits for the device when host callbacks queued by a run may still
  // point into the steps and the pinned host arena.
  ~ExecutionPlan();

  // The value whose memory `v` is (itself unless a view). Valid once
  // plan_lifetimes_and_aliases resolved the alias chains.
  ir::Value root(ir::Value v) const;
  Slot& slot(ir::Value v) { return slots[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]; }
  const Slot& slot(ir::Value v) const { return slots[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]; }

  ir::Graph graph;  // as placed: decomposed, op nodes tagged with their device
  Device* device = nullptr;
  Device* host = nullptr;     // the cpu device, when ops are placed there
  std::vector<bool> on_host;  // per node
  std::vector<int32_t> param_nodes;  // inputs and weights, in binding order
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<std::vector<Slot>> slots;  // per node, per output
  std::vector<Tensor> constants;         // uploaded when planning
  std::vector<Tensor> host_constants;    // constants cpu-placed ops read
  std::shared_ptr<Buffer> arena, host_arena;
  // Scratch of the device steps' kernels (the largest need; cpu-placed
  // steps use the cpu device's shared scratch). The plan's own, so that a
  // recorded replay keeps reading the buffer it recorded.
  std::shared_ptr<Buffer> workspace;
  uint64_t arena_bytes = 0, naive_bytes = 0, host_arena_bytes = 0;
  uint64_t sub_bytes = 0, sub_naive_bytes = 0;  // held by control-flow steps
  size_t host_ops = 0, host_copies = 0;
  // cpu steps run from host callbacks between async copies (the device has
  // pinned host memory for the host arena), else synchronously.
  bool host_steps_async = false;
  // Async collectives (Step::async_slot), those no step reads (waited for
  // at the end of a run), and the events of device-bound ones: per slot,
  // "inputs ready" on the compute lane and "done" on the comm lane.
  int32_t num_async = 0;
  std::vector<int32_t> waits_at_end;
  std::vector<std::unique_ptr<Device::Event>> comm_events;
  // Per slot, input and output: pinned host memory a host-memory backend's
  // async collective is staged through on a device without host-
  // addressable memory.
  std::vector<std::shared_ptr<void>> comm_stage;
  // Per graph output: the param positions (plan.h's param_nodes) whose
  // memory the output may be written into instead of a fresh tensor -- the
  // param is read by no step after the one writing the output (or only by
  // that step, as its in-place input), and is no graph output itself. A
  // training step's updated weights and optimizer state thus overwrite the
  // old ones (Executable::run's `donate`), as PyTorch's in-place updates do.
  std::vector<std::vector<int32_t>> output_may_take;

  // The recorded launches replayed by later runs (plan_capture.h). Last, so
  // it goes first: before the arena and constants its graph reads.
  struct CaptureDeleter {
    void operator()(CaptureState* s) const;
  };
  std::unique_ptr<CaptureState, CaptureDeleter> capture;
};

}  // namespace spora::sched
