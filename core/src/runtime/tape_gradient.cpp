// Gradients from the eager tape: value_and_grad over the recorded graph,
// then only its backward nodes run eagerly with the recorded forward values
// bound (no forward recomputation).
#include <string>

#include "autodiff/grad.h"
#include "runtime/interpreter.h"
#include "runtime/tape.h"
#include "support/error.h"

namespace spora {

namespace {

Tensor zeros_like(const Tensor& t) { return tensor_from_host(t.device(), t.dtype, t.shape, nullptr, 0); }

ir::Node input_node(const std::string& name, const TensorMeta& meta) {
  ir::Node n;
  n.kind = ir::NodeKind::kInput;
  n.name = name;
  n.outputs.push_back(meta);
  return n;
}

}  // namespace

std::vector<Tensor> Tape::gradient(const Tensor& target, const Tensor* sens,
                                   const std::vector<const Tensor*>& sources) {
  if (!dtype_is_float(target.dtype))
    fail(Code::kInvalidArgument, "[spora_tape_gradient] the target is {}; only float tensors are differentiable",
         dtype_name(target.dtype));
  if (sens && (sens->dtype != target.dtype || sens->shape != target.shape))
    fail(Code::kInvalidArgument, "[spora_tape_gradient] sens is {} {} but the target is {} {}; they must match",
         dtype_name(sens->dtype), sens->shape.str(), dtype_name(target.dtype), target.shape.str());
  for (size_t i = 0; i < sources.size(); ++i)
    if (!dtype_is_float(sources[i]->dtype))
      fail(Code::kInvalidArgument, "[spora_tape_gradient] source {} is {}; only float tensors have gradients", i,
           dtype_name(sources[i]->dtype));

  std::vector<Tensor> grads(sources.size());
  // Index into the gradient graph's wrt list, or -1 when the target cannot
  // depend on the source (zeros).
  std::vector<int> slot(sources.size(), -1);
  ir::Graph work("tape_grad");
  std::vector<std::vector<Tensor>> bound;  // per node of `work`
  std::vector<ir::Value> wrt;
  ir::Value seed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (released()) fail(Code::kInvalidArgument, "[spora_tape_gradient] the tape has been freed");
    std::vector<ir::Value> on_tape(sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      auto it = by_id_.find(sources[i]->id);
      if (it != by_id_.end()) on_tape[i] = it->second;
      else if (!watched_ids_.count(sources[i]->id))
        fail(Code::kInvalidArgument,
             "[spora_tape_gradient] source {} is unknown to this tape: it was not watched, and no op recorded on "
             "the tape produced or used it; watch it (spora_tape_watch) before computing with it",
             i);
    }
    auto t = by_id_.find(target.id);
    if (t == by_id_.end()) {
      if (!watched_ids_.count(target.id))
        fail(Code::kInvalidArgument,
             "[spora_tape_gradient] the target was not recorded on this tape: no op recorded on it produced or used "
             "it, and it is not watched");
      // A watched tensor no op used: only itself depends on it.
      const ir::Value x{work.append(input_node("x", {target.dtype, target.shape})), 0};
      bound.push_back({target});
      for (size_t i = 0; i < sources.size(); ++i)
        if (sources[i]->id == target.id) {
          slot[i] = static_cast<int>(wrt.size());
          wrt.push_back(x);
        }
      work.set_outputs({x});
    } else {
      // Nodes after the target cannot reach it: the work graph is the
      // tape's prefix up to the target (same node ids).
      const ir::Value tv = t->second;
      for (int32_t id = 0; id <= tv.node; ++id) {
        work.append(g_.node(id));
        bound.push_back(values_[static_cast<size_t>(id)]);
      }
      for (size_t i = 0; i < sources.size(); ++i) {
        const ir::Value v = on_tape[i];
        if (!v.valid() || v.node > tv.node) continue;  // recorded after the target: zeros
        slot[i] = static_cast<int>(wrt.size());
        wrt.push_back(v);
      }
      work.set_outputs({tv});
    }
    if (sens && !wrt.empty()) {
      seed = {work.append(input_node("sens", {sens->dtype, sens->shape})), 0};
      bound.push_back({*sens});
    }
  }

  if (!wrt.empty()) {
    const ir::Graph vg = autodiff::value_and_grad_values(work, wrt, 0, seed);
    std::vector<Tensor> outs;
    {
      // The backward ops are recorded on the outer tapes (for grad of
      // grad), not on this one.
      tape_detail::NotRecordingOn guard(this);
      outs = run_eager_from(vg, target.device(), std::move(bound));
    }
    for (size_t i = 0; i < sources.size(); ++i)
      if (slot[i] >= 0) grads[i] = std::move(outs[1 + static_cast<size_t>(slot[i])]);
  }
  for (size_t i = 0; i < sources.size(); ++i)
    if (slot[i] < 0) grads[i] = zeros_like(*sources[i]);
  return grads;
}

}  // namespace spora
