// Elementwise ops: unary maps, binary arithmetic and comparisons with numpy
// broadcasting, logical ops, where and cast.
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

#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

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

void unary(OpRegistry& r, const char* name, const char* what, const std::vector<DType>& ts,
           std::vector<AttrSpec> attrs = {}, InferFn infer = infer_unary) {
  OpDef d = def(name, {"x"}, {"y"}, std::move(attrs), ts, infer, doc(what, ts));
  d.in_place = true;  // one pass, each element read before it is written
  r.add(std::move(d));
}

void binary(OpRegistry& r, const char* name, const char* what, const std::vector<DType>& ts,
            InferFn infer = infer_binary) {
  OpDef d = def(name, {"x", "y"}, {"z"}, {}, ts, infer, doc(what, ts));
  d.in_place = true;
  r.add(std::move(d));
}

AttrSpec float_attr(const char* name, double v) { return {name, AttrType::kFloat, false, AttrValue::of_float(v)}; }

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  const double inf = HUGE_VAL;
  unary(r, "neg", "-x (integers wrap)", kSigned);
  unary(r, "abs", "|x| (integers wrap: abs of the minimum stays negative)", kNumeric);
  unary(r, "sign", "-1, 0 or 1 (NaN stays NaN)", kNumeric);
  unary(r, "square", "x * x (integers wrap)", kNumeric);
  unary(r, "relu", "max(x, 0), NaN stays NaN", kNumeric);
  unary(r, "exp", "e^x", kFloat);
  unary(r, "log", "natural logarithm", kFloat);
  unary(r, "log1p", "log(1 + x), accurate near 0", kFloat);
  unary(r, "sqrt", "square root", kFloat);
  unary(r, "rsqrt", "1 / sqrt(x)", kFloat);
  unary(r, "reciprocal", "1 / x", kFloat);
  unary(r, "sin", "sine", kFloat);
  unary(r, "cos", "cosine", kFloat);
  unary(r, "tanh", "hyperbolic tangent", kFloat);
  unary(r, "sigmoid", "1 / (1 + e^-x)", kFloat);
  unary(r, "silu", "x * sigmoid(x)", kFloat);
  unary(r, "erf", "the error function", kFloat);
  unary(r, "floor", "largest integer <= x", kFloat);
  unary(r, "ceil", "smallest integer >= x", kFloat);
  unary(r, "round", "nearest integer, halves to even (like numpy)", kFloat);
  unary(r, "leaky_relu", "x if x >= 0 else alpha * x", kFloat, {float_attr("alpha", 0.01)}, infer_leaky_relu);
  unary(r, "gelu", "x * Phi(x); approximate \"tanh\" uses the tanh formula", kFloat,
        {{"approximate", AttrType::kString, false, AttrValue::of_string("none")}}, infer_gelu);
  unary(r, "softplus", "log(1 + e^(beta x)) / beta, or x where beta x > threshold (like PyTorch)", kFloat,
        {float_attr("beta", 1.0), float_attr("threshold", 20.0)}, infer_softplus);
  unary(r, "clip",
        "x limited to [min, max] (an absent bound does not limit); integer dtypes clamp to [ceil(min), floor(max)]",
        kNumeric, {float_attr("min", -inf), float_attr("max", inf)}, infer_clip);
  unary(r, "logical_not", "not x", kBool, {}, infer_logical_not);
  r.add(def("cast", {"x"}, {"y"}, {{"dtype", AttrType::kString, true, {}}}, kAll, infer_cast,
            "x converted to dtype (a name as spora_dtype_name gives); float -> integer truncates toward zero "
            "and saturates, NaN -> 0; nonzero -> true; dtypes: " + dtype_list(kAll)));

  binary(r, "add", "x + y, broadcasting (integers wrap)", kNumeric);
  binary(r, "sub", "x - y, broadcasting (integers wrap)", kNumeric);
  binary(r, "mul", "x * y, broadcasting (integers wrap)", kNumeric);
  // Integer dtypes pass the schema check so that infer_div can say "cast".
  binary(r, "div", "x / y, broadcasting; floats only: integer inputs are refused (cast them first)", kNumeric,
         infer_div);
  binary(r, "pow", "x ^ y, broadcasting", kFloat);
  binary(r, "maximum", "elementwise max, broadcasting; NaN propagates", kNumeric);
  binary(r, "minimum", "elementwise min, broadcasting; NaN propagates", kNumeric);
  binary(r, "equal", "x == y -> bool, broadcasting", kAll, infer_to_bool);
  binary(r, "not_equal", "x != y -> bool, broadcasting", kAll, infer_to_bool);
  binary(r, "less", "x < y -> bool, broadcasting", kNumeric, infer_to_bool);
  binary(r, "less_equal", "x <= y -> bool, broadcasting", kNumeric, infer_to_bool);
  binary(r, "greater", "x > y -> bool, broadcasting", kNumeric, infer_to_bool);
  binary(r, "greater_equal", "x >= y -> bool, broadcasting", kNumeric, infer_to_bool);
  binary(r, "logical_and", "x and y, broadcasting", kBool, infer_to_bool);
  binary(r, "logical_or", "x or y, broadcasting", kBool, infer_to_bool);
  binary(r, "logical_xor", "x xor y, broadcasting", kBool, infer_to_bool);
  OpDef where = def("where", {"cond", "x", "y"}, {"z"}, {}, kAll, infer_where,
                    "x where cond else y, all three broadcasting; cond: bool; x, y: one dtype of " + dtype_list(kAll));
  where.typed_inputs = {1, 2};  // cond is checked by infer_where
  r.add(std::move(where));
}

SPORA_OP_FAMILY(register_elementwise_ops);

}  // namespace spora
