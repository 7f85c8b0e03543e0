// Elementwise ops: unary maps, binary arithmetic and comparisons with numpy
// broadcasting, logical ops, where and cast; each registered with its
// gradient rule and, where it has one, its decomposition. The list of ops
// is the table plugin-api/include/spora/ops_elementwise.def (checked at
// registration).
//
// What kernels see (the contract with plugins/common/kernels/elementwise*):
// - Unary ops (including cast and logical_not): in[0] and out[0] have the
//   same shape; a kernel may treat both as flat contiguous arrays. out[0]'s
//   dtype is the input's, except cast (the "dtype" attribute) and
//   logical_not (bool).
// - Binary ops, comparisons, logical ops and where: every input is padded
//   with leading 1s to the output's rank, so a kernel only handles size-1
//   dims, never rank differences. Every input dim equals the output dim or
//   is 1. Comparisons and logical ops output bool; where's output has x's
//   dtype; the rest output the input dtype.
// - Attributes arrive validated with defaults filled: leaky_relu alpha is
//   finite; gelu approximate is "none" or "tanh"; softplus beta is finite and
//   non-zero, threshold is not NaN; clip min/max are not NaN, min <= max, and
//   an absent bound is -inf/+inf. For integer dtypes a clip kernel clamps to
//   [ceil(min), floor(max)], saturated to the dtype's range. cast's "dtype"
//   is a valid dtype name equal to out[0]'s dtype.
// - Integer add/sub/mul/neg/abs/square wrap around on overflow (like numpy);
//   float -> integer cast truncates toward zero and saturates (NaN -> 0);
//   maximum/minimum/clip/relu propagate NaN.
#include <cmath>
#include <cstring>

#include <spora/ops_elementwise.h>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

using namespace rules;  // NOLINT: the rule helpers, in this family's rules

constexpr DType F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                I32 = SPORA_DTYPE_I32, I64 = SPORA_DTYPE_I64, U8 = SPORA_DTYPE_U8, BOOL = SPORA_DTYPE_BOOL;
const std::vector<DType> kFloat = {F32, F64, F16, BF16};
const std::vector<DType> kSigned = {F32, F64, F16, BF16, I32, I64};
const std::vector<DType> kNumeric = {F32, F64, F16, BF16, I32, I64, U8};
const std::vector<DType> kAll = {F32, F64, F16, BF16, I32, I64, U8, BOOL};
const std::vector<DType> kBool = {BOOL};

std::string dtype_list(const std::vector<DType>& ts) {
  std::string s;
  for (DType t : ts) s += std::string(s.empty() ? "" : ", ") + dtype_name(t);
  return s;
}

void infer_unary(const OpDef&, const TensorMeta* in, OpCall& call) {
  call.out[0] = in[0];
  call.result[0] = in[0].shape;
}

void infer_logical_not(const OpDef&, const TensorMeta* in, OpCall& call) {
  call.out[0] = {BOOL, in[0].shape};
  call.result[0] = in[0].shape;
}

double finite_attr(const OpDef& op, const OpCall& call, const char* name) {
  const double v = call.attrs.get_float(name);
  if (!std::isfinite(v)) fail(Code::kInvalidArgument, "[{}] {} must be finite, got {}", op.name, name, v);
  return v;
}

void infer_leaky_relu(const OpDef& op, const TensorMeta* in, OpCall& call) {
  finite_attr(op, call, "alpha");
  infer_unary(op, in, call);
}

void infer_gelu(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const AttrValue* a = call.attrs.find("approximate");
  if (!a || (a->s != "none" && a->s != "tanh"))
    fail(Code::kInvalidArgument, "[{}] approximate must be \"none\" or \"tanh\", got {}", op.name,
         a ? a->str() : "nothing");
  infer_unary(op, in, call);
}

void infer_softplus(const OpDef& op, const TensorMeta* in, OpCall& call) {
  if (finite_attr(op, call, "beta") == 0) fail(Code::kInvalidArgument, "[{}] beta must be non-zero", op.name);
  if (std::isnan(call.attrs.get_float("threshold")))
    fail(Code::kInvalidArgument, "[{}] threshold must be a number, got nan", op.name);
  infer_unary(op, in, call);
}

void infer_clip(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const double lo = call.attrs.get_float("min"), hi = call.attrs.get_float("max");
  if (std::isnan(lo) || std::isnan(hi))
    fail(Code::kInvalidArgument, "[{}] min and max must be numbers, got min={} max={}", op.name, lo, hi);
  if (lo > hi) fail(Code::kInvalidArgument, "[{}] min ({}) is greater than max ({})", op.name, lo, hi);
  infer_unary(op, in, call);
}

// Broadcast shape of `n` inputs, re-validated: the broadcast of shapes that
// each fit in int64 may not ((2^40,1) with (1,2^40)).
Shape broadcast_all(const OpDef& op, const TensorMeta* in, int n) {
  Shape out = in[0].shape;
  for (int i = 1; i < n; ++i) {
    try {
      out = broadcast_shapes(out, in[i].shape, op.name.c_str());
    } catch (const Error&) {
      std::string shapes;
      for (int k = 0; k < n; ++k) shapes += (k ? " and " : "") + in[k].shape.str();
      fail(Code::kInvalidArgument, "[{}] shapes {} do not broadcast", op.name, shapes);
    }
  }
  return Shape::from(out.dims, out.rank, op.name.c_str());
}

void pad_inputs(const TensorMeta* in, int n, const Shape& out, OpCall& call) {
  for (int i = 0; i < n; ++i) call.in[i].shape = pad_to_rank(in[i].shape, out.rank);
}

void infer_binary(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape out = broadcast_all(op, in, 2);
  pad_inputs(in, 2, out, call);
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

// True division of integers has no integer result; numpy returns floats,
// which would hide a dtype change, so it is refused with the fix.
void infer_div(const OpDef& op, const TensorMeta* in, OpCall& call) {
  if (!dtype_is_float(in[0].dtype))
    fail(Code::kInvalidArgument,
         "[{}] integer division is not supported (inputs are {}): use cast to a float dtype first", op.name,
         dtype_name(in[0].dtype));
  infer_binary(op, in, call);
}

void infer_to_bool(const OpDef& op, const TensorMeta* in, OpCall& call) {
  infer_binary(op, in, call);
  call.out[0].dtype = BOOL;
}

void infer_where(const OpDef& op, const TensorMeta* in, OpCall& call) {
  if (in[0].dtype != BOOL)
    fail(Code::kInvalidArgument, "[{}] cond must be bool, got {}; compare or cast it first", op.name,
         dtype_name(in[0].dtype));
  const Shape out = broadcast_all(op, in, 3);
  pad_inputs(in, 3, out, call);
  call.out[0] = {in[1].dtype, out};
  call.result[0] = out;
}

void infer_cast(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const AttrValue* a = call.attrs.find("dtype");
  DType to = SPORA_DTYPE_INVALID;
  for (DType t : kAll)
    if (a && a->s == dtype_name(t)) to = t;
  if (to == SPORA_DTYPE_INVALID)
    fail(Code::kInvalidArgument, "[{}] dtype must be one of {}, got {}", op.name, dtype_list(kAll),
         a ? a->str() : "nothing");
  call.out[0] = {to, in[0].shape};
  call.result[0] = in[0].shape;
}

// ---- gradient rules ----------------------------------------------------------
// Broadcasting is undone with sum_to; masks use where/greater so that kinks
// (relu at 0, clip bounds) get the subgradient PyTorch uses.

// where(cond, dy, 0)
Value mask(GradBuilder& b, Value cond, Value dy) { return b.op("where", {cond, dy, k(b, 0, dy)}); }

// Unary rules: dx from x, y, dy.
#define UNARY_RULE(name) \
  V name(GradBuilder& b, const ir::Node&, [[maybe_unused]] const V& x, [[maybe_unused]] const V& y, const V& dy)

UNARY_RULE(neg_bp) { return {neg(b, dy[0])}; }
UNARY_RULE(abs_bp) { return {mul(b, dy[0], b.op("sign", {x[0]}))}; }
UNARY_RULE(exp_bp) { return {mul(b, dy[0], y[0])}; }
UNARY_RULE(log_bp) { return {div(b, dy[0], x[0])}; }
UNARY_RULE(log1p_bp) { return {div(b, dy[0], add(b, x[0], k(b, 1, x[0])))}; }
UNARY_RULE(sqrt_bp) { return {div(b, mul(b, dy[0], k(b, 0.5, y[0])), y[0])}; }
UNARY_RULE(rsqrt_bp) {
  // d/dx x^-1/2 = -1/2 y^3
  return {mul(b, dy[0], mul(b, k(b, -0.5, y[0]), mul(b, y[0], mul(b, y[0], y[0]))))};
}
UNARY_RULE(square_bp) { return {mul(b, dy[0], mul(b, x[0], k(b, 2, x[0])))}; }
UNARY_RULE(reciprocal_bp) { return {neg(b, mul(b, dy[0], mul(b, y[0], y[0])))}; }
UNARY_RULE(sin_bp) { return {mul(b, dy[0], b.op("cos", {x[0]}))}; }
UNARY_RULE(cos_bp) { return {neg(b, mul(b, dy[0], b.op("sin", {x[0]})))}; }
UNARY_RULE(tanh_bp) { return {mul(b, dy[0], sub(b, k(b, 1, y[0]), mul(b, y[0], y[0])))}; }
UNARY_RULE(sigmoid_bp) { return {mul(b, dy[0], mul(b, y[0], sub(b, k(b, 1, y[0]), y[0])))}; }
UNARY_RULE(relu_bp) { return {mask(b, b.op("greater", {x[0], k(b, 0, x[0])}), dy[0])}; }
UNARY_RULE(erf_bp) {
  // 2/sqrt(pi) exp(-x^2)
  const Value e = b.op("exp", {neg(b, mul(b, x[0], x[0]))});
  return {mul(b, dy[0], mul(b, e, k(b, 2.0 / std::sqrt(M_PI), x[0])))};
}
UNARY_RULE(silu_bp) {
  // s (1 + x (1 - s)), s = sigmoid(x)
  const Value s = b.op("sigmoid", {x[0]});
  const Value inner = add(b, k(b, 1, x[0]), mul(b, x[0], sub(b, k(b, 1, x[0]), s)));
  return {mul(b, dy[0], mul(b, s, inner))};
}
#undef UNARY_RULE

V leaky_relu_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const double alpha = n.attrs.get_float("alpha");
  const Value pos = b.op("greater", {x[0], k(b, 0, x[0])});
  return {b.op("where", {pos, dy[0], mul(b, dy[0], k(b, alpha, dy[0]))})};
}

V gelu_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Value v = x[0];
  if (n.attrs.find("approximate") && n.attrs.find("approximate")->s == "tanh") {
    // gelu = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3)), c = sqrt(2/pi)
    const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
    const Value x2 = mul(b, v, v);
    const Value u = mul(b, k(b, c, v), add(b, v, mul(b, k(b, a, v), mul(b, x2, v))));
    const Value t = b.op("tanh", {u});
    const Value one_t = add(b, k(b, 1, v), t);
    const Value du = mul(b, k(b, c, v), add(b, k(b, 1, v), mul(b, k(b, 3 * a, v), x2)));
    const Value sech2 = sub(b, k(b, 1, v), mul(b, t, t));
    const Value d = add(b, mul(b, k(b, 0.5, v), one_t), mul(b, mul(b, k(b, 0.5, v), v), mul(b, sech2, du)));
    return {mul(b, dy[0], d)};
  }
  // Phi(x) + x phi(x)
  const Value cdf = mul(b, k(b, 0.5, v), add(b, k(b, 1, v), b.op("erf", {mul(b, v, k(b, M_SQRT1_2, v))})));
  const Value pdf = mul(b, b.op("exp", {mul(b, k(b, -0.5, v), mul(b, v, v))}), k(b, 1.0 / std::sqrt(2 * M_PI), v));
  return {mul(b, dy[0], add(b, cdf, mul(b, v, pdf)))};
}

V softplus_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  // sigmoid(beta x) below the threshold, 1 above (where softplus is linear).
  const double beta = n.attrs.get_float("beta"), threshold = n.attrs.get_float("threshold");
  const Value bx = mul(b, x[0], k(b, beta, x[0]));
  const Value linear = b.op("greater", {bx, k(b, threshold, x[0])});
  const Value d = b.op("where", {linear, k(b, 1, x[0]), b.op("sigmoid", {bx})});
  return {mul(b, dy[0], d)};
}

V clip_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  Value in = b.op("greater_equal", {x[0], k(b, n.attrs.get_float("min"), x[0])});
  in = b.op("logical_and", {in, b.op("less_equal", {x[0], k(b, n.attrs.get_float("max"), x[0])})});
  return {mask(b, in, dy[0])};
}

// Binary rules.
V add_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape), b.sum_to(dy[0], b.meta(x[1]).shape)};
}
V sub_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape), b.sum_to(neg(b, dy[0]), b.meta(x[1]).shape)};
}
V mul_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(mul(b, dy[0], x[1]), b.meta(x[0]).shape), b.sum_to(mul(b, dy[0], x[0]), b.meta(x[1]).shape)};
}
V div_bp(GradBuilder& b, const ir::Node&, const V& x, const V& y, const V& dy) {
  const Value da = div(b, dy[0], x[1]);
  return {b.sum_to(da, b.meta(x[0]).shape), b.sum_to(neg(b, mul(b, da, y[0])), b.meta(x[1]).shape)};
}
V pow_bp(GradBuilder& b, const ir::Node&, const V& x, const V& y, const V& dy) {
  // d/da a^p = p a^(p-1); d/dp a^p = a^p log a
  const Value da = mul(b, dy[0], mul(b, x[1], b.op("pow", {x[0], sub(b, x[1], k(b, 1, x[1]))})));
  const Value dp = mul(b, dy[0], mul(b, y[0], b.op("log", {x[0]})));
  return {b.sum_to(da, b.meta(x[0]).shape), b.sum_to(dp, b.meta(x[1]).shape)};
}
// Ties send the gradient to the first operand, like PyTorch's max/min.
V maximum_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value first = b.op("greater_equal", {x[0], x[1]});
  return {b.sum_to(mask(b, first, dy[0]), b.meta(x[0]).shape),
          b.sum_to(b.op("where", {first, k(b, 0, dy[0]), dy[0]}), b.meta(x[1]).shape)};
}
V minimum_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value first = b.op("less_equal", {x[0], x[1]});
  return {b.sum_to(mask(b, first, dy[0]), b.meta(x[0]).shape),
          b.sum_to(b.op("where", {first, k(b, 0, dy[0]), dy[0]}), b.meta(x[1]).shape)};
}
V where_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Value zero = k(b, 0, dy[0]);
  return {Value{}, b.sum_to(b.op("where", {x[0], dy[0], zero}), b.meta(x[1]).shape),
          b.sum_to(b.op("where", {x[0], zero, dy[0]}), b.meta(x[2]).shape)};
}
V cast_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const DType from = b.meta(x[0]).dtype;
  if (!dtype_is_float(from) || !dtype_is_float(b.meta(dy[0]).dtype)) return {Value{}};
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(from)));
  return {b.op("cast", {dy[0]}, a)};
}

// ---- decompositions (for plugins without a kernel) --------------------------

V silu_dec(ir::Builder& b, const V& x, const Attrs&) { return {b.op("mul", {x[0], b.op("sigmoid", {x[0]})})}; }
V square_dec(ir::Builder& b, const V& x, const Attrs&) { return {b.op("mul", {x[0], x[0]})}; }
V reciprocal_dec(ir::Builder& b, const V& x, const Attrs&) { return {b.op("div", {k(b, 1, x[0]), x[0]})}; }
V rsqrt_dec(ir::Builder& b, const V& x, const Attrs&) {
  return {b.op("div", {k(b, 1, x[0]), b.op("sqrt", {x[0]})})};
}
V relu_dec(ir::Builder& b, const V& x, const Attrs&) { return {b.op("maximum", {x[0], k(b, 0, x[0])})}; }
V leaky_relu_dec(ir::Builder& b, const V& x, const Attrs& a) {
  const Value pos = b.op("greater", {x[0], k(b, 0, x[0])});
  return {b.op("where", {pos, x[0], b.op("mul", {x[0], k(b, a.get_float("alpha"), x[0])})})};
}
V sigmoid_dec(ir::Builder& b, const V& x, const Attrs&) {
  // 1 / (1 + e^-x): exp overflow to inf gives the right limit 0.
  return {b.op("div", {k(b, 1, x[0]), b.op("add", {k(b, 1, x[0]), b.op("exp", {b.op("neg", {x[0]})})})})};
}

std::string doc(const char* what, const std::vector<DType>& ts) {
  return std::string(what) + "; dtypes: " + dtype_list(ts);
}

OpDef def(const char* name, std::vector<std::string> inputs, std::vector<std::string> outputs,
          std::vector<AttrSpec> attrs, const std::vector<DType>& ts, InferFn infer, std::string doc) {
  OpDef d;
  d.name = name;
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.attrs = std::move(attrs);
  d.dtypes = ts;
  d.infer = infer;
  d.doc = std::move(doc);
  return d;
}

// The elementwise op table (plugin-api/include/spora/ops_elementwise.def):
// every op registered here must be a row of it and every row registered
// here; its flags give fusibility.
struct EwRow {
  const char* name;
  int flags;
};
const EwRow kEwRows[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) {name, flags},
#include <spora/ops_elementwise.def>
};

// Elementwise ops shard along every dim; the linear ones keep partial sums
// (sum_r a_r + sum_r b_r = sum_r (a_r + b_r), c * sum_r a_r = sum_r c a_r).
ShardingFn shard_rule(const std::string& name) {
  if (name == "add" || name == "sub") return shard::elementwise_additive;
  if (name == "mul") return shard::elementwise_scaling;
  if (name == "div" || name == "neg") return shard::elementwise_first;
  return shard::elementwise_plain;
}

void add_op(OpRegistry& r, OpDef d, const Rules& rules) {
  const EwRow* row = nullptr;
  for (const EwRow& e : kEwRows)
    if (d.name == e.name) row = &e;
  if (!row) fail(Code::kInternal, "[{}] is registered as elementwise but is not in ops_elementwise.def", d.name);
  d.fusible = (row->flags & SPORA_EW_F_FUSIBLE) != 0;
  rules.apply(d);
  if (!d.sharding) d.sharding = shard_rule(d.name);
  r.add(std::move(d));
}

void unary(OpRegistry& r, const char* name, const char* what, const std::vector<DType>& ts, const Rules& rules,
           std::vector<AttrSpec> attrs = {}, InferFn infer = infer_unary) {
  OpDef d = def(name, {"x"}, {"y"}, std::move(attrs), ts, infer, doc(what, ts));
  d.in_place = true;  // one pass, each element read before it is written
  add_op(r, std::move(d), rules);
}

void binary(OpRegistry& r, const char* name, const char* what, const std::vector<DType>& ts, const Rules& rules,
            InferFn infer = infer_binary) {
  OpDef d = def(name, {"x", "y"}, {"z"}, {}, ts, infer, doc(what, ts));
  d.in_place = true;
  add_op(r, std::move(d), rules);
}

AttrSpec float_attr(const char* name, double v) { return {name, AttrType::kFloat, false, AttrValue::of_float(v)}; }

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  const double inf = HUGE_VAL;
  const Rules none = kNoGradient;
  unary(r, "neg", "-x (integers wrap)", kSigned, {neg_bp});
  unary(r, "abs", "|x| (integers wrap: abs of the minimum stays negative)", kNumeric, {abs_bp});
  unary(r, "sign", "-1, 0 or 1 (NaN stays NaN)", kNumeric, none);
  unary(r, "square", "x * x (integers wrap)", kNumeric, {square_bp, square_dec});
  unary(r, "relu", "max(x, 0), NaN stays NaN", kNumeric, {relu_bp, relu_dec});
  unary(r, "exp", "e^x", kFloat, {exp_bp});
  unary(r, "log", "natural logarithm", kFloat, {log_bp});
  unary(r, "log1p", "log(1 + x), accurate near 0", kFloat, {log1p_bp});
  unary(r, "sqrt", "square root", kFloat, {sqrt_bp});
  unary(r, "rsqrt", "1 / sqrt(x)", kFloat, {rsqrt_bp, rsqrt_dec});
  unary(r, "reciprocal", "1 / x", kFloat, {reciprocal_bp, reciprocal_dec});
  unary(r, "sin", "sine", kFloat, {sin_bp});
  unary(r, "cos", "cosine", kFloat, {cos_bp});
  unary(r, "tanh", "hyperbolic tangent", kFloat, {tanh_bp});
  unary(r, "sigmoid", "1 / (1 + e^-x)", kFloat, {sigmoid_bp, sigmoid_dec});
  unary(r, "silu", "x * sigmoid(x)", kFloat, {silu_bp, silu_dec});
  unary(r, "erf", "the error function", kFloat, {erf_bp});
  unary(r, "floor", "largest integer <= x", kFloat, none);
  unary(r, "ceil", "smallest integer >= x", kFloat, none);
  unary(r, "round", "nearest integer, halves to even (like numpy)", kFloat, none);
  unary(r, "leaky_relu", "x if x >= 0 else alpha * x", kFloat, {leaky_relu_bp, leaky_relu_dec},
        {float_attr("alpha", 0.01)}, infer_leaky_relu);
  unary(r, "gelu", "x * Phi(x); approximate \"tanh\" uses the tanh formula", kFloat, {gelu_bp},
        {{"approximate", AttrType::kString, false, AttrValue::of_string("none")}}, infer_gelu);
  unary(r, "softplus", "log(1 + e^(beta x)) / beta, or x where beta x > threshold (like PyTorch)", kFloat,
        {softplus_bp}, {float_attr("beta", 1.0), float_attr("threshold", 20.0)}, infer_softplus);
  unary(r, "clip",
        "x limited to [min, max] (an absent bound does not limit); integer dtypes clamp to [ceil(min), floor(max)]",
        kNumeric, {clip_bp}, {float_attr("min", -inf), float_attr("max", inf)}, infer_clip);
  unary(r, "logical_not", "not x", kBool, none, {}, infer_logical_not);
  add_op(r,
      def("cast", {"x"}, {"y"}, {{"dtype", AttrType::kString, true, {}}}, kAll, infer_cast,
          "x converted to dtype (a name as spora_dtype_name gives); float -> integer truncates toward zero "
          "and saturates, NaN -> 0; nonzero -> true; dtypes: " + dtype_list(kAll)),
      {cast_bp});

  binary(r, "add", "x + y, broadcasting (integers wrap)", kNumeric, {add_bp});
  binary(r, "sub", "x - y, broadcasting (integers wrap)", kNumeric, {sub_bp});
  binary(r, "mul", "x * y, broadcasting (integers wrap)", kNumeric, {mul_bp});
  // Integer dtypes pass the schema check so that infer_div can say "cast".
  binary(r, "div", "x / y, broadcasting; floats only: integer inputs are refused (cast them first)", kNumeric,
         {div_bp}, infer_div);
  binary(r, "pow", "x ^ y, broadcasting", kFloat, {pow_bp});
  binary(r, "maximum", "elementwise max, broadcasting; NaN propagates", kNumeric, {maximum_bp});
  binary(r, "minimum", "elementwise min, broadcasting; NaN propagates", kNumeric, {minimum_bp});
  binary(r, "equal", "x == y -> bool, broadcasting", kAll, none, infer_to_bool);
  binary(r, "not_equal", "x != y -> bool, broadcasting", kAll, none, infer_to_bool);
  binary(r, "less", "x < y -> bool, broadcasting", kNumeric, none, infer_to_bool);
  binary(r, "less_equal", "x <= y -> bool, broadcasting", kNumeric, none, infer_to_bool);
  binary(r, "greater", "x > y -> bool, broadcasting", kNumeric, none, infer_to_bool);
  binary(r, "greater_equal", "x >= y -> bool, broadcasting", kNumeric, none, infer_to_bool);
  binary(r, "logical_and", "x and y, broadcasting", kBool, none, infer_to_bool);
  binary(r, "logical_or", "x or y, broadcasting", kBool, none, infer_to_bool);
  binary(r, "logical_xor", "x xor y, broadcasting", kBool, none, infer_to_bool);
  OpDef where = def("where", {"cond", "x", "y"}, {"z"}, {}, kAll, infer_where,
                    "x where cond else y, all three broadcasting; cond: bool; x, y: one dtype of " + dtype_list(kAll));
  where.typed_inputs = {1, 2};  // cond is checked by infer_where
  add_op(r, std::move(where), {where_bp});
  // Every row of the table is registered (a row without an op is drift).
  for (const EwRow& e : kEwRows) {
    bool found = false;
    for (const auto& op : r.ops()) found = found || op->name == e.name;
    if (!found) fail(Code::kInternal, "[{}] is in ops_elementwise.def but not registered", e.name);
  }
}

SPORA_OP_FAMILY(register_elementwise_ops);

}  // namespace spora
