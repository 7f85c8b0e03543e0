#include "ir/verifier.h"

#include <algorithm>
#include <set>
#include <vector>

#include "support/error.h"

namespace spora::ir {
namespace {

[[noreturn]] void broken(const Graph& g, size_t id, const Node& n, const std::string& why) {
  const std::string what = n.kind == NodeKind::kApply && n.op ? n.op->name : node_kind_name(n.kind);
  fail(Code::kInvalidArgument, "{}",
       with_loc(fmt::format("[verify] graph '{}' node %{} ({}): {}", g.name(), id, what, why), n.loc));
}

bool same_meta(const TensorMeta& a, const TensorMeta& b) { return a.dtype == b.dtype && a.shape == b.shape; }

// A control-flow sub-graph takes only inputs, one per node input from
// `first` on, of the same types.
void check_params(const Graph& g, size_t id, const Node& n, const Graph& sub, size_t first) {
  if (!sub.weights().empty()) broken(g, id, n, "sub-graph '" + sub.name() + "' has weights");
  const std::vector<int32_t> ins = sub.inputs();
  if (ins.size() + first != n.inputs.size())
    broken(g, id, n, fmt::format("sub-graph '{}' takes {} inputs, the node passes {}", sub.name(), ins.size(),
                                 n.inputs.size() - first));
  for (size_t i = 0; i < ins.size(); ++i)
    if (!same_meta(sub.node(ins[i]).outputs[0], g.meta(n.inputs[first + i])))
      broken(g, id, n, fmt::format("sub-graph '{}' input {} differs in type from the node's", sub.name(), i));
}

std::vector<int64_t> ports(const Node& n, const char* name) {
  const AttrValue* v = n.kind == NodeKind::kApply ? n.attrs.find(name) : nullptr;
  return v && v->type == AttrType::kInts ? v->ints : std::vector<int64_t>{};
}
bool names(const std::vector<int64_t>& list, size_t i) {
  return std::find(list.begin(), list.end(), static_cast<int64_t>(i)) != list.end();
}

// blocked_outputs / blocked_inputs (set by passes/blocked_handoff.cpp): a
// value whose bytes are a kernel's private blocked layout is written and
// read only by kernels that agree on it. Every reader of a blocked output
// names that input blocked and runs on the producer's device, every
// blocked input comes from a blocked output, and no graph output is
// blocked; a pass that broke this would hand blocked bytes to a reader
// expecting NCHW.
void check_blocked(const Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<std::vector<int64_t>> out(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) out[id] = ports(nodes[id], "blocked_outputs");
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    const std::vector<int64_t> in = ports(n, "blocked_inputs");
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const Value v = n.inputs[j];
      const bool written = names(out[static_cast<size_t>(v.node)], static_cast<size_t>(v.index));
      if (written != names(in, j))
        broken(g, id, n,
               fmt::format("input {} (%{}.{}) is {} but its producer writes it {}", j, v.node, v.index,
                           written ? "read as NCHW" : "read blocked", written ? "blocked" : "as NCHW"));
      if (written && nodes[static_cast<size_t>(v.node)].device != n.device)
        broken(g, id, n, fmt::format("input {} is blocked but made on another device", j));
    }
  }
  for (const Value& v : g.outputs())
    if (v.node >= 0 && static_cast<size_t>(v.node) < nodes.size() &&
        names(out[static_cast<size_t>(v.node)], static_cast<size_t>(v.index)))
      broken(g, static_cast<size_t>(v.node), nodes[static_cast<size_t>(v.node)],
             fmt::format("output {} is a graph output but written blocked", v.index));
}

}  // namespace

void verify(const Graph& g) {
  std::set<std::string> names;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    for (const Value& v : n.inputs) {
      if (v.node < 0 || static_cast<size_t>(v.node) >= id)
        broken(g, id, n, fmt::format("input %{} is not an earlier node", v.node));
      if (v.index < 0 || v.index >= static_cast<int32_t>(g.node(v.node).outputs.size()))
        broken(g, id, n, fmt::format("input %{}.{} does not exist", v.node, v.index));
    }
    for (const TensorMeta& m : n.outputs)
      if (!dtype_valid(m.dtype)) broken(g, id, n, "output has an invalid dtype");
    switch (n.kind) {
      case NodeKind::kInput:
      case NodeKind::kWeight:
        if (n.name.empty()) broken(g, id, n, "has no name");
        if (!names.insert(n.name).second) broken(g, id, n, "name '" + n.name + "' is used twice");
        if (n.outputs.size() != 1 || !n.inputs.empty()) broken(g, id, n, "must have no inputs and one output");
        break;
      case NodeKind::kConstant: {
        if (n.outputs.size() != 1 || !n.inputs.empty()) broken(g, id, n, "must have no inputs and one output");
        const size_t want = static_cast<size_t>(n.outputs[0].shape.numel()) * dtype_size(n.outputs[0].dtype);
        if (!n.data || n.data->size() != want)
          broken(g, id, n, fmt::format("holds {} bytes, its type needs {}", n.data ? n.data->size() : 0, want));
        break;
      }
      case NodeKind::kApply: {
        if (!n.op) broken(g, id, n, "has no op");
        TensorMeta metas[kMaxOpInputs];
        if (n.inputs.size() > static_cast<size_t>(kMaxOpInputs)) broken(g, id, n, "too many inputs");
        for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = g.meta(n.inputs[i]);
        OpCall call;
        try {
          infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
        } catch (const Error& e) {
          broken(g, id, n, e.what());
        }
        if (call.num_outputs != static_cast<int>(n.outputs.size()))
          broken(g, id, n, fmt::format("has {} outputs, inference says {}", n.outputs.size(), call.num_outputs));
        for (int i = 0; i < call.num_outputs; ++i)
          if (!same_meta(n.outputs[static_cast<size_t>(i)], {call.out[i].dtype, call.result[i]}))
            broken(g, id, n, fmt::format("output {} is recorded as {} {}, inference says {} {}", i,
                                         dtype_name(n.outputs[static_cast<size_t>(i)].dtype),
                                         n.outputs[static_cast<size_t>(i)].shape.str(), dtype_name(call.out[i].dtype),
                                         call.result[i].str()));
        break;
      }
      case NodeKind::kIf: {
        if (n.subgraphs.size() != 2 || !n.subgraphs[0] || !n.subgraphs[1])
          broken(g, id, n, "needs a then and an else graph");
        if (n.inputs.empty() || g.meta(n.inputs[0]).dtype != SPORA_DTYPE_BOOL || g.meta(n.inputs[0]).shape.numel() != 1)
          broken(g, id, n, "first input must be a bool scalar");
        for (const auto& sub : n.subgraphs) {
          verify(*sub);
          check_params(g, id, n, *sub, 1);
          if (sub->outputs().size() != n.outputs.size()) broken(g, id, n, "branch outputs do not match");
          for (size_t i = 0; i < n.outputs.size(); ++i)
            if (!same_meta(sub->meta(sub->outputs()[i]), n.outputs[i])) broken(g, id, n, "branch output types differ");
        }
        break;
      }
      case NodeKind::kWhile: {
        if (n.subgraphs.size() != 2 || !n.subgraphs[0] || !n.subgraphs[1])
          broken(g, id, n, "needs a cond and a body graph");
        const Graph &cond = *n.subgraphs[0], &body = *n.subgraphs[1];
        verify(cond);
        verify(body);
        check_params(g, id, n, cond, 0);
        check_params(g, id, n, body, 0);
        if (cond.outputs().size() != 1 || cond.meta(cond.outputs()[0]).dtype != SPORA_DTYPE_BOOL ||
            cond.meta(cond.outputs()[0]).shape.numel() != 1)
          broken(g, id, n, "cond must return one bool scalar");
        if (body.outputs().size() != n.inputs.size() || n.outputs.size() != n.inputs.size())
          broken(g, id, n, "body must map the loop-carried values to themselves");
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          if (!same_meta(body.meta(body.outputs()[i]), g.meta(n.inputs[i])))
            broken(g, id, n, fmt::format("loop-carried value {} changes type in the body", i));
          if (!same_meta(n.outputs[i], g.meta(n.inputs[i])))
            broken(g, id, n, fmt::format("output {} differs in type from loop-carried value {}", i, i));
        }
        break;
      }
    }
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value v = g.outputs()[i];
    if (v.node < 0 || v.node >= static_cast<int32_t>(g.nodes().size()) || v.index < 0 ||
        v.index >= static_cast<int32_t>(g.node(v.node).outputs.size()))
      fail(Code::kInvalidArgument, "[verify] graph '{}' output {} refers to a missing value", g.name(), i);
  }
  check_blocked(g);
}

}  // namespace spora::ir
