// softmax along one axis.
#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_softmax(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), in[0].shape.rank, op.name.c_str());
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.out[0] = in[0];
  call.result[0] = in[0].shape;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  r.add(OpDef{"softmax",
              {"x"},
              {"y"},
              {{"axis", AttrType::kInt, false, AttrValue::of_int(-1)}},
              {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
              infer_softmax,
              "exp(x) / sum(exp(x)) along axis, computed stably"});
}

SPORA_OP_FAMILY(register_softmax_ops);

}  // namespace spora
