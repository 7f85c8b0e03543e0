// Reductions: sum, mean, max, min, prod, logsumexp, var, std over any set of
// axes, and argmax/argmin along one axis (or the flattened input).
//
// Contract between inference and kernels. Normalised attributes stay in
// terms of the user's shapes, so that inferring again from them (graph
// passes, a reloaded graph) gives the same call; kernels regroup dims
// themselves at plan time if they want to.
//
// Axis reductions (attrs axes, keepdims; var/std also correction):
// - call.in[0] is the input; attrs "axes" lists the reduced dims, sorted,
//   non-negative and explicit (empty only for a scalar).
// - call.out[0] is the input's shape with the reduced dims set to 1, of the
//   input's dtype. call.result[0] is what the user sees (keepdims applied).
// - Empty reductions: sum -> 0, prod -> 1, logsumexp -> -inf; max/min/mean/
//   var/std over an axis of size 0 are rejected here, so their kernels never
//   see one.
// - Integer sum/prod wrap around in the input's dtype (two's complement).
//   max/min propagate NaN. var/std divide by max(n - correction, 0).
//
// argmax/argmin (attrs axis, keepdims):
// - With an axis: call.in[0] is the input (a scalar as (1,)) and attrs
//   "axis" is non-negative; call.out[0] is the input's shape with that dim
//   set to 1, of dtype i64. Without one, attrs have no "axis" (the schema's
//   default is a placeholder no caller can pass), call.in[0] is the
//   flattened input (numel,) and call.out[0] is (1,). The reduced length is
//   never 0.
// - The result is the index along the axis of the first maximum (minimum);
//   a NaN counts as larger and smaller than everything, so the first NaN
//   wins, like numpy.
#include "ir/op.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};
const std::vector<DType> kArith = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                   SPORA_DTYPE_I32, SPORA_DTYPE_I64};
const std::vector<DType> kOrdered = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                     SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8};

// Ops whose result over zero elements is undefined, and why.
const char* empty_reason(const std::string& op) {
  if (op == "mean" || op == "var" || op == "std") return "cannot average over";
  if (op == "max" || op == "min") return "has no identity to return for";
  return nullptr;
}

void infer_reduce(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const std::vector<int64_t> axes = call.attrs.get_ints("axes");
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
  if (const char* why = empty_reason(op.name)) {
    for (int i = 0; i < s.rank; ++i)
      if (reduce[i] && s.dims[i] == 0)
        fail(Code::kInvalidArgument, "[{}] {} axis {} of size 0 in shape {}", op.name, why, i, s.str());
  }
  Shape result, kept = s;
  std::vector<int64_t> norm;
  for (int i = 0; i < s.rank; ++i) {
    if (reduce[i]) {
      norm.push_back(i);
      kept.dims[i] = 1;
    }
    if (!reduce[i] || keep) result.push_back(kept.dims[i]);
  }
  call.out[0] = {in[0].dtype, kept};
  call.result[0] = result;
  call.attrs.set("axes", AttrValue::of_ints(norm));
}

void infer_arg(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const bool keep = call.attrs.get_bool("keepdims");
  const AttrValue* axis = call.attrs.find("axis");
  Shape result, seen, kept;
  if (axis->type != AttrType::kInt) {  // the schema's "not given": flatten
    if (s.numel() == 0)
      fail(Code::kInvalidArgument, "[{}] input of shape {} is empty: an empty sequence has no {}", op.name, s.str(),
           op.name);
    if (keep)
      for (int i = 0; i < s.rank; ++i) result.push_back(1);
    seen.push_back(s.numel());
    kept.push_back(1);
    // Left out of the normalised attributes rather than kept as the schema's
    // placeholder: inferring again from them must accept them.
    Attrs without;
    for (const auto& [name, value] : call.attrs.items())
      if (name != "axis") without.set(name, value);
    call.attrs = without;
  } else {
    const int32_t ax = normalize_axis(axis->i, s.rank, op.name.c_str());
    for (int i = 0; i < s.rank; ++i)
      if (i != ax || keep) result.push_back(i == ax ? 1 : s.dims[i]);
    if (s.rank > 0 && s.dims[ax] == 0)
      fail(Code::kInvalidArgument, "[{}] axis {} has size 0 in shape {}: an empty sequence has no {}", op.name,
           axis->i, s.str(), op.name);
    seen = s;
    if (s.rank == 0) seen.push_back(1);  // a scalar is one element along axis 0
    kept = seen;
    kept.dims[ax] = 1;
    call.attrs.set("axis", AttrValue::of_int(ax));
  }
  call.in[0] = {in[0].dtype, seen};
  call.out[0] = {SPORA_DTYPE_I64, kept};
  call.result[0] = result;
}

// Reductions read every input element once (var and logsumexp twice).
Cost reduce_cost(const OpCall& c) {
  const double n = static_cast<double>(c.in[0].shape.numel());
  const double m = static_cast<double>(c.out[0].shape.numel());
  const double in_bytes = n * static_cast<double>(dtype_size(c.in[0].dtype));
  const double out_bytes = m * static_cast<double>(dtype_size(c.out[0].dtype));
  const bool two_pass = c.attrs.find("correction") != nullptr;
  Cost cost;
  cost.flops = two_pass ? 3 * n + m : n + m;
  cost.bytes = (two_pass ? 2 : 1) * in_bytes + out_bytes;
  return cost;
}

// logsumexp: max, then exp and add per element.
Cost logsumexp_cost(const OpCall& c) {
  Cost cost = reduce_cost(c);
  cost.flops += 10 * static_cast<double>(c.in[0].shape.numel());
  cost.bytes += static_cast<double>(c.in[0].shape.numel()) * static_cast<double>(dtype_size(c.in[0].dtype));
  return cost;
}

AttrSpec axes_attr() { return {"axes", AttrType::kInts, false, AttrValue::of_ints({})}; }
AttrSpec keepdims_attr() { return {"keepdims", AttrType::kBool, false, AttrValue::of_bool(false)}; }

void reduction(OpRegistry& r, const char* name, const std::vector<DType>& dtypes, const char* doc,
               CostFn cost = reduce_cost) {
  r.add(OpDef{name, {"x"}, {"y"}, {axes_attr(), keepdims_attr()}, dtypes, infer_reduce, doc, {}, false, false, cost});
}

void variance(OpRegistry& r, const char* name, const char* doc) {
  r.add(OpDef{name,
              {"x"},
              {"y"},
              {axes_attr(), keepdims_attr(), {"correction", AttrType::kInt, false, AttrValue::of_int(0)}},
              kFloat,
              infer_reduce,
              doc,
              {},
              false,
              false,
              reduce_cost});
}

void arg(OpRegistry& r, const char* name, const char* doc) {
  // An axis that is not given must be told apart from every int: the
  // default is an empty list, which no caller can pass for an int.
  r.add(OpDef{name,
              {"x"},
              {"index"},
              {{"axis", AttrType::kInt, false, AttrValue::of_ints({})}, keepdims_attr()},
              kOrdered,
              infer_arg,
              doc,
              {},
              false,
              false,
              reduce_cost});
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  reduction(r, "sum", kArith, "sum over axes (all when empty); integers wrap around");
  reduction(r, "mean", kFloat, "mean over axes (all when empty)");
  reduction(r, "max", kOrdered, "maximum over axes (all when empty); NaN propagates");
  reduction(r, "min", kOrdered, "minimum over axes (all when empty); NaN propagates");
  reduction(r, "prod", kArith, "product over axes (all when empty); integers wrap around");
  reduction(r, "logsumexp", kFloat, "log(sum(exp(x))) over axes (all when empty), computed stably",
            logsumexp_cost);
  variance(r, "var", "variance over axes (all when empty), dividing by n - correction");
  variance(r, "std", "standard deviation over axes (all when empty), sqrt of var with the same correction");
  arg(r, "argmax", "i64 index of the first maximum along axis (of the flattened input when no axis)");
  arg(r, "argmin", "i64 index of the first minimum along axis (of the flattened input when no axis)");
}

SPORA_OP_FAMILY(register_reduce_ops);

}  // namespace spora
