// Layout ops: reshape (a view, no copy) and transpose.
#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_reshape(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const auto& want = call.attrs.get_ints("shape");
  if (want.size() > static_cast<size_t>(kMaxRank))
    fail(Code::kInvalidArgument, "[{}] target rank {} exceeds {}", op.name, want.size(), kMaxRank);
  Shape out;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1) {
      if (infer_at >= 0) fail(Code::kInvalidArgument, "[{}] only one dimension may be -1", op.name);
      infer_at = static_cast<int>(i);
      out.push_back(1);
    } else if (want[i] < 0) {
      fail(Code::kInvalidArgument, "[{}] dimension {} is negative ({})", op.name, i, want[i]);
    } else {
      out.push_back(want[i]);
      known *= want[i];
    }
  }
  const int64_t n = in[0].shape.numel();
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      fail(Code::kInvalidArgument, "[{}] cannot reshape {} into {}", op.name, in[0].shape.str(),
           AttrValue::of_ints(want).str());
    out.dims[infer_at] = n / known;
  } else if (known != n) {
    fail(Code::kInvalidArgument, "[{}] cannot reshape {} ({} elements) into {} ({} elements)", op.name,
         in[0].shape.str(), n, out.str(), known);
  }
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
  call.view = true;
}

void infer_transpose(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  std::vector<int64_t> perm = call.attrs.get_ints("perm");
  if (perm.empty())
    for (int i = s.rank - 1; i >= 0; --i) perm.push_back(i);
  if (perm.size() != static_cast<size_t>(s.rank))
    fail(Code::kInvalidArgument, "[{}] perm {} has {} entries for rank {}", op.name, AttrValue::of_ints(perm).str(),
         perm.size(), s.rank);
  bool seen[kMaxRank] = {};
  Shape out;
  for (auto& p : perm) {
    p = normalize_axis(p, s.rank, op.name.c_str());
    if (seen[p]) fail(Code::kInvalidArgument, "[{}] perm lists axis {} twice", op.name, p);
    seen[p] = true;
    out.push_back(s.dims[p]);
  }
  call.attrs.set("perm", AttrValue::of_ints(perm));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  const std::vector<DType> all = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                  SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};
  r.add(OpDef{"reshape", {"x"}, {"y"}, {{"shape", AttrType::kInts, true, {}}}, all, infer_reshape,
              "same data, new shape (one dim may be -1); returns a view"});
  r.add(OpDef{"transpose", {"x"}, {"y"}, {{"perm", AttrType::kInts, false, AttrValue::of_ints({})}}, all,
              infer_transpose, "permutes dims (reverses them when perm is empty)"});
}

SPORA_OP_FAMILY(register_layout_ops);

}  // namespace spora
