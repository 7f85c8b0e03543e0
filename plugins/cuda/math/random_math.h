// uniform, normal, truncated_normal and dropout, element by element as the
// reference kernels (plugins/common/kernels/random.cpp) compute them from
// the Philox stream of (seed, offset) (sdk philox.h). Work is split by
// Philox block: *_block(b) draws block b once and writes the elements that
// use its words (4 of a 32-bit-or-smaller dtype, 2 of f64), so any grid
// gives the reference's bits. tests/gpu runs the same functions over every
// block against the reference.
//
// Bit-exactness, every dtype. Every operation the reference rounds is done
// here in the same order and precision, and never fused into an FMA (nvcc
// and hipcc contract a * b + c by default, g++ does where the target has
// FMA): rn_add/rn_mul of rounded.h. The transcendental functions (log, sin/cos of 2 pi u, erfc, exp)
// are exact_math.h's too, on both sides, built from those same rounded
// operations, so the device computes the reference's bits by construction,
// f64 included; sqrt and division are correctly rounded everywhere. Dropout
// passes a NaN input's payload through as the host does (rnd_scale).
#pragma once
#include <cstdint>

#include <cmath>
#include <string>

#include <spora/sdk/exact_math.h>
#include <spora/sdk/philox.h>

#include "fmath.h"
#include "hd.h"
#include "kernel_plan.h"  // plugins/common: KernelPlan (host side)
#include "rounded.h"

namespace spora::gpu {

using spora::plugin::PhiloxBlock;
using spora::plugin::PhiloxStream;

// ---- the next value below (std::nextafter(r, -inf); the reference's
// sign-magnitude step for 16-bit floats) ----

SPORA_HD inline float rnd_next_below(float r) {
  if (r != r) return r;
  const uint32_t u = float_bits(r);
  if ((u & 0x7fffffffu) == 0) return bits_float(0x80000001u);  // +-0: smallest negative subnormal
  if (u == 0xff800000u) return r;                                // -inf stays
  return bits_float(u & 0x80000000u ? u + 1 : u - 1);
}
SPORA_HD inline double rnd_next_below(double r) {
  if (r != r) return r;
  uint64_t u;
  memcpy(&u, &r, 8);
  if ((u & 0x7fffffffffffffffull) == 0) u = 0x8000000000000001ull;
  else if (u != 0xfff0000000000000ull) u = u & 0x8000000000000000ull ? u + 1 : u - 1;
  double out;
  memcpy(&out, &u, 8);
  return out;
}
SPORA_HD inline uint16_t rnd_next_below_bits16(uint16_t b) {
  if (b == 0) return 0x8001u;
  return static_cast<uint16_t>(b & 0x8000u ? b + 1 : b - 1);
}
SPORA_HD inline half_t rnd_next_below(half_t r) { return half_t{rnd_next_below_bits16(r.bits)}; }
SPORA_HD inline bhalf_t rnd_next_below(bhalf_t r) { return bhalf_t{rnd_next_below_bits16(r.bits)}; }

// Elements per Philox block: f64 takes two words per uniform.
template <class T>
SPORA_HD constexpr int64_t rnd_per_block() {
  return std::is_same<T, double>::value ? 2 : 4;
}
// Philox blocks covering n elements.
template <class T>
SPORA_HD inline int64_t rnd_blocks(int64_t n) {
  return (n + rnd_per_block<T>() - 1) / rnd_per_block<T>();
}

// Elements [first, end) of block b of an n-element output.
template <class T>
SPORA_HD inline void rnd_span(int64_t b, int64_t n, int64_t* first, int* count) {
  *first = b * rnd_per_block<T>();
  const int64_t left = n - *first;
  *count = static_cast<int>(left < rnd_per_block<T>() ? left : rnd_per_block<T>());
}

// ---- uniform: low + (high - low) u, in [low, high) ----

struct UniformArgs {
  PhiloxStream stream{0, 0};
  double low, span, high;
};

template <class T>
SPORA_HD inline void uniform_block(const UniformArgs& a, T* y, int64_t b, int64_t n) {
  int64_t first;
  int count;
  rnd_span<T>(b, n, &first, &count);
  const PhiloxBlock w = a.stream.block(static_cast<uint64_t>(b));
  for (int k = 0; k < count; ++k) {
    double u;
    if (std::is_same<T, double>::value) u = spora::plugin::uniform53(w.v[2 * k], w.v[2 * k + 1]);
    else u = spora::plugin::uniform24(w.v[k]);
    T r = elem<T>::store(rn_add(a.low, rn_mul(a.span, u)));
    // Rounding may reach high; the interval is half-open.
    if (static_cast<double>(elem<T>::load(r)) >= a.high) r = rnd_next_below(r);
    y[first + k] = r;
  }
}

// ---- normal: Box-Muller ----

struct NormalArgs {
  PhiloxStream stream{0, 0};
  double mean, std;
};

// Pair (u1 in (0, 1], u2 in [0, 1)) -> mean + std r cos(2 pi u2),
// mean + std r sin(2 pi u2), r = sqrt(-2 log u1).
template <class T>
SPORA_HD inline void normal_pair(const NormalArgs& a, double u1, double u2, T* y0, T* y1) {
  const double r = fm::sqrt(rn_mul(-2.0, spora::exact_math::log(u1)));
  double sin_t, cos_t;
  spora::exact_math::sincos_2pi(u2, &sin_t, &cos_t);
  *y0 = elem<T>::store(rn_add(a.mean, rn_mul(a.std, rn_mul(r, cos_t))));
  if (y1) *y1 = elem<T>::store(rn_add(a.mean, rn_mul(a.std, rn_mul(r, sin_t))));
}

// Pair j is elements 2j (cos) and 2j + 1 (sin); a block holds 2 pairs
// (words 2q, 2q + 1 for pair q), or 1 for f64 (words 0, 1 for u1 and 2, 3
// for u2).
template <class T>
SPORA_HD inline void normal_block(const NormalArgs& a, T* y, int64_t b, int64_t n) {
  int64_t first;
  int count;
  rnd_span<T>(b, n, &first, &count);
  const PhiloxBlock w = a.stream.block(static_cast<uint64_t>(b));
  for (int k = 0; k < count; k += 2) {
    double u1, u2;
    if (std::is_same<T, double>::value) {
      u1 = spora::plugin::uniform53_open0(w.v[0], w.v[1]);
      u2 = spora::plugin::uniform53(w.v[2], w.v[3]);
    } else {
      u1 = spora::plugin::uniform24_open0(w.v[k]);
      u2 = spora::plugin::uniform24(w.v[k + 1]);
    }
    normal_pair<T>(a, u1, u2, &y[first + k], k + 1 < count ? &y[first + k + 1] : nullptr);
  }
}

// ---- truncated normal: inverse CDF on [a, b] ----

// Standard normal CDF (host: the plan's constants; device: the f64 Halley step).
SPORA_HD inline double rnd_phi_cdf(double x) {
  return rn_mul(0.5, spora::exact_math::erfc(rn_mul(-x, 0.70710678118654752440)));
}

// Inverse of the standard normal CDF for p in (0, 0.5]: Acklam's rational
// approximation and, when `refine`, one Halley step on the exact CDF, as
// the reference evaluates them.
SPORA_HD inline double rnd_inv_phi_lower(double p, bool refine) {
  constexpr double a0 = -3.969683028665376e+01, a1 = 2.209460984245205e+02, a2 = -2.759285104469687e+02,
                   a3 = 1.383577518672690e+02, a4 = -3.066479806614716e+01, a5 = 2.506628277459239e+00;
  constexpr double b0 = -5.447609879822406e+01, b1 = 1.615858368580409e+02, b2 = -1.556989798598866e+02,
                   b3 = 6.680131188771972e+01, b4 = -1.328068155288572e+01;
  constexpr double c0 = -7.784894002430293e-03, c1 = -3.223964580411365e-01, c2 = -2.400758277161838e+00,
                   c3 = -2.549732539343734e+00, c4 = 4.374664141464968e+00, c5 = 2.938163982698783e+00;
  constexpr double d0 = 7.784695709041462e-03, d1 = 3.224671290700398e-01, d2 = 2.445134137142996e+00,
                   d3 = 3.754408661907416e+00;
  double x;
  if (p < 0.02425) {
    const double q = fm::sqrt(rn_mul(-2.0, spora::exact_math::log(p)));
    const double num = rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(c0, q), c1), q), c2), q), c3), q), c4), q), c5);
    const double den = rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(d0, q), d1), q), d2), q), d3), q), 1.0);
    x = num / den;
  } else {
    const double q = rn_sub(p, 0.5), r = rn_mul(q, q);
    const double num = rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(a0, r), a1), r), a2), r), a3), r), a4), r), a5), q);
    const double den =
        rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(rn_add(rn_mul(b0, r), b1), r), b2), r), b3), r), b4), r), 1.0);
    x = num / den;
  }
  if (!refine) return x;
  const double e = rn_sub(rnd_phi_cdf(x), p);
  // e / pdf(x); the reference's 0.5 * x * x is (0.5 * x) * x.
  const double u = rn_mul(rn_mul(e, 2.50662827463100050242), spora::exact_math::exp(rn_mul(rn_mul(0.5, x), x)));
  return rn_sub(x, u / rn_add(1.0, rn_mul(rn_mul(0.5, x), u)));
}

struct TruncArgs {
  PhiloxStream stream{0, 0};
  double mean, std;
  // [lo, hi] in units of std, mirrored when a >= 0 so that lo < 0.
  double lo, hi;
  bool mirrored;
  double cdf_lo, ccdf_hi, mass;  // Phi(lo), Phi(-hi), the probability in [lo, hi]
};

// One standard sample from u in (0, 1); `refine` for f64.
SPORA_HD inline double trunc_sample(const TruncArgs& s, double u, bool refine) {
  const double p = rn_add(s.cdf_lo, rn_mul(u, s.mass));
  double x = p <= 0.5 ? rnd_inv_phi_lower(p, refine)
                      : -rnd_inv_phi_lower(rn_add(s.ccdf_hi, rn_mul(rn_sub(1.0, u), s.mass)), refine);
  x = x < s.lo ? s.lo : x;  // std::min(std::max(x, lo), hi)
  x = s.hi < x ? s.hi : x;
  return s.mirrored ? -x : x;
}

template <class T>
SPORA_HD inline void trunc_block(const TruncArgs& a, T* y, int64_t b, int64_t n) {
  int64_t first;
  int count;
  rnd_span<T>(b, n, &first, &count);
  const PhiloxBlock w = a.stream.block(static_cast<uint64_t>(b));
  constexpr bool f64 = std::is_same<T, double>::value;
  for (int k = 0; k < count; ++k) {
    const double u = f64 ? spora::plugin::uniform53_mid(w.v[2 * k], w.v[2 * k + 1])
                         : spora::plugin::uniform24_mid(w.v[k]);
    y[first + k] = elem<T>::store(rn_add(a.mean, rn_mul(a.std, trunc_sample(a, u, f64))));
  }
}

// ---- dropout ----

struct DropoutArgs {
  PhiloxStream stream{0, 0};
  bool identity;       // training = false or p = 0: y = x, mask all true
  uint64_t threshold;  // keep element i when word i >= threshold (2^32 drops all)
  double scale;        // 1 / (1 - p), rounded to the compute type at use
};

// v * scale as the host's FPU gives it: a NaN v comes out as itself,
// quietened, where a GPU returns its canonical NaN (the payload survives
// into f32, f64 and bf16 outputs).
SPORA_HD inline float rnd_scale(float v, float scale) {
  return v != v ? bits_float(float_bits(v) | 0x00400000u) : rn_mul(v, scale);
}
SPORA_HD inline double rnd_scale(double v, double scale) {
  if (v == v) return rn_mul(v, scale);
  uint64_t u;
  memcpy(&u, &v, 8);
  u |= 0x0008000000000000ull;
  memcpy(&v, &u, 8);
  return v;
}

// Elements 4b .. 4b + 3 (the word per element for every dtype).
template <class T>
SPORA_HD inline void dropout_block(const DropoutArgs& a, const T* x, T* y, bool_t* mask, int64_t b, int64_t n) {
  using C = compute_of<T>;
  const int64_t first = b * 4;
  const int count = static_cast<int>(n - first < 4 ? n - first : 4);
  if (a.identity) {
    for (int k = 0; k < count; ++k) {
      y[first + k] = x[first + k];
      mask[first + k] = bool_t{1};
    }
    return;
  }
  const PhiloxBlock w = a.stream.block(static_cast<uint64_t>(b));
  const C scale = static_cast<C>(a.scale);
  for (int k = 0; k < count; ++k) {
    const bool keep = w.v[k] >= a.threshold;
    mask[first + k] = bool_t{static_cast<uint8_t>(keep ? 1 : 0)};
    y[first + k] = keep ? elem<T>::store(rnd_scale(elem<T>::load(x[first + k]), scale)) : elem<T>::store(C(0));
  }
}
SPORA_HD inline int64_t dropout_blocks(int64_t n) { return (n + 3) / 4; }

// ---- host side: the arguments of a validated plan ----

enum class RndKind : int32_t { kUniform, kNormal, kTrunc, kDropout };

inline bool rnd_kind_of(const std::string& op, RndKind* k) {
  if (op == "uniform") *k = RndKind::kUniform;
  else if (op == "normal") *k = RndKind::kNormal;
  else if (op == "truncated_normal") *k = RndKind::kTrunc;
  else if (op == "dropout") *k = RndKind::kDropout;
  else return false;
  return true;
}

inline PhiloxStream rnd_stream_of(const spora::plugin::KernelPlan& p) {
  return PhiloxStream(static_cast<uint64_t>(p.attrs.get_int("seed", 0)),
                      static_cast<uint64_t>(p.attrs.get_int("offset", 0)));
}

inline UniformArgs uniform_args_of(const spora::plugin::KernelPlan& p) {
  const double low = p.attrs.get_float("low", 0.0), high = p.attrs.get_float("high", 1.0);
  return UniformArgs{rnd_stream_of(p), low, high - low, high};
}

inline NormalArgs normal_args_of(const spora::plugin::KernelPlan& p) {
  return NormalArgs{rnd_stream_of(p), p.attrs.get_float("mean", 0.0), p.attrs.get_float("std", 1.0)};
}

// The reference planner's constants (the same functions as on the device).
inline TruncArgs trunc_args_of(const spora::plugin::KernelPlan& p) {
  const double a = p.attrs.get_float("a", -2.0), b = p.attrs.get_float("b", 2.0);
  TruncArgs s{rnd_stream_of(p), p.attrs.get_float("mean", 0.0), p.attrs.get_float("std", 1.0), 0, 0, false, 0, 0, 0};
  s.mirrored = a >= 0;
  s.lo = s.mirrored ? -b : a;
  s.hi = s.mirrored ? -a : b;
  s.cdf_lo = rnd_phi_cdf(s.lo);
  s.ccdf_hi = rnd_phi_cdf(-s.hi);
  s.mass = s.hi > 0 ? 1 - s.cdf_lo - s.ccdf_hi : rnd_phi_cdf(s.hi) - s.cdf_lo;
  return s;
}

inline DropoutArgs dropout_args_of(const spora::plugin::KernelPlan& p) {
  const double prob = p.attrs.get_float("p", 0.5);
  DropoutArgs s{rnd_stream_of(p), !p.attrs.get_bool("training", true) || prob == 0, 0, 1};
  if (!s.identity) {
    s.threshold = static_cast<uint64_t>(std::llround(std::ldexp(prob, 32)));
    s.scale = prob < 1 ? 1 / (1 - prob) : 0;
  }
  return s;
}

}  // namespace spora::gpu
