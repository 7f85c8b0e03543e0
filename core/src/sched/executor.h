// Compiles a graph for one device into an execution plan: kernels planned
// once, constants uploaded once, every intermediate buffer placed in one
// arena by liveness; running the plan is a sequence of launches on the
// device's stream.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace spora::sched {

struct Step;

class Executable {
 public:
  // Throws with the failing node's op and source location.
  Executable(const ir::Graph& graph, Device* device);
  ~Executable();

  // `params` binds every input and weight node, in creation order; each must
  // live on the executable's device with the node's dtype and shape.
  std::vector<Tensor> run(const std::vector<const Tensor*>& params);

  Device* device() const { return device_; }
  size_t num_params() const { return param_nodes_.size(); }
  uint64_t planned_bytes() const { return arena_bytes_; }
  uint64_t naive_bytes() const { return naive_bytes_; }
  const ir::Graph& graph() const { return graph_; }

 private:
  ir::Graph graph_;
  Device* device_;
  std::vector<int32_t> param_nodes_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<Tensor> constants_;  // uploaded at compile time
  std::shared_ptr<Buffer> arena_;
  uint64_t arena_bytes_ = 0, naive_bytes_ = 0;
  struct Slot;                     // where each value lives
  std::vector<std::vector<Slot>> slots_;
};

// Runs `graph` node by node with eager dispatch (no plan, no arena).
std::vector<Tensor> run_eager(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params);

}  // namespace spora::sched
