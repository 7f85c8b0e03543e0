// Optimizer kernels shared by the reference implementation and the cpu
// plugin: sgd_update, adam_update, global_norm and clip_by_global_norm
// (semantics in docs/ops-optim.md). A plan describes the group (its tensors
// laid end to end as one index space); range functions compute any slice
// [begin, end) of that space. The reference kernel runs the whole space on
// the calling thread, the cpu plugin splits it across threads and compiles
// the same loops for AVX2.
//
// Every loop reads element j of each input before writing element j of the
// outputs, and touches no other index, so an output may be the very buffer
// of the input it replaces (the host's in-place planning): `#pragma GCC
// ivdep` tells the vectoriser so, where it would otherwise fall back to
// scalar code when it cannot prove the pointers apart.
//
// Everything is forced inline (no lambdas, which would not inherit a
// caller's target attribute), so a caller compiled for another ISA gets the
// whole loop nest in that ISA.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "elementwise.h"
#include "kernel_plan.h"

namespace spora::plugin::optim {

#define SPORA_OPTIM_INLINE __attribute__((always_inline)) inline

enum class Kind { kSgd, kAdam, kNorm, kClip };

struct Plan {
  Kind kind = Kind::kSgd;
  int32_t dtype = 0;   // params' (and grads', and the tensors' of the norms)
  int32_t n = 0;       // tensors per role
  int32_t scalars = 0; // scalar inputs before the list
  int32_t roles = 0;   // lists of n tensors
  int32_t scalar_dtype[3] = {};
  bool momentum_bufs = false, nesterov = false, decoupled = false, amsgrad = false;
  double momentum = 0, dampening = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0, max_norm = 0;
  std::vector<int64_t> offset;  // n + 1 prefix sums of the tensors' element counts
  int64_t total() const { return offset.empty() ? 0 : offset.back(); }
};

// Checks the plan's operands (counts, dtypes, element counts) and
// attributes into `out`.
spora_plugin_error_t* describe(const KernelPlan& p, Plan* out);

// Per-launch coefficients, from the scalar inputs (read on the host: cpu and
// sim memory is host-addressable), in double.
struct Coeffs {
  double lr = 0, grad_scale = 1;
  double step_size = 0;  // adam: lr / (1 - beta1^step), NaN when step < 1
  double bc2_sqrt = 1;   // adam: sqrt(1 - beta2^step)
  double decay = 1;      // adam decoupled: 1 - lr * weight_decay
  double l2 = 0;         // weight decay added to the gradient
};
Coeffs coeffs(const Plan& u, const void* const* in);

// Norms are summed in fixed blocks of the index space, each block's partial
// kept apart and the partials added in order, so that the result does not
// depend on how many threads ran the blocks.
constexpr int64_t kNormBlock = 1 << 14;
inline int64_t norm_blocks(const Plan& u) { return (u.total() + kNormBlock - 1) / kNormBlock; }
// Workspace bytes: one double per block.
inline size_t norm_workspace(const Plan& u) { return static_cast<size_t>(norm_blocks(u)) * sizeof(double); }
// sqrt of the sum of the block partials; the clip factor for a norm.
double finish_norm(const Plan& u, const double* partials);
double clip_factor(const Plan& u, double norm);
// Writes the norm (f32 or f64 scalar).
void store_norm(const Plan& u, double norm, void* out);

// ---------------------------------------------------------------------------
// Loops over one tensor's elements [lo, hi).

template <class T>
using C = compute_t<T>;   // arithmetic type: float for 16-bit params
template <class T>
using S = compute_t<T>;   // optimizer state type (docs/ops-optim.md)

template <class T, bool kMomentum, bool kNesterov>
SPORA_OPTIM_INLINE void sgd_loop(const Plan& u, const Coeffs& c, const ew::stor_t<T>* p, const ew::stor_t<T>* g,
                                 const S<T>* b, ew::stor_t<T>* p_out, S<T>* b_out, int64_t lo, int64_t hi) {
  const C<T> lr = static_cast<C<T>>(c.lr), gs = static_cast<C<T>>(c.grad_scale),
             wd = static_cast<C<T>>(u.weight_decay), mom = static_cast<C<T>>(u.momentum),
             keep = static_cast<C<T>>(1.0 - u.dampening);
#pragma GCC ivdep
  for (int64_t j = lo; j < hi; ++j) {
    const C<T> pj = ew::ld<T>(p[j]);
    C<T> d = gs * ew::ld<T>(g[j]) + wd * pj;
    if constexpr (kMomentum) {
      const C<T> bj = mom * b[j] + keep * d;
      b_out[j] = bj;
      d = kNesterov ? d + mom * bj : bj;
    }
    p_out[j] = ew::st<T>(pj - lr * d);
  }
}

template <class T, bool kAmsgrad>
SPORA_OPTIM_INLINE void adam_loop(const Plan& u, const Coeffs& c, const ew::stor_t<T>* p, const ew::stor_t<T>* g,
                                  const S<T>* m, const S<T>* v, const S<T>* vmax, ew::stor_t<T>* p_out, S<T>* m_out,
                                  S<T>* v_out, S<T>* vmax_out, int64_t lo, int64_t hi) {
  using F = C<T>;
  const F gs = static_cast<F>(c.grad_scale), l2 = static_cast<F>(c.l2), decay = static_cast<F>(c.decay),
          b1 = static_cast<F>(u.beta1), b2 = static_cast<F>(u.beta2), a1 = static_cast<F>(1.0 - u.beta1),
          a2 = static_cast<F>(1.0 - u.beta2), step = static_cast<F>(c.step_size),
          bc2 = static_cast<F>(c.bc2_sqrt), eps = static_cast<F>(u.eps);
#pragma GCC ivdep
  for (int64_t j = lo; j < hi; ++j) {
    const F pj = ew::ld<T>(p[j]);
    const F d = gs * ew::ld<T>(g[j]) + l2 * pj;
    const F mj = b1 * m[j] + a1 * d;
    const F vj = b2 * v[j] + a2 * (d * d);
    m_out[j] = mj;
    v_out[j] = vj;
    F vm = vj;
    if constexpr (kAmsgrad) {
      // A NaN v propagates, as torch.maximum does.
      vm = vmax[j] >= vj ? vmax[j] : vj;
      vmax_out[j] = vm;
    }
    p_out[j] = ew::st<T>(pj * decay - step * mj / (std::sqrt(vm) / bc2 + eps));
  }
}

template <class T>
SPORA_OPTIM_INLINE double sumsq_loop(const ew::stor_t<T>* x, int64_t lo, int64_t hi) {
  // Independent accumulators: one would serialise on the add's latency,
  // and the vectoriser may not reassociate a floating-point sum itself.
  double acc[8] = {};
  int64_t j = lo;
  for (; j + 8 <= hi; j += 8)
    for (int k = 0; k < 8; ++k) {
      const double e = static_cast<double>(ew::ld<T>(x[j + k]));
      acc[k] += e * e;
    }
  for (; j < hi; ++j) {
    const double e = static_cast<double>(ew::ld<T>(x[j]));
    acc[0] += e * e;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <class T>
SPORA_OPTIM_INLINE void scale_loop(const ew::stor_t<T>* x, ew::stor_t<T>* y, C<T> f, int64_t lo, int64_t hi) {
#pragma GCC ivdep
  for (int64_t j = lo; j < hi; ++j) y[j] = ew::st<T>(ew::ld<T>(x[j]) * f);
}

// Calls fn(k, lo, hi) for each tensor k overlapping [begin, end) of the
// index space, with [lo, hi) the overlap in k's own elements.
template <class Fn>
SPORA_OPTIM_INLINE void for_tensors(const Plan& u, int64_t begin, int64_t end, Fn&& fn) {
  int32_t k = static_cast<int32_t>(std::upper_bound(u.offset.begin(), u.offset.end(), begin) - u.offset.begin()) - 1;
  for (k = std::max(k, 0); k < u.n && u.offset[static_cast<size_t>(k)] < end; ++k) {
    const int64_t o = u.offset[static_cast<size_t>(k)];
    const int64_t lo = std::max(begin, o) - o, hi = std::min(end, u.offset[static_cast<size_t>(k) + 1]) - o;
    if (lo < hi) fn(k, lo, hi);
  }
}

// ---------------------------------------------------------------------------
// Range functions over the index space.

template <class T>
struct UpdateRange {
  using St = ew::stor_t<T>;
  const Plan& u;
  const Coeffs& c;
  const void* const* in;
  void* const* out;
  const void* input(int role, int32_t k) const { return in[u.scalars + role * u.n + k]; }
  void* output(int slot, int32_t k) const { return out[slot * u.n + k]; }

  SPORA_OPTIM_INLINE void operator()(int32_t k, int64_t lo, int64_t hi) const {
    const auto* p = static_cast<const St*>(input(0, k));
    const auto* g = static_cast<const St*>(input(1, k));
    auto* p_out = static_cast<St*>(output(0, k));
    if (u.kind == Kind::kSgd) {
      if (!u.momentum_bufs) {
        sgd_loop<T, false, false>(u, c, p, g, nullptr, p_out, nullptr, lo, hi);
        return;
      }
      const auto* b = static_cast<const S<T>*>(input(2, k));
      auto* b_out = static_cast<S<T>*>(output(1, k));
      if (u.nesterov) sgd_loop<T, true, true>(u, c, p, g, b, p_out, b_out, lo, hi);
      else sgd_loop<T, true, false>(u, c, p, g, b, p_out, b_out, lo, hi);
      return;
    }
    const auto* m = static_cast<const S<T>*>(input(2, k));
    const auto* v = static_cast<const S<T>*>(input(3, k));
    auto* m_out = static_cast<S<T>*>(output(1, k));
    auto* v_out = static_cast<S<T>*>(output(2, k));
    if (u.amsgrad)
      adam_loop<T, true>(u, c, p, g, m, v, static_cast<const S<T>*>(input(4, k)), p_out, m_out, v_out,
                         static_cast<S<T>*>(output(3, k)), lo, hi);
    else
      adam_loop<T, false>(u, c, p, g, m, v, nullptr, p_out, m_out, v_out, nullptr, lo, hi);
  }
};

template <class T>
struct SumsqRange {
  const Plan& u;
  const void* const* in;
  double* acc;
  SPORA_OPTIM_INLINE void operator()(int32_t k, int64_t lo, int64_t hi) const {
    *acc += sumsq_loop<T>(static_cast<const ew::stor_t<T>*>(in[k]), lo, hi);
  }
};

template <class T>
struct ScaleRange {
  const void* const* in;
  void* const* out;
  C<T> f;
  SPORA_OPTIM_INLINE void operator()(int32_t k, int64_t lo, int64_t hi) const {
    scale_loop<T>(static_cast<const ew::stor_t<T>*>(in[k]), static_cast<ew::stor_t<T>*>(out[k]), f, lo, hi);
  }
};

template <class T>
SPORA_OPTIM_INLINE void update_range_t(const Plan& u, const Coeffs& c, const void* const* in, void* const* out,
                                       int64_t begin, int64_t end) {
  for_tensors(u, begin, end, UpdateRange<T>{u, c, in, out});
}

// The elements [begin, end) of an sgd_update or adam_update.
SPORA_OPTIM_INLINE void update_range(const Plan& u, const Coeffs& c, const void* const* in, void* const* out,
                                     int64_t begin, int64_t end) {
  switch (u.dtype) {
    case SPORA_DTYPE_F32: update_range_t<float>(u, c, in, out, begin, end); break;
    case SPORA_DTYPE_F64: update_range_t<double>(u, c, in, out, begin, end); break;
    case SPORA_DTYPE_F16: update_range_t<f16>(u, c, in, out, begin, end); break;
    case SPORA_DTYPE_BF16: update_range_t<bf16>(u, c, in, out, begin, end); break;
    default: break;  // refused at plan time
  }
}

// Partials of norm blocks [b0, b1) into partials[b0..b1).
SPORA_OPTIM_INLINE void norm_blocks_range(const Plan& u, const void* const* in, double* partials, int64_t b0,
                                          int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    double acc = 0;
    const int64_t begin = b * kNormBlock, end = std::min(u.total(), begin + kNormBlock);
    switch (u.dtype) {
      case SPORA_DTYPE_F32: for_tensors(u, begin, end, SumsqRange<float>{u, in, &acc}); break;
      case SPORA_DTYPE_F64: for_tensors(u, begin, end, SumsqRange<double>{u, in, &acc}); break;
      case SPORA_DTYPE_F16: for_tensors(u, begin, end, SumsqRange<f16>{u, in, &acc}); break;
      case SPORA_DTYPE_BF16: for_tensors(u, begin, end, SumsqRange<bf16>{u, in, &acc}); break;
      default: break;
    }
    partials[b] = acc;
  }
}

// clip_by_global_norm's scaling of elements [begin, end) by `factor`.
SPORA_OPTIM_INLINE void scale_range(const Plan& u, double factor, const void* const* in, void* const* out,
                                    int64_t begin, int64_t end) {
  switch (u.dtype) {
    case SPORA_DTYPE_F32: for_tensors(u, begin, end, ScaleRange<float>{in, out, static_cast<float>(factor)}); break;
    case SPORA_DTYPE_F64: for_tensors(u, begin, end, ScaleRange<double>{in, out, factor}); break;
    case SPORA_DTYPE_F16: for_tensors(u, begin, end, ScaleRange<f16>{in, out, static_cast<float>(factor)}); break;
    case SPORA_DTYPE_BF16: for_tensors(u, begin, end, ScaleRange<bf16>{in, out, static_cast<float>(factor)}); break;
    default: break;
  }
}

#undef SPORA_OPTIM_INLINE

}  // namespace spora::plugin::optim
