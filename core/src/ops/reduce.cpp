// Reductions over any set of axes, with keepdims.
#include <algorithm>

#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_reduce(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  std::vector<int64_t> axes = call.attrs.get_ints("axes");
  const bool keep = call.attrs.get_bool("keepdims");
  bool reduce[kMaxRank] = {};
  if (axes.empty()) {
    for (int i = 0; i < s.rank; ++i) reduce[i] = true;
  }
  for (int64_t a : axes) {
    const int32_t ax = normalize_axis(a, s.rank, op.name.c_str());
    if (s.rank == 0) continue;
    if (reduce[ax]) fail(Code::kInvalidArgument, "[{}] axis {} appears twice in axes", op.name, a);
    reduce[ax] = true;
  }
  std::vector<int64_t> norm;
  Shape kept, result;
  kept.rank = s.rank;
  for (int i = 0; i < s.rank; ++i) {
    kept.dims[i] = reduce[i] ? 1 : s.dims[i];
    if (reduce[i]) norm.push_back(i);
    if (!reduce[i] || keep) result.push_back(kept.dims[i]);
  }
  if (op.name == "mean") {
    for (int i = 0; i < s.rank; ++i)
      if (reduce[i] && s.dims[i] == 0)
        fail(Code::kInvalidArgument, "[mean] cannot average over axis {} of size 0 in shape {}", i, s.str());
  }
  call.attrs.set("axes", AttrValue::of_ints(norm));
  call.out[0] = {in[0].dtype, kept};
  call.result[0] = result;
}

void reduction(OpRegistry& r, const char* name, const char* doc) {
  r.add(OpDef{name,
              {"x"},
              {"y"},
              {{"axes", AttrType::kInts, false, AttrValue::of_ints({})},
               {"keepdims", AttrType::kBool, false, AttrValue::of_bool(false)}},
              {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
              infer_reduce,
              doc});
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  reduction(r, "sum", "sum over axes (all when empty)");
  reduction(r, "mean", "mean over axes (all when empty)");
}

SPORA_OP_FAMILY(register_reduce_ops);

}  // namespace spora
