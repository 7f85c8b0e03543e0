// Reverse rule of all_reduce. For y = sum_r x_r on every rank, the loss
// of the whole job is sum_r L_r, so dL/dx_r = sum_r' dy_r': the gradient is
// the all_reduce (sum) of the adjoints; for mean it is the mean of them.
// prod, max and min are not differentiated (their gradient needs every
// rank's input, which no rank holds).
#include "autodiff/bprop.h"
#include "support/error.h"

namespace spora::autodiff {
namespace {

std::vector<Value> all_reduce_bp(GradBuilder& b, const ir::Node& n, const std::vector<Value>&,
                                 const std::vector<Value>&, const std::vector<Value>& dy) {
  const AttrValue* mode = n.attrs.find("op");
  const std::string m = mode ? mode->s : "sum";
  if (m != "sum" && m != "mean")
    throw Error(Code::kUnimplemented, ir::with_loc("[all_reduce] the gradient of op '" + m +
                                                       "' is not defined; only sum and mean are differentiable",
                                                   n.loc));
  return {b.op("all_reduce", {dy[0]}, n.attrs)};
}

void register_collective_bprops() { register_bprop("all_reduce", all_reduce_bp); }

}  // namespace
SPORA_BPROPS(register_collective_bprops);
}  // namespace spora::autodiff
