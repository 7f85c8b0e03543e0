// Gradient rules of layout ops: the adjoint undoes the data movement.
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

V reshape_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.reshape(dy[0], b.meta(x[0]).shape)};
}

V transpose_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  const auto& perm = n.attrs.get_ints("perm");
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  Attrs a;
  a.set("perm", AttrValue::of_ints(inv));
  return {b.op("transpose", {dy[0]}, a)};
}

V broadcast_to_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape)};
}

void register_rules() {
  register_bprop("reshape", reshape_bp);
  register_bprop("transpose", transpose_bp);
  register_bprop("broadcast_to", broadcast_to_bp);
  register_not_differentiable("stop_gradient");
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
