// layer_norm and the dx of layer_norm_grad for rows that fit in
// registers: a warp (rows up to warp * 32 elements) or a block of
// kLnThreads (longer rows, whole 16-byte vectors only) per row reads x (and
// dy) once, in vectors, keeps them in registers for the row's sums and
// writes y (dx) once -- the general kernel (group_norm_math.h) reads them
// again for every pass. layer_norm_grad's dgamma/dbeta stay the general
// kernel's column partials.
//
// Same semantics as the general kernel and the reference: statistics in
// double over two passes (sum, then squared deviations from the mean),
// mean/invstd stored in the compute type, y = (x - mu) * inv * gamma + beta
// in the compute type. Thread t's partials are its slots in order; the
// partials of a row's threads are combined by a halving tree (shared
// memory for the levels of a warp and more, shuffles below), which
// ln_reg_forward_emulate runs in the same order for tests/gpu. The
// gradient's dx is gn_bwd_write's, from the row's sums of a = dy * gamma
// and a * xhat (ln_reg_backward_emulate).
#pragma once
#include <cstdint>

#include <vector>

#include "group_norm_math.h"
#include "hd.h"
#include "reg_rows.h"
#include "rounded.h"
#include "warp.h"

namespace spora::gpu {

constexpr int kLnThreads = 256;  // block size of the register path

// The register path's shape (reg_rows.h); threads == 0: the row does not
// fit (general kernel).
using LnRegCfg = RegRowCfg;

// Largest `per` of a warp and of a block for elements of `size` bytes: a
// thread caches at most 32 four-byte (16 eight-byte) values in a warp, and
// a block's thread 64 two-byte ones (16384 half elements per row) in the
// forward; the gradient, which also caches dy * gamma in the compute type,
// 32 of them.
SPORA_HD inline int ln_warp_max_per(size_t size) { return size >= 8 ? 16 : 32; }
SPORA_HD inline int ln_block_max_per(size_t size, bool backward) {
  return size >= 8 ? 16 : size >= 4 || backward ? 32 : 64;
}

// The register path for layer_norm / layer_norm_grad rows of `ix` of
// elements of `size` bytes. `vec_ok`: the row tensors and gamma (beta) are
// aligned to 16 bytes (vectors are then used when the row is a whole
// number of them). Rows of other lengths go element by element, in a
// warp, with at most 16 slots.
inline LnRegCfg ln_reg_cfg(const GnIndex& ix, size_t size, bool vec_ok, int warp = kWarp) {
  if (ix.kind != GnKind::kLayer) return LnRegCfg{};
  return reg_row_cfg(ix.len, size, vec_ok, warp, kLnThreads, ln_warp_max_per(size), ln_block_max_per(size, ix.backward));
}

// Row position of thread t's cached slot k (reg_row_pos).
SPORA_HD inline int64_t ln_reg_pos(int threads, int vec, int t, int k) { return reg_row_pos(threads, vec, t, k); }

// Pass 0 of thread t: the sum of its slots' x.
template <class T>
SPORA_HD inline double ln_reg_sum(const T* v, int per, int threads, int vec, int t, int64_t len) {
  double a = 0;
  SPORA_UNROLL
  for (int k = 0; k < per; ++k) {
    if (ln_reg_pos(threads, vec, t, k) >= len) continue;
    a += static_cast<double>(elem<T>::load(v[k]));
  }
  return a;
}

// Pass 1 of thread t: the sum of its slots' squared deviations from `mean`.
template <class T>
SPORA_HD inline double ln_reg_sq(const T* v, int per, int threads, int vec, int t, int64_t len, double mean) {
  double a = 0;
  SPORA_UNROLL
  for (int k = 0; k < per; ++k) {
    if (ln_reg_pos(threads, vec, t, k) >= len) continue;
    const double d = static_cast<double>(elem<T>::load(v[k])) - mean;
    a += rn_mul(d, d);
  }
  return a;
}

// The output of one element, as gn_fwd_write computes it.
template <class T>
SPORA_HD inline T ln_reg_out(T v, T g, T b, compute_of<T> mu, compute_of<T> inv) {
  using C = compute_of<T>;
  const C xh = (elem<T>::load(v) - mu) * inv;
  return elem<T>::store(rn_mul(xh, elem<T>::load(g)) + elem<T>::load(b));
}

// invstd from the biased variance, as gn_write_stats stores it.
SPORA_HD inline double ln_invstd(double var, double eps) { return 1.0 / fm::sqrt(var + eps); }

// ---- layer_norm_grad's dx ----

// a = dy * gamma of one element, cached in the compute type.
template <class T>
SPORA_HD inline compute_of<T> ln_reg_a(T dy, T gamma) {
  return rn_mul(elem<T>::load(dy), elem<T>::load(gamma));
}

// Thread t's sums of a and a * xhat over its slots, in order (v: x, w: a).
template <class T>
SPORA_HD inline void ln_reg_bwd_sums(const T* v, const compute_of<T>* w, int per, int threads, int vec, int t,
                                     int64_t len, compute_of<T> mu, compute_of<T> inv, double* sa, double* sax) {
  using C = compute_of<T>;
  double a = 0, ax = 0;
  SPORA_UNROLL
  for (int k = 0; k < per; ++k) {
    if (ln_reg_pos(threads, vec, t, k) >= len) continue;
    const C xh = (elem<T>::load(v[k]) - mu) * inv;
    a += static_cast<double>(w[k]);
    ax += static_cast<double>(rn_mul(w[k], xh));
  }
  *sa = a, *sax = ax;
}

// dx of one element, as gn_bwd_write computes it; ma and max are the
// row's means of a and a * xhat.
template <class T>
SPORA_HD inline T ln_reg_dx(T v, compute_of<T> w, compute_of<T> mu, compute_of<T> inv, compute_of<T> ma,
                            compute_of<T> max) {
  using C = compute_of<T>;
  const C xh = (elem<T>::load(v) - mu) * inv;
  return elem<T>::store(inv * (w - ma - rn_mul(xh, max)));
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the register path over every row. in: x, gamma, beta;
// out: y, mean, invstd (the compute type).
template <class T>
inline void ln_reg_forward_emulate(const GnIndex& ix, const LnRegCfg& c, const void* const* in, void* const* out) {
  using C = compute_of<T>;
  const T* x = static_cast<const T*>(in[0]);
  const T* gamma = static_cast<const T*>(in[1]);
  const T* beta = static_cast<const T*>(in[2]);
  T* y = static_cast<T*>(out[0]);
  C* mean_out = static_cast<C*>(out[1]);
  C* invstd_out = static_cast<C*>(out[2]);
  const int n = c.threads;
  std::vector<T> v(static_cast<size_t>(n) * c.per);
  std::vector<double> acc(static_cast<size_t>(n));
  const double m = static_cast<double>(ix.len);
  auto tree = [&]() {
    for (int s = n / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; ++t) acc[t] += acc[t + s];
    return acc[0];
  };
  for (int64_t q = 0; q < ix.groups; ++q) {
    const int64_t base = q * ix.qstride;
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < c.per; ++k) {
        const int64_t pos = ln_reg_pos(n, c.vec, t, k);
        if (pos < ix.len) v[static_cast<size_t>(t * c.per + k)] = x[base + pos];
      }
    for (int t = 0; t < n; ++t) acc[t] = ln_reg_sum<T>(&v[static_cast<size_t>(t * c.per)], c.per, n, c.vec, t, ix.len);
    const double mean = tree() / m;
    for (int t = 0; t < n; ++t)
      acc[t] = ln_reg_sq<T>(&v[static_cast<size_t>(t * c.per)], c.per, n, c.vec, t, ix.len, mean);
    const double var = tree() / m;
    mean_out[q] = static_cast<C>(mean);
    invstd_out[q] = static_cast<C>(ln_invstd(var, ix.eps));
    const C mu = static_cast<C>(mean), inv = static_cast<C>(ln_invstd(var, ix.eps));
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < c.per; ++k) {
        const int64_t pos = ln_reg_pos(n, c.vec, t, k);
        if (pos < ix.len)
          y[base + pos] = ln_reg_out<T>(v[static_cast<size_t>(t * c.per + k)], gamma[pos], beta[pos], mu, inv);
      }
  }
}

// Host emulation of the gradient's dx over every row. in: x, dy, gamma,
// mean, invstd; out[0]: dx.
template <class T>
inline void ln_reg_backward_emulate(const GnIndex& ix, const LnRegCfg& c, const void* const* in, void* const* out) {
  using C = compute_of<T>;
  const T* x = static_cast<const T*>(in[0]);
  const T* dy = static_cast<const T*>(in[1]);
  const T* gamma = static_cast<const T*>(in[2]);
  const C* mean = static_cast<const C*>(in[3]);
  const C* invstd = static_cast<const C*>(in[4]);
  T* dx = static_cast<T*>(out[0]);
  const int n = c.threads;
  std::vector<T> v(static_cast<size_t>(n) * c.per);
  std::vector<C> w(v.size(), C(0));
  std::vector<double> acc(static_cast<size_t>(n)), acc_x(static_cast<size_t>(n));
  const double m = static_cast<double>(ix.len);
  auto tree = [&](std::vector<double>& a) {
    for (int s = n / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; ++t) a[t] += a[t + s];
    return a[0];
  };
  for (int64_t q = 0; q < ix.groups; ++q) {
    const int64_t base = q * ix.qstride;
    const C mu = mean[q], inv = invstd[q];
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < c.per; ++k) {
        const int64_t pos = ln_reg_pos(n, c.vec, t, k);
        if (pos >= ix.len) continue;
        const size_t i = static_cast<size_t>(t * c.per + k);
        v[i] = x[base + pos];
        w[i] = ln_reg_a<T>(dy[base + pos], gamma[pos]);
      }
    for (int t = 0; t < n; ++t) {
      const size_t i = static_cast<size_t>(t * c.per);
      ln_reg_bwd_sums<T>(&v[i], &w[i], c.per, n, c.vec, t, ix.len, mu, inv, &acc[t], &acc_x[t]);
    }
    const C ma = static_cast<C>(tree(acc) / m), max = static_cast<C>(tree(acc_x) / m);
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < c.per; ++k) {
        const int64_t pos = ln_reg_pos(n, c.vec, t, k);
        if (pos < ix.len) {
          const size_t i = static_cast<size_t>(t * c.per + k);
          dx[base + pos] = ln_reg_dx<T>(v[i], w[i], mu, inv, ma, max);
        }
      }
  }
}
#endif

}  // namespace spora::gpu
