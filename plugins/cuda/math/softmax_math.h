// softmax, log_softmax and their gradients along one axis, numerically
// stable (the line's max is subtracted before exp). One thread block per
// line: a line is `len` elements `inner` apart. Thread t handles positions
// t, t + kSmThreads, ...; partial maxima and sums (in double, as the
// reference) are combined as a halving tree, emulated on the host by
// sm_line_emulate for tests/gpu.
#pragma once
#include <cstdint>

#include <string>

#include "fmath.h"
#include "hd.h"
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
