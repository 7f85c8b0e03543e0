// global_norm and clip_by_global_norm over a group of tensors: squares
// summed in double, each tensor split into norm_blocks_of() thread blocks
// whose partials (thread strides, halving tree) are added in a fixed order
// by one finishing thread, so the result does not depend on timing. The
// reference (plugins/common/kernels/optim.h) sums fixed index blocks in
// another order: results agree to a double's rounding. tests/gpu runs the
// host emulation below against it.
#pragma once
#include <cstdint>

#include "fmath.h"
#include "hd.h"

namespace spora::gpu {

constexpr int kNormThreads = 256;
constexpr int64_t kNormPerThread = 16;  // elements per thread before another block is worth it
constexpr int64_t kNormMaxBlocks = 1024;

// Blocks for a tensor of n elements (at least 1, so every tensor has a partial).
SPORA_HD inline int64_t norm_blocks_of(int64_t n) {
  const int64_t b = (n + kNormThreads * kNormPerThread - 1) / (kNormThreads * kNormPerThread);
  return b < 1 ? 1 : b > kNormMaxBlocks ? kNormMaxBlocks : b;
}

// Thread t of block b (of `blocks`) over x[0, n).
template <class T>
SPORA_HD inline double norm_thread(const T* x, int64_t n, int64_t b, int64_t blocks, int t) {
  double a = 0;
  for (int64_t i = b * kNormThreads + t; i < n; i += blocks * kNormThreads) {
    const double e = static_cast<double>(elem<T>::load(x[i]));
    a += e * e;
  }
  return a;
}

SPORA_HD inline double norm_finish(const double* partials, int64_t count) {
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += partials[i];
  return fm::sqrt(s);
}

// clip_by_global_norm's factor: max_norm / (norm + 1e-6) when below 1; NaN stays NaN.
SPORA_HD inline double norm_clip_factor(double max_norm, double norm) {
  const double f = max_norm / (norm + 1e-6);
  return f < 1 || f != f ? f : 1.0;
}

template <class T>
SPORA_HD inline T norm_scale(T x, double factor) {
  return elem<T>::store(elem<T>::load(x) * static_cast<compute_of<T>>(factor));
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of one tensor's blocks: appends its partials.
template <class T>
inline void norm_partials_emulate(const T* x, int64_t n, double* out) {
  const int64_t blocks = norm_blocks_of(n);
  for (int64_t b = 0; b < blocks; ++b) {
    double acc[kNormThreads];
    for (int t = 0; t < kNormThreads; ++t) acc[t] = norm_thread<T>(x, n, b, blocks, t);
    for (int s = kNormThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; ++t) acc[t] += acc[t + s];
    out[b] = acc[0];
  }
}
#endif

}  // namespace spora::gpu
