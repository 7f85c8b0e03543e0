// Compiles a graph for one device into an execution plan (plan.h, built by
// the stages of plan_build.h: kernels planned once, constants uploaded once,
// every intermediate buffer placed in one arena by liveness) and runs it: a
// run binds buffers and enqueues the launches on the device's stream.
//
// Control flow: an `if` or `while` node is a step holding nested
// Executables of its sub-graphs (compiled once, for the same device). At
// run time the condition is read back to the host (a synchronising copy)
// to choose the branch or to decide whether to go round again; the nested
// plan runs with the current values bound as its inputs and writes its
// outputs straight into the parent's buffers. A while loop's carried values
// ping-pong between the node's output buffers and one scratch set, so a
// loop allocates nothing per iteration. A loop that is still running after
// SPORA_MAX_WHILE_ITERATIONS iterations (default 1e6) fails with
// Code::kAborted naming the node's source location.
//
// Placement (placement.h): an op the device has no kernel and no
// decomposition for runs on the cpu device. Its plan step copies the inputs
// it needs from the device into a second arena, on cpu (asynchronous d2h
// copies on the device's stream), runs the cpu kernel from a host callback
// in stream order, and copies the outputs the device needs back (async h2d).
// That arena is the device plugin's pinned host memory: an async copy from
// pageable memory may read it when enqueued (CUDA stages it then), before
// the callback has written it. A plugin without pinned memory gets the
// same step with synchronous copies and the kernel run inline.
// Values flowing between cpu-placed ops stay on cpu; constants they read
// are uploaded to cpu once.
//
// Asynchronous execution: a run enqueues every launch and copy on the
// device's stream and returns without waiting for the device; the host waits
// only to read an if/while condition. The caller's reads (tensor_read, a
// synchronous copy) wait for the work they depend on. A failure inside a
// cpu-placed kernel's callback cannot be returned by the run that queued it:
// the next run of the plan reports it.
//
// A plan is for one signature (the dtypes and shapes of its inputs and
// weights); plan_cache.h keeps plans for several.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"
#include "sched/plan.h"
#include "support/error.h"

namespace spora::sched {

// Checks what a run binds to a graph's inputs and weights (`param_nodes`, in
// binding order): count, non-null, device, dtype, and shape -- exact, or for
// inputs only the rank when `inputs_may_reshape` (the plan cache retypes).
void check_bound_params(const ir::Graph& graph, const std::vector<int32_t>& param_nodes, const Device* device,
                        const std::vector<const Tensor*>& params, bool inputs_may_reshape);

// Runs a finished plan: `params` binds its inputs and weights (checked),
// results go into `outputs`, tensors of the plan's output types on its
// device that do not overlap the params. Raises first a failure a host
// callback left from an earlier run by this thread (host_errors.h).
void run_plan(ExecutionPlan& plan, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs);

class Executable {
 public:
  // Builds the plan (build_plan). Throws with the failing node's op and
  // source location.
  Executable(const ir::Graph& graph, Device* device);
  ~Executable();

  // `params` binds every input and weight node, in creation order; each must
  // live on the executable's device with the node's dtype and shape.
  // `donate` (per output, a param position or -1) lets output i be written
  // into params[donate[i]]'s memory and returned sharing it, where the plan
  // proves nothing reads that param afterwards (ExecutionPlan::
  // output_may_take) and no other tensor holds its buffer; otherwise the
  // output is a fresh tensor. A donated param's old value is gone.
  std::vector<Tensor> run(const std::vector<const Tensor*>& params, const std::vector<int32_t>& donate = {});
  // The same, writing into caller-made tensors of the output types. They
  // must not overlap the params.
  void run_into(const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs);

  Device* device() const { return plan_->device; }
  size_t num_params() const { return plan_->param_nodes.size(); }
  // Arena bytes on the device (nested plans included) and on cpu for
  // cpu-placed ops; naive_bytes is the sum of every tensor's bytes.
  uint64_t planned_bytes() const { return plan_->arena_bytes; }
  // Collective steps, and those started without waiting (plan_overlap.cpp).
  int32_t collectives() const;
  int32_t overlapped_collectives() const { return plan_->num_async; }
  uint64_t naive_bytes() const { return plan_->naive_bytes; }
  uint64_t host_planned_bytes() const { return plan_->host_arena_bytes; }
  // Op nodes placed on cpu, and the copies between device and cpu one run
  // makes for them (this plan's own, not nested plans').
  size_t host_ops() const { return plan_->host_ops; }
  size_t host_copies() const { return plan_->host_copies; }
  // The graph as placed: decomposed, op nodes tagged with their device.
  const ir::Graph& graph() const { return plan_->graph; }
  const ExecutionPlan& plan() const { return *plan_; }

 private:
  std::unique_ptr<ExecutionPlan> plan_;
};

}  // namespace spora::sched
