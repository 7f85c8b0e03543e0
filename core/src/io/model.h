// Model files: a graph (its JSON in __metadata__ as "spora.graph") with the
// values of its weights as the file's tensors, named by the weight nodes.
// A loaded Model runs with only the graph's inputs: it compiles itself (O1)
// on the first run and binds the stored weights.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace spora::sched {
class PlanCache;
}

namespace spora::io {

// `weights` bind the graph's weight nodes in creation order; each must have
// its node's dtype and shape (errors name the weight). The graph must verify
// and have outputs, and its weight names must be unique. Atomic, like a
// checkpoint.
void save_model(const std::string& path, const ir::Graph& graph, const std::vector<const Tensor*>& weights);

class Model {
 public:
  // Reads the graph and every weight (CRC-checked) onto `device`. Errors name
  // the file, and the weight where there is one.
  Model(const std::string& path, Device* device);
  ~Model();

  const ir::Graph& graph() const { return graph_; }
  Device* device() const { return device_; }
  // Input nodes of graph(), in creation order.
  const std::vector<int32_t>& inputs() const { return inputs_; }
  // One tensor per input (dtype and rank of its node; tensors on another
  // device are copied over); returns one new tensor per graph output.
  // Compiles on the first call. Inputs of other shapes than the graph's
  // (another batch size) are planned once per signature and cached
  // (sched/plan_cache.h); a shape the graph cannot take fails naming the op
  // and source line that refuse it. Safe to call from several threads (runs
  // are serialised).
  std::vector<Tensor> run(const std::vector<const Tensor*>& inputs);

 private:
  std::string path_;
  ir::Graph graph_;
  Device* device_;
  std::vector<int32_t> inputs_;
  std::vector<Tensor> weights_;  // in weight-node order
  std::mutex mu_;
  std::unique_ptr<sched::PlanCache> plans_;
};

}  // namespace spora::io
