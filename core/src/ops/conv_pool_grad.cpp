// conv2d_act_pool_grad: the backward pass of conv2d_act_pool (relu or no
// activation) as one op, so that a plugin can build the activation's
// gradient once, in the layout its backward convolutions read (oneDNN:
// nChw16c on AVX-512, nChw8c on AVX2), and hand that one copy to both of
// them (issue 19's layout selection; the pass is
// passes/conv_pool_grad_fusion.cpp). Unfused, max_pool2d_grad, the relu
// mask (greater, where) and the bias gradient (sum) each ran over the NCHW
// activation and the two convolution gradients each reordered it.
//
//   g  = where(a > 0, max_pool2d_grad(a, dy), 0)    (activation "relu")
//   g  = max_pool2d_grad(a, dy)                      (activation "none")
//   conv2d_act_pool_grad(x, w, a, dy) = conv2d_grad_weight(x, g),
//                                       sum(g, axes [0, 2, 3]),
//                                       [conv2d_grad_input(g, w) when input_grad]
//
// x and w are the convolution's input and weight, a its activation (the
// relu's output) and dy the gradient of the pooled result. Attributes:
// conv2d's (stride, padding, pad_mode, dilation, groups), activation, the
// max pooling's prefixed "pool_" as in conv2d_act_pool, and input_grad
// (output 2, the input's gradient, exists only then: the first layer of a
// network needs none). Inference checks every part through the parts' own
// inference and stores their canonical attributes.
//
// Every device without a kernel runs the decomposition above; the gradient
// is the decomposition's (rules::vjp_of).
#include <string>
#include <vector>

#include "ir/op.h"
#include "ops/conv_pool_parts.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

constexpr const char* kOp = "conv2d_act_pool_grad";

using conv_pool::pool_part;
const OpDef& registered(const char* name) { return conv_pool::registered(kOp, name); }
Attrs conv_part(const Attrs& a) { return conv_pool::conv_part(a, false); }

bool input_grad(const Attrs& a) {
  const AttrValue* v = a.find("input_grad");
  return v && v->i != 0;
}
std::string activation(const Attrs& a) {
  const AttrValue* v = a.find("activation");
  return v ? v->s : "none";
}
Attrs with_shape(Attrs a, const char* name, const Shape& s) {
  a.set(name, AttrValue::of_ints(rules::dims_of(s)));
  return a;
}

void infer_conv_pool_grad(const OpDef&, const TensorMeta* in, OpCall& call) {
  const std::string act = activation(call.attrs);
  if (act != "relu" && act != "none")
    fail(Code::kInvalidArgument, "[{}] activation must be \"relu\" or \"none\", got \"{}\"", kOp, act);
  const TensorMeta &x = in[0], &w = in[1], &a = in[2], &dy = in[3];
  // The forward convolution fixes the activation's shape and canonicalises
  // the convolution's attributes.
  OpCall conv;
  const TensorMeta xw[2] = {x, w};
  infer_call(registered("conv2d"), xw, 2, conv_part(call.attrs), conv);
  if (conv.result[0] != a.shape)
    fail(Code::kInvalidArgument, "[{}] a has shape {}, the convolution of x {} and w {} gives {}", kOp,
         a.shape.str(), x.shape.str(), w.shape.str(), conv.result[0].str());
  OpCall pool;
  const TensorMeta ady[2] = {a, dy};
  infer_call(registered("max_pool2d_grad"), ady, 2, pool_part(call.attrs), pool);
  const TensorMeta g{a.dtype, a.shape};
  OpCall gw;
  const TensorMeta xg[2] = {x, g};
  infer_call(registered("conv2d_grad_weight"), xg, 2, with_shape(conv.attrs, "weight_shape", w.shape), gw);
  const bool dx = input_grad(call.attrs);
  Attrs attrs;
  for (const auto& [name, v] : conv.attrs.items()) attrs.set(name, v);
  for (const auto& [name, v] : pool.attrs.items()) attrs.set("pool_" + name, v);
  attrs.set("activation", AttrValue::of_string(act));
  attrs.set("input_grad", AttrValue::of_bool(dx));
  conv_pool::keep_blocked_ports(kOp, call.attrs, attrs, "blocked_inputs", {0, 2, 3});
  conv_pool::keep_blocked_ports(kOp, call.attrs, attrs, "blocked_outputs", dx ? std::vector<int64_t>{2}
                                                                              : std::vector<int64_t>{});
  call.attrs = attrs;
  for (int i = 0; i < 4; ++i) call.in[i] = in[i];
  call.num_outputs = dx ? 3 : 2;
  call.out[0] = {x.dtype, w.shape};
  call.result[0] = w.shape;
  Shape b;
  b.push_back(w.shape.dims[0]);
  call.out[1] = {x.dtype, b};
  call.result[1] = b;
  if (dx) {
    call.out[2] = x;
    call.result[2] = x.shape;
  }
}

Cost conv_pool_grad_cost(const OpCall& call) {
  // The convolution gradients' work (one for the weight, one more for the
  // input when asked) plus a pass over the activation.
  Cost c;
  const Shape &w = call.in[1].shape, &a = call.in[2].shape;
  const double act = static_cast<double>(a.numel());
  const double macs = act * static_cast<double>(w.dims[1] * w.dims[2] * w.dims[3]);
  c.flops = 2.0 * macs * (input_grad(call.attrs) ? 2 : 1) + 3 * act;
  const double es = static_cast<double>(dtype_size(call.out[0].dtype));
  for (int i = 0; i < call.num_inputs; ++i) c.bytes += static_cast<double>(call.in[i].shape.numel()) * es;
  for (int i = 0; i < call.num_outputs; ++i) c.bytes += static_cast<double>(call.out[i].shape.numel()) * es;
  return c;
}

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

V decompose_conv_pool_grad(ir::Builder& b, const V& x, const Attrs& a) {
  Value g = b.op("max_pool2d_grad", {x[2], x[3]}, pool_part(a));
  if (activation(a) == "relu") g = b.op("where", {b.op("greater", {x[2], k(b, 0, x[2])}), g, k(b, 0, g)});
  const Attrs conv = conv_part(a);
  V out{b.op("conv2d_grad_weight", {x[0], g}, with_shape(conv, "weight_shape", b.meta(x[1]).shape)),
        sum_axes(b, g, {0, 2, 3}, false)};
  if (input_grad(a))
    out.push_back(b.op("conv2d_grad_input", {g, x[1]}, with_shape(conv, "input_shape", b.meta(x[0]).shape)));
  return out;
}

V conv_pool_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Attrs attrs = n.attrs;
  // The decomposition would read a's bytes as NCHW on a device whose
  // kernel wrote them blocked.
  if (conv_pool::any_blocked(attrs))
    fail(Code::kUnimplemented, "[{}] no gradient with blocked_inputs or blocked_outputs: differentiate before optimising",
         kOp);
  return vjp_of(b, n, x, y, dy,
                [attrs](GradBuilder& sb, const V& sx) { return decompose_conv_pool_grad(sb, sx, attrs); });
}

void register_conv_pool_grad_ops(OpRegistry& r) {
  OpDef d;
  d.name = kOp;
  d.inputs = {"x", "w", "a", "dy"};
  d.outputs = {"dw"};
  d.attrs = conv_pool::attr_specs("relu");
  d.attrs.push_back({"input_grad", AttrType::kBool, false, AttrValue::of_bool(true)});
  d.dtypes = conv_pool::float_dtypes();
  d.infer = infer_conv_pool_grad;
  d.doc =
      "conv2d_act_pool's backward pass (relu or none): g = act'(a) * max_pool2d_grad(a, dy); outputs "
      "conv2d_grad_weight(x, g), sum(g, [0, 2, 3]) and, with input_grad, conv2d_grad_input(g, w). "
      "blocked_inputs (0: x, 2: a, 3: dy) and blocked_outputs (2: dx), set by blocked_handoff only, make those "
      "operands' bytes the device kernel's private blocked layout, agreed with their producer or readers "
      "(docs/cpu-layouts.md); the decomposition ignores them";
  d.dynamic_outputs = true;
  d.cost = conv_pool_grad_cost;
  Rules{conv_pool_grad_bp, decompose_conv_pool_grad}.apply(d);
  r.add(std::move(d));
}
SPORA_OP_FAMILY(register_conv_pool_grad_ops);

}  // namespace
}  // namespace spora
