// Gradient rules of the remaining reductions (max, min, prod, logsumexp,
// var, std), of cumsum and topk; argmax/argmin are not differentiable.
//
// Reduction nodes carry explicit, sorted, non-negative axes (empty only for
// a scalar), so the adjoint is reshaped to the input's shape with the
// reduced dims kept as 1 and broadcast back.
//
// max/min: the gradient is shared equally by the elements equal to the
// result (PyTorch's amax/amin rule): dx = dy * (x == y) / count(x == y).
// prod: exact with zeros too (see prod_bp); its own gradient is exact as
// well (every order while a group has at most two zeros).
#include <algorithm>

#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

Value cast(GradBuilder& b, Value v, DType to) {
  if (dt(b, v) == to) return v;
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(to)));
  return b.op("cast", {v}, a);
}

Attrs reduce_attrs(const std::vector<int64_t>& axes, bool keepdims) {
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  a.set("keepdims", AttrValue::of_bool(keepdims));
  return a;
}

// The input's shape with the reduced dims set to 1.
Shape kept_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept = in;
  for (int64_t a : axes) kept.dims[a] = 1;
  return kept;
}

double count_of(const Shape& in, const std::vector<int64_t>& axes) {
  double n = 1;
  for (int64_t a : axes) n *= static_cast<double>(in.dims[a]);
  return n;
}

// A reduced value (keepdims or not) as the kept shape, ready to broadcast
// against the input.
Value kept(GradBuilder& b, Value v, const Shape& in, const std::vector<int64_t>& axes) {
  return b.reshape(v, kept_shape(in, axes));
}

Value broadcast(GradBuilder& b, Value v, const Shape& to) {
  if (b.meta(v).shape == to) return v;
  Attrs a;
  a.set("shape", AttrValue::of_ints(std::vector<int64_t>(to.dims, to.dims + to.rank)));
  return b.op("broadcast_to", {v}, a);
}

V extreme_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value hit = b.op("equal", {x[0], kept(b, y[0], in, axes)});
  const Value count = b.op("sum", {cast(b, hit, dt(b, dy[0]))}, reduce_attrs(axes, true));
  const Value share = div(b, kept(b, dy[0], in, axes), count);
  // where, not a product: a group whose maximum is NaN has no hit, and its
  // 0/0 share must not leak.
  return {b.op("where", {hit, broadcast(b, share, in), k(b, 0, dy[0])})};
}

// dx_i = dy * prod_{k != i} x_k, written as P / x_i * E_i with P the product
// of the group's non-zero elements and E_i the product of its zeros other
// than x_i. The zeros stay variables (xz = x where x == 0), so that the
// formula equals the polynomial exactly while the zero pattern holds: E_i is
// 1 (no other zero), e1 of the zeros (one), their e2 = (s1^2 - s2) / 2
// (two). With three or more zeros dx and its first derivatives (prod's
// second order) are 0, which the constant 0 gives; only third and higher
// orders are then not exact.
V prod_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value zero = b.op("equal", {x[0], k(b, 0, x[0])});
  const Value safe = b.op("where", {zero, k(b, 1, x[0]), x[0]});
  const Value others = div(b, b.op("prod", {safe}, reduce_attrs(axes, true)), safe);  // P / x_i
  const Value nz = b.op("sum", {cast(b, zero, dt(b, x[0]))}, reduce_attrs(axes, true));
  const Value xz = b.op("where", {zero, x[0], k(b, 0, x[0])});
  const Value s1 = b.op("sum", {xz}, reduce_attrs(axes, true));
  const Value s2 = b.op("sum", {mul(b, xz, xz)}, reduce_attrs(axes, true));
  const Value e2 = mul(b, sub(b, mul(b, s1, s1), s2), k(b, 0.5, s1));
  const Value one = k(b, 1, x[0]), none = k(b, 0, x[0]);
  auto nz_is = [&](double c) { return b.op("equal", {nz, k(b, c, nz)}); };
  Value e = b.op("where", {nz_is(2), b.op("where", {zero, sub(b, s1, x[0]), broadcast(b, e2, in)}), none});
  e = b.op("where", {nz_is(1), b.op("where", {zero, one, broadcast(b, s1, in)}), e});
  e = b.op("where", {nz_is(0), one, e});
  return {mul(b, mul(b, others, e), kept(b, dy[0], in, axes))};
}

V logsumexp_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value soft = b.op("exp", {sub(b, x[0], kept(b, y[0], in, axes))});
  return {mul(b, soft, kept(b, dy[0], in, axes))};
}

// var = sum((x - mean)^2) / max(n - correction, 0); std = sqrt(var).
Value centered_over_denominator(GradBuilder& b, const ir::Node& n, Value x) {
  const Shape in = b.meta(x).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const double count = count_of(in, axes);
  const double denom = std::max(count - static_cast<double>(n.attrs.get_int("correction")), 0.0);
  const Value mean = b.op("mean", {x}, reduce_attrs(axes, true));
  return div(b, sub(b, x, mean), k(b, denom, x));
}

V var_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value c = centered_over_denominator(b, n, x[0]);
  return {mul(b, mul(b, c, k(b, 2, c)), kept(b, dy[0], in, axes))};
}

V std_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value c = centered_over_denominator(b, n, x[0]);
  // Where std is 0 (a single element, or all equal) the centred values are
  // 0 too: send 0 instead of 0/0.
  const Value s = kept(b, y[0], in, axes);
  const Value zero = b.scalar(0, b.meta(s).dtype);
  const Value ratio = b.op("where", {b.op("equal", {s, zero}), zero, div(b, kept(b, dy[0], in, axes), s)});
  return {mul(b, c, ratio)};
}

// The transpose of a running sum is the running sum in the other direction
// (exclusive stays exclusive).
V cumsum_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  Attrs a = n.attrs;
  a.set("reverse", AttrValue::of_bool(!n.attrs.get_bool("reverse")));
  return {b.op("cumsum", {dy[0]}, a)};
}

// The values' adjoint goes back to the positions they were taken from.
V topk_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  if (!dy[0].valid()) return {Value{}};
  const TensorMeta m = b.meta(x[0]);
  Attrs z;
  z.set("shape", AttrValue::of_ints(std::vector<int64_t>(m.shape.dims, m.shape.dims + m.shape.rank)));
  z.set("dtype", AttrValue::of_string(dtype_name(m.dtype)));
  Attrs a;
  a.set("axis", AttrValue::of_int(n.attrs.get_int("axis")));
  return {b.op("scatter_add", {b.op("zeros", {}, z), y[1], dy[0]}, a)};
}

void register_rules() {
  register_bprop("max", extreme_bp);
  register_bprop("min", extreme_bp);
  register_bprop("prod", prod_bp);
  register_bprop("logsumexp", logsumexp_bp);
  register_bprop("var", var_bp);
  register_bprop("std", std_bp);
  register_bprop("cumsum", cumsum_bp);
  register_bprop("topk", topk_bp);
  register_not_differentiable("argmax");
  register_not_differentiable("argmin");
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
