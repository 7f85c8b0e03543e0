// softmax, log_softmax and their gradients along one axis, numerically
// stable (the line's max is subtracted before exp). A line is `len`
// elements `inner` apart; partial maxima and sums (in double, as the
// reference) are combined as halving trees.
//
// Two paths. Lines along the innermost axis of up to a few thousand
// elements are held in registers (sm_reg_*): a warp (short lines) or a
// block of kSmThreads reads its line once, in vectors, and writes it once.
// Any other line: one block per line, thread t at positions t, t +
// kSmThreads, ..., three passes over memory. sm_reg_line_emulate and
// sm_line_emulate run each in the device's order for tests/gpu.
#pragma once
#include <cstdint>

#include <string>
#include <vector>

#include "fmath.h"
#include "hd.h"
#include "reg_rows.h"
#include "warp.h"
#include "kernel_plan.h"  // plugins/common: Shape, AttrList (host side)

namespace spora::gpu {

enum class SmKind : int32_t { kSoftmax, kLogSoftmax, kSoftmaxGrad, kLogSoftmaxGrad };

constexpr int kSmThreads = 256;

struct SmIndex {
  SmKind kind = SmKind::kSoftmax;
  int64_t outer = 1, len = 1, inner = 1;
};

// Offset of line l's first element (lines are numbered outer-major).
SPORA_HD inline int64_t sm_base(const SmIndex& ix, int64_t l) {
  return (l / ix.inner) * ix.len * ix.inner + l % ix.inner;
}

// Max that ignores NaN in its second argument, as std::max(acc, v) does in
// the reference (a NaN input still makes every output NaN through exp).
SPORA_HD inline double sm_max(double a, double b) { return a < b ? b : a; }

// Pass 0 partial of thread t: the max of x (forward) or the dot term
// (gradient: sum dy, or sum dy * y).
template <class T>
SPORA_HD inline double sm_partial0(const SmIndex& ix, const T* x, const T* dy, int64_t base, int t) {
  using C = compute_of<T>;
  const bool fwd = ix.kind == SmKind::kSoftmax || ix.kind == SmKind::kLogSoftmax;
  double a = fwd ? -HUGE_VAL : 0.0;
  for (int64_t j = t; j < ix.len; j += kSmThreads) {
    const C v = elem<T>::load(x[base + j * ix.inner]);
    if (fwd) {
      a = sm_max(a, static_cast<double>(v));
    } else {
      const C g = elem<T>::load(dy[base + j * ix.inner]);
      a += static_cast<double>(ix.kind == SmKind::kLogSoftmaxGrad ? g : g * v);
    }
  }
  return a;
}

// Forward pass 1 partial: sum of exp(x - max), each exp in the compute type.
template <class T>
SPORA_HD inline double sm_partial1(const SmIndex& ix, const T* x, int64_t base, int t, compute_of<T> mx) {
  double a = 0;
  for (int64_t j = t; j < ix.len; j += kSmThreads)
    a += static_cast<double>(fm::exp(elem<T>::load(x[base + j * ix.inner]) - mx));
  return a;
}

// Writes thread t's outputs. Forward: `mx` is the max, `total` the sum of
// exps. Gradient: `total` is the dot term.
template <class T>
SPORA_HD inline void sm_write(const SmIndex& ix, const T* x, const T* dy, T* y, int64_t base, int t,
                              compute_of<T> mx, double total) {
  using C = compute_of<T>;
  switch (ix.kind) {
    case SmKind::kSoftmax: {
      const C scale = static_cast<C>(1.0 / total);
      for (int64_t j = t; j < ix.len; j += kSmThreads) {
        const int64_t k = base + j * ix.inner;
        y[k] = elem<T>::store(fm::exp(elem<T>::load(x[k]) - mx) * scale);
      }
      return;
    }
    case SmKind::kLogSoftmax: {
      const C lse = static_cast<C>(fm::log(total));
      for (int64_t j = t; j < ix.len; j += kSmThreads) {
        const int64_t k = base + j * ix.inner;
        y[k] = elem<T>::store((elem<T>::load(x[k]) - mx) - lse);
      }
      return;
    }
    case SmKind::kSoftmaxGrad:
    case SmKind::kLogSoftmaxGrad: {
      // x is the forward output y, dy the incoming gradient.
      const C d = static_cast<C>(total);
      for (int64_t j = t; j < ix.len; j += kSmThreads) {
        const int64_t k = base + j * ix.inner;
        const C yv = elem<T>::load(x[k]), g = elem<T>::load(dy[k]);
        y[k] = elem<T>::store(ix.kind == SmKind::kLogSoftmaxGrad ? g - fm::exp(yv) * d : yv * (g - d));
      }
      return;
    }
  }
}

// Tree combine of one level: max for the forward's pass 0, else a sum.
SPORA_HD inline void sm_tree_level(bool is_max, double* acc, int t, int s) {
  if (t < s) acc[t] = is_max ? sm_max(acc[t], acc[t + s]) : acc[t] + acc[t + s];
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of one block over line l, in the device's order.
template <class T>
inline void sm_line_emulate(const SmIndex& ix, const T* x, const T* dy, T* y, int64_t l) {
  using C = compute_of<T>;
  double acc[kSmThreads];
  const int64_t base = sm_base(ix, l);
  const bool fwd = ix.kind == SmKind::kSoftmax || ix.kind == SmKind::kLogSoftmax;
  for (int t = 0; t < kSmThreads; ++t) acc[t] = sm_partial0<T>(ix, x, dy, base, t);
  for (int s = kSmThreads / 2; s > 0; s >>= 1)
    for (int t = 0; t < kSmThreads; ++t) sm_tree_level(fwd, acc, t, s);
  C mx = C(0);
  double total = acc[0];
  if (fwd) {
    mx = static_cast<C>(acc[0]);
    for (int t = 0; t < kSmThreads; ++t) acc[t] = sm_partial1<T>(ix, x, base, t, mx);
    for (int s = kSmThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < kSmThreads; ++t) sm_tree_level(false, acc, t, s);
    total = acc[0];
  }
  for (int t = 0; t < kSmThreads; ++t) sm_write<T>(ix, x, dy, y, base, t, mx, total);
}
#endif

// ---- lines held in registers ----

// The register path's shape (reg_rows.h); threads == 0: the line does not
// fit (three-pass kernel).
using SmRegCfg = RegRowCfg;

// The register path for lines of `ix` of elements of `size` bytes: along
// the innermost axis, warps of `warp` lanes for lines up to warp * 32
// elements, blocks of kSmThreads up to kSmThreads * 32 (the block only
// with whole vectors); 8-byte elements cache at most 16 per thread.
// `vec_ok`: the tensors are aligned to 16 bytes (vectors are then used
// when the line is a whole number of them).
inline SmRegCfg sm_reg_cfg(const SmIndex& ix, size_t size, bool vec_ok, int warp = kWarp) {
  if (ix.inner != 1) return SmRegCfg{};
  const int max_per = size >= 8 ? 16 : 32;
  return reg_row_cfg(ix.len, size, vec_ok, warp, kSmThreads, max_per, max_per);
}

// Line position of thread t's cached slot k (reg_row_pos).
SPORA_HD inline int64_t sm_reg_pos(int threads, int vec, int t, int k) { return reg_row_pos(threads, vec, t, k); }

// Each thread caches its slots' v (x forward, y for the gradients) in the
// storage type and w in the compute type: dy for the gradients, exp(x -
// max) for softmax (the value the output would compute again).

// Pass 0 of thread t over its cached slots: the max of x, or the dot
// term; slots in order.
template <class T>
SPORA_HD inline double sm_reg_partial0(SmKind kind, const T* v, const compute_of<T>* w, int per, int threads, int vec,
                                       int t, int64_t len) {
  using C = compute_of<T>;
  const bool fwd = kind == SmKind::kSoftmax || kind == SmKind::kLogSoftmax;
  double a = fwd ? -HUGE_VAL : 0.0;
  SPORA_UNROLL
  for (int k = 0; k < per; ++k) {
    if (sm_reg_pos(threads, vec, t, k) >= len) continue;
    const C x = elem<T>::load(v[k]);
    if (fwd) a = sm_max(a, static_cast<double>(x));
    else a += static_cast<double>(kind == SmKind::kLogSoftmaxGrad ? w[k] : w[k] * x);
  }
  return a;
}

// Forward pass 1 of thread t: the sum of exp(x - max), slots in order,
// each exp kept in w.
template <class T>
SPORA_HD inline double sm_reg_partial1(const T* v, compute_of<T>* w, int per, int threads, int vec, int t, int64_t len,
                                       compute_of<T> mx) {
  double a = 0;
  SPORA_UNROLL
  for (int k = 0; k < per; ++k) {
    if (sm_reg_pos(threads, vec, t, k) >= len) continue;
    w[k] = fm::exp(elem<T>::load(v[k]) - mx);
    a += static_cast<double>(w[k]);
  }
  return a;
}

// The line's constant of the outputs (as sm_write computes it): softmax's
// 1 / sum, log_softmax's log(sum), the gradients' dot term.
template <class C>
SPORA_HD inline C sm_reg_scale(SmKind kind, double total) {
  switch (kind) {
    case SmKind::kSoftmax: return static_cast<C>(1.0 / total);
    case SmKind::kLogSoftmax: return static_cast<C>(fm::log(total));
    default: return static_cast<C>(total);
  }
}

// The output of a slot from its v and w.
template <class T>
SPORA_HD inline T sm_reg_out(SmKind kind, T v, compute_of<T> w, compute_of<T> mx, compute_of<T> scale) {
  switch (kind) {
    case SmKind::kSoftmax: return elem<T>::store(w * scale);
    case SmKind::kLogSoftmax: return elem<T>::store((elem<T>::load(v) - mx) - scale);
    case SmKind::kSoftmaxGrad: return elem<T>::store(elem<T>::load(v) * (w - scale));
    default: return elem<T>::store(w - fm::exp(elem<T>::load(v)) * scale);
  }
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the register path over line l (inner == 1).
template <class T>
inline void sm_reg_line_emulate(const SmIndex& ix, const SmRegCfg& c, const T* x, const T* dy, T* y, int64_t l) {
  using C = compute_of<T>;
  const int n = c.threads;
  std::vector<T> v(static_cast<size_t>(n) * c.per);
  std::vector<C> w(v.size(), C(0));
  std::vector<double> acc(static_cast<size_t>(n));
  const int64_t base = l * ix.len;
  const bool fwd = ix.kind == SmKind::kSoftmax || ix.kind == SmKind::kLogSoftmax;
  for (int t = 0; t < n; ++t)
    for (int k = 0; k < c.per; ++k) {
      const int64_t pos = sm_reg_pos(n, c.vec, t, k);
      if (pos >= ix.len) continue;
      v[t * c.per + k] = x[base + pos];
      if (!fwd) w[t * c.per + k] = elem<T>::load(dy[base + pos]);
    }
  auto tree = [&](bool is_max) {
    for (int s = n / 2; s > 0; s >>= 1)
      for (int t = 0; t < n; ++t) sm_tree_level(is_max, acc.data(), t, s);
    return acc[0];
  };
  for (int t = 0; t < n; ++t)
    acc[t] = sm_reg_partial0<T>(ix.kind, &v[t * c.per], &w[t * c.per], c.per, n, c.vec, t, ix.len);
  double total = tree(fwd);
  C mx = C(0);
  if (fwd) {
    mx = static_cast<C>(total);
    for (int t = 0; t < n; ++t)
      acc[t] = sm_reg_partial1<T>(&v[t * c.per], &w[t * c.per], c.per, n, c.vec, t, ix.len, mx);
    total = tree(false);
  }
  const C scale = sm_reg_scale<C>(ix.kind, total);
  for (int t = 0; t < n; ++t)
    for (int k = 0; k < c.per; ++k) {
      const int64_t pos = sm_reg_pos(n, c.vec, t, k);
      if (pos < ix.len) {
        const size_t s = static_cast<size_t>(t * c.per + k);
        y[base + pos] = sm_reg_out<T>(ix.kind, v[s], w[s], mx, scale);
      }
    }
}
#endif

// Host side: the lines of `op` ("softmax", "log_softmax", "softmax_grad",
// "log_softmax_grad") over shape `sh` along attribute `axis`.
inline SmIndex sm_index_of(const std::string& op, const spora::plugin::Shape& sh, const spora::plugin::AttrList& attrs) {
  SmIndex ix;
  ix.kind = op == "softmax"       ? SmKind::kSoftmax
            : op == "log_softmax" ? SmKind::kLogSoftmax
            : op == "softmax_grad" ? SmKind::kSoftmaxGrad
                                   : SmKind::kLogSoftmaxGrad;
  const int64_t ax = attrs.get_int("axis", sh.rank - 1);
  ix.outer = ix.inner = 1;
  ix.len = sh.rank ? sh.dims[ax] : 1;
  for (int i = 0; i < sh.rank; ++i) {
    if (i < ax) ix.outer *= sh.dims[i];
    if (i > ax) ix.inner *= sh.dims[i];
  }
  return ix;
}

}  // namespace spora::gpu
