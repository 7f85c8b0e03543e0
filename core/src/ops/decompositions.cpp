// Decompositions registered by name, of the families not yet moved into
// their op files (elementwise ops carry theirs: ops/elementwise.cpp).
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
  register_decomposition("mean", mean);
}
SPORA_DECOMPOSITIONS(register_all);

}  // namespace
}  // namespace spora
