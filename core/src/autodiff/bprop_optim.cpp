// The optimizer ops (core/src/ops/optim.cpp) are not differentiable: they
// run after the gradients are taken, on values no loss depends on.
#include "autodiff/bprop.h"

namespace spora::autodiff {
namespace {

void register_all() {
  for (const char* op : {"sgd_update", "adam_update", "global_norm", "clip_by_global_norm"})
    register_not_differentiable(op);
}
SPORA_BPROPS(register_all);

}  // namespace
}  // namespace spora::autodiff
