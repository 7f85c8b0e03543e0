// Gradient rules of softmax-family ops.
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

V softmax_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  Attrs a;
  a.set("axis", AttrValue::of_int(n.attrs.get_int("axis")));
  return {b.op("softmax_grad", {y[0], dy[0]}, a)};
}

void register_rules() { register_bprop("softmax", softmax_bp); }
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
