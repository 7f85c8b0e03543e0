// Elementwise arithmetic of the GPU plugins: unary, binary and comparison
// ops by op code (a switch that is uniform across a warp, so one kernel per
// dtype serves every op instead of ops x dtypes instantiations), casts, and
// the broadcast index math mapping an output element to its input offsets.
//
// Semantics follow the reference kernels (plugins/common/kernels/
// elementwise_*.cpp): NaN propagates through max/min/relu/clip, integers
// wrap, float -> integer casts truncate and saturate with NaN -> 0, gelu and
// sigmoid are written without cancellation. tests/gpu checks each against
// the reference on the same inputs.
#pragma once
#include <cstdint>
#include <limits>

#include <spora/ops_elementwise.h>

#include "fmath.h"
#include "hd.h"

namespace spora::gpu {

// The table's ops (spora/ops_elementwise.def) that these kernels switch on,
// in table order: unary, logical_not, binary, then the bool-result ops
// (cast and where have kernels of their own).
#define SPORA_EW_GPU_UNARY(Id) k##Id,
#define SPORA_EW_GPU_NOT(Id) k##Id,
#define SPORA_EW_GPU_CAST(Id)
#define SPORA_EW_GPU_BINARY(Id) k##Id,
#define SPORA_EW_GPU_COMPARE(Id) k##Id,
#define SPORA_EW_GPU_WHERE(Id)
enum class EwOp : int32_t {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_EW_GPU_##kind(Id)
#include <spora/ops_elementwise.def>
  kCount
};

SPORA_HD inline bool ew_is_compare(EwOp op) { return op >= EwOp::kEqual && op <= EwOp::kLogicalXor; }

// Attributes in double, as the host gives them; converted per dtype below.
struct EwParams {
  double alpha = 0.01;     // leaky_relu
  double beta = 1;         // softplus
  double threshold = 20;   // softplus
  double lo = -HUGE_VAL;   // clip
  double hi = HUGE_VAL;
  int32_t gelu_tanh = 0;
};

// `d` as C, saturated (out-of-range float -> integer conversion is UB).
template <class C>
SPORA_HD inline C saturate(double d) {
  if constexpr (is_float_c<C>) {
    if (d > static_cast<double>(std::numeric_limits<C>::max())) return static_cast<C>(HUGE_VAL);
    if (d < static_cast<double>(std::numeric_limits<C>::lowest())) return static_cast<C>(-HUGE_VAL);
    return static_cast<C>(d);
  } else {
    if (d != d) return C(0);
    if (d <= static_cast<double>(std::numeric_limits<C>::min())) return std::numeric_limits<C>::min();
    if (d >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(d);
  }
}

template <class C>
SPORA_HD inline C sigmoid(C v) {
  // Split by sign so exp never overflows.
  if (v >= C(0)) return C(1) / (C(1) + fm::exp(-v));
  const C e = fm::exp(v);
  return e / (C(1) + e);
}

// Unary op `op` on v. Float-only ops on an integer C (rejected at plan
// time) return v unchanged rather than fail to compile.
template <class C>
SPORA_HD inline C ew_unary(EwOp op, C v, const EwParams& p) {
  if constexpr (is_float_c<C>) {
    switch (op) {
      case EwOp::kNeg: return -v;
      case EwOp::kAbs: return fm::fabs(v);
      case EwOp::kSign: return v > C(0) ? C(1) : v < C(0) ? C(-1) : v;  // keeps NaN and -0
      case EwOp::kSquare: return v * v;
      case EwOp::kRelu: return v < C(0) ? C(0) : v;                   // NaN stays NaN
      case EwOp::kExp: return fm::exp(v);
      case EwOp::kLog: return fm::log(v);
      case EwOp::kLog1p: return fm::log1p(v);
      case EwOp::kSqrt: return fm::sqrt(v);
      case EwOp::kRsqrt: return C(1) / fm::sqrt(v);
      case EwOp::kReciprocal: return C(1) / v;
      case EwOp::kSin: return fm::sin(v);
      case EwOp::kCos: return fm::cos(v);
      case EwOp::kTanh: return fm::tanh(v);
      case EwOp::kSigmoid: return sigmoid(v);
      case EwOp::kSilu: return v * sigmoid(v);
      case EwOp::kErf: return fm::erf(v);
      case EwOp::kFloor: return fm::floor(v);
      case EwOp::kCeil: return fm::ceil(v);
      case EwOp::kRound: return fm::rint(v);
      case EwOp::kLeakyRelu: {
        const C a = saturate<C>(p.alpha);
        return (v < C(0) ? C(0) : v) + a * (v < C(0) ? v : C(0));
      }
      case EwOp::kGelu:
        if (p.gelu_tanh) {  // 0.5 (1 + tanh(u)) = sigmoid(2u): no cancellation for large negative v
          const C k = C(2 * 0.7978845608028654);
          return v * sigmoid(k * (v + C(0.044715) * v * v * v));
        }
        return C(0.5) * v * fm::erfc(v * C(-0.7071067811865476));
      case EwOp::kSoftplus: {
        const C beta = saturate<C>(p.beta), threshold = saturate<C>(p.threshold);
        const C bx = v * beta;
        return bx > threshold ? v : fm::log1p(fm::exp(bx)) / beta;
      }
      case EwOp::kClip: {
        const C t = v < saturate<C>(p.lo) ? saturate<C>(p.lo) : v;  // NaN stays NaN
        return t > saturate<C>(p.hi) ? saturate<C>(p.hi) : t;
      }
      default: return v;
    }
  } else if constexpr (is_bool_c<C>) {
    return op == EwOp::kLogicalNot ? !v : v;
  } else {
    switch (op) {
      case EwOp::kNeg: return wrap_sub(C(0), v);
      case EwOp::kAbs:
        if constexpr (is_signed_int_c<C>) return v < 0 ? wrap_sub(C(0), v) : v;
        else return v;
      case EwOp::kSign:
        if constexpr (is_signed_int_c<C>) return static_cast<C>((v > 0) - (v < 0));
        else return static_cast<C>(v > 0);
      case EwOp::kSquare: return wrap_mul(v, v);
      case EwOp::kRelu:
        if constexpr (is_signed_int_c<C>) return v < C(0) ? C(0) : v;
        else return v;
      case EwOp::kClip: {
        // Integer bounds: the integers inside [lo, hi].
        const C lo = saturate<C>(::ceil(p.lo)), hi = saturate<C>(::floor(p.hi));
        const C t = v < lo ? lo : v;
        return t > hi ? hi : t;
      }
      default: return v;
    }
  }
}

// Binary op with a same-type result.
template <class C>
SPORA_HD inline C ew_arith(EwOp op, C a, C b) {
  switch (op) {
    case EwOp::kAdd: return wrap_add(a, b);
    case EwOp::kSub: return wrap_sub(a, b);
    case EwOp::kMul: return wrap_mul(a, b);
    case EwOp::kDiv:
      if constexpr (is_float_c<C>) return a / b;
      else return a;  // integer division is refused at plan time
    case EwOp::kPow:
      if constexpr (is_float_c<C>) return fm::pow(a, b);
      else return a;
    // NaN propagates: a NaN `a` is kept, a NaN `b` fails the compare and is taken.
    case EwOp::kMaximum: return (a > b || is_nan(a)) ? a : b;
    case EwOp::kMinimum: return (a < b || is_nan(a)) ? a : b;
    default: return a;
  }
}

// Binary op with a bool result.
template <class C>
SPORA_HD inline bool ew_compare(EwOp op, C a, C b) {
  switch (op) {
    case EwOp::kEqual: return a == b;
    case EwOp::kNotEqual: return a != b;
    case EwOp::kLess: return a < b;
    case EwOp::kLessEqual: return a <= b;
    case EwOp::kGreater: return a > b;
    case EwOp::kGreaterEqual: return a >= b;
    case EwOp::kLogicalAnd: return a && b;
    case EwOp::kLogicalOr: return a || b;
    case EwOp::kLogicalXor: return (a != C(0)) != (b != C(0));
    default: return false;
  }
}

// Float -> integer: truncation toward zero, saturating, NaN -> 0.
template <class TO, class V>
SPORA_HD inline TO float_to_int(V v) {
  if (v != v) return TO(0);
  const double d = static_cast<double>(v);
  if (d <= static_cast<double>(std::numeric_limits<TO>::min())) return std::numeric_limits<TO>::min();
  // 2^digits (one past max) is exact in double for every integer type here.
  if (d >= static_cast<double>(std::numeric_limits<TO>::max()) + 1.0) return std::numeric_limits<TO>::max();
  return static_cast<TO>(v);
}

// One element of cast from storage type TI to TO.
template <class TI, class TO>
SPORA_HD inline TO cast_elem(TI x) {
  using CI = compute_of<TI>;
  using CO = compute_of<TO>;
  const CI v = elem<TI>::load(x);
  if constexpr (std::is_same<TI, TO>::value) {
    return x;
  } else if constexpr (is_bool_c<CO>) {
    return elem<TO>::store(v != CI(0));
  } else if constexpr (is_float_c<CO>) {
    // 16-bit targets go through float (their only conversion); any other
    // pair is one rounding.
    return elem<TO>::store(static_cast<CO>(v));
  } else if constexpr (is_float_c<CI>) {
    return float_to_int<TO>(v);
  } else {
    return static_cast<TO>(v);  // integers wrap (two's complement), as numpy's astype
  }
}

// ---- broadcasting ----

constexpr int kEwMaxRank = 8;
constexpr int kEwMaxIn = 3;

// The output's iteration space (adjacent dims merged where possible, on
// the host) and each input's element strides over it, 0 where broadcast.
struct EwIndex {
  int32_t rank = 1;
  int32_t num_in = 1;
  int64_t dims[kEwMaxRank] = {1};
  int64_t strides[kEwMaxIn][kEwMaxRank] = {};
  // 1 when every input is either contiguous with the output or a scalar:
  // offsets are then i * inner stride, no division needed.
  int32_t flat = 0;
};

// Input offsets of flat output element i.
SPORA_HD inline void ew_offsets(const EwIndex& ix, int64_t i, int64_t* off) {
  for (int k = 0; k < ix.num_in; ++k) off[k] = 0;
  if (ix.flat) {
    for (int k = 0; k < ix.num_in; ++k) off[k] = ix.strides[k][ix.rank - 1] ? i : 0;
    return;
  }
  for (int d = ix.rank - 1; d >= 0; --d) {
    const int64_t n = ix.dims[d];
    const int64_t c = i % n;
    i /= n;
    for (int k = 0; k < ix.num_in; ++k) off[k] += c * ix.strides[k][d];
  }
}

}  // namespace spora::gpu
