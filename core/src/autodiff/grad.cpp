#include "autodiff/grad.h"

#include <algorithm>
#include <map>

#include "autodiff/bprop.h"
#include "ir/serialize.h"
#include "support/error.h"

namespace spora::autodiff {

namespace detail {
// grad_control_flow.cpp: the adjoints of an if / while node's inputs
// (invalid where none), given the adjoints `dy` of its outputs and which
// inputs `need` one. Nodes are added to `out`.
std::vector<Value> bprop_if(ir::Graph& out, const ir::Node& node, const std::vector<Value>& dy,
                            const std::vector<bool>& need);
std::vector<Value> bprop_while(ir::Graph& out, const ir::Node& node, const std::vector<Value>& dy,
                               const std::vector<bool>& need);
}  // namespace detail

ir::Graph value_and_grad(const ir::Graph& g, const std::vector<int32_t>& wrt, int32_t output, ir::Value seed) {
  const int32_t n = static_cast<int32_t>(g.nodes().size());
  std::vector<Value> values;
  for (int32_t w : wrt) {
    if (w < 0 || w >= n || (g.node(w).kind != ir::NodeKind::kInput && g.node(w).kind != ir::NodeKind::kWeight))
      fail(Code::kInvalidArgument, "[grad] node %{} is not an input or weight of graph '{}'", w, g.name());
    if (!dtype_is_float(g.node(w).outputs[0].dtype))
      fail(Code::kInvalidArgument, "[grad] cannot differentiate with respect to '{}' of dtype {}", g.node(w).name,
           dtype_name(g.node(w).outputs[0].dtype));
    values.push_back({w, 0});
  }
  return value_and_grad_values(g, values, output, seed);
}

ir::Graph value_and_grad_values(const ir::Graph& g, const std::vector<Value>& wrt, int32_t output, ir::Value seed) {
  ir::check_json_roundtrip(g, "grad, input");
  if (output < 0 || output >= static_cast<int32_t>(g.outputs().size()))
    fail(Code::kInvalidArgument, "[grad] graph '{}' has {} outputs; output {} does not exist", g.name(),
         g.outputs().size(), output);
  const int32_t n = static_cast<int32_t>(g.nodes().size());
  for (const Value& w : wrt)
    if (!dtype_is_float(g.meta(w).dtype))
      fail(Code::kInvalidArgument, "[grad] cannot differentiate with respect to %{}.{} of dtype {}", w.node, w.index,
           dtype_name(g.meta(w).dtype));
  const Value loss = g.outputs()[static_cast<size_t>(output)];
  if (!dtype_is_float(g.meta(loss).dtype))
    fail(Code::kInvalidArgument, "[grad] output {} has dtype {}; only float outputs are differentiable", output,
         dtype_name(g.meta(loss).dtype));
  if (seed.valid()) {
    const TensorMeta &s = g.meta(seed), &m = g.meta(loss);
    if (s.dtype != m.dtype || s.shape != m.shape)
      fail(Code::kInvalidArgument, "[grad] the seed is {} {} but output {} is {} {}", dtype_name(s.dtype),
           s.shape.str(), output, dtype_name(m.dtype), m.shape.str());
  }

  ir::Graph out(g.name() + "_grad");
  for (const ir::Node& node : g.nodes()) out.append(node);

  // Nodes through which a wrt value reaches anything: only they need adjoints.
  std::vector<bool> depends(static_cast<size_t>(n), false);
  for (const Value& w : wrt) depends[static_cast<size_t>(w.node)] = true;
  for (int32_t id = 0; id < n; ++id)
    for (const Value& v : g.node(id).inputs)
      if (depends[static_cast<size_t>(v.node)]) depends[static_cast<size_t>(id)] = true;

  std::map<std::pair<int32_t, int32_t>, Value> adjoint;
  auto accumulate = [&](Value at, Value grad, GradBuilder& b) {
    auto key = std::make_pair(at.node, at.index);
    auto it = adjoint.find(key);
    if (it == adjoint.end()) adjoint.emplace(key, grad);
    else it->second = b.op("add", {it->second, grad});
  };
  {
    GradBuilder b(out, g.node(loss.node).loc);
    const TensorMeta& m = g.meta(loss);
    accumulate(loss, seed.valid() ? seed : b.full(1.0, m.dtype, m.shape), b);
  }
  for (int32_t id = loss.node; id >= 0; --id) {
    if (!depends[static_cast<size_t>(id)]) continue;
    const ir::Node& node = g.node(id);
    const bool control = node.kind == ir::NodeKind::kIf || node.kind == ir::NodeKind::kWhile;
    if (node.kind != ir::NodeKind::kApply && !control) continue;
    std::vector<Value> dy(node.outputs.size());
    bool any = false;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      auto it = adjoint.find({id, static_cast<int32_t>(o)});
      if (it != adjoint.end()) {
        dy[o] = it->second;
        any = true;
      }
    }
    if (!any) continue;
    if (control) {
      // Branches and loop bodies are differentiated as graphs of their own.
      std::vector<bool> need(node.inputs.size());
      for (size_t i = 0; i < node.inputs.size(); ++i)
        need[i] = depends[static_cast<size_t>(node.inputs[i].node)] && dtype_is_float(g.meta(node.inputs[i]).dtype);
      if (std::find(need.begin(), need.end(), true) == need.end()) continue;
      const std::vector<Value> dx = node.kind == ir::NodeKind::kIf ? detail::bprop_if(out, node, dy, need)
                                                                   : detail::bprop_while(out, node, dy, need);
      GradBuilder b(out, node.loc);
      for (size_t i = 0; i < dx.size(); ++i)
        if (dx[i].valid() && need[i]) accumulate(node.inputs[i], dx[i], b);
      continue;
    }
    // An intermediate wrt value needs its adjoint, not its inputs': a node
    // none of whose inputs depends on a wrt value has nothing to pass back.
    bool feeds = false;
    for (const Value& v : node.inputs) feeds = feeds || depends[static_cast<size_t>(v.node)];
    if (!feeds) continue;
    // The rule its family file registered with the op.
    const std::optional<BpropEntry> rule = find_bprop(*node.op);
    if (!rule)
      fail(Code::kUnimplemented, "{}", ir::with_loc("[" + node.op->name + "] has no gradient rule yet", node.loc));
    if (!rule->differentiable) continue;  // e.g. argmax: no gradient flows back
    std::vector<Value> y;
    for (size_t o = 0; o < node.outputs.size(); ++o) y.push_back({id, static_cast<int32_t>(o)});
    GradBuilder b(out, node.loc);
    std::vector<Value> dx;
    try {
      dx = rule->fn(b, node, node.inputs, y, dy);
    } catch (const Error& e) {
      throw Error(e.code(), ir::with_loc(std::string("[grad of ") + node.op->name + "] " + e.what(), node.loc));
    }
    if (dx.size() != node.inputs.size())
      fail(Code::kInternal, "[{}] gradient rule returned {} gradients for {} inputs", node.op->name, dx.size(),
           node.inputs.size());
    for (size_t i = 0; i < dx.size(); ++i)
      if (dx[i].valid() && depends[static_cast<size_t>(node.inputs[i].node)]) accumulate(node.inputs[i], dx[i], b);
  }
  std::vector<Value> outputs = g.outputs();
  for (const Value& w : wrt) {
    auto it = adjoint.find({w.node, w.index});
    if (it != adjoint.end()) {
      outputs.push_back(it->second);
    } else {
      // Not connected to the output: its gradient is zero.
      GradBuilder b(out, {});
      const TensorMeta& m = g.meta(w);
      outputs.push_back(b.full(0.0, m.dtype, m.shape));
    }
  }
  out.set_outputs(outputs);
  ir::check_json_roundtrip(out, "grad, result");
  return out;
}

}  // namespace spora::autodiff
