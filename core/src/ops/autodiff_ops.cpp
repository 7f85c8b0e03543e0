// Ops that exist for autodiff: stop_gradient (identity forward, no gradient;
// a view, so it costs nothing at run time).
#include "ir/op.h"

namespace spora {
namespace {

void infer_identity_view(const OpDef&, const TensorMeta* in, OpCall& call) {
  call.out[0] = in[0];
  call.result[0] = in[0].shape;
  call.view = true;
}

void register_autodiff_ops(OpRegistry& r) {
  OpDef d{"stop_gradient",
              {"x"},
              {"y"},
              {},
              {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16, SPORA_DTYPE_I32, SPORA_DTYPE_I64,
               SPORA_DTYPE_U8, SPORA_DTYPE_BOOL},
              infer_identity_view,
              "x, with no gradient flowing back through it (a view)"};
  d.differentiable = false;  // no gradient flows back
  r.add(std::move(d));
}
SPORA_OP_FAMILY(register_autodiff_ops);

}  // namespace
}  // namespace spora
