// Compiles a graph for one device into an execution plan: kernels planned
// once, constants uploaded once, every intermediate buffer placed in one
// arena by liveness; running the plan is a sequence of launches on the
// device's stream.
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
#include "support/error.h"

namespace spora::sched {

struct Step;

// Checks what a run binds to a graph's inputs and weights (`param_nodes`, in
// binding order): count, non-null, device, dtype, and shape -- exact, or for
// inputs only the rank when `inputs_may_reshape` (the plan cache retypes).
void check_bound_params(const ir::Graph& graph, const std::vector<int32_t>& param_nodes, const Device* device,
                        const std::vector<const Tensor*>& params, bool inputs_may_reshape);

class Executable {
 public:
  // Throws with the failing node's op and source location.
  Executable(const ir::Graph& graph, Device* device);
  ~Executable();

  // `params` binds every input and weight node, in creation order; each must
  // live on the executable's device with the node's dtype and shape.
  std::vector<Tensor> run(const std::vector<const Tensor*>& params);
  // The same, writing into caller-made tensors of the output types (used by
  // control flow to run a nested plan into its parent's buffers). They must
  // not overlap the params.
  void run_into(const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs);

  Device* device() const { return device_; }
  size_t num_params() const { return param_nodes_.size(); }
  // Arena bytes on the device (nested plans included) and on cpu for
  // cpu-placed ops; naive_bytes is the sum of every tensor's bytes.
  uint64_t planned_bytes() const { return arena_bytes_; }
  uint64_t naive_bytes() const { return naive_bytes_; }
  uint64_t host_planned_bytes() const { return host_arena_bytes_; }
  // Op nodes placed on cpu, and the copies between device and cpu one run
  // makes for them (this plan's own, not nested plans').
  size_t host_ops() const { return host_ops_; }
  size_t host_copies() const { return host_copies_; }
  // The graph as placed: decomposed, op nodes tagged with their device.
  const ir::Graph& graph() const { return graph_; }

 private:
  void check_params(const std::vector<const Tensor*>& params) const;
  void raise_async_error();

  ir::Graph graph_;
  Device* device_;
  Device* host_ = nullptr;  // the cpu device, when ops are placed there
  std::vector<bool> on_host_;
  std::vector<int32_t> param_nodes_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<Tensor> constants_;  // uploaded at compile time
  std::vector<Tensor> host_constants_;
  std::shared_ptr<Buffer> arena_, host_arena_;
  uint64_t arena_bytes_ = 0, naive_bytes_ = 0, host_arena_bytes_ = 0;
  uint64_t sub_bytes_ = 0, sub_naive_bytes_ = 0;  // held by control-flow steps
  size_t host_ops_ = 0, host_copies_ = 0;
  // cpu steps run from host callbacks between async copies (the device has
  // pinned host memory for the host arena), else synchronously.
  bool host_steps_async_ = false;
  struct Slot;  // where each value lives
  std::vector<std::vector<Slot>> slots_;
  // First failure of a cpu-placed kernel in a host callback, raised by the
  // next run.
  std::mutex async_mu_;
  std::unique_ptr<Error> async_error_;
  friend struct HostLaunch;
};

}  // namespace spora::sched
