// conv2d_act_pool: a biased convolution with its activation followed by a
// max pooling, as one op, so that a plugin can keep the activation in the
// layout its convolution writes (oneDNN: nChw16c / NHWC on AVX-512, nChw8c
// on AVX2) for the pooling and reorder only the op's results to NCHW
// (issue 19's layout selection; the pass is passes/conv_pool_fusion.cpp).
//
//   conv2d_act_pool(x, w, b)  = max_pool2d(conv2d_act(x, w, b))
//                               [, conv2d_act(x, w, b) when keep_activation]
//
// Attributes: conv2d_act's (stride, padding, pad_mode, dilation, groups,
// activation) and max_pool2d's prefixed with "pool_" (pool_kernel_size,
// pool_stride, pool_padding, pool_dilation, pool_ceil_mode); both are
// canonicalised by the two ops' own inference. keep_activation adds the
// activation as output 1 (training graphs read it in max_pool2d_grad and
// the relu mask), so the op has one or two outputs.
//
// Every device without a kernel runs the decomposition (the two ops). The
// gradient is max_pool2d's rule followed by conv2d_act's, on the kept
// activation or, without it, on a recomputed one.
#include <string>
#include <vector>

#include "ir/op.h"
#include "ops/conv_pool_parts.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

using conv_pool::pool_part;
const OpDef& registered(const char* name) { return conv_pool::registered("conv2d_act_pool", name); }
Attrs conv_part(const Attrs& a) { return conv_pool::conv_part(a, true); }

bool keeps_activation(const Attrs& a) {
  const AttrValue* v = a.find("keep_activation");
  return v && v->i != 0;
}

void infer_conv_pool(const OpDef&, const TensorMeta* in, OpCall& call) {
  OpCall conv, pool;
  infer_call(registered("conv2d_act"), in, 3, conv_part(call.attrs), conv);
  const TensorMeta act{conv.out[0].dtype, conv.result[0]};
  infer_call(registered("max_pool2d"), &act, 1, pool_part(call.attrs), pool);
  const bool keep = keeps_activation(call.attrs);
  // The canonical attributes of both parts, so that kernels and the
  // decomposition see what conv2d_act and max_pool2d would.
  Attrs a;
  for (const auto& [name, v] : conv.attrs.items()) a.set(name, v);
  for (const auto& [name, v] : pool.attrs.items()) a.set("pool_" + name, v);
  a.set("keep_activation", AttrValue::of_bool(keep));
  conv_pool::keep_blocked_ports("conv2d_act_pool", call.attrs, a, "blocked_inputs", {0});
  conv_pool::keep_blocked_ports("conv2d_act_pool", call.attrs, a, "blocked_outputs",
                                keep ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  call.attrs = a;
  for (int i = 0; i < 3; ++i) call.in[i] = conv.in[i];
  call.num_outputs = keep ? 2 : 1;
  call.out[0] = pool.out[0];
  call.result[0] = pool.result[0];
  if (keep) {
    call.out[1] = conv.out[0];
    call.result[1] = conv.result[0];
  }
}

Cost conv_pool_cost(const OpCall& call) {
  // The convolution's work on the activation (taken from the pooled shape
  // times the pooling stride's area: an estimate) plus one compare per
  // pooled element and window position.
  Cost c;
  const auto& ks = call.attrs.get_ints("pool_kernel_size");
  const auto& st = call.attrs.get_ints("pool_stride");
  const double pooled = static_cast<double>(call.out[0].shape.numel());
  const double act = pooled * static_cast<double>(st[0] * st[1]);
  const Shape& w = call.in[1].shape;
  c.flops = 2.0 * act * static_cast<double>(w[1] * w[2] * w[3]) + 2 * act + pooled * static_cast<double>(ks[0] * ks[1]);
  const double es = static_cast<double>(dtype_size(call.out[0].dtype));
  for (int i = 0; i < call.num_inputs; ++i) c.bytes += static_cast<double>(call.in[i].shape.numel()) * es;
  for (int i = 0; i < call.num_outputs; ++i) c.bytes += static_cast<double>(call.out[i].shape.numel()) * es;
  return c;
}

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

V decompose_conv_pool(ir::Builder& b, const V& x, const Attrs& a) {
  const Value act = b.op("conv2d_act", {x[0], x[1], x[2]}, conv_part(a));
  const Value y = b.op("max_pool2d", {act}, pool_part(a));
  if (keeps_activation(a)) return {y, act};
  return {y};
}

// A node standing for one part: the parts' rules read only its op,
// attributes and location.
ir::Node part_node(const char* op, const Attrs& attrs, const ir::Node& n) {
  ir::Node part;
  part.kind = ir::NodeKind::kApply;
  part.op = &registered(op);
  part.attrs = attrs;
  part.loc = n.loc;
  return part;
}

V conv_pool_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  // Operands in a kernel's blocked layout (blocked_handoff): the rule's ops
  // would read them as NCHW.
  if (conv_pool::any_blocked(n.attrs))
    fail(Code::kUnimplemented, "[conv2d_act_pool] no gradient with blocked_inputs/blocked_outputs: differentiate "
                               "before optimising");
  const bool keep = keeps_activation(n.attrs);
  const Attrs conv_attrs = conv_part(n.attrs);
  Value act = keep ? y[1] : Value{};
  Value dact;
  if (dy[0].valid()) {
    if (!act.valid()) act = b.op("conv2d_act", {x[0], x[1], x[2]}, conv_attrs);
    const ir::Node pool = part_node("max_pool2d", pool_part(n.attrs), n);
    if (!pool.op->bprop) fail(Code::kInternal, "[conv2d_act_pool] max_pool2d has no gradient rule");
    dact = pool.op->bprop(b, pool, {act}, {y[0]}, {dy[0]})[0];
  }
  if (keep && dy.size() > 1 && dy[1].valid()) dact = dact.valid() ? add(b, dact, dy[1]) : dy[1];
  if (!dact.valid()) return {Value{}, Value{}, Value{}};
  if (!act.valid()) act = b.op("conv2d_act", {x[0], x[1], x[2]}, conv_attrs);
  const ir::Node conv = part_node("conv2d_act", conv_attrs, n);
  if (!conv.op->bprop) fail(Code::kInternal, "[conv2d_act_pool] conv2d_act has no gradient rule");
  return conv.op->bprop(b, conv, {x[0], x[1], x[2]}, {act}, {dact});
}

void register_conv_pool_ops(OpRegistry& r) {
  OpDef d;
  d.name = "conv2d_act_pool";
  d.inputs = {"x", "w", "b"};
  d.outputs = {"y"};
  d.attrs = conv_pool::attr_specs("none");
  d.attrs.push_back({"keep_activation", AttrType::kBool, false, AttrValue::of_bool(false)});
  d.dtypes = conv_pool::float_dtypes();
  d.infer = infer_conv_pool;
  d.doc =
      "max_pool2d(conv2d_act(x, w, b)) as one op (conv2d_act's attributes, max_pool2d's prefixed pool_); "
      "keep_activation adds conv2d_act's result as output 1; blocked_inputs [0] / blocked_outputs [0, 1] (set by "
      "blocked_handoff only, where every reader agrees) make those operands' bytes the device kernel's private "
      "blocked layout (logical shape and dtype unchanged; docs/cpu-layouts.md), which the decomposition ignores";
  d.dynamic_outputs = true;
  d.cost = conv_pool_cost;
  Rules{conv_pool_bp, decompose_conv_pool}.apply(d);
  r.add(std::move(d));
}
SPORA_OP_FAMILY(register_conv_pool_ops);

}  // namespace
}  // namespace spora
