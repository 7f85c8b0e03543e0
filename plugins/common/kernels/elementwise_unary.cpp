// Reference unary kernels. Each functor is a template on the compute type C
// (float for f16/bf16) with `ok` saying which C it supports; one loop is
// instantiated per (op, dtype), so the op is never switched on per element.
#include <cmath>
#include <cstring>
#include <limits>

#include "elementwise.h"

namespace spora::plugin::ew {
namespace {

template <class C>
constexpr bool kNumeric = kIsFloat<C> || kIsInt<C>;

// `d` as C, saturated: out-of-range float -> integer conversions are UB.
template <class C>
C saturate(double d) {
  using L = std::numeric_limits<C>;
  if constexpr (kIsFloat<C>) {
    if (d > static_cast<double>(L::max())) return L::infinity();
    if (d < static_cast<double>(L::lowest())) return -L::infinity();
    return static_cast<C>(d);
  } else {
    if (d != d) return C(0);
    if (d <= static_cast<double>(L::min())) return L::min();
    if (d >= static_cast<double>(L::max())) return L::max();
    return static_cast<C>(d);
  }
}

// `c ? a : b` through a bit mask. GCC (with its default -ftrapping-math)
// will not vectorise a ?: whose arm alone needs a float operation: it sinks
// the operation into a branch. A mask keeps both computed and the loop
// straight.
template <class C>
inline C bit_select(bool c, C a, C b) {
  using U = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  U ab, bb;
  std::memcpy(&ab, &a, sizeof a);
  std::memcpy(&bb, &b, sizeof b);
  const U m = U(0) - static_cast<U>(c);
  const U r = (ab & m) | (bb & ~m);
  C o;
  std::memcpy(&o, &r, sizeof o);
  return o;
}

// Round half to even without a libm call (baseline x86-64 has no roundps, so
// std::nearbyint and std::floor are calls and their loops stay scalar):
// adding and subtracting 2^mantissa rounds in the FPU's default mode, which
// the plugins never change (they only set FTZ/DAZ). Larger magnitudes, inf
// and NaN are already integral and pass through.
template <class C>
inline C round_even(C v) {
  constexpr C big = C(1) / std::numeric_limits<C>::epsilon();  // 2^23 or 2^52
  const C a = std::fabs(v);
  return bit_select(a < big, std::copysign((a + big) - big, v), v);
}

template <class C>
C sigmoid(C v) {
  // Split by sign so exp never overflows.
  if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
  const C e = std::exp(v);
  return e / (C(1) + e);
}

#define SPORA_EW_UNARY(Name, Ok, Body)          \
  template <class C>                            \
  struct Name {                                 \
    static constexpr bool ok = Ok;              \
    explicit Name(const Params&) {}             \
    C operator()(C v) const { Body }            \
  };

SPORA_EW_UNARY(Neg, kIsFloat<C> || kIsSignedInt<C>, {
  if constexpr (kIsSignedInt<C>) return wrap_sub(C(0), v);
  else return -v;
})
SPORA_EW_UNARY(Abs, kNumeric<C>, {
  if constexpr (kIsFloat<C>) return std::fabs(v);
  else if constexpr (kIsSignedInt<C>) return v < 0 ? wrap_sub(C(0), v) : v;
  else return v;
})
SPORA_EW_UNARY(Sign, kNumeric<C>, {
  if constexpr (kIsFloat<C>) return v > C(0) ? C(1) : v < C(0) ? C(-1) : v;  // keeps NaN and -0
  else if constexpr (kIsSignedInt<C>) return static_cast<C>((v > 0) - (v < 0));
  else return static_cast<C>(v > 0);
})
SPORA_EW_UNARY(Square, kNumeric<C>, { return wrap_mul(v, v); })
SPORA_EW_UNARY(Relu, kNumeric<C>, {
  if constexpr (std::is_unsigned_v<C>) return v;
  else return v < C(0) ? C(0) : v;  // NaN stays NaN
})
SPORA_EW_UNARY(Exp, kIsFloat<C>, { return std::exp(v); })
SPORA_EW_UNARY(Log, kIsFloat<C>, { return std::log(v); })
SPORA_EW_UNARY(Log1p, kIsFloat<C>, { return std::log1p(v); })
SPORA_EW_UNARY(Sqrt, kIsFloat<C>, { return std::sqrt(v); })
SPORA_EW_UNARY(Rsqrt, kIsFloat<C>, { return C(1) / std::sqrt(v); })
SPORA_EW_UNARY(Reciprocal, kIsFloat<C>, { return C(1) / v; })
SPORA_EW_UNARY(Sin, kIsFloat<C>, { return std::sin(v); })
SPORA_EW_UNARY(Cos, kIsFloat<C>, { return std::cos(v); })
SPORA_EW_UNARY(Tanh, kIsFloat<C>, { return std::tanh(v); })
SPORA_EW_UNARY(Sigmoid, kIsFloat<C>, { return sigmoid(v); })
SPORA_EW_UNARY(Silu, kIsFloat<C>, { return v * sigmoid(v); })
SPORA_EW_UNARY(Erf, kIsFloat<C>, { return std::erf(v); })
SPORA_EW_UNARY(Floor, kIsFloat<C>, {
  const C r = round_even(v);
  return std::copysign(r - bit_select(r > v, C(1), C(0)), v);
})
SPORA_EW_UNARY(Ceil, kIsFloat<C>, {
  const C r = round_even(v);
  return std::copysign(r + bit_select(r < v, C(1), C(0)), v);  // ceil(-0.5) is -0
})
SPORA_EW_UNARY(Round, kIsFloat<C>, { return round_even(v); })
SPORA_EW_UNARY(LogicalNot, kIsBool<C>, { return !v; })
#undef SPORA_EW_UNARY

template <class C>
struct LeakyRelu {
  static constexpr bool ok = kIsFloat<C>;
  C alpha;
  explicit LeakyRelu(const Params& p) : alpha(saturate<C>(p.alpha)) {}
  // Both parts always computed (see round_even); NaN stays NaN.
  C operator()(C v) const { return (v < C(0) ? C(0) : v) + alpha * (v < C(0) ? v : C(0)); }
};

template <class C>
struct Gelu {
  static constexpr bool ok = kIsFloat<C>;
  bool tanh_form;
  explicit Gelu(const Params& p) : tanh_form(p.gelu_tanh) {}
  // Written without 1 + erf(..) or 1 + tanh(..), which cancel to 0 for
  // x below about -6 and lose the (tiny, but nonzero) result.
  C operator()(C v) const {
    if (tanh_form) {  // 0.5 (1 + tanh(u)) = sigmoid(2u)
      const C k = C(2 * 0.7978845608028654);  // 2 sqrt(2 / pi)
      return v * sigmoid(k * (v + C(0.044715) * v * v * v));
    }
    return C(0.5) * v * std::erfc(v * C(-0.7071067811865476));
  }
};

// As PyTorch: linear above the threshold, where log1p(exp) would only lose
// precision or overflow.
template <class C>
struct Softplus {
  static constexpr bool ok = kIsFloat<C>;
  C beta, threshold;
  explicit Softplus(const Params& p) : beta(saturate<C>(p.beta)), threshold(saturate<C>(p.threshold)) {}
  C operator()(C v) const {
    const C bx = v * beta;
    return bx > threshold ? v : std::log1p(std::exp(bx)) / beta;
  }
};

template <class C>
struct Clip {
  static constexpr bool ok = kNumeric<C>;
  C lo, hi;
  explicit Clip(const Params& p)
      : lo(saturate<C>(kIsFloat<C> ? p.lo : std::ceil(p.lo))), hi(saturate<C>(kIsFloat<C> ? p.hi : std::floor(p.hi))) {}
  C operator()(C v) const {
    const C t = v < lo ? lo : v;  // NaN stays NaN
    return t > hi ? hi : t;
  }
};

template <class T, template <class> class F>
void unary_range(const State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  const F<compute_t<T>> f(s.prm);
  const auto* x = static_cast<const stor_t<T>*>(in[0]);
  auto* y = static_cast<stor_t<T>*>(out[0]);
  for (int64_t i = begin; i < end; ++i) y[i] = st<T>(f(ld<T>(x[i])));
}

template <template <class> class F>
RangeFn pick(int32_t dtype) {
  RangeFn r = nullptr;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (F<compute_t<T>>::ok) r = &unary_range<T, F>;
  });
  return r;
}

}  // namespace

RangeFn pick_unary(Op op, int32_t dtype) {
  switch (op) {
    case Op::kNeg: return pick<Neg>(dtype);
    case Op::kAbs: return pick<Abs>(dtype);
    case Op::kSign: return pick<Sign>(dtype);
    case Op::kSquare: return pick<Square>(dtype);
    case Op::kRelu: return pick<Relu>(dtype);
    case Op::kExp: return pick<Exp>(dtype);
    case Op::kLog: return pick<Log>(dtype);
    case Op::kLog1p: return pick<Log1p>(dtype);
    case Op::kSqrt: return pick<Sqrt>(dtype);
    case Op::kRsqrt: return pick<Rsqrt>(dtype);
    case Op::kReciprocal: return pick<Reciprocal>(dtype);
    case Op::kSin: return pick<Sin>(dtype);
    case Op::kCos: return pick<Cos>(dtype);
    case Op::kTanh: return pick<Tanh>(dtype);
    case Op::kSigmoid: return pick<Sigmoid>(dtype);
    case Op::kSilu: return pick<Silu>(dtype);
    case Op::kErf: return pick<Erf>(dtype);
    case Op::kFloor: return pick<Floor>(dtype);
    case Op::kCeil: return pick<Ceil>(dtype);
    case Op::kRound: return pick<Round>(dtype);
    case Op::kLeakyRelu: return pick<LeakyRelu>(dtype);
    case Op::kGelu: return pick<Gelu>(dtype);
    case Op::kSoftplus: return pick<Softplus>(dtype);
    case Op::kClip: return pick<Clip>(dtype);
    case Op::kLogicalNot: return pick<LogicalNot>(dtype);
    default: return nullptr;
  }
}

}  // namespace spora::plugin::ew
