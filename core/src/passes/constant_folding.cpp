// Constant folding: an op whose inputs are all constants is evaluated once,
// by the context's Evaluator (the runtime registers one that runs ops on the
// host's cpu device), and replaced by a constant. Outputs above a size
// limit stay as ops, so folding never bloats a model file.
#include <cstring>

#include "ir/rewrite.h"
#include "passes/host_eval.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

constexpr size_t kMaxFoldedBytes = 64 * 1024;

bool foldable(const ir::Graph& g, const ir::Node& n) {
  if (n.kind != ir::NodeKind::kApply) return false;
  for (const ir::Value& v : n.inputs)
    if (g.node(v.node).kind != ir::NodeKind::kConstant) return false;
  for (const TensorMeta& m : n.outputs)
    if (static_cast<size_t>(m.shape.numel()) * dtype_size(m.dtype) > kMaxFoldedBytes) return false;
  return true;
}

bool fold(ir::Graph& g, const PassContext& ctx) {
  bool any = false;
  for (const ir::Node& n : g.nodes()) any = any || foldable(g, n);
  if (!any) return false;
  const Evaluator* ev = ctx.evaluator_in_use();
  if (!ev || !ev->available()) return false;
  ir::Rewriter rw(g);
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.nodes()[id];
    if (!foldable(g, n)) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    std::vector<HostValue> in;
    for (const ir::Value& v : n.inputs) in.push_back({g.node(v.node).outputs[0], g.node(v.node).data});
    const auto out = evaluate_node(*ev, n, in, "constant_folding");
    if (!out) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    for (size_t o = 0; o < out->size(); ++o) {
      const HostValue& r = (*out)[o];
      rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)},
             rw.out().add_constant(r.meta.dtype, r.meta.shape, *r.bytes, n.loc));
    }
    changed = true;
  }
  if (changed) g = rw.finish();
  return changed;
}

}  // namespace
SPORA_PASS("constant_folding", 1, fold, {"shape_inference"});
}  // namespace spora::passes
