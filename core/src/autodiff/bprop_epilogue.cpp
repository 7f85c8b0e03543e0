// Gradient rules of the epilogue-fused ops (core/src/ops/epilogue.cpp):
// linear_act, linear_add_act, conv2d_act, conv2d_add_act.
//
// y = act(pre), pre = base(x, w, b) [+ r]. The adjoint of pre comes from y
// wherever the activation allows it, so the base op is not recomputed:
//   relu:    dy where y > 0 (y > 0 exactly where pre > 0, NaN included)
//   sigmoid: dy * y * (1 - y)      tanh: dy * (1 - y^2)      none: dy
// gelu needs pre itself: it is rebuilt (the op's decomposition without the
// activation) and gelu's own rule is applied. The base op's rule (linear's
// or conv2d_bias's) then gives dx, dw, db; the residual's adjoint is dpre.
// Everything is built from ops with rules of their own (higher order works).
#include <string>

#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"
#include "ir/op.h"
#include "support/error.h"

namespace spora::autodiff {
namespace {

bool is_conv(const ir::Node& n) { return n.op->name.compare(0, 6, "conv2d") == 0; }

// A node standing for the base op (linear or conv2d_bias) of `n`: the rules
// read only its op and attributes.
ir::Node base_node(const ir::Node& n) {
  ir::Node base;
  base.kind = ir::NodeKind::kApply;
  base.op = OpRegistry::get().find(is_conv(n) ? "conv2d_bias" : "linear");
  if (!base.op) fail(Code::kInternal, "[{}] base op not registered", n.op->name);
  for (const auto& [name, v] : n.attrs.items())
    if (name != "activation") base.attrs.set(name, v);
  base.loc = n.loc;
  return base;
}

V epilogue_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const AttrValue* a = n.attrs.find("activation");
  const std::string act = a ? a->s : "none";
  const ir::Node base = base_node(n);
  Value g = dy[0];
  if (act == "relu") {
    g = b.op("where", {b.op("greater", {y[0], k(b, 0, y[0])}), g, k(b, 0, g)});
  } else if (act == "sigmoid") {
    g = mul(b, g, mul(b, y[0], sub(b, k(b, 1, y[0]), y[0])));
  } else if (act == "tanh") {
    g = mul(b, g, sub(b, k(b, 1, y[0]), mul(b, y[0], y[0])));
  } else if (act == "gelu" || act == "gelu_tanh") {
    Value pre = b.op(base.op->name.c_str(), {x[0], x[1], x[2]}, base.attrs);
    if (x.size() == 4) pre = add(b, pre, x[3]);
    ir::Node gelu;
    gelu.kind = ir::NodeKind::kApply;
    gelu.op = OpRegistry::get().find("gelu");
    gelu.attrs.set("approximate", AttrValue::of_string(act == "gelu" ? "none" : "tanh"));
    gelu.loc = n.loc;
    const BpropEntry* rule = find_bprop("gelu");
    if (!gelu.op || !rule || !rule->fn) fail(Code::kInternal, "[{}] gelu has no gradient rule", n.op->name);
    g = rule->fn(b, gelu, {pre}, {y[0]}, {g})[0];
  } else if (act != "none") {
    fail(Code::kInternal, "[{}] no gradient for activation \"{}\"", n.op->name, act);
  }
  const BpropEntry* rule = find_bprop(base.op->name);
  if (!rule || !rule->fn) fail(Code::kInternal, "[{}] {} has no gradient rule", n.op->name, base.op->name);
  V d = rule->fn(b, base, {x[0], x[1], x[2]}, {}, {g});
  if (x.size() == 4) d.push_back(g);
  return d;
}

void register_rules() {
  for (const char* op : {"linear_act", "linear_add_act", "conv2d_act", "conv2d_add_act"})
    register_bprop(op, epilogue_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
