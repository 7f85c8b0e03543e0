// Epilogue fusion: a linear layer or biased convolution followed by an
// activation and/or a residual add becomes one op that a plugin runs as a
// single primitive with post-ops (core/src/ops/epilogue.cpp):
//
//   act(linear(x, w, b))              -> linear_act(x, w, b)
//   act(linear(x, w, b) + r)          -> linear_add_act(x, w, b, r)
//   linear(x, w, b) + r               -> linear_add_act(x, w, b, r), activation "none"
//   (the same for conv2d_bias -> conv2d_act / conv2d_add_act)
//
// act is relu, gelu (either form), sigmoid or tanh. Every intermediate must
// have exactly one consumer (and not be a graph output): the fused op does
// not produce it. The add may take its operands in either order; r must have
// the sum's shape and dtype (an add that broadcasts stays unfused).
//
// Training graphs: relu's gradient rule reads its input, greater(pre, 0),
// which would give the pre-activation a second consumer. relu(pre) > 0
// exactly where pre > 0 (NaN included: both are false), so such a
// comparison that comes after the relu is rewritten to read the relu's
// output, and the fusion goes ahead. sigmoid's and tanh's rules read the
// output already; gelu's reads the pre-activation, so gelu stays unfused in
// training graphs.
//
// The result is the same as the unfused ops': bit-identical with the
// reference kernels; with oneDNN post-ops f32 agrees to rounding of the
// activation, and bf16 rounds once instead of after every op.
#include <cstring>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

bool is_activation(const Node& n) {
  if (n.kind != NodeKind::kApply) return false;
  const std::string& op = n.op->name;
  return op == "relu" || op == "gelu" || op == "sigmoid" || op == "tanh";
}

std::string activation_name(const Node& n) {
  if (n.op->name != "gelu") return n.op->name;
  const AttrValue* a = n.attrs.find("approximate");
  return a && a->s == "tanh" ? "gelu_tanh" : "gelu";
}

// True if `v` is a float constant whose every element is +0 or -0.
bool is_zero_constant(const Graph& g, Value v) {
  const Node& n = g.node(v.node);
  if (n.kind != NodeKind::kConstant || !n.data) return false;
  const TensorMeta& m = n.outputs[0];
  const size_t es = dtype_size(m.dtype);
  if (!dtype_is_float(m.dtype) || m.shape.numel() == 0) return false;
  const uint8_t* p = n.data->data();
  for (int64_t i = 0; i < m.shape.numel(); ++i) {
    // Every byte zero except the sign bit (the top bit of the last byte).
    for (size_t b = 0; b < es; ++b) {
      const uint8_t mask = b + 1 == es ? 0x7f : 0xff;
      if (p[static_cast<size_t>(i) * es + b] & mask) return false;
    }
  }
  return true;
}

struct Fusion {
  int32_t base = -1;      // linear / conv2d_bias
  int32_t add = -1;       // the residual add, or -1
  int32_t act = -1;       // the activation, or -1
  Value residual;         // the add's other operand
  int32_t last() const { return act >= 0 ? act : add; }
};

bool epilogue_fusion(Graph& g, const PassContext&) {
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  // Consumers of every value (node ids, one entry per input slot) and graph
  // outputs, which count as consumers the fused op cannot serve.
  std::vector<std::vector<std::vector<int32_t>>> users(n);
  for (size_t id = 0; id < n; ++id) users[id].resize(nodes[id].outputs.size());
  for (size_t id = 0; id < n; ++id)
    for (const Value& v : nodes[id].inputs)
      users[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)].push_back(static_cast<int32_t>(id));
  std::vector<bool> is_output(n, false);
  for (const Value& v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;
  auto users_of = [&](Value v) -> const std::vector<int32_t>& {
    return users[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
  };

  // The single consumer of `v` apart from greater(v, 0) comparisons that a
  // relu consumer can serve (collected in `redirect`), or -1.
  auto sole_user = [&](Value v, bool allow_relu_masks, std::vector<int32_t>* redirect) -> int32_t {
    if (is_output[static_cast<size_t>(v.node)]) return -1;
    const auto& us = users_of(v);
    int32_t relu = -1;
    if (allow_relu_masks)
      for (int32_t u : us)
        if (is_apply(nodes[static_cast<size_t>(u)], "relu")) relu = u;
    int32_t sole = -1;
    std::vector<int32_t> masks;
    for (int32_t u : us) {
      const Node& un = nodes[static_cast<size_t>(u)];
      if (relu >= 0 && u > relu && is_apply(un, "greater") && un.inputs[0] == v && un.inputs[1] != v &&
          is_zero_constant(g, un.inputs[1])) {
        masks.push_back(u);
        continue;
      }
      if (sole >= 0) return -1;  // a second consumer (or the same one twice)
      sole = u;
    }
    if (!masks.empty() && sole != relu) return -1;
    if (redirect) *redirect = masks;
    return sole;
  };

  std::vector<Fusion> fusions;
  std::vector<int32_t> role(n, -1);            // node -> fusion index it belongs to
  std::vector<int32_t> mask_of(n, -1);         // greater node -> fusion whose output it now reads
  for (size_t id = 0; id < n; ++id) {
    const Node& b = nodes[id];
    if (!(is_apply(b, "linear") || is_apply(b, "conv2d_bias")) || !dtype_is_float(b.outputs[0].dtype)) continue;
    Fusion f;
    f.base = static_cast<int32_t>(id);
    Value cur{f.base, 0};
    std::vector<int32_t> masks;
    int32_t next = sole_user(cur, true, &masks);
    // A node joins one fusion only (add(linear(a), linear(b)): the first).
    if (next >= 0 && role[static_cast<size_t>(next)] >= 0) continue;
    if (next >= 0 && is_apply(nodes[static_cast<size_t>(next)], "add")) {
      const Node& a = nodes[static_cast<size_t>(next)];
      const Value other = a.inputs[0] == cur ? a.inputs[1] : a.inputs[0];
      const TensorMeta &om = g.meta(other), &am = a.outputs[0];
      if (other != cur && masks.empty() && om.dtype == am.dtype && om.shape == am.shape &&
          am.shape == b.outputs[0].shape) {
        f.add = next;
        f.residual = other;
        cur = {next, 0};
        next = sole_user(cur, true, &masks);
      }
    }
    if (next >= 0 && role[static_cast<size_t>(next)] < 0 && is_activation(nodes[static_cast<size_t>(next)])) {
      f.act = next;
    } else {
      masks.clear();
    }
    if (f.last() < 0) continue;
    const int32_t k = static_cast<int32_t>(fusions.size());
    for (int32_t m : masks) mask_of[static_cast<size_t>(m)] = k;
    role[id] = k;
    if (f.add >= 0) role[static_cast<size_t>(f.add)] = k;
    if (f.act >= 0) role[static_cast<size_t>(f.act)] = k;
    fusions.push_back(f);
  }
  if (fusions.empty()) return false;

  ir::Rewriter rw(g);
  std::vector<Value> fused_out(fusions.size());
  for (size_t id = 0; id < n; ++id) {
    const int32_t k = role[id];
    if (k < 0) {
      if (mask_of[id] >= 0) {
        // greater(pre, 0) -> greater(relu(pre), 0): the fused op's output.
        Node c = nodes[id];
        c.inputs = {fused_out[static_cast<size_t>(mask_of[id])], rw.map(c.inputs[1])};
        const int32_t nid = rw.out().append(std::move(c));
        rw.set({static_cast<int32_t>(id), 0}, {nid, 0});
        continue;
      }
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    const Fusion& f = fusions[static_cast<size_t>(k)];
    if (static_cast<int32_t>(id) != f.last()) continue;  // emitted with the last node of the pattern
    const Node& b = nodes[static_cast<size_t>(f.base)];
    const bool conv = b.op->name == "conv2d_bias";
    std::vector<Value> in;
    for (const Value& v : b.inputs) in.push_back(rw.map(v));
    if (f.add >= 0) in.push_back(rw.map(f.residual));
    Attrs attrs = b.attrs;
    const std::string act = f.act >= 0 ? activation_name(nodes[static_cast<size_t>(f.act)]) : "none";
    attrs.set("activation", AttrValue::of_string(act));
    const bool res = f.add >= 0;
    const char* op = conv ? (res ? "conv2d_add_act" : "conv2d_act") : (res ? "linear_add_act" : "linear_act");
    const Value out = rw.out().add_op(op, in, attrs, b.loc)[0];
    Node& fn = rw.out().mutable_node(out.node);
    fn.device = b.device;
    fn.name = b.name;
    fused_out[static_cast<size_t>(k)] = out;
    rw.set({static_cast<int32_t>(id), 0}, out);
  }
  g = rw.finish();
  return true;
}

}  // namespace

SPORA_PASS("epilogue_fusion", 1, epilogue_fusion, {"shape_inference"});

}  // namespace spora::passes
