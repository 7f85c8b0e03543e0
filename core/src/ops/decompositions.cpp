// Decompositions of composite ops into the primitive elementwise, matmul and
// reduction ops every plugin is expected to have first.
#include <cmath>

#include "ops/decompose.h"

namespace spora {
namespace {

using ir::Value;
using V = std::vector<Value>;

DType dt(ir::Builder& b, Value v) { return b.meta(v).dtype; }
Value k(ir::Builder& b, double v, Value like) { return b.scalar(v, dt(b, like)); }

// x @ w^T + b
V linear(ir::Builder& b, const V& x, const Attrs&) {
  Attrs t;
  t.set("transpose_b", AttrValue::of_bool(true));
  return {b.op("add", {b.op("matmul", {x[0], x[1]}, t), x[2]})};
}

V silu(ir::Builder& b, const V& x, const Attrs&) { return {b.op("mul", {x[0], b.op("sigmoid", {x[0]})})}; }
V square(ir::Builder& b, const V& x, const Attrs&) { return {b.op("mul", {x[0], x[0]})}; }
V reciprocal(ir::Builder& b, const V& x, const Attrs&) { return {b.op("div", {k(b, 1, x[0]), x[0]})}; }
V rsqrt(ir::Builder& b, const V& x, const Attrs&) { return {b.op("div", {k(b, 1, x[0]), b.op("sqrt", {x[0]})})}; }
V relu(ir::Builder& b, const V& x, const Attrs&) { return {b.op("maximum", {x[0], k(b, 0, x[0])})}; }
V leaky_relu(ir::Builder& b, const V& x, const Attrs& a) {
  const Value pos = b.op("greater", {x[0], k(b, 0, x[0])});
  return {b.op("where", {pos, x[0], b.op("mul", {x[0], k(b, a.get_float("alpha"), x[0])})})};
}
V sigmoid(ir::Builder& b, const V& x, const Attrs&) {
  // 1 / (1 + e^-x): exp overflow to inf gives the right limit 0.
  return {b.op("div", {k(b, 1, x[0]), b.op("add", {k(b, 1, x[0]), b.op("exp", {b.op("neg", {x[0]})})})})};
}
V mean(ir::Builder& b, const V& x, const Attrs& a) {
  const Shape& s = b.meta(x[0]).shape;
  double count = 1;
  const auto& axes = a.get_ints("axes");
  if (axes.empty()) count = static_cast<double>(s.numel());
  for (int64_t ax : axes) count *= static_cast<double>(s.dims[ax]);
  const Value total = b.op("sum", {x[0]}, a);
  return {b.op("div", {total, k(b, count, total)})};
}

void register_all() {
  register_decomposition("linear", linear);
  register_decomposition("silu", silu);
  register_decomposition("square", square);
  register_decomposition("reciprocal", reciprocal);
  register_decomposition("rsqrt", rsqrt);
  register_decomposition("relu", relu);
  register_decomposition("leaky_relu", leaky_relu);
  register_decomposition("sigmoid", sigmoid);
  register_decomposition("mean", mean);
}
SPORA_DECOMPOSITIONS(register_all);

}  // namespace
}  // namespace spora
