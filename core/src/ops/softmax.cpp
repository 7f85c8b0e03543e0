// Softmax family along one axis: softmax, log_softmax and their gradients.
//
// Contract with kernels (what inference hands them):
//  - attr "axis" is non-negative and names a dim of in[0];
//  - a rank-0 input is presented as shape (1,) with axis 0, so kernels never
//    see rank 0 (the user-visible result stays a scalar);
//  - softmax_grad / log_softmax_grad take in[0] = y, the forward op's
//    output, and in[1] = dy, with equal shapes and dtypes; out[0] = dx has
//    that shape too:
//      softmax_grad:     dx = y * (dy - sum(dy * y, axis))
//      log_softmax_grad: dx = dy - exp(y) * sum(dy, axis)
//    Taking y rather than x saves the backward pass a recomputation and is
//    what both forward ops' autodiff rules have at hand.
//  - the output dtype is the input dtype; f16/bf16 compute in f32.
//
// Gradient rules: softmax and log_softmax use their *_grad ops;
// softmax_grad and log_softmax_grad have closed-form rules built from basic
// ops (so third order works).
#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

Shape kernel_shape(const Shape& s) {
  if (s.rank > 0) return s;
  Shape one;
  one.push_back(1);
  return one;
}

void set_axis(const OpDef& op, const Shape& s, OpCall& call) {
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), s.rank, op.name.c_str());
  call.attrs.set("axis", AttrValue::of_int(ax));
}

void infer_softmax(const OpDef& op, const TensorMeta* in, OpCall& call) {
  set_axis(op, in[0].shape, call);
  call.in[0].shape = kernel_shape(in[0].shape);
  call.out[0] = call.in[0];
  call.result[0] = in[0].shape;
}

void infer_softmax_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  if (in[0].shape != in[1].shape)
    fail(Code::kInvalidArgument, "[{}] y has shape {} but dy has shape {}; they must match", op.name,
         in[0].shape.str(), in[1].shape.str());
  set_axis(op, in[0].shape, call);
  call.in[0].shape = call.in[1].shape = kernel_shape(in[0].shape);
  call.out[0] = call.in[0];
  call.result[0] = in[0].shape;
}

// exp, a max and a sum per element; the grads read two inputs.
Cost softmax_cost(const OpCall& c) {
  const double n = static_cast<double>(c.out[0].shape.numel());
  const double es = static_cast<double>(dtype_size(c.out[0].dtype));
  return Cost{4 * n, es * n * (c.num_inputs + 1)};
}

// ---- gradient rules ------------------------------------------------------------

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

// sum over one axis, kept; a scalar is its own sum.
Value sum_axis(GradBuilder& b, Value v, int64_t axis) {
  if (b.meta(v).shape.rank == 0) return v;
  return rules::sum_axes(b, v, {axis}, true);
}

V softmax_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  return {b.op("softmax_grad", {y[0], dy[0]}, axis_attr(n.attrs.get_int("axis")))};
}

V log_softmax_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  return {b.op("log_softmax_grad", {y[0], dy[0]}, axis_attr(n.attrs.get_int("axis")))};
}

// dx = y * (dy - S), S = sum(dy * y). With cotangent g and T = sum(g * y):
// d/d(dy) = y * (g - T) = softmax_grad(y, g); d/dy = g * (dy - S) - dy * T.
V softmax_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const int64_t axis = n.attrs.get_int("axis");
  const Value y = x[0], d = x[1], g = dy[0];
  const Value s = sum_axis(b, mul(b, d, y), axis);
  const Value t = sum_axis(b, mul(b, g, y), axis);
  const Value dyv = sub(b, mul(b, g, sub(b, d, s)), mul(b, d, t));
  return {dyv, b.op("softmax_grad", {y, g}, axis_attr(axis))};
}

// dx = dy - exp(y) * sum(dy). With cotangent g: d/d(dy) = g - sum(g * e^y);
// d/dy = -g * e^y * sum(dy).
V log_softmax_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const int64_t axis = n.attrs.get_int("axis");
  const Value y = x[0], d = x[1], g = dy[0];
  const Value e = b.op("exp", {y});
  const Value ge = mul(b, g, e);
  const Value dd = sub(b, g, sum_axis(b, ge, axis));
  const Value dyv = b.op("neg", {mul(b, ge, sum_axis(b, d, axis))});
  return {dyv, dd};
}

void add(OpRegistry& r, const char* name, std::vector<std::string> inputs, InferFn infer, const char* doc,
         const Rules& rules) {
  std::string out = inputs.size() == 1 ? "y" : "dx";
  OpDef d{name,
          std::move(inputs),
          {std::move(out)},
          {{"axis", AttrType::kInt, false, AttrValue::of_int(-1)}},
          kFloat,
          infer,
          doc,
          {},
          false,
          false,
          softmax_cost};
  rules.apply(d);
  d.sharding = shard::along_axis;  // elementwise but along `axis`, which stays whole
  r.add(std::move(d));
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  add(r, "softmax", {"x"}, infer_softmax, "exp(x) / sum(exp(x)) along axis, computed stably", {softmax_bp});
  add(r, "log_softmax", {"x"}, infer_softmax, "x - log(sum(exp(x))) along axis, computed stably",
      {log_softmax_bp});
  add(r, "softmax_grad", {"y", "dy"}, infer_softmax_grad,
      "gradient of softmax from its output y: y * (dy - sum(dy * y, axis))", {softmax_grad_bp});
  add(r, "log_softmax_grad", {"y", "dy"}, infer_softmax_grad,
      "gradient of log_softmax from its output y: dy - exp(y) * sum(dy, axis)", {log_softmax_grad_bp});
}

SPORA_OP_FAMILY(register_softmax_ops);

}  // namespace spora
