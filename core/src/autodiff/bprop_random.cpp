// Gradient rules of the creation and random ops. Creation and sampling ops
// have no differentiable inputs; dropout's adjoint is dy on the kept
// elements scaled like the forward pass (dx = dy * mask / (1 - p)).
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

V dropout_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  if (!dy[0].valid()) return {Value{}};
  // Inference (and p = 0, which inference canonicalises to it) copies x.
  if (!n.attrs.get_bool("training")) return {dy[0]};
  const double p = n.attrs.get_float("p");
  const DType d = b.meta(dy[0]).dtype;
  const Value zero = b.scalar(0, d);
  if (p >= 1) return {b.op("where", {y[1], zero, zero})};  // everything dropped; keeps dy's shape
  const Value scaled = b.op("mul", {dy[0], b.scalar(1.0 / (1.0 - p), d)});
  return {b.op("where", {y[1], scaled, zero})};
}

void register_rules() {
  register_bprop("dropout", dropout_bp);
  for (const char* op : {"zeros", "ones", "full", "arange", "eye", "uniform", "normal", "truncated_normal"})
    register_not_differentiable(op);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
