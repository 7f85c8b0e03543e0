// Gradient rules of reductions: the adjoint is broadcast back over the
// reduced axes.
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

// The reduced output reshaped with its reduced dims kept as 1, then
// broadcast to the input's shape.
Value expand_back(GradBuilder& b, Value g, const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept = in;
  if (axes.empty())
    for (int i = 0; i < kept.rank; ++i) kept.dims[i] = 1;
  for (int64_t a : axes) kept.dims[a] = 1;
  Attrs bc;
  bc.set("shape", AttrValue::of_ints(std::vector<int64_t>(in.dims, in.dims + in.rank)));
  return b.op("broadcast_to", {b.reshape(g, kept)}, bc);
}

V sum_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {expand_back(b, dy[0], b.meta(x[0]).shape, n.attrs.get_ints("axes"))};
}

V mean_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  double count = 1;
  if (axes.empty()) count = static_cast<double>(in.numel());
  for (int64_t a : axes) count *= static_cast<double>(in.dims[a]);
  const Value g = b.op("div", {dy[0], b.scalar(count, b.meta(dy[0]).dtype)});
  return {expand_back(b, g, in, axes)};
}

void register_rules() {
  register_bprop("sum", sum_bp);
  register_bprop("mean", mean_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
