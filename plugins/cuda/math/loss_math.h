// cross_entropy (from logits) and nll_loss (from log-probabilities) over
// scores (N, C, S) and class-index targets (N, S). One thread per sample
// (n, s) computes that sample's loss in double, reading its C scores in
// class order exactly as the reference does (plugins/common/kernels/
// loss.cpp); for mean/sum one block then folds the samples' losses and
// counts (thread strides, halving tree; ce_reduce_emulate on the host).
// A target that is neither ignore_index nor in [0, C) makes its sample NaN.
#pragma once
#include <cstdint>

#include "fmath.h"
#include "hd.h"

namespace spora::gpu {

enum class CeReduction : int32_t { kMean, kSum, kNone };

constexpr int kCeThreads = 256;

struct CeIndex {
  int32_t from_logits = 1;
  CeReduction reduction = CeReduction::kMean;
  double smoothing = 0;
  int64_t ignore = -100;
  int64_t n = 0, c = 0, s = 0;
};

// Sample i = n * S + s: its loss and whether it counts toward the mean.
template <class T, class I>
SPORA_HD inline double ce_sample(const CeIndex& ix, const T* x, const I* target, int64_t i, bool* counted) {
  const int64_t n = i / ix.s, s = i % ix.s;
  const T* xs = x + n * ix.c * ix.s;
  const int64_t t = static_cast<int64_t>(target[i]);
  *counted = false;
  if (t == ix.ignore) return 0;
  *counted = true;
  if (t < 0 || t >= ix.c) return HUGE_VAL - HUGE_VAL;  // NaN
  double lse = 0;
  if (ix.from_logits) {
    double mx = -HUGE_VAL;
    for (int64_t c = 0; c < ix.c; ++c) {
      const double v = static_cast<double>(elem<T>::load(xs[c * ix.s + s]));
      mx = mx < v ? v : mx;  // std::max(mx, v): a NaN score is skipped here, then poisons the sum
    }
    for (int64_t c = 0; c < ix.c; ++c) lse += fm::exp(static_cast<double>(elem<T>::load(xs[c * ix.s + s])) - mx);
    lse = mx + fm::log(lse);
  }
  double l = (1 - ix.smoothing) * (lse - static_cast<double>(elem<T>::load(xs[t * ix.s + s])));
  if (ix.smoothing > 0) {
    double xsum = 0;
    for (int64_t c = 0; c < ix.c; ++c) xsum += static_cast<double>(elem<T>::load(xs[c * ix.s + s]));
    l += ix.smoothing * (lse - xsum / static_cast<double>(ix.c));
  }
  return l;
}

// Thread t's share of the samples' losses and counts.
template <class T, class I>
SPORA_HD inline void ce_thread(const CeIndex& ix, const T* x, const I* target, int t, double* loss, double* count) {
  double a = 0, k = 0;
  for (int64_t i = t; i < ix.n * ix.s; i += kCeThreads) {
    bool counted = false;
    a += ce_sample<T, I>(ix, x, target, i, &counted);
    k += counted ? 1.0 : 0.0;
  }
  *loss = a;
  *count = k;
}

SPORA_HD inline double ce_finish(const CeIndex& ix, double loss, double count) {
  return ix.reduction == CeReduction::kSum ? loss : loss / count;  // 0/0 = NaN when nothing counts
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the reducing block (mean/sum).
template <class T, class I>
inline double ce_reduce_emulate(const CeIndex& ix, const T* x, const I* target) {
  double loss[kCeThreads], count[kCeThreads];
  for (int t = 0; t < kCeThreads; ++t) ce_thread<T, I>(ix, x, target, t, &loss[t], &count[t]);
  for (int h = kCeThreads / 2; h > 0; h >>= 1)
    for (int t = 0; t < h; ++t) {
      loss[t] += loss[t + h];
      count[t] += count[t + h];
    }
  return ce_finish(ix, loss[0], count[0]);
}
#endif

}  // namespace spora::gpu
