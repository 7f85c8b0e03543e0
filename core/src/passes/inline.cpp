// Inlining of control flow decided at compile time:
//  - an `if` whose condition is a constant becomes the nodes of the taken
//    branch, spliced into the graph with the branch's inputs bound to the
//    node's operands;
//  - a `while` whose condition is false on entry (its cond graph, applied to
//    the initial values, is a constant false) becomes its initial values;
//  - control flow left in place has its sub-graphs inlined the same way,
//    recursively.
// "Constant" means computed from constants only: a condition such as
// less(c1, c2) or a cond graph comparing a constant initial value counts.
// Such small computations are evaluated by the context's Evaluator, as
// constant folding does; without one, only literal constants count.
//
// Runs first at O1 (after shape inference) so that dce, cse and folding see
// the spliced nodes; dce then drops the conditions left unused.
#include <memory>
#include <optional>

#include "ir/rewrite.h"
#include "passes/host_eval.h"
#include "passes/pass.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {
namespace {

// Conditions are scalars; the cap keeps evaluation from doing real work.
constexpr size_t kMaxEvaluatedBytes = 64 * 1024;
// Splicing a branch may expose control flow whose condition just became
// constant; a few rounds settle any realistic nesting.
constexpr int kMaxRounds = 8;

using Known = HostValue;
using Maybe = std::optional<Known>;

// Evaluates `target` of `g` when it depends only on constants (and on g's
// inputs that `args` knows, by input position). Iterative over the nodes
// that `target` depends on, so a long chain cannot exhaust the stack.
Maybe evaluate(const ir::Graph& g, ir::Value target, const std::vector<Maybe>& args, const Evaluator* ev) {
  const auto& nodes = g.nodes();
  const size_t last = static_cast<size_t>(target.node);
  std::vector<bool> need(last + 1, false);
  need[last] = true;
  for (size_t id = last + 1; id-- > 0;)
    if (need[id])
      for (const ir::Value& v : nodes[id].inputs) need[static_cast<size_t>(v.node)] = true;
  std::vector<int32_t> input_pos(last + 1, -1);
  int32_t next_input = 0;
  for (size_t id = 0; id <= last; ++id)
    if (nodes[id].kind == ir::NodeKind::kInput) input_pos[id] = next_input++;

  std::vector<std::vector<Maybe>> val(last + 1);
  for (size_t id = 0; id <= last; ++id) {
    if (!need[id]) continue;
    const ir::Node& n = nodes[id];
    val[id].resize(n.outputs.size());
    switch (n.kind) {
      case ir::NodeKind::kInput: {
        const size_t pos = static_cast<size_t>(input_pos[id]);
        if (pos < args.size()) val[id][0] = args[pos];
        break;
      }
      case ir::NodeKind::kConstant: val[id][0] = Known{n.outputs[0], n.data}; break;
      case ir::NodeKind::kApply: {
        if (!ev) break;
        bool all = true;
        for (const ir::Value& v : n.inputs)
          all = all && val[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)].has_value();
        for (const TensorMeta& m : n.outputs)
          all = all && static_cast<size_t>(m.shape.numel()) * dtype_size(m.dtype) <= kMaxEvaluatedBytes;
        if (!all) break;
        std::vector<Known> in;
        for (const ir::Value& v : n.inputs)
          in.push_back(*val[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]);
        // Not decided at compile time when it fails: running it reports the
        // error with the node's source line.
        if (auto out = evaluate_node(*ev, n, in, "inline"))
          for (size_t o = 0; o < out->size(); ++o) val[id][o] = std::move((*out)[o]);
        break;
      }
      default: break;  // weights are bound at run time; nested control flow is not evaluated
    }
  }
  return val[last][static_cast<size_t>(target.index)];
}

// The truth of a bool scalar known at compile time.
std::optional<bool> truth(const Maybe& k) {
  if (!k || k->meta.dtype != SPORA_DTYPE_BOOL || k->meta.shape.numel() != 1 || k->bytes->empty()) return std::nullopt;
  return (*k->bytes)[0] != 0;
}

bool inline_once(ir::Graph& g, const Evaluator* ev) {
  ir::Rewriter rw(g);
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.nodes()[id];
    const int32_t nid = static_cast<int32_t>(id);
    if (n.kind == ir::NodeKind::kIf && !n.inputs.empty()) {
      if (const auto taken = truth(evaluate(g, n.inputs[0], {}, ev))) {
        std::vector<ir::Value> args;
        for (size_t i = 1; i < n.inputs.size(); ++i) args.push_back(rw.map(n.inputs[i]));
        const auto outs = ir::inline_graph(rw.out(), *n.subgraphs[*taken ? 0 : 1], args);
        for (size_t o = 0; o < outs.size(); ++o) rw.set({nid, static_cast<int32_t>(o)}, outs[o]);
        changed = true;
        continue;
      }
    } else if (n.kind == ir::NodeKind::kWhile) {
      std::vector<Maybe> initial;
      for (const ir::Value& v : n.inputs) initial.push_back(evaluate(g, v, {}, ev));
      const ir::Graph& cond = *n.subgraphs[0];
      if (truth(evaluate(cond, cond.outputs()[0], initial, ev)) == false) {
        for (size_t o = 0; o < n.inputs.size(); ++o) rw.set({nid, static_cast<int32_t>(o)}, rw.map(n.inputs[o]));
        changed = true;
        continue;
      }
    }
    rw.copy(nid);
  }
  if (changed) g = rw.finish();
  return changed;
}

bool inline_recursively(ir::Graph& g, const Evaluator* ev) {
  bool changed = false;
  for (int round = 0; round < kMaxRounds && inline_once(g, ev); ++round) changed = true;
  // What stays control flow still gets its own constant branches inlined.
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    ir::Node& n = g.mutable_node(static_cast<int32_t>(id));
    if (n.kind != ir::NodeKind::kIf && n.kind != ir::NodeKind::kWhile) continue;
    for (auto& sub : n.subgraphs) {
      auto copy = std::make_shared<ir::Graph>(*sub);  // sub-graphs may be shared with other graphs
      if (inline_recursively(*copy, ev)) {
        sub = std::move(copy);
        changed = true;
      }
    }
  }
  return changed;
}

bool inline_control_flow(ir::Graph& g, const PassContext& ctx) {
  bool has_control_flow = false;
  for (const ir::Node& n : g.nodes())
    has_control_flow = has_control_flow || n.kind == ir::NodeKind::kIf || n.kind == ir::NodeKind::kWhile;
  if (!has_control_flow) return false;
  const Evaluator* ev = ctx.evaluator_in_use();
  return inline_recursively(g, ev && ev->available() ? ev : nullptr);
}

}  // namespace
SPORA_PASS("inline", 1, inline_control_flow, {"shape_inference"});
}  // namespace spora::passes
