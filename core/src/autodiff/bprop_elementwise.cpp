// Gradient rules of the elementwise ops. Broadcasting is undone with
// sum_to; masks use where/greater so that kinks (relu at 0, clip bounds)
// get the subgradient PyTorch uses.
#include <cmath>

#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

// where(cond, dy, 0)
Value mask(GradBuilder& b, Value cond, Value dy) { return b.op("where", {cond, dy, k(b, 0, dy)}); }

// Unary rules: dx from x, y, dy.
#define UNARY(name) \
  V name(GradBuilder& b, const ir::Node&, [[maybe_unused]] const V& x, [[maybe_unused]] const V& y, const V& dy)

UNARY(neg_bp) { return {neg(b, dy[0])}; }
UNARY(abs_bp) { return {mul(b, dy[0], b.op("sign", {x[0]}))}; }
UNARY(exp_bp) { return {mul(b, dy[0], y[0])}; }
UNARY(log_bp) { return {div(b, dy[0], x[0])}; }
UNARY(log1p_bp) { return {div(b, dy[0], add(b, x[0], k(b, 1, x[0])))}; }
UNARY(sqrt_bp) { return {div(b, mul(b, dy[0], k(b, 0.5, y[0])), y[0])}; }
UNARY(rsqrt_bp) {
  // d/dx x^-1/2 = -1/2 y^3
  return {mul(b, dy[0], mul(b, k(b, -0.5, y[0]), mul(b, y[0], mul(b, y[0], y[0]))))};
}
UNARY(square_bp) { return {mul(b, dy[0], mul(b, x[0], k(b, 2, x[0])))}; }
UNARY(reciprocal_bp) { return {neg(b, mul(b, dy[0], mul(b, y[0], y[0])))}; }
UNARY(sin_bp) { return {mul(b, dy[0], b.op("cos", {x[0]}))}; }
UNARY(cos_bp) { return {neg(b, mul(b, dy[0], b.op("sin", {x[0]})))}; }
UNARY(tanh_bp) { return {mul(b, dy[0], sub(b, k(b, 1, y[0]), mul(b, y[0], y[0])))}; }
UNARY(sigmoid_bp) { return {mul(b, dy[0], mul(b, y[0], sub(b, k(b, 1, y[0]), y[0])))}; }
UNARY(relu_bp) { return {mask(b, b.op("greater", {x[0], k(b, 0, x[0])}), dy[0])}; }
UNARY(erf_bp) {
  // 2/sqrt(pi) exp(-x^2)
  const Value e = b.op("exp", {neg(b, mul(b, x[0], x[0]))});
  return {mul(b, dy[0], mul(b, e, k(b, 2.0 / std::sqrt(M_PI), x[0])))};
}
UNARY(silu_bp) {
  // s (1 + x (1 - s)), s = sigmoid(x)
  const Value s = b.op("sigmoid", {x[0]});
  const Value inner = add(b, k(b, 1, x[0]), mul(b, x[0], sub(b, k(b, 1, x[0]), s)));
  return {mul(b, dy[0], mul(b, s, inner))};
}

V leaky_relu_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const double alpha = n.attrs.get_float("alpha");
  const Value pos = b.op("greater", {x[0], k(b, 0, x[0])});
  return {b.op("where", {pos, dy[0], mul(b, dy[0], k(b, alpha, dy[0]))})};
}

V gelu_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Value v = x[0];
  if (n.attrs.find("approximate") && n.attrs.find("approximate")->s == "tanh") {
    // gelu = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3)), c = sqrt(2/pi)
    const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
    const Value x2 = mul(b, v, v);
    const Value u = mul(b, k(b, c, v), add(b, v, mul(b, k(b, a, v), mul(b, x2, v))));
    const Value t = b.op("tanh", {u});
    const Value one_t = add(b, k(b, 1, v), t);
    const Value du = mul(b, k(b, c, v), add(b, k(b, 1, v), mul(b, k(b, 3 * a, v), x2)));
    const Value sech2 = sub(b, k(b, 1, v), mul(b, t, t));
    const Value d = add(b, mul(b, k(b, 0.5, v), one_t), mul(b, mul(b, k(b, 0.5, v), v), mul(b, sech2, du)));
    return {mul(b, dy[0], d)};
  }
  // Phi(x) + x phi(x)
  const Value cdf = mul(b, k(b, 0.5, v), add(b, k(b, 1, v), b.op("erf", {mul(b, v, k(b, M_SQRT1_2, v))})));
  const Value pdf = mul(b, b.op("exp", {mul(b, k(b, -0.5, v), mul(b, v, v))}), k(b, 1.0 / std::sqrt(2 * M_PI), v));
  return {mul(b, dy[0], add(b, cdf, mul(b, v, pdf)))};
}

V softplus_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  // sigmoid(beta x) below the threshold, 1 above (where softplus is linear).
  const double beta = n.attrs.get_float("beta"), threshold = n.attrs.get_float("threshold");
  const Value bx = mul(b, x[0], k(b, beta, x[0]));
  const Value linear = b.op("greater", {bx, k(b, threshold, x[0])});
  const Value d = b.op("where", {linear, k(b, 1, x[0]), b.op("sigmoid", {bx})});
  return {mul(b, dy[0], d)};
}

V clip_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  Value in = b.op("greater_equal", {x[0], k(b, n.attrs.get_float("min"), x[0])});
  in = b.op("logical_and", {in, b.op("less_equal", {x[0], k(b, n.attrs.get_float("max"), x[0])})});
  return {mask(b, in, dy[0])};
}

// Binary rules.
V add_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape), b.sum_to(dy[0], b.meta(x[1]).shape)};
}
V sub_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape), b.sum_to(neg(b, dy[0]), b.meta(x[1]).shape)};
}
V mul_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(mul(b, dy[0], x[1]), b.meta(x[0]).shape), b.sum_to(mul(b, dy[0], x[0]), b.meta(x[1]).shape)};
}
V div_bp(GradBuilder& b, const ir::Node&, const V& x, const V& y, const V& dy) {
  const Value da = div(b, dy[0], x[1]);
  return {b.sum_to(da, b.meta(x[0]).shape), b.sum_to(neg(b, mul(b, da, y[0])), b.meta(x[1]).shape)};
}
V pow_bp(GradBuilder& b, const ir::Node&, const V& x, const V& y, const V& dy) {
  // d/da a^p = p a^(p-1); d/dp a^p = a^p log a
  const Value da = mul(b, dy[0], mul(b, x[1], b.op("pow", {x[0], sub(b, x[1], k(b, 1, x[1]))})));
  const Value dp = mul(b, dy[0], mul(b, y[0], b.op("log", {x[0]})));
  return {b.sum_to(da, b.meta(x[0]).shape), b.sum_to(dp, b.meta(x[1]).shape)};
}
// Ties send the gradient to the first operand, like PyTorch's max/min.
V maximum_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value first = b.op("greater_equal", {x[0], x[1]});
  return {b.sum_to(mask(b, first, dy[0]), b.meta(x[0]).shape),
          b.sum_to(b.op("where", {first, k(b, 0, dy[0]), dy[0]}), b.meta(x[1]).shape)};
}
V minimum_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value first = b.op("less_equal", {x[0], x[1]});
  return {b.sum_to(mask(b, first, dy[0]), b.meta(x[0]).shape),
          b.sum_to(b.op("where", {first, k(b, 0, dy[0]), dy[0]}), b.meta(x[1]).shape)};
}
V where_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value zero = k(b, 0, dy[0]);
  return {Value{}, b.sum_to(b.op("where", {x[0], dy[0], zero}), b.meta(x[1]).shape),
          b.sum_to(b.op("where", {x[0], zero, dy[0]}), b.meta(x[2]).shape)};
}
V cast_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const DType from = b.meta(x[0]).dtype;
  if (!dtype_is_float(from) || !dtype_is_float(b.meta(dy[0]).dtype)) return {Value{}};
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(from)));
  return {b.op("cast", {dy[0]}, a)};
}

void register_rules() {
  register_bprop("neg", neg_bp);
  register_bprop("abs", abs_bp);
  register_bprop("exp", exp_bp);
  register_bprop("log", log_bp);
  register_bprop("log1p", log1p_bp);
  register_bprop("sqrt", sqrt_bp);
  register_bprop("rsqrt", rsqrt_bp);
  register_bprop("square", square_bp);
  register_bprop("reciprocal", reciprocal_bp);
  register_bprop("sin", sin_bp);
  register_bprop("cos", cos_bp);
  register_bprop("tanh", tanh_bp);
  register_bprop("sigmoid", sigmoid_bp);
  register_bprop("relu", relu_bp);
  register_bprop("erf", erf_bp);
  register_bprop("silu", silu_bp);
  register_bprop("leaky_relu", leaky_relu_bp);
  register_bprop("gelu", gelu_bp);
  register_bprop("softplus", softplus_bp);
  register_bprop("clip", clip_bp);
  register_bprop("add", add_bp);
  register_bprop("sub", sub_bp);
  register_bprop("mul", mul_bp);
  register_bprop("div", div_bp);
  register_bprop("pow", pow_bp);
  register_bprop("maximum", maximum_bp);
  register_bprop("minimum", minimum_bp);
  register_bprop("where", where_bp);
  register_bprop("cast", cast_bp);
  // Piecewise constant or boolean: no gradient flows.
  for (const char* op : {"sign", "floor", "ceil", "round", "equal", "not_equal", "less", "less_equal", "greater",
                         "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not"})
    register_not_differentiable(op);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
