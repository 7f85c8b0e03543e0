// Ops along one axis that keep it: cumsum (a prefix scan) and topk.
//
// Contract between inference and kernels. Normalised attributes stay in
// terms of the user's shapes (inferring again from them gives the same call).
// - call.in[0] is the input (a scalar as (1,)); attrs "axis" is non-negative.
// - cumsum: call.out[0] has call.in[0]'s shape and dtype. Integer sums wrap
//   around in the input's dtype. exclusive: element i gets the sum of the
//   elements before it (the first gets 0); reverse: sums run from the end.
// - topk: call.out[0] (values, the input's dtype) and call.out[1] (indices
//   along the axis, i64) have call.in[0]'s shape with the axis's dim set to
//   k, 0 <= k <= that dim. The k elements chosen are the first k in the
//   order "larger first" (largest) or "smaller first", ties going to the
//   lower index and NaN counting as larger than every number (first when
//   largest, last otherwise), like torch's stable sort. sorted: they come
//   in that order; otherwise in increasing index order, which is just as
//   deterministic and cheaper.
//
// Gradient rules: cumsum's adjoint is the running sum the other way; topk's
// sends the values' adjoint back to the positions they were taken from (the
// indices have none).
#include <cmath>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

const std::vector<DType> kArith = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                   SPORA_DTYPE_I32, SPORA_DTYPE_I64};
const std::vector<DType> kOrdered = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                     SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8};

// The input as kernels see it (a scalar as (1,)) and the normalised axis.
int32_t axis_of(const OpDef& op, const Shape& s, int64_t axis, Shape* seen) {
  const int32_t ax = normalize_axis(axis, s.rank, op.name.c_str());
  *seen = s;
  if (s.rank == 0) seen->push_back(1);  // one element along axis 0
  return ax;
}

void infer_cumsum(const OpDef& op, const TensorMeta* in, OpCall& call) {
  Shape seen;
  const int32_t ax = axis_of(op, in[0].shape, call.attrs.get_int("axis"), &seen);
  call.in[0] = {in[0].dtype, seen};
  call.out[0] = {in[0].dtype, seen};
  call.result[0] = in[0].shape;
  call.attrs.set("axis", AttrValue::of_int(ax));
}

void infer_topk(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  Shape seen;
  const int32_t ax = axis_of(op, s, call.attrs.get_int("axis"), &seen);
  const int64_t k = call.attrs.get_int("k"), n = seen.dims[ax];
  if (k < 0 || k > n)
    fail(Code::kInvalidArgument, "[{}] k={} is out of range for axis {} of size {} in shape {} (0 <= k <= {})", op.name,
         k, ax, n, s.str(), n);
  if (s.rank == 0 && k != 1)
    fail(Code::kInvalidArgument, "[{}] k={} for a scalar input: a scalar has one element, so k must be 1", op.name, k);
  Shape out = seen, result = s;
  out.dims[ax] = k;
  if (s.rank > 0) result.dims[ax] = k;
  call.in[0] = {in[0].dtype, seen};
  call.out[0] = {in[0].dtype, out};
  call.out[1] = {SPORA_DTYPE_I64, out};
  call.result[0] = result;
  call.result[1] = result;
  call.attrs.set("axis", AttrValue::of_int(ax));
}

Cost cumsum_cost(const OpCall& c) {
  const double n = static_cast<double>(c.in[0].shape.numel());
  Cost cost;
  cost.flops = n;
  cost.bytes = 2 * n * static_cast<double>(dtype_size(c.in[0].dtype));
  return cost;
}

// Selecting k of n costs about n log2(k) comparisons.
Cost topk_cost(const OpCall& c) {
  const double n = static_cast<double>(c.in[0].shape.numel());
  const double m = static_cast<double>(c.out[0].shape.numel());
  const double k = static_cast<double>(c.attrs.get_int("k"));
  Cost cost;
  cost.flops = n * std::log2(k + 2);
  cost.bytes = n * static_cast<double>(dtype_size(c.in[0].dtype)) + m * (dtype_size(c.in[0].dtype) + 8.0);
  return cost;
}

// ---- gradient rules ------------------------------------------------------------

// The transpose of a running sum is the running sum in the other direction
// (exclusive stays exclusive).
V cumsum_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  Attrs a = n.attrs;
  a.set("reverse", AttrValue::of_bool(!n.attrs.get_bool("reverse")));
  return {b.op("cumsum", {dy[0]}, a)};
}

// The values' adjoint goes back to the positions they were taken from.
V topk_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  if (!dy[0].valid()) return {Value{}};
  const TensorMeta m = b.meta(x[0]);
  Attrs z;
  z.set("shape", AttrValue::of_ints(std::vector<int64_t>(m.shape.dims, m.shape.dims + m.shape.rank)));
  z.set("dtype", AttrValue::of_string(dtype_name(m.dtype)));
  Attrs a;
  a.set("axis", AttrValue::of_int(n.attrs.get_int("axis")));
  return {b.op("scatter_add", {b.op("zeros", {}, z), y[1], dy[0]}, a)};
}

}  // namespace

void register_scan_ops(OpRegistry& r) {
  OpDef cumsum{"cumsum",
               {"x"},
               {"y"},
               {{"axis", AttrType::kInt, false, AttrValue::of_int(-1)},
                {"exclusive", AttrType::kBool, false, AttrValue::of_bool(false)},
                {"reverse", AttrType::kBool, false, AttrValue::of_bool(false)}},
               kArith,
               infer_cumsum,
               "running sum along axis (exclusive: shifted by one; reverse: from the end); integers wrap around",
               {},
               false,
               false,
               cumsum_cost};
  Rules{cumsum_bp}.apply(cumsum);
  r.add(std::move(cumsum));
  OpDef topk{"topk",
             {"x"},
             {"values", "indices"},
             {{"k", AttrType::kInt, true, {}},
              {"axis", AttrType::kInt, false, AttrValue::of_int(-1)},
              {"largest", AttrType::kBool, false, AttrValue::of_bool(true)},
              {"sorted", AttrType::kBool, false, AttrValue::of_bool(true)}},
             kOrdered,
             infer_topk,
             "the k largest (smallest) elements along axis and their i64 indices; ties to the lower index",
             {},
             false,
             false,
             topk_cost};
  Rules{topk_bp}.apply(topk);
  r.add(std::move(topk));
}

SPORA_OP_FAMILY(register_scan_ops);

}  // namespace spora
