// Reference random kernels: uniform, normal, truncated_normal, dropout, all
// drawing from the Philox stream of (seed, offset) (philox.h). Every element
// is a pure function of its index, so the fill functions take a range
// [begin, end) and any split of the output gives identical bits. What each
// element draws, and what inference guarantees, is documented at the top of
// core/src/ops/random.cpp.
//
// Same bits on every device: the transcendental functions are
// spora/sdk/exact_math.h's (log, sin/cos of 2 pi u, erfc, exp, built from
// exactly rounded operations), never the host libm's, and every product
// goes through xm::mul, so no compiler fuses it into an FMA. The GPU
// kernels (plugins/cuda/math/random_math.h) evaluate the same expressions
// in the same order with the same functions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_plan.h"
#include <spora/sdk/exact_math.h>
#include <spora/sdk/philox.h>

namespace spora::plugin {
namespace {

namespace xm = spora::exact_math;

// Calls f(i, block, k) for every element i in [begin, end), where element i
// draws from block i / per_block of the stream and k = i % per_block is its
// slot there. Each block is generated once.
template <class F>
void for_each_element(const PhiloxStream& s, int64_t per_block, int64_t begin, int64_t end, F&& f) {
  int64_t i = begin;
  while (i < end) {
    const int64_t b = i / per_block;
    const PhiloxBlock w = s.block(static_cast<uint64_t>(b));
    const int64_t stop = std::min(end, (b + 1) * per_block);
    for (; i < stop; ++i) f(i, w, static_cast<int>(i - b * per_block));
  }
}

// Elements per block: f64 takes two 32-bit words per uniform.
template <class T>
constexpr int64_t per_block() {
  return std::is_same_v<T, double> ? 2 : 4;
}

// The next value of T below r (towards -inf).
template <class T>
T next_below(T r) {
  if constexpr (is_half_v<T>) {
    // Sign-magnitude bits: step the magnitude up for negatives, down for
    // positives; +0 steps to the smallest negative subnormal.
    T out = r;
    if (r.bits == 0) out.bits = 0x8001u;
    else if (r.bits & 0x8000u) out.bits = static_cast<uint16_t>(r.bits + 1);
    else out.bits = static_cast<uint16_t>(r.bits - 1);
    return out;
  } else {
    return std::nextafter(r, -std::numeric_limits<T>::infinity());
  }
}

PhiloxStream stream_of(const KernelPlan& p) {
  return PhiloxStream(static_cast<uint64_t>(p.attrs.get_int("seed", 0)),
                      static_cast<uint64_t>(p.attrs.get_int("offset", 0)));
}

// ---- uniform ----

struct UniformState {
  PhiloxStream stream;
  double low, high;
};

template <class T>
void uniform_range(const UniformState& s, T* y, int64_t begin, int64_t end) {
  const double low = s.low, span = s.high - s.low, high = s.high;
  for_each_element(s.stream, per_block<T>(), begin, end, [&](int64_t i, const PhiloxBlock& w, int k) {
    double u;
    if constexpr (std::is_same_v<T, double>) u = uniform53(w.v[2 * k], w.v[2 * k + 1]);
    else u = uniform24(w.v[k]);
    T r = store<T>(xm::add(low, xm::mul(span, u)));
    // Rounding may reach high; the interval is half-open.
    if (static_cast<double>(load(r)) >= high) r = next_below(r);
    y[i] = r;
  });
}

void run_uniform(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const UniformState& s = p.get<UniformState>();
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) uniform_range(s, static_cast<T*>(out[0]), 0, p.out[0].shape.numel());
  });
}

// ---- normal (Box-Muller) ----

struct NormalState {
  PhiloxStream stream;
  double mean, std;
};

template <class T>
void normal_range(const NormalState& s, T* y, int64_t begin, int64_t end) {
  // Pair j, elements 2j and 2j+1, is r cos(2 pi u2) and r sin(2 pi u2),
  // r = sqrt(-2 log u1), for
  // one pair of uniforms (u1 in (0, 1] for the log, u2 in [0, 1)); each pair
  // is computed once.
  constexpr int64_t kPairsPerBlock = std::is_same_v<T, double> ? 1 : 2;
  for (int64_t j = begin / 2; 2 * j < end;) {
    const int64_t b = j / kPairsPerBlock;
    const PhiloxBlock w = s.stream.block(static_cast<uint64_t>(b));
    for (; j < (b + 1) * kPairsPerBlock && 2 * j < end; ++j) {
      double u1, u2;
      if constexpr (std::is_same_v<T, double>) {
        u1 = uniform53_open0(w.v[0], w.v[1]);
        u2 = uniform53(w.v[2], w.v[3]);
      } else {
        const int q = static_cast<int>(2 * (j - b * kPairsPerBlock));
        u1 = uniform24_open0(w.v[q]);
        u2 = uniform24(w.v[q + 1]);
      }
      const double r = std::sqrt(xm::mul(-2.0, xm::log(u1)));  // sqrt is correctly rounded everywhere
      double sin_t, cos_t;
      xm::sincos_2pi(u2, &sin_t, &cos_t);
      if (2 * j >= begin) y[2 * j] = store<T>(xm::add(s.mean, xm::mul(s.std, xm::mul(r, cos_t))));
      if (2 * j + 1 < end) y[2 * j + 1] = store<T>(xm::add(s.mean, xm::mul(s.std, xm::mul(r, sin_t))));
    }
  }
}

void run_normal(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const NormalState& s = p.get<NormalState>();
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) normal_range(s, static_cast<T*>(out[0]), 0, p.out[0].shape.numel());
  });
}

// ---- truncated normal (inverse CDF) ----

// Standard normal CDF.
double phi_cdf(double x) { return xm::mul(0.5, xm::erfc(xm::mul(-x, 0.70710678118654752440))); }

// c[0] x^(n-1) + ... + c[n-1] (Horner), never contracted.
template <size_t N>
double horner(const double (&c)[N], double x) {
  double v = c[0];
  for (size_t i = 1; i < N; ++i) v = xm::add(xm::mul(v, x), c[i]);
  return v;
}

// Inverse of the standard normal CDF for p in (0, 0.5]: Acklam's rational
// approximation (relative error below 1.2e-9, under half an f32 ulp), then,
// when `refine`, one Halley step on the exact CDF, which brings it to double
// precision. Below 0.5 the CDF and its argument are both computed without
// cancellation.
double inv_phi_lower(double p, bool refine) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  static constexpr double d1[] = {d[0], d[1], d[2], d[3], 1.0};
  static constexpr double b1[] = {b[0], b[1], b[2], b[3], b[4], 1.0};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(xm::mul(-2.0, xm::log(p)));
    x = horner(c, q) / horner(d1, q);
  } else {
    const double q = p - 0.5, r = xm::mul(q, q);
    x = xm::mul(horner(a, r), q) / horner(b1, r);
  }
  if (!refine) return x;
  const double e = phi_cdf(x) - p;
  const double half_x = xm::mul(0.5, x);
  const double u = xm::mul(xm::mul(e, 2.50662827463100050242), xm::exp(xm::mul(half_x, x)));  // e / pdf(x)
  return x - u / xm::add(1.0, xm::mul(half_x, u));
}

struct TruncState {
  PhiloxStream stream;
  double mean, std;
  // The interval, mirrored when it lies at or above 0 so that lo < 0:
  // sampling then starts from the lower tail, where CDF values keep their
  // relative precision.
  double lo, hi;
  bool mirrored;
  double cdf_lo;    // Phi(lo)
  double ccdf_hi;   // 1 - Phi(hi), taken as Phi(-hi)
  double mass;      // Phi(hi) - Phi(lo)
};

// `refine`: full double precision (f64 outputs only need it).
double trunc_sample(const TruncState& s, double u, bool refine) {
  // Points below the median invert the CDF from the left, the others the
  // upper-tail probability from the right, each without cancellation.
  const double p = xm::add(s.cdf_lo, xm::mul(u, s.mass));
  double x = p <= 0.5 ? inv_phi_lower(p, refine) : -inv_phi_lower(xm::add(s.ccdf_hi, xm::mul(1 - u, s.mass)), refine);
  x = std::min(std::max(x, s.lo), s.hi);
  return s.mirrored ? -x : x;
}

template <class T>
void trunc_range(const TruncState& s, T* y, int64_t begin, int64_t end) {
  for_each_element(s.stream, per_block<T>(), begin, end, [&](int64_t i, const PhiloxBlock& w, int k) {
    double u;
    if constexpr (std::is_same_v<T, double>) u = uniform53_mid(w.v[2 * k], w.v[2 * k + 1]);
    else u = uniform24_mid(w.v[k]);
    y[i] = store<T>(xm::add(s.mean, xm::mul(s.std, trunc_sample(s, u, std::is_same_v<T, double>))));
  });
}

void run_trunc(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const TruncState& s = p.get<TruncState>();
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) trunc_range(s, static_cast<T*>(out[0]), 0, p.out[0].shape.numel());
  });
}

// ---- dropout ----

struct DropoutState {
  PhiloxStream stream;
  bool identity;       // training = false or p = 0
  uint64_t threshold;  // keep element i when word i >= threshold (2^32 drops all)
  double scale;        // 1 / (1 - p)
};

template <class T>
void dropout_range(const DropoutState& s, const T* x, T* y, bool* mask, int64_t begin, int64_t end) {
  if (s.identity) {
    std::copy(x + begin, x + end, y + begin);
    std::fill(mask + begin, mask + end, true);
    return;
  }
  using C = compute_t<T>;
  const C scale = static_cast<C>(s.scale);
  const T zero = store<T>(C(0));
  for_each_element(s.stream, 4, begin, end, [&](int64_t i, const PhiloxBlock& w, int k) {
    const bool keep = w.v[k] >= s.threshold;
    mask[i] = keep;
    y[i] = keep ? store<T>(load(x[i]) * scale) : zero;
  });
}

void run_dropout(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const DropoutState& s = p.get<DropoutState>();
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      dropout_range(s, static_cast<const T*>(in[0]), static_cast<T*>(out[0]), static_cast<bool*>(out[1]), 0,
                    p.in[0].shape.numel());
  });
}

// ---- planning ----

bool float_dtype(int32_t d) {
  return d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
}

spora_plugin_error_t* check_generated(const KernelPlan& p) {
  if (auto* e = expect_operands(p, 0, 1)) return e;
  if (!float_dtype(p.out[0].dtype))
    return unsupported(p, std::string("dtype ") + dtype_name(p.out[0].dtype) + " has no kernel");
  if (p.attrs.get_int("offset", 0) < 0) return invalid(p, "offset must be non-negative");
  return nullptr;
}

spora_plugin_error_t* plan_uniform(KernelPlan& p) {
  if (auto* e = check_generated(p)) return e;
  UniformState s{stream_of(p), p.attrs.get_float("low", 0.0), p.attrs.get_float("high", 1.0)};
  if (!(s.low < s.high) || !std::isfinite(s.high - s.low)) return invalid(p, "need finite low < high");
  p.state = std::make_shared<UniformState>(s);
  p.run = run_uniform;
  return nullptr;
}

spora_plugin_error_t* plan_normal(KernelPlan& p) {
  if (auto* e = check_generated(p)) return e;
  NormalState s{stream_of(p), p.attrs.get_float("mean", 0.0), p.attrs.get_float("std", 1.0)};
  if (!std::isfinite(s.mean) || !(s.std >= 0) || !std::isfinite(s.std)) return invalid(p, "need finite std >= 0");
  p.state = std::make_shared<NormalState>(s);
  p.run = run_normal;
  return nullptr;
}

spora_plugin_error_t* plan_trunc(KernelPlan& p) {
  if (auto* e = check_generated(p)) return e;
  const double a = p.attrs.get_float("a", -2.0), b = p.attrs.get_float("b", 2.0);
  TruncState s{stream_of(p), p.attrs.get_float("mean", 0.0), p.attrs.get_float("std", 1.0), 0, 0, false, 0, 0, 0};
  if (!std::isfinite(s.mean) || !(s.std >= 0) || !std::isfinite(s.std)) return invalid(p, "need finite std >= 0");
  if (!(a < b)) return invalid(p, "need a < b");
  s.mirrored = a >= 0;
  s.lo = s.mirrored ? -b : a;
  s.hi = s.mirrored ? -a : b;
  s.cdf_lo = phi_cdf(s.lo);
  s.ccdf_hi = phi_cdf(-s.hi);
  s.mass = s.hi > 0 ? 1 - s.cdf_lo - s.ccdf_hi : phi_cdf(s.hi) - s.cdf_lo;
  if (!(s.mass >= 1e-280)) return invalid(p, "[a, b] holds too little probability to sample");
  p.state = std::make_shared<TruncState>(s);
  p.run = run_trunc;
  return nullptr;
}

spora_plugin_error_t* plan_dropout(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 2)) return e;
  const int32_t dt = p.in[0].dtype;
  if (!float_dtype(dt)) return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.out[0].dtype != dt || p.out[1].dtype != SPORA_DTYPE_BOOL) return invalid(p, "outputs must be (x's dtype, bool)");
  const int64_t n = p.in[0].shape.numel();
  if (p.out[0].shape.numel() != n || p.out[1].shape.numel() != n) return invalid(p, "outputs must have x's size");
  const double prob = p.attrs.get_float("p", 0.5);
  if (!(prob >= 0 && prob <= 1)) return invalid(p, "p must be in [0, 1]");
  DropoutState s{stream_of(p), !p.attrs.get_bool("training", true) || prob == 0, 0, 1};
  if (!s.identity) {
    s.threshold = static_cast<uint64_t>(std::llround(std::ldexp(prob, 32)));
    s.scale = prob < 1 ? 1 / (1 - prob) : 0;
  }
  p.state = std::make_shared<DropoutState>(s);
  p.run = run_dropout;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"uniform", "ref", plan_uniform});
  t.add({"normal", "ref", plan_normal});
  t.add({"truncated_normal", "ref", plan_trunc});
  t.add({"dropout", "ref", plan_dropout});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
