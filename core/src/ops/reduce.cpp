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
//
// Gradient rules: the adjoint is reshaped to the input's shape with the
// reduced dims kept as 1 and broadcast back. max/min: the gradient is
// shared equally by the elements equal to the result (PyTorch's amax/amin
// rule): dx = dy * (x == y) / count(x == y). prod: exact with zeros too (see
// prod_bp); its own gradient is exact as well (every order while a group has
// at most two zeros). argmax/argmin are not differentiable. mean also has a
// decomposition (sum, then divide by the count).
#include <algorithm>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

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

// ---- gradient rules and decompositions ----------------------------------------

// The reduced output reshaped with its reduced dims kept as 1, then
// broadcast to the input's shape.
Value expand_back(GradBuilder& b, Value g, const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept = in;
  if (axes.empty())
    for (int i = 0; i < kept.rank; ++i) kept.dims[i] = 1;
  for (int64_t a : axes) kept.dims[a] = 1;
  Attrs bc;
  bc.set("shape", AttrValue::of_ints(std::vector<int64_t>(in.dims, in.dims + in.rank)));
  return b.op("broadcast_to", {b.reshape(g, kept)}, bc);
}

V sum_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {expand_back(b, dy[0], b.meta(x[0]).shape, n.attrs.get_ints("axes"))};
}

V mean_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  double count = 1;
  if (axes.empty()) count = static_cast<double>(in.numel());
  for (int64_t a : axes) count *= static_cast<double>(in.dims[a]);
  const Value g = b.op("div", {dy[0], b.scalar(count, b.meta(dy[0]).dtype)});
  return {expand_back(b, g, in, axes)};
}

Attrs reduce_attrs(const std::vector<int64_t>& axes, bool keepdims) {
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  a.set("keepdims", AttrValue::of_bool(keepdims));
  return a;
}

// The input's shape with the reduced dims set to 1.
Shape kept_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept = in;
  for (int64_t a : axes) kept.dims[a] = 1;
  return kept;
}

double count_of(const Shape& in, const std::vector<int64_t>& axes) {
  double n = 1;
  for (int64_t a : axes) n *= static_cast<double>(in.dims[a]);
  return n;
}

// A reduced value (keepdims or not) as the kept shape, ready to broadcast
// against the input.
Value kept(GradBuilder& b, Value v, const Shape& in, const std::vector<int64_t>& axes) {
  return b.reshape(v, kept_shape(in, axes));
}

Value broadcast(GradBuilder& b, Value v, const Shape& to) {
  if (b.meta(v).shape == to) return v;
  Attrs a;
  a.set("shape", AttrValue::of_ints(std::vector<int64_t>(to.dims, to.dims + to.rank)));
  return b.op("broadcast_to", {v}, a);
}

V extreme_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value hit = b.op("equal", {x[0], kept(b, y[0], in, axes)});
  const Value count = b.op("sum", {cast(b, hit, dt(b, dy[0]))}, reduce_attrs(axes, true));
  const Value share = div(b, kept(b, dy[0], in, axes), count);
  // where, not a product: a group whose maximum is NaN has no hit, and its
  // 0/0 share must not leak.
  return {b.op("where", {hit, broadcast(b, share, in), k(b, 0, dy[0])})};
}

// dx_i = dy * prod_{k != i} x_k, written as P / x_i * E_i with P the product
// of the group's non-zero elements and E_i the product of its zeros other
// than x_i. The zeros stay variables (xz = x where x == 0), so that the
// formula equals the polynomial exactly while the zero pattern holds: E_i is
// 1 (no other zero), e1 of the zeros (one), their e2 = (s1^2 - s2) / 2
// (two). With three or more zeros dx and its first derivatives (prod's
// second order) are 0, which the constant 0 gives; only third and higher
// orders are then not exact.
V prod_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value zero = b.op("equal", {x[0], k(b, 0, x[0])});
  const Value safe = b.op("where", {zero, k(b, 1, x[0]), x[0]});
  const Value others = div(b, b.op("prod", {safe}, reduce_attrs(axes, true)), safe);  // P / x_i
  const Value nz = b.op("sum", {cast(b, zero, dt(b, x[0]))}, reduce_attrs(axes, true));
  const Value xz = b.op("where", {zero, x[0], k(b, 0, x[0])});
  const Value s1 = b.op("sum", {xz}, reduce_attrs(axes, true));
  const Value s2 = b.op("sum", {mul(b, xz, xz)}, reduce_attrs(axes, true));
  const Value e2 = mul(b, sub(b, mul(b, s1, s1), s2), k(b, 0.5, s1));
  const Value one = k(b, 1, x[0]), none = k(b, 0, x[0]);
  auto nz_is = [&](double c) { return b.op("equal", {nz, k(b, c, nz)}); };
  Value e = b.op("where", {nz_is(2), b.op("where", {zero, sub(b, s1, x[0]), broadcast(b, e2, in)}), none});
  e = b.op("where", {nz_is(1), b.op("where", {zero, one, broadcast(b, s1, in)}), e});
  e = b.op("where", {nz_is(0), one, e});
  return {mul(b, mul(b, others, e), kept(b, dy[0], in, axes))};
}

V logsumexp_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value soft = b.op("exp", {sub(b, x[0], kept(b, y[0], in, axes))});
  return {mul(b, soft, kept(b, dy[0], in, axes))};
}

// var = sum((x - mean)^2) / max(n - correction, 0); std = sqrt(var).
Value centered_over_denominator(GradBuilder& b, const ir::Node& n, Value x) {
  const Shape in = b.meta(x).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const double count = count_of(in, axes);
  const double denom = std::max(count - static_cast<double>(n.attrs.get_int("correction")), 0.0);
  const Value mean = b.op("mean", {x}, reduce_attrs(axes, true));
  return div(b, sub(b, x, mean), k(b, denom, x));
}

V var_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value c = centered_over_denominator(b, n, x[0]);
  return {mul(b, mul(b, c, k(b, 2, c)), kept(b, dy[0], in, axes))};
}

V std_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const Shape in = b.meta(x[0]).shape;
  const auto& axes = n.attrs.get_ints("axes");
  const Value c = centered_over_denominator(b, n, x[0]);
  // Where std is 0 (a single element, or all equal) the centred values are
  // 0 too: send 0 instead of 0/0.
  const Value s = kept(b, y[0], in, axes);
  const Value zero = b.scalar(0, b.meta(s).dtype);
  const Value ratio = b.op("where", {b.op("equal", {s, zero}), zero, div(b, kept(b, dy[0], in, axes), s)});
  return {mul(b, c, ratio)};
}

// mean = sum / count of the reduced elements.
V decompose_mean(GradBuilder& b, const V& x, const Attrs& a) {
  const Shape& s = b.meta(x[0]).shape;
  double count = 1;
  const auto& axes = a.get_ints("axes");
  if (axes.empty()) count = static_cast<double>(s.numel());
  for (int64_t ax : axes) count *= static_cast<double>(s.dims[ax]);
  const Value total = b.op("sum", {x[0]}, a);
  return {b.op("div", {total, k(b, count, total)})};
}

AttrSpec axes_attr() { return {"axes", AttrType::kInts, false, AttrValue::of_ints({})}; }
AttrSpec keepdims_attr() { return {"keepdims", AttrType::kBool, false, AttrValue::of_bool(false)}; }

void reduction(OpRegistry& r, const char* name, const std::vector<DType>& dtypes, const char* doc,
               const Rules& rules, CostFn cost = reduce_cost) {
  OpDef d{name, {"x"}, {"y"}, {axes_attr(), keepdims_attr()}, dtypes, infer_reduce, doc, {}, false, false, cost};
  rules.apply(d);
  r.add(std::move(d));
}

void variance(OpRegistry& r, const char* name, const char* doc, const Rules& rules) {
  OpDef d{name,
          {"x"},
          {"y"},
          {axes_attr(), keepdims_attr(), {"correction", AttrType::kInt, false, AttrValue::of_int(0)}},
          kFloat,
          infer_reduce,
          doc,
          {},
          false,
          false,
          reduce_cost};
  rules.apply(d);
  r.add(std::move(d));
}

void arg(OpRegistry& r, const char* name, const char* doc) {
  // An axis that is not given must be told apart from every int: the
  // default is an empty list, which no caller can pass for an int.
  OpDef d{name,
          {"x"},
          {"index"},
          {{"axis", AttrType::kInt, false, AttrValue::of_ints({})}, keepdims_attr()},
          kOrdered,
          infer_arg,
          doc,
          {},
          false,
          false,
          reduce_cost};
  rules::kNoGradient.apply(d);
  r.add(std::move(d));
}

// Sharding (ir/sharding.h). Kept dims keep their splits. A sum over a split
// dim leaves each device its block's sum: a partial sum over that mesh axis.
// sum and mean are linear, so a partial input stays partial; the other
// reductions need their reduced dims whole and no partial input.
bool shard_reduce(const ShardQuery& q, ShardPlan& p) {
  const Shape& s = q.in[0].shape;
  const TensorLayout& l = q.in_layouts[0];
  if (l.free) return false;
  const bool sum = q.op->name == "sum", linear = sum || q.op->name == "mean";
  const std::vector<int64_t>& axes = q.attrs->get_ints("axes");
  const bool keep = q.attrs->get_bool("keepdims");
  std::vector<bool> reduced(static_cast<size_t>(s.rank), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + s.rank : a)] = true;
  TensorLayout want = l, out;
  out.partial = linear ? l.partial : 0;
  if (!linear) want.partial = 0;
  for (int d = 0; d < s.rank; ++d) {
    const int a = l.dims[static_cast<size_t>(d)];
    if (!reduced[static_cast<size_t>(d)]) {
      out.dims.push_back(a);
      continue;
    }
    if (a != kReplicated) {
      if (sum) out.partial |= 1u << a;
      else want.dims[static_cast<size_t>(d)] = kReplicated;
    }
    if (keep) out.dims.push_back(kReplicated);
  }
  p.in = {want};
  p.out = {out};
  return true;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  reduction(r, "sum", kArith, "sum over axes (all when empty); integers wrap around",
            {sum_bp, nullptr, true, shard_reduce});
  reduction(r, "mean", kFloat, "mean over axes (all when empty)", {mean_bp, decompose_mean, true, shard_reduce});
  reduction(r, "max", kOrdered, "maximum over axes (all when empty); NaN propagates",
            {extreme_bp, nullptr, true, shard_reduce});
  reduction(r, "min", kOrdered, "minimum over axes (all when empty); NaN propagates",
            {extreme_bp, nullptr, true, shard_reduce});
  reduction(r, "prod", kArith, "product over axes (all when empty); integers wrap around", {prod_bp});
  reduction(r, "logsumexp", kFloat, "log(sum(exp(x))) over axes (all when empty), computed stably", {logsumexp_bp},
            logsumexp_cost);
  variance(r, "var", "variance over axes (all when empty), dividing by n - correction", {var_bp});
  variance(r, "std", "standard deviation over axes (all when empty), sqrt of var with the same correction",
           {std_bp});
  arg(r, "argmax", "i64 index of the first maximum along axis (of the flattened input when no axis)");
  arg(r, "argmin", "i64 index of the first minimum along axis (of the flattened input when no axis)");
}

SPORA_OP_FAMILY(register_reduce_ops);

}  // namespace spora
