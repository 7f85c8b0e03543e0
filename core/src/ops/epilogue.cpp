// Matmul/conv epilogue fusion ops: a linear layer or a biased convolution
// with its activation (and optionally a residual add) applied to the result
// before it is written, which oneDNN does as primitive post-ops in one pass
// over the output.
//
//   linear_act(x, w, b)            = act(linear(x, w, b))
//   linear_add_act(x, w, b, r)     = act(linear(x, w, b) + r)
//   conv2d_act(x, w, b)            = act(conv2d_bias(x, w, b))
//   conv2d_add_act(x, w, b, r)     = act(conv2d_bias(x, w, b) + r)
//
// attribute activation: "relu" | "gelu" (erf form) | "gelu_tanh" | "sigmoid"
// | "tanh" | "none". The residual is added before the activation (ResNet's
// relu(conv(x) + b + shortcut)); with activation "none" it is a plain
// residual add. The conv ops take conv2d's attributes as well.
//
// Four ops rather than one op with an optional input: the registry has fixed
// input counts, and a distinct name lets a plugin plan the residual (a
// oneDNN binary or sum post-op) without inspecting descriptors, as
// conv2d/conv2d_bias already do for the bias.
//
// Contract with kernels: inference is linear's and conv2d_bias's (kernels see
// linear's x flattened to [M, K] and y as [M, N], conv operands as rank 4
// with canonical attributes); the residual has exactly the output's shape
// and dtype and is presented to kernels in the output's kernel shape ([M, N]
// for linear). All operands share one float dtype.
//
// The epilogue_fusion pass (core/src/passes/epilogue_fusion.cpp) makes these
// ops; every device without a kernel runs the decomposition below. Each op
// is registered with its decomposition and its gradient rule.
//
// Gradient: y = act(pre), pre = base(x, w, b) [+ r]. The adjoint of pre
// comes from y wherever the activation allows it, so the base op is not
// recomputed:
//   relu:    dy where y > 0 (y > 0 exactly where pre > 0, NaN included)
//   sigmoid: dy * y * (1 - y)      tanh: dy * (1 - y^2)      none: dy
// gelu needs pre itself: it is rebuilt (the op's decomposition without the
// activation) and gelu's own rule is applied. The base op's rule (linear's
// or conv2d_bias's) then gives dx, dw, db; the residual's adjoint is dpre.
// Everything is built from ops with rules of their own (higher order works).
#include <string>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};
const char* const kActivations[] = {"none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"};

bool is_conv(const OpDef& op) { return op.name.compare(0, 6, "conv2d") == 0; }

// The op the fused one extends.
const OpDef& base_op(const OpDef& op) {
  static const OpDef* linear = OpRegistry::get().find("linear");
  static const OpDef* conv = OpRegistry::get().find("conv2d_bias");
  const OpDef* b = is_conv(op) ? conv : linear;
  if (!b) fail(Code::kInternal, "[{}] the base op is not registered", op.name);
  return *b;
}

void check_activation(const OpDef& op, const Attrs& a) {
  const AttrValue* v = a.find("activation");
  const std::string s = v ? v->s : "";
  for (const char* ok : kActivations)
    if (s == ok) return;
  fail(Code::kInvalidArgument,
       "[{}] activation must be \"relu\", \"gelu\", \"gelu_tanh\", \"sigmoid\", \"tanh\" or \"none\", got \"{}\"",
       op.name, s);
}

void infer_epilogue(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_activation(op, call.attrs);
  const int n = call.num_inputs;
  // The base op's inference, naming this op in its messages; conv2d's reads
  // num_inputs to know there is a bias, and ignores the extra attribute.
  call.num_inputs = 3;
  base_op(op).infer(op, in, call);
  call.num_inputs = n;
  if (n == 4) {
    const TensorMeta& r = in[3];
    if (r.shape != call.result[0])
      fail(Code::kInvalidArgument, "[{}] residual has shape {}, but the output's shape is {} (it must match exactly)",
           op.name, r.shape.str(), call.result[0].str());
    call.in[3] = {r.dtype, call.out[0].shape};
  }
}

Cost epilogue_cost(const OpCall& call) {
  // The base op's work plus one pass of elementwise arithmetic; the fused
  // epilogue reads the residual but writes the output only once.
  Cost c;
  const double out = static_cast<double>(call.out[0].shape.numel());
  const double es = static_cast<double>(dtype_size(call.out[0].dtype));
  if (call.in[0].shape.rank == 2) {  // linear: x [M, K], w [N, K]
    const double m = static_cast<double>(call.in[0].shape[0]), k = static_cast<double>(call.in[0].shape[1]),
                 nn = static_cast<double>(call.in[1].shape[0]);
    c.flops = 2 * m * nn * k;
  } else {  // conv: every output element meets one group's weights
    const Shape& w = call.in[1].shape;
    c.flops = 2.0 * out * static_cast<double>(w[1]) * static_cast<double>(w[2]) * static_cast<double>(w[3]);
  }
  c.flops += out * (call.num_inputs == 4 ? 3 : 2);
  for (int i = 0; i < call.num_inputs; ++i) c.bytes += static_cast<double>(call.in[i].shape.numel()) * es;
  c.bytes += out * es;
  return c;
}

std::vector<AttrSpec> conv_attrs() {
  return {{"stride", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
          {"pad_mode", AttrType::kString, false, AttrValue::of_string("explicit")},
          {"dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"groups", AttrType::kInt, false, AttrValue::of_int(1)}};
}

// ---- decomposition -------------------------------------------------------------

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

Value activation(ir::Builder& b, Value y, const std::string& act) {
  if (act == "none") return y;
  if (act == "gelu" || act == "gelu_tanh") {
    Attrs a;
    a.set("approximate", AttrValue::of_string(act == "gelu" ? "none" : "tanh"));
    return b.op("gelu", {y}, a);
  }
  return b.op(act.c_str(), {y});
}

Attrs without_activation(const Attrs& a) {
  Attrs out;
  for (const auto& [name, v] : a.items())
    if (name != "activation") out.set(name, v);
  return out;
}

V decompose(ir::Builder& b, const V& x, const Attrs& a, bool conv) {
  Value y = b.op(conv ? "conv2d_bias" : "linear", {x[0], x[1], x[2]}, conv ? without_activation(a) : Attrs());
  if (x.size() == 4) y = b.op("add", {y, x[3]});
  const AttrValue* act = a.find("activation");
  return {activation(b, y, act ? act->s : "none")};
}

V decompose_linear(ir::Builder& b, const V& x, const Attrs& a) { return decompose(b, x, a, false); }
V decompose_conv(ir::Builder& b, const V& x, const Attrs& a) { return decompose(b, x, a, true); }

// ---- gradient rule -------------------------------------------------------------

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
    if (!gelu.op || !gelu.op->bprop) fail(Code::kInternal, "[{}] gelu has no gradient rule", n.op->name);
    g = gelu.op->bprop(b, gelu, {pre}, {y[0]}, {g})[0];
  } else if (act != "none") {
    fail(Code::kInternal, "[{}] no gradient for activation \"{}\"", n.op->name, act);
  }
  if (!base.op->bprop) fail(Code::kInternal, "[{}] {} has no gradient rule", n.op->name, base.op->name);
  V d = base.op->bprop(b, base, {x[0], x[1], x[2]}, {}, {g});
  if (x.size() == 4) d.push_back(g);
  return d;
}

// ---- registration --------------------------------------------------------------

OpDef def(const char* name, bool conv, bool residual, const char* doc) {
  OpDef d;
  d.name = name;
  d.inputs = {"x", "w", "b"};
  if (residual) d.inputs.push_back("residual");
  d.outputs = {"y"};
  if (conv) d.attrs = conv_attrs();
  d.attrs.push_back({"activation", AttrType::kString, false, AttrValue::of_string("none")});
  d.dtypes = kFloat;
  d.infer = infer_epilogue;
  d.doc = doc;
  d.cost = epilogue_cost;
  Rules{epilogue_bp, conv ? decompose_conv : decompose_linear}.apply(d);
  return d;
}

void register_epilogue_ops(OpRegistry& r) {
  r.add(def("linear_act", false, false,
            "act(x @ w^T + b): linear with a fused activation (relu, gelu, gelu_tanh, sigmoid, tanh, none)"));
  r.add(def("linear_add_act", false, true,
            "act(x @ w^T + b + residual): linear with a fused residual add and activation; residual has the "
            "output's shape"));
  r.add(def("conv2d_act", true, false,
            "act(conv2d(x, w) + b): conv2d_bias with a fused activation (relu, gelu, gelu_tanh, sigmoid, tanh, "
            "none)"));
  r.add(def("conv2d_add_act", true, true,
            "act(conv2d(x, w) + b + residual): conv2d_bias with a fused residual add and activation (ResNet "
            "order); residual has the output's shape"));
}
SPORA_OP_FAMILY(register_epilogue_ops);

}  // namespace
}  // namespace spora
