// log, exp, erfc and sin/cos of 2 pi u, in double, computed ONLY from
// operations IEEE 754 rounds exactly (+, -, *, /, comparisons, bit and
// integer manipulation), each rounded on its own (never fused into an FMA).
// Header-only and among the SDK's helpers because the random ops must give
// the same bits on every device: the cpu reference kernels
// (plugins/common/kernels/random.cpp) and the GPU kernels (plugins/cuda,
// also compiled for ROCm) call these functions, so their results agree by
// construction, where each platform's libm (glibc, CUDA's libdevice, ROCm's
// ocml) rounds its own way.
//
// Accuracy: within about 1 ulp of the exact value over the domains the
// random ops use (tests/gpu/gpu_math_exact_test.cpp measures them against
// glibc), so the distributions the ops sample are unchanged.
//
// No contraction: under nvcc's device pass the __d*_rn intrinsics (never
// contracted); under hipcc's device pass `#pragma clang fp contract(off)`
// (its default, -ffp-contract=fast-honor-pragmas, honours it); on the host
// an empty asm makes every product an opaque, rounded value, because GCC
// contracts a * b + c whenever the target has FMA (its default is
// -ffp-contract=fast and no pragma turns that off) and clang's
// -ffp-contract=fast disregards the pragma.
//
// Valid C++11 (nvcc and hipcc may compile it in older modes).
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SPORA_EXACT_HD __host__ __device__
#else
#define SPORA_EXACT_HD
#endif

namespace spora {
namespace exact_math {

// ---- single rounded operations ----

SPORA_EXACT_HD inline double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a + b;
#endif
}

SPORA_EXACT_HD inline double sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a - b;
#endif
}

SPORA_EXACT_HD inline double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#elif defined(__HIP_DEVICE_COMPILE__)
  // hipcc's default -ffp-contract=fast-honor-pragmas honours this.
#pragma clang fp contract(off)
  return a * b;
#else
  double p = a * b;
  // The host: clang's -ffp-contract=fast ignores the pragma, GCC has none.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile double v = p;
  p = v;
#endif
  return p;
#endif
}

SPORA_EXACT_HD inline double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// ---- bits ----

SPORA_EXACT_HD inline uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
SPORA_EXACT_HD inline double double_of(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}
// 2^k for -1022 <= k <= 1023.
SPORA_EXACT_HD inline double pow2(int k) { return double_of(static_cast<uint64_t>(k + 1023) << 52); }
SPORA_EXACT_HD inline bool is_nan(double x) { return x != x; }
SPORA_EXACT_HD inline double infinity() { return double_of(0x7ff0000000000000ull); }
SPORA_EXACT_HD inline double quiet_nan() { return double_of(0x7ff8000000000000ull); }

// y * 2^k, y in [2^-20, 2] (what exp and erfc scale), rounded once: at
// the last multiplication, the one that may leave the normal range.
SPORA_EXACT_HD inline double scale2(double y, int k) {
  if (k > 1023) return mul(mul(y, pow2(1023)), pow2(k - 1023 > 1023 ? 1023 : k - 1023));
  if (k < -1021) {
    if (k < -1200) return mul(y, 0.0);  // below 2^-1079: rounds to 0
    return mul(mul(y, pow2(k + 200)), pow2(-200));
  }
  return mul(y, pow2(k));
}

// ---- double-double: value hi + lo, |lo| <= ulp(hi) / 2 ----

struct DD {
  double hi, lo;
};

// a + b = s + e exactly (Knuth).
SPORA_EXACT_HD inline DD two_sum(double a, double b) {
  const double s = add(a, b), bb = sub(s, a);
  return DD{s, add(sub(a, sub(s, bb)), sub(b, bb))};
}
// |a| >= |b| (or a == 0): a + b = s + e exactly.
SPORA_EXACT_HD inline DD fast_two_sum(double a, double b) {
  const double s = add(a, b);
  return DD{s, sub(b, sub(s, a))};
}
// Veltkamp's split: a = hi + lo, each with at most 26 significant bits
// (|a| < 2^995, which every caller here keeps).
SPORA_EXACT_HD inline DD split(double a) {
  const double c = mul(134217729.0, a);  // 2^27 + 1
  const double hi = sub(c, sub(c, a));
  return DD{hi, sub(a, hi)};
}
// a * b = p + e exactly (Dekker), without an FMA.
SPORA_EXACT_HD inline DD two_prod(double a, double b) {
  const double p = mul(a, b);
  const DD x = split(a), y = split(b);
  const double e =
      add(add(add(sub(mul(x.hi, y.hi), p), mul(x.hi, y.lo)), mul(x.lo, y.hi)), mul(x.lo, y.lo));
  return DD{p, e};
}
SPORA_EXACT_HD inline DD dd_add(DD a, DD b) {
  const DD s = two_sum(a.hi, b.hi);
  return fast_two_sum(s.hi, add(s.lo, add(a.lo, b.lo)));
}
SPORA_EXACT_HD inline DD dd_neg(DD a) { return DD{sub(0.0, a.hi), sub(0.0, a.lo)}; }
SPORA_EXACT_HD inline DD dd_mul(DD a, DD b) {
  const DD p = two_prod(a.hi, b.hi);
  return fast_two_sum(p.hi, add(p.lo, add(mul(a.hi, b.lo), mul(a.lo, b.hi))));
}
SPORA_EXACT_HD inline DD dd_div(DD a, DD b) {
  const double q = div(a.hi, b.hi);
  // Remainder a - q b, its leading part exact.
  const DD p = two_prod(q, b.hi);
  const double r = sub(add(sub(sub(a.hi, p.hi), p.lo), a.lo), mul(q, b.lo));
  return fast_two_sum(q, div(r, b.hi));
}
SPORA_EXACT_HD inline DD dd_div(DD a, double b) { return dd_div(a, DD{b, 0.0}); }
SPORA_EXACT_HD inline double dd_round(DD a) { return add(a.hi, a.lo); }

// ---- log ----

// Natural logarithm: log(x) = k ln 2 + log(1 + f), with x = 2^k (1 + f) and
// 1 + f in [sqrt(1/2), sqrt(2)). log(1 + f) = 2 atanh(s), s = f / (2 + f),
// |s| <= 0.1716, is evaluated as f - f^2/2 + s (f^2/2 + R(s^2)): f is
// exact, so the rounding errors only touch the small correction terms.
SPORA_EXACT_HD inline double log(double x) {
  if (is_nan(x) || x < 0) return quiet_nan();
  if (x == 0) return sub(0.0, infinity());
  if (x == infinity()) return x;
  int k = 0;
  if (x < 2.2250738585072014e-308) {  // subnormal: scale into the normal range (exact)
    x = mul(x, 18014398509481984.0);  // 2^54
    k = -54;
  }
  const uint64_t b = bits_of(x);
  k += static_cast<int>((b >> 52) & 0x7ff) - 1023;
  double m = double_of((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m = mul(m, 0.5);  // exact
    k += 1;
  }
  const double f = sub(m, 1.0);  // exact (Sterbenz)
  const double s = div(f, add(2.0, f)), z = mul(s, s);
  // R = 2 s^2/3 + 2 s^4/5 + ... + 2 s^22/23; the first term left out is
  // below 2^-60 of the result for |s| <= 0.1716.
  double r = 0.08695652173913043;  // 2/23
  r = add(0.09523809523809523, mul(z, r));
  r = add(0.10526315789473684, mul(z, r));
  r = add(0.11764705882352941, mul(z, r));
  r = add(0.13333333333333333, mul(z, r));
  r = add(0.15384615384615385, mul(z, r));
  r = add(0.18181818181818182, mul(z, r));
  r = add(0.2222222222222222, mul(z, r));
  r = add(0.2857142857142857, mul(z, r));
  r = add(0.4, mul(z, r));
  r = add(0.6666666666666666, mul(z, r));
  r = mul(z, r);
  const double hfsq = mul(mul(0.5, f), f);
  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 42 significant bits: k kLn2Hi is
  // exact for |k| <= 2^11.
  const double kLn2Hi = 0.6931471805598903, kLn2Lo = 5.497923018708371e-14;
  const double dk = static_cast<double>(k);
  const double corr = add(mul(s, add(hfsq, r)), mul(dk, kLn2Lo));
  return add(mul(dk, kLn2Hi), sub(f, sub(hfsq, corr)));
}

// ---- exp ----

// exp(xh + xl) = 2^k (hi + lo), for |xh| <= 746 and |xl| <= ulp(xh):
// k = round(xh / ln 2), r = xh + xl - k ln 2 with |r| <= 0.35 (a
// double-double: k ln 2 in two parts, the leading difference exact), and
// exp(r) = 1 + r + r^2 P(r) with P's Taylor series to r^14 / 14!.
SPORA_EXACT_HD inline DD exp_core(double xh, double xl, int* k_out) {
  const double t = mul(xh, 1.4426950408889634);  // 1 / ln 2
  const int k = static_cast<int>(t < 0 ? sub(t, 0.5) : add(t, 0.5));  // rounds half away from 0
  const double dk = static_cast<double>(k);
  const double kLn2Hi = 0.6931471805598903, kLn2Lo = 5.497923018708371e-14;
  const double rh0 = sub(xh, mul(dk, kLn2Hi));  // exact: k kLn2Hi is exact and within a factor 2 of xh
  DD r = two_sum(rh0, sub(0.0, mul(dk, kLn2Lo)));
  r = fast_two_sum(r.hi, add(r.lo, xl));
  const double x = r.hi;
  double p = 1.1470745597729725e-11;  // 1/14!
  p = add(1.6059043836821613e-10, mul(x, p));
  p = add(2.08767569878681e-09, mul(x, p));
  p = add(2.505210838544172e-08, mul(x, p));
  p = add(2.755731922398589e-07, mul(x, p));
  p = add(2.7557319223985893e-06, mul(x, p));
  p = add(2.48015873015873e-05, mul(x, p));
  p = add(0.0001984126984126984, mul(x, p));
  p = add(0.001388888888888889, mul(x, p));
  p = add(0.008333333333333333, mul(x, p));
  p = add(0.041666666666666664, mul(x, p));
  p = add(0.16666666666666666, mul(x, p));
  p = add(0.5, mul(x, p));
  p = mul(mul(x, x), p);
  // exp(x + lo) = exp(x) (1 + lo) to within lo^2: the low part adds
  // lo (1 + x).
  const DD one_x = two_sum(1.0, x);
  *k_out = k;
  return fast_two_sum(one_x.hi, add(one_x.lo, add(p, add(r.lo, mul(r.lo, x)))));
}

SPORA_EXACT_HD inline double exp(double x) {
  if (is_nan(x)) return x;
  if (x > 710.0) return infinity();
  if (x < -746.0) return 0.0;
  int k;
  const DD e = exp_core(x, 0.0, &k);
  return scale2(dd_round(e), k);
}

// ---- erfc ----

// erfc(x) = 1 - erf(x) for |x| < 3, from the Taylor series of erf in
// double-double: erf(x) = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)). At
// |x| = 3 the terms peak near 3e3 and erfc is 2e-5, so about 8 of the ~32
// digits cancel.
SPORA_EXACT_HD inline double erfc_series(double x) {
  if (x == 0) return 1.0;
  const DD x2 = two_prod(x, x);
  const DD minus_x2 = dd_neg(x2);
  DD term{x, 0.0}, sum{x, 0.0};
  for (int n = 1; n < 120; ++n) {
    term = dd_div(dd_mul(term, minus_x2), static_cast<double>(n));
    const DD t = dd_div(term, static_cast<double>(2 * n + 1));
    sum = dd_add(sum, t);
    const double mag = t.hi < 0 ? sub(0.0, t.hi) : t.hi, smag = sum.hi < 0 ? sub(0.0, sum.hi) : sum.hi;
    if (mag <= mul(smag, 1e-34)) break;
  }
  const DD erf = dd_mul(sum, DD{1.1283791670955126, 1.533545961316588e-17});  // 2/sqrt(pi)
  return dd_round(dd_add(DD{1.0, 0.0}, dd_neg(erf)));
}

// erfc(x) for x >= 3: exp(-x^2) / sqrt(pi) / F, F the continued fraction
// x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + ...)))), evaluated from
// depth `terms` up in double-double (40 levels reach 2^-64 at x = 3, 24 at
// x >= 4.5); exp(-x^2) takes x^2 exactly as a double-double.
SPORA_EXACT_HD inline double erfc_tail(double x) {
  if (x > 28.0) return 0.0;  // erfc(27.3) is below the smallest subnormal
  const int terms = x < 4.5 ? 40 : 24;
  DD f{x, 0.0};
  for (int k = terms; k >= 1; --k) f = dd_add(DD{x, 0.0}, dd_div(DD{mul(0.5, static_cast<double>(k)), 0.0}, f));
  const DD x2 = two_prod(x, x);
  int k;
  const DD e = exp_core(sub(0.0, x2.hi), sub(0.0, x2.lo), &k);
  const DD v = dd_div(dd_mul(e, DD{0.5641895835477563, 7.66772980658294e-18}), f);  // 1/sqrt(pi)
  return scale2(dd_round(v), k);
}

// Complementary error function, every double x.
SPORA_EXACT_HD inline double erfc(double x) {
  if (is_nan(x)) return x;
  if (x < -3.0) return sub(2.0, erfc_tail(sub(0.0, x)));  // erfc(-x) <= 2.3e-5: no precision lost
  if (x < 3.0) return erfc_series(x);
  return erfc_tail(x);
}

// ---- sin and cos of 2 pi u ----

// sin(pi/2 w) and cos(pi/2 w) for w in [0, 1/2] (angles up to pi/4):
// Taylor series in w, the leading terms in double-double.
SPORA_EXACT_HD inline double sin_half_pi(double w) {
  const double z = mul(w, w);
  double p = -4.377065467313742e-14;  // (pi/2)^19 / 19!, signs alternating
  p = add(6.0669357311061955e-12, mul(z, p));
  p = add(-6.688035109811468e-10, mul(z, p));
  p = add(5.692172921967927e-08, mul(z, p));
  p = add(-3.598843235212085e-06, mul(z, p));
  p = add(0.00016044118478735983, mul(z, p));
  p = add(-0.004681754135318688, mul(z, p));
  p = add(0.07969262624616705, mul(z, p));
  p = add(-0.6459640975062463, mul(z, p));
  // pi/2 w exactly as a double-double, then the rest.
  const double kHalfPiHi = 1.5707963267948966, kHalfPiLo = 6.123233995736766e-17;
  const DD lead = two_prod(kHalfPiHi, w);
  const double tail = add(add(lead.lo, mul(kHalfPiLo, w)), mul(mul(w, z), p));
  return add(lead.hi, tail);
}
SPORA_EXACT_HD inline double cos_half_pi(double w) {
  const DD z = two_prod(w, w);
  const double zh = z.hi;
  double q = -5.294400200734623e-13;  // (pi/2)^18 / 18!, signs alternating
  q = add(6.565963114979473e-11, mul(zh, q));
  q = add(-6.386603083791852e-09, mul(zh, q));
  q = add(4.710874778818172e-07, mul(zh, q));
  q = add(-2.5202042373060607e-05, mul(zh, q));
  q = add(0.0009192602748394266, mul(zh, q));
  q = add(-0.02086348076335296, mul(zh, q));
  q = add(0.25366950790104803, mul(zh, q));
  // 1 - (pi/2)^2/2 w^2 in double-double, then the rest.
  const double kC2Hi = -1.2337005501361697, kC2Lo = -7.831619385924639e-17;
  const DD t = two_prod(kC2Hi, zh);
  const DD s = two_sum(1.0, t.hi);
  const double tail =
      add(add(add(s.lo, t.lo), add(mul(kC2Hi, z.lo), mul(kC2Lo, zh))), mul(mul(zh, zh), q));
  return add(s.hi, tail);
}

// sin(2 pi u) and cos(2 pi u) for u in [0, 1). The reduction is exact:
// 4u = q + v (quadrant q, v in [0, 1)), and v > 1/2 becomes 1 - v with sin
// and cos swapped, so the series only see angles up to pi/4. Exact zeros
// come out as +0.
SPORA_EXACT_HD inline void sincos_2pi(double u, double* s_out, double* c_out) {
  const double u4 = mul(4.0, u);
  const int q = static_cast<int>(u4);  // 0..3
  const double v = sub(u4, static_cast<double>(q));
  double s, c;
  if (v > 0.5) {
    const double w = sub(1.0, v);
    s = cos_half_pi(w);
    c = sin_half_pi(w);
  } else {
    s = sin_half_pi(v);
    c = cos_half_pi(v);
  }
  // Rotate by q quarter turns; 0 - x keeps an exact 0 positive.
  switch (q & 3) {
    case 0: *s_out = s; *c_out = c; break;
    case 1: *s_out = c; *c_out = sub(0.0, s); break;
    case 2: *s_out = sub(0.0, s); *c_out = sub(0.0, c); break;
    default: *s_out = sub(0.0, c); *c_out = s; break;
  }
}

}  // namespace exact_math
}  // namespace spora
