#include "io/model.h"

#include <set>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "sched/plan_cache.h"
#include "support/error.h"

namespace spora::io {
namespace {

std::string type_str(DType d, const Shape& s) { return std::string(dtype_name(d)) + " " + s.str(); }

}  // namespace

void save_model(const std::string& path, const ir::Graph& graph, const std::vector<const Tensor*>& weights) {
  ir::verify(graph);
  if (graph.outputs().empty())
    fail(Code::kInvalidArgument, "[model] saving '{}': graph '{}' has no outputs", path, graph.name());
  const std::vector<int32_t> nodes = graph.weights();
  if (weights.size() != nodes.size())
    fail(Code::kInvalidArgument, "[model] saving '{}': graph '{}' has {} weights, {} given", path, graph.name(),
         nodes.size(), weights.size());
  std::vector<TensorSource> sources;
  std::set<std::string> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = graph.node(nodes[i]);
    const TensorMeta& m = n.outputs.at(0);
    const Tensor* t = weights[i];
    if (!names.insert(n.name).second)
      fail(Code::kInvalidArgument, "[model] saving '{}': graph '{}' has two weights named '{}'", path, graph.name(),
           n.name);
    if (!t || !t->buffer) fail(Code::kInvalidArgument, "[model] saving '{}': weight '{}' is null", path, n.name);
    if (t->dtype != m.dtype || t->shape != m.shape)
      fail(Code::kInvalidArgument, "[model] saving '{}': weight '{}' must be {}, got {}", path, n.name,
           type_str(m.dtype, m.shape), type_str(t->dtype, t->shape));
    sources.push_back(tensor_source(n.name, *t));
  }
  std::map<std::string, std::string> meta;
  meta["spora.format"] = "model";
  meta["spora.version"] = std::to_string(kFormatVersion);
  meta["spora.graph"] = ir::to_json(graph);
  write_safetensors(path, "model", sources, meta);
}

Model::Model(const std::string& path, Device* device) : path_(path), device_(device) {
  SafetensorsFile file(path, "model");
  if (file.format() != "model")
    fail(Code::kInvalidArgument, "[model] '{}' is not a Spora model file ({})", path,
         file.format().empty() ? std::string("no spora.format") : "it is a " + file.format());
  auto g = file.metadata().find("spora.graph");
  if (g == file.metadata().end()) fail(Code::kInvalidArgument, "[model] '{}' holds no graph", path);
  try {
    graph_ = ir::from_json(g->second);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("[model] '{}': {}", path, e.what()));
  }
  inputs_ = graph_.inputs();
  std::set<std::string> used;
  for (int32_t id : graph_.weights()) {
    const ir::Node& n = graph_.node(id);
    const TensorMeta& m = n.outputs.at(0);
    if (!used.insert(n.name).second)
      fail(Code::kInvalidArgument, "[model] '{}': the graph has two weights named '{}'", path, n.name);
    const TensorInfo* t = file.find(n.name);
    if (!t) fail(Code::kInvalidArgument, "[model] '{}': weight '{}' is not in the file", path, n.name);
    if (t->dtype != m.dtype || t->shape != m.shape)
      fail(Code::kInvalidArgument, "[model] '{}': weight '{}' is {} in the file but {} in the graph", path, n.name,
           type_str(t->dtype, t->shape), type_str(m.dtype, m.shape));
  }
  for (const TensorInfo& t : file.tensors())
    if (!used.count(t.name))
      fail(Code::kInvalidArgument, "[model] '{}': tensor '{}' is not a weight of the graph", path, t.name);
  // Everything is checked: now read (and CRC-check) the weights.
  for (int32_t id : graph_.weights()) {
    weights_.push_back(read_tensor(file, *file.find(graph_.node(id).name), device));
  }
}

Model::~Model() = default;

std::vector<Tensor> Model::run(const std::vector<const Tensor*>& inputs) {
  if (inputs.size() != inputs_.size())
    fail(Code::kInvalidArgument, "[model] '{}' takes {} inputs, got {}", path_, inputs_.size(), inputs.size());
  std::vector<Tensor> moved;  // inputs copied to the model's device
  moved.reserve(inputs.size());
  std::vector<const Tensor*> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Node& n = graph_.node(inputs_[i]);
    const TensorMeta& m = n.outputs.at(0);
    const Tensor* t = inputs[i];
    if (!t || !t->buffer) fail(Code::kInvalidArgument, "[model] '{}': input '{}' is null", path_, n.name);
    // Other shapes of the same rank are the plan cache's to accept or
    // refuse (naming the op that cannot take them).
    if (t->dtype != m.dtype || t->shape.rank != m.shape.rank)
      fail(Code::kInvalidArgument, "[model] '{}': input '{}' must be {} (or another shape of that rank), got {}",
           path_, n.name, type_str(m.dtype, m.shape), type_str(t->dtype, t->shape));
    if (t->device() != device_) {
      moved.push_back(tensor_to(*t, device_));
      t = &moved.back();
    }
    in[i] = t;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!plans_) {
    ir::Graph g = graph_;
    passes::optimize(g, 1);
    plans_ = std::make_unique<sched::PlanCache>(g, device_);
  }
  // The plans bind inputs and weights together, in node order; the passes
  // keep every input and weight node, in order.
  std::vector<const Tensor*> params;
  size_t next_in = 0, next_w = 0;
  for (const ir::Node& n : plans_->graph().nodes()) {
    if (n.kind == ir::NodeKind::kInput && next_in < in.size()) params.push_back(in[next_in++]);
    else if (n.kind == ir::NodeKind::kWeight && next_w < weights_.size()) params.push_back(&weights_[next_w++]);
  }
  if (next_in != in.size() || next_w != weights_.size())
    fail(Code::kInternal, "[model] '{}': the compiled graph lost inputs or weights", path_);
  try {
    return plans_->run(params);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("[model] '{}': {}", path_, e.what()));
  }
}

}  // namespace spora::io
