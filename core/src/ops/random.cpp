// Random ops: uniform, normal, truncated_normal (no inputs; the caller
// passes the device) and dropout.
//
// Every random op draws from the Philox-4x32-10 stream keyed by its "seed"
// and "offset" attributes (sdk/include/spora/sdk/philox.h): element i depends only
// on (seed, offset, i), never on threads or the device, so cpu and sim agree
// bit for bit. Two calls with the same seed and offset give the same tensor;
// a new offset (e.g. a call counter) gives numbers independent of every
// other offset's. "seed" is required: a silent default would make every
// call's "random" tensor the same.
//
// Contract between inference and kernels (plugins/common/kernels/random.cpp):
// - uniform, normal, truncated_normal: call.out[0] has the "dtype"
//   attribute's dtype (f32, f64, f16 or bf16) and the "shape" attribute's
//   shape. Inference has checked the parameters: low < high, both finite and
//   high - low finite; mean finite, std finite and >= 0; for
//   truncated_normal a < b (in units of std from the mean; infinite allowed,
//   finite ones within [-30, 30], so that every normal-CDF value the kernel
//   takes is a normal double or 0) and a non-negligible probability in
//   [a, b]. "offset" is >= 0; "seed" any int64, used as its 64 bits.
// - Element i of a float type stored in 32 bits or less uses word i of the
//   stream (Box-Muller pairs: words 2k, 2k+1 give elements 2k, 2k+1); f64
//   uses words 2i, 2i+1 (Box-Muller pairs: words 4k..4k+3). Values are
//   computed in double and rounded once to the dtype.
// - uniform lies in [low, high): a value that rounds up to high is replaced
//   by the dtype's next value below high.
// - truncated_normal inverts the normal CDF on [a, b] (one uniform per
//   element), so no element ever needs a retry.
// - dropout(x) -> (y, mask): mask is bool, y has x's dtype and shape.
//   Element i is kept when word i >= round(p * 2^32); kept elements are
//   x * (1 / (1 - p)), the product taken in x's compute type (float for
//   f16/bf16) with the scale rounded to it; dropped ones are 0, even where x
//   is inf or NaN. Inference canonicalises the identity cases: with
//   training = false or p = 0 it sets training = false, p = 0, seed = 0,
//   offset = 0 (kernels then copy x and set the mask to all true), and with
//   p = 1 it zeroes seed and offset; so eval-mode calls with per-step seeds
//   share one planned kernel.
#include <cmath>
#include <limits>

#include <spora/sdk/exact_math.h>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {

// From creation.cpp (same family).
DType creation_dtype(const OpDef& op, const Attrs& attrs, bool floats_only);
Shape creation_shape(const OpDef& op, const std::vector<int64_t>& dims, DType dt);

namespace {

// Largest finite value of a float dtype.
double float_max(DType dt) {
  switch (dt) {
    case SPORA_DTYPE_F16: return 65504.0;
    case SPORA_DTYPE_BF16: return 3.3895313892515355e38;
    case SPORA_DTYPE_F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

void check_offset(const OpDef& op, const Attrs& a) {
  const int64_t offset = a.get_int("offset");
  if (offset < 0) fail(Code::kInvalidArgument, "[{}] offset must be non-negative, got {}", op.name, offset);
}

DType infer_generated(const OpDef& op, OpCall& call) {
  const DType dt = creation_dtype(op, call.attrs, true);
  const Shape s = creation_shape(op, call.attrs.get_ints("shape"), dt);
  check_offset(op, call.attrs);
  call.out[0] = {dt, s};
  call.result[0] = s;
  return dt;
}

void infer_uniform(const OpDef& op, const TensorMeta*, OpCall& call) {
  const DType dt = infer_generated(op, call);
  const double low = call.attrs.get_float("low"), high = call.attrs.get_float("high");
  const double big = float_max(dt);
  if (!(std::fabs(low) <= big) || !(std::fabs(high) <= big))
    fail(Code::kInvalidArgument, "[uniform] low ({}) and high ({}) must be finite values of {}", low, high,
         dtype_name(dt));
  if (!(low < high)) fail(Code::kInvalidArgument, "[uniform] low ({}) must be less than high ({})", low, high);
  if (!std::isfinite(high - low))
    fail(Code::kInvalidArgument, "[uniform] high - low overflows ({} - {})", high, low);
}

void check_mean_std(const OpDef& op, const Attrs& a) {
  const double mean = a.get_float("mean"), sd = a.get_float("std");
  if (!std::isfinite(mean)) fail(Code::kInvalidArgument, "[{}] mean must be finite, got {}", op.name, mean);
  if (!(sd >= 0) || !std::isfinite(sd))
    fail(Code::kInvalidArgument, "[{}] std must be finite and non-negative, got {}", op.name, sd);
}

void infer_normal(const OpDef& op, const TensorMeta*, OpCall& call) {
  infer_generated(op, call);
  check_mean_std(op, call.attrs);
}

void infer_truncated_normal(const OpDef& op, const TensorMeta*, OpCall& call) {
  infer_generated(op, call);
  check_mean_std(op, call.attrs);
  const double a = call.attrs.get_float("a"), b = call.attrs.get_float("b");
  if (std::isnan(a) || std::isnan(b) || !(a < b))
    fail(Code::kInvalidArgument, "[truncated_normal] a ({}) must be less than b ({})", a, b);
  for (double v : {a, b})
    if (std::isfinite(v) && std::fabs(v) > 30)
      fail(Code::kInvalidArgument,
           "[truncated_normal] bound {} is beyond 30 std from the mean; finite bounds must lie in [-30, 30] "
           "(use inf for an open side)",
           v);
  // Probability of [a, b], from the tail that keeps precision, computed as
  // the kernels compute it (Phi from spora/sdk/exact_math.h), so this check
  // and every device's kernel accept exactly the same bounds.
  const auto phi = [](double x) {
    return exact_math::mul(0.5, exact_math::erfc(exact_math::mul(-x, 0.70710678118654752440)));
  };
  const double lo = a >= 0 ? -b : a, hi = a >= 0 ? -a : b;
  const double c_lo = phi(lo), c_hi_up = phi(-hi);
  const double mass = hi > 0 ? 1 - c_lo - c_hi_up : phi(hi) - c_lo;
  if (!(mass >= 1e-280))
    fail(Code::kInvalidArgument,
         "[truncated_normal] [a, b] = [{}, {}] holds a probability of {} under the standard normal, too little to "
         "sample; a and b are in units of std from the mean",
         a, b, mass);
}

void infer_dropout(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const double p = call.attrs.get_float("p");
  if (!(p >= 0 && p <= 1)) fail(Code::kInvalidArgument, "[dropout] p must be in [0, 1], got {}", p);
  check_offset(op, call.attrs);
  if (!call.attrs.get_bool("training") || p == 0) {
    call.attrs.set("training", AttrValue::of_bool(false));
    call.attrs.set("p", AttrValue::of_float(0));
  }
  if (!call.attrs.get_bool("training") || p == 1) {
    call.attrs.set("seed", AttrValue::of_int(0));
    call.attrs.set("offset", AttrValue::of_int(0));
  }
  call.out[0] = in[0];
  call.out[1] = {SPORA_DTYPE_BOOL, in[0].shape};
  call.result[0] = in[0].shape;
  call.result[1] = in[0].shape;
}

// Work estimates per element: a Philox block (10 rounds of two 32x32->64
// multiplies and four xors/adds) serves four 32-bit words; the transforms
// add a log, sqrt and sin/cos (normal) or an inverse CDF with erfc and exp
// (truncated_normal).
Cost generated_cost(const OpCall& c, double per_word, double per_element) {
  const double n = static_cast<double>(c.out[0].shape.numel());
  const double words = c.out[0].dtype == SPORA_DTYPE_F64 ? 2 : 1;
  Cost cost;
  cost.flops = n * (words * per_word + per_element);
  cost.bytes = n * static_cast<double>(dtype_size(c.out[0].dtype));
  return cost;
}
Cost uniform_cost(const OpCall& c) { return generated_cost(c, 15, 3); }
Cost normal_cost(const OpCall& c) { return generated_cost(c, 15, 60); }
Cost truncated_normal_cost(const OpCall& c) { return generated_cost(c, 15, 150); }
Cost dropout_cost(const OpCall& c) {
  const double n = static_cast<double>(c.in[0].shape.numel());
  const double es = static_cast<double>(dtype_size(c.in[0].dtype));
  Cost cost;
  cost.flops = c.attrs.get_bool("training") ? n * 17 : 0;
  cost.bytes = n * (2 * es + 1);
  return cost;
}

AttrSpec shape_attr() { return {"shape", AttrType::kInts, true, {}}; }
AttrSpec dtype_attr() { return {"dtype", AttrType::kString, false, AttrValue::of_string("f32")}; }
AttrSpec seed_attr() { return {"seed", AttrType::kInt, true, {}}; }
AttrSpec offset_attr() { return {"offset", AttrType::kInt, false, AttrValue::of_int(0)}; }
AttrSpec float_attr(const char* name, double v) { return {name, AttrType::kFloat, false, AttrValue::of_float(v)}; }

// ---- gradient rules ------------------------------------------------------------
// Sampling ops have no differentiable inputs; dropout's adjoint is dy on the
// kept elements scaled like the forward pass (dx = dy * mask / (1 - p)).

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

V dropout_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  if (!dy[0].valid()) return {Value{}};
  // Inference (and p = 0, which inference canonicalises to it) copies x.
  if (!n.attrs.get_bool("training")) return {dy[0]};
  const double p = n.attrs.get_float("p");
  const DType d = b.meta(dy[0]).dtype;
  const Value zero = b.scalar(0, d);
  if (p >= 1) return {b.op("where", {y[1], zero, zero})};  // everything dropped; keeps dy's shape
  const Value scaled = b.op("mul", {dy[0], b.scalar(1.0 / (1.0 - p), d)});
  return {b.op("where", {y[1], scaled, zero})};
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  const std::vector<DType> floats = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};
  OpDef uniform{"uniform",
                {},
                {"y"},
                {shape_attr(), float_attr("low", 0), float_attr("high", 1), dtype_attr(), seed_attr(), offset_attr()},
                {},
                infer_uniform,
                "uniform samples in [low, high) from the Philox stream (seed, offset)",
                {},
                false,
                false,
                uniform_cost};
  rules::kNoGradient.apply(uniform);
  r.add(std::move(uniform));
  OpDef normal{"normal",
               {},
               {"y"},
               {shape_attr(), float_attr("mean", 0), float_attr("std", 1), dtype_attr(), seed_attr(), offset_attr()},
               {},
               infer_normal,
               "normal samples (Box-Muller) from the Philox stream (seed, offset)",
               {},
               false,
               false,
               normal_cost};
  rules::kNoGradient.apply(normal);
  r.add(std::move(normal));
  OpDef truncated_normal{"truncated_normal",
                         {},
                         {"y"},
                         {shape_attr(), float_attr("mean", 0), float_attr("std", 1), float_attr("a", -2), float_attr("b", 2),
                          dtype_attr(), seed_attr(), offset_attr()},
                         {},
                         infer_truncated_normal,
                         "normal samples restricted to [mean + a*std, mean + b*std] (inverse CDF), from the Philox stream",
                         {},
                         false,
                         false,
                         truncated_normal_cost};
  rules::kNoGradient.apply(truncated_normal);
  r.add(std::move(truncated_normal));
  OpDef dropout{"dropout",
                {"x"},
                {"y", "mask"},
                {{"p", AttrType::kFloat, true, {}},
                 {"training", AttrType::kBool, false, AttrValue::of_bool(true)},
                 seed_attr(),
                 offset_attr()},
                floats,
                infer_dropout,
                "zeroes each element with probability p and scales the rest by 1/(1-p); mask (bool) marks kept ones",
                {},
                false,
                false,
                dropout_cost};
  Rules{dropout_bp}.apply(dropout);
  r.add(std::move(dropout));
}

SPORA_OP_FAMILY(register_random_ops);

}  // namespace spora
