// batch_norm, layer_norm, group_norm and their gradients, as the reference
// (plugins/common/kernels/norm.cpp) defines them: each normalises "groups",
// group q being `blocks` runs of `len` contiguous elements, with statistics
// in double over two passes (mean, then squared deviations).
//
// Device order, emulated on the host by gn_*_emulate for tests/gpu:
//  - statistics and dx: one thread block per group. Thread t takes the
//    group's flat positions t, t + kGnThreads, ...; its partials (double)
//    are combined by a halving tree in shared memory.
//  - dgamma/dbeta (sums over groups per parameter), without atomics: batch
//    norm's parameter is its group, so the group block writes them. Layer
//    norm: tiles of kGnCols columns x kGnLanes lanes over a chunk of rows,
//    one partial per (chunk, column). Group norm: one block per run (sample,
//    channel), one partial per (sample, channel). A finishing thread per
//    parameter then adds its partials in index order.
// The reference sums sequentially: results agree to a double's rounding
// before the final store. Products that feed an addition go through
// rn_mul (rounded.h), which the GPU compilers may not fuse into an FMA (the
// reference rounds the product first).
#pragma once
#include <cstdint>

#include <string>

#include "fmath.h"
#include "hd.h"
#include "kernel_plan.h"  // plugins/common: Shape, AttrList (host side)
#include "rounded.h"

namespace spora::gpu {

enum class GnKind : int32_t { kBatch, kLayer, kGroup };

constexpr int kGnThreads = 256;
constexpr int kGnCols = 32;                      // layer norm parameter tiles: columns (one warp's worth)
constexpr int kGnLanes = kGnThreads / kGnCols;   // ... and row lanes
constexpr int64_t kGnRowsPerLane = 16;           // rows a lane sums before another chunk is worth it
constexpr int64_t kGnMaxChunks = 256;

struct GnIndex {
  GnKind kind = GnKind::kLayer;
  bool backward = false;
  bool training = false;  // batch_norm only
  double eps = 1e-5, momentum = 0.1;
  // The reference's Layout: group q is `blocks` runs of `len` elements from
  // q * qstride, run b at b * stride; run b's parameter is
  // q % pmod * pmul + b * pstep, or the position in the run (per_element).
  int64_t groups = 0, blocks = 0, len = 0, stride = 0, qstride = 0;
  int64_t pmod = 1, pmul = 0, pstep = 0;
  bool per_element = false;
  int64_t params = 0;
  // Backward dgamma/dbeta partials per parameter: row chunks (layer norm)
  // or samples (group norm); 0 for batch norm.
  int64_t partials = 0;
};

SPORA_HD inline int64_t gn_size(const GnIndex& ix) { return ix.blocks * ix.len; }

// Statistics from the group (else batch_norm inference's running stats).
SPORA_HD inline bool gn_batch_stats(const GnIndex& ix) { return ix.kind != GnKind::kBatch || ix.training; }

// Walks thread t's flat positions j = t, t + kGnThreads, ... of group q:
// element offset k and parameter index p, advanced by additions only (no
// division per element). Run b = j / len, position e = j % len.
struct GnCursor {
  int64_t e = 0, k = 0, p = 0;     // at the current j
  int64_t de = 0, dk = 0, dp = 0;  // one step of kGnThreads, before a wrap of e
};

SPORA_HD inline GnCursor gn_cursor(const GnIndex& ix, int64_t q, int t) {
  GnCursor c;
  if (ix.len <= 0) return c;  // an empty group: no position is visited
  const int64_t b = t / ix.len, db = kGnThreads / ix.len;
  c.e = t - b * ix.len;
  c.k = q * ix.qstride + b * ix.stride + c.e;
  c.p = ix.per_element ? c.e : q % ix.pmod * ix.pmul + b * ix.pstep;
  c.de = kGnThreads - db * ix.len;
  c.dk = db * ix.stride + c.de;
  c.dp = db * ix.pstep;
  return c;
}

SPORA_HD inline void gn_next(const GnIndex& ix, GnCursor& c) {
  c.e += c.de, c.k += c.dk, c.p += c.dp;
  if (c.e >= ix.len) c.e -= ix.len, c.k += ix.stride - ix.len, c.p += ix.pstep;
  if (ix.per_element) c.p = c.e;
}

// Halving tree level over `n` arrays of kGnThreads partials.
SPORA_HD inline void gn_tree_level(double* acc, int n, int t, int s) {
  if (t < s)
    for (int i = 0; i < n; ++i) acc[i * kGnThreads + t] += acc[i * kGnThreads + t + s];
}

// ---- forward ----

template <class T>
SPORA_HD inline double gn_sum_partial(const GnIndex& ix, const T* x, int64_t q, int t) {
  const int64_t n = gn_size(ix);
  double a = 0;
  GnCursor c = gn_cursor(ix, q, t);
  for (int64_t j = t; j < n; j += kGnThreads, gn_next(ix, c)) {
    const int64_t k = c.k;
    a += static_cast<double>(elem<T>::load(x[k]));
  }
  return a;
}

template <class T>
SPORA_HD inline double gn_sq_partial(const GnIndex& ix, const T* x, int64_t q, int t, double mean) {
  const int64_t n = gn_size(ix);
  double a = 0;
  GnCursor c = gn_cursor(ix, q, t);
  for (int64_t j = t; j < n; j += kGnThreads, gn_next(ix, c)) {
    const int64_t k = c.k;
    const double d = static_cast<double>(elem<T>::load(x[k])) - mean;
    a += rn_mul(d, d);
  }
  return a;
}

// Group q's statistics outputs from its mean and (biased) variance; thread
// 0 of the block writes them, and batch norm's running statistics. rm/rv
// are batch norm's running inputs, rm_out/rv_out its outputs (else null).
template <class T>
SPORA_HD inline void gn_write_stats(const GnIndex& ix, int64_t q, double mean, double var, const T* rm, const T* rv,
                                    compute_of<T>* mean_out, compute_of<T>* invstd_out, T* rm_out, T* rv_out) {
  using C = compute_of<T>;
  mean_out[q] = static_cast<C>(mean);
  invstd_out[q] = static_cast<C>(1.0 / fm::sqrt(var + ix.eps));
  if (ix.kind != GnKind::kBatch) return;
  const double m = static_cast<double>(gn_size(ix));
  const double r_mean = static_cast<double>(elem<T>::load(rm[q]));
  const double r_var = static_cast<double>(elem<T>::load(rv[q]));
  double nm = r_mean, nv = r_var;
  if (ix.training && m > 0) {
    const double unbiased = m > 1 ? var * m / (m - 1) : var;
    nm = rn_mul(1 - ix.momentum, r_mean) + rn_mul(ix.momentum, mean);
    nv = rn_mul(1 - ix.momentum, r_var) + rn_mul(ix.momentum, unbiased);
  }
  rm_out[q] = elem<T>::template store<double>(nm);
  rv_out[q] = elem<T>::template store<double>(nv);
}

// Thread t's outputs y = (x - mu) * inv * gamma + beta.
template <class T>
SPORA_HD inline void gn_fwd_write(const GnIndex& ix, const T* x, const T* gamma, const T* beta, T* y, int64_t q, int t,
                                  compute_of<T> mu, compute_of<T> inv) {
  const int64_t n = gn_size(ix);
  GnCursor c = gn_cursor(ix, q, t);
  for (int64_t j = t; j < n; j += kGnThreads, gn_next(ix, c)) {
    const int64_t k = c.k, p = c.p;
    const auto xh = (elem<T>::load(x[k]) - mu) * inv;
    y[k] = elem<T>::store(rn_mul(xh, elem<T>::load(gamma[p])) + elem<T>::load(beta[p]));
  }
}

// ---- backward: dx = inv * (a - mean(a) - xhat * mean(a * xhat)), a = dy * gamma ----

// Thread t's partials of the group: sum a, sum a * xhat, sum dy,
// sum dy * xhat (the last two are batch norm's dbeta and dgamma).
constexpr int kGnBwdSums = 4;
template <class T>
SPORA_HD inline void gn_bwd_partials(const GnIndex& ix, const T* x, const T* dy, const T* gamma, int64_t q, int t,
                                     compute_of<T> mu, compute_of<T> inv, double* out) {
  using C = compute_of<T>;
  const int64_t n = gn_size(ix);
  double sa = 0, sax = 0, sg = 0, sgx = 0;
  GnCursor c = gn_cursor(ix, q, t);
  for (int64_t j = t; j < n; j += kGnThreads, gn_next(ix, c)) {
    const int64_t k = c.k, p = c.p;
    const C g = elem<T>::load(dy[k]), xh = (elem<T>::load(x[k]) - mu) * inv;
    const C a = rn_mul(g, elem<T>::load(gamma[p]));
    sa += static_cast<double>(a);
    sax += static_cast<double>(rn_mul(a, xh));
    sg += static_cast<double>(g);
    sgx += static_cast<double>(rn_mul(g, xh));
  }
  out[0] = sa, out[1] = sax, out[2] = sg, out[3] = sgx;
}

template <class T>
SPORA_HD inline void gn_bwd_write(const GnIndex& ix, const T* x, const T* dy, const T* gamma, T* dx, int64_t q, int t,
                                  compute_of<T> mu, compute_of<T> inv, double sa, double sax) {
  using C = compute_of<T>;
  const int64_t n = gn_size(ix);
  const double m = static_cast<double>(n);
  const C ma = static_cast<C>(sa / m), max = static_cast<C>(sax / m);
  GnCursor c = gn_cursor(ix, q, t);
  for (int64_t j = t; j < n; j += kGnThreads, gn_next(ix, c)) {
    const int64_t k = c.k, p = c.p;
    const C xh = (elem<T>::load(x[k]) - mu) * inv;
    dx[k] = elem<T>::store(inv * (rn_mul(elem<T>::load(dy[k]), elem<T>::load(gamma[p])) - ma - rn_mul(xh, max)));
  }
}

// Layer norm: rows [r0, r1) of row chunk `chunk`.
SPORA_HD inline int64_t gn_chunk_rows(const GnIndex& ix) { return (ix.groups + ix.partials - 1) / ix.partials; }

// Layer norm, thread (col, lane) of column tile `tile` in row chunk
// `chunk`: sums of dy * xhat and dy over its rows of column tile*kGnCols+col.
template <class T>
SPORA_HD inline void gn_col_partials(const GnIndex& ix, const T* x, const T* dy, const compute_of<T>* mean,
                                     const compute_of<T>* invstd, int64_t tile, int64_t chunk, int col, int lane,
                                     double* out) {
  using C = compute_of<T>;
  const int64_t c = tile * kGnCols + col, rows = gn_chunk_rows(ix);
  const int64_t r0 = chunk * rows, r1 = r0 + rows < ix.groups ? r0 + rows : ix.groups;
  double sgx = 0, sg = 0;
  if (c < ix.params) {
    for (int64_t q = r0 + lane; q < r1; q += kGnLanes) {
      const int64_t k = q * ix.qstride + c;
      const C g = elem<T>::load(dy[k]), xh = (elem<T>::load(x[k]) - mean[q]) * invstd[q];
      sgx += static_cast<double>(rn_mul(g, xh));
      sg += static_cast<double>(g);
    }
  }
  out[0] = sgx, out[1] = sg;
}

// Group norm, thread t of run r (r = q * blocks + b): the run's sums of
// dy * xhat and dy.
template <class T>
SPORA_HD inline void gn_run_partials(const GnIndex& ix, const T* x, const T* dy, const compute_of<T>* mean,
                                     const compute_of<T>* invstd, int64_t r, int t, double* out) {
  using C = compute_of<T>;
  const int64_t q = r / ix.blocks, b = r - q * ix.blocks, base = q * ix.qstride + b * ix.stride;
  const C mu = mean[q], inv = invstd[q];
  double sgx = 0, sg = 0;
  for (int64_t e = t; e < ix.len; e += kGnThreads) {
    const C g = elem<T>::load(dy[base + e]), xh = (elem<T>::load(x[base + e]) - mu) * inv;
    sgx += static_cast<double>(rn_mul(g, xh));
    sg += static_cast<double>(g);
  }
  out[0] = sgx, out[1] = sg;
}

// Where run r's partials go: partial index (the sample) and parameter.
SPORA_HD inline int64_t gn_run_slot(const GnIndex& ix, int64_t r) {
  const int64_t q = r / ix.blocks, b = r - q * ix.blocks;
  return (q / ix.pmod) * ix.params + q % ix.pmod * ix.pmul + b * ix.pstep;
}

// Partials are ws[(i * params + p) * 2 + {0: dy * xhat, 1: dy}].
template <class T>
SPORA_HD inline void gn_param_finish(const GnIndex& ix, const double* ws, int64_t p, T* dgamma, T* dbeta) {
  double sgx = 0, sg = 0;
  for (int64_t i = 0; i < ix.partials; ++i) {
    sgx += ws[(i * ix.params + p) * 2];
    sg += ws[(i * ix.params + p) * 2 + 1];
  }
  dgamma[p] = elem<T>::template store<double>(sgx);
  dbeta[p] = elem<T>::template store<double>(sg);
}

// Workspace bytes of the backward's parameter partials.
inline size_t gn_workspace(const GnIndex& ix) {
  if (!ix.backward || ix.kind == GnKind::kBatch) return 0;
  return static_cast<size_t>(ix.partials) * static_cast<size_t>(ix.params) * 2 * sizeof(double);
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the forward, every group in the device's order.
// in: x, gamma, beta[, running_mean, running_var]; out: y, mean, invstd[,
// running_mean, running_var].
template <class T>
inline void gn_forward_emulate(const GnIndex& ix, const void* const* in, void* const* out) {
  using C = compute_of<T>;
  const T* x = static_cast<const T*>(in[0]);
  const bool bn = ix.kind == GnKind::kBatch;
  const T* rm = bn ? static_cast<const T*>(in[3]) : nullptr;
  const T* rv = bn ? static_cast<const T*>(in[4]) : nullptr;
  double acc[kGnThreads];
  const double m = static_cast<double>(gn_size(ix));
  for (int64_t q = 0; q < ix.groups; ++q) {
    double mean, var;
    if (gn_batch_stats(ix)) {
      for (int t = 0; t < kGnThreads; ++t) acc[t] = gn_sum_partial<T>(ix, x, q, t);
      for (int s = kGnThreads / 2; s > 0; s >>= 1)
        for (int t = 0; t < kGnThreads; ++t) gn_tree_level(acc, 1, t, s);
      mean = acc[0] / m;
      for (int t = 0; t < kGnThreads; ++t) acc[t] = gn_sq_partial<T>(ix, x, q, t, mean);
      for (int s = kGnThreads / 2; s > 0; s >>= 1)
        for (int t = 0; t < kGnThreads; ++t) gn_tree_level(acc, 1, t, s);
      var = acc[0] / m;
    } else {
      mean = static_cast<double>(elem<T>::load(rm[q]));
      var = static_cast<double>(elem<T>::load(rv[q]));
    }
    gn_write_stats<T>(ix, q, mean, var, rm, rv, static_cast<C*>(out[1]), static_cast<C*>(out[2]),
                      bn ? static_cast<T*>(out[3]) : nullptr, bn ? static_cast<T*>(out[4]) : nullptr);
    const C mu = static_cast<C>(mean), inv = static_cast<C>(1.0 / fm::sqrt(var + ix.eps));
    for (int t = 0; t < kGnThreads; ++t)
      gn_fwd_write<T>(ix, x, static_cast<const T*>(in[1]), static_cast<const T*>(in[2]), static_cast<T*>(out[0]), q,
                      t, mu, inv);
  }
}

// Host emulation of the backward. in: x, dy, gamma, mean, invstd; out: dx,
// dgamma, dbeta; ws: gn_workspace(ix) bytes.
template <class T>
inline void gn_backward_emulate(const GnIndex& ix, const void* const* in, void* const* out, void* ws) {
  using C = compute_of<T>;
  const T* x = static_cast<const T*>(in[0]);
  const T* dy = static_cast<const T*>(in[1]);
  const T* gamma = static_cast<const T*>(in[2]);
  const C* mean = static_cast<const C*>(in[3]);
  const C* invstd = static_cast<const C*>(in[4]);
  T* dgamma = static_cast<T*>(out[1]);
  T* dbeta = static_cast<T*>(out[2]);
  double acc[kGnBwdSums * kGnThreads];
  for (int64_t q = 0; q < ix.groups; ++q) {
    const C mu = mean[q], inv = invstd[q];
    for (int t = 0; t < kGnThreads; ++t) {
      double part[kGnBwdSums];
      gn_bwd_partials<T>(ix, x, dy, gamma, q, t, mu, inv, part);
      for (int i = 0; i < kGnBwdSums; ++i) acc[i * kGnThreads + t] = part[i];
    }
    for (int s = kGnThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < kGnThreads; ++t) gn_tree_level(acc, kGnBwdSums, t, s);
    const double sa = acc[0], sax = acc[kGnThreads], sg = acc[2 * kGnThreads], sgx = acc[3 * kGnThreads];
    if (ix.kind == GnKind::kBatch) {
      dgamma[q] = elem<T>::template store<double>(sgx);
      dbeta[q] = elem<T>::template store<double>(sg);
    }
    for (int t = 0; t < kGnThreads; ++t) gn_bwd_write<T>(ix, x, dy, gamma, static_cast<T*>(out[0]), q, t, mu, inv, sa, sax);
  }
  if (ix.kind == GnKind::kBatch) return;
  double* part = static_cast<double*>(ws);
  double tile[2 * kGnThreads];
  if (ix.kind == GnKind::kLayer) {
    const int64_t tiles = (ix.params + kGnCols - 1) / kGnCols;
    for (int64_t chunk = 0; chunk < ix.partials; ++chunk)
      for (int64_t tl = 0; tl < tiles; ++tl) {
        for (int t = 0; t < kGnThreads; ++t) {
          double two[2];
          gn_col_partials<T>(ix, x, dy, mean, invstd, tl, chunk, t % kGnCols, t / kGnCols, two);
          tile[t] = two[0], tile[kGnThreads + t] = two[1];
        }
        // Lanes are kGnCols apart: a tree over thread strides s * kGnCols.
        for (int s = kGnLanes / 2; s > 0; s >>= 1)
          for (int t = 0; t < kGnThreads; ++t) gn_tree_level(tile, 2, t, s * kGnCols);
        for (int col = 0; col < kGnCols; ++col) {
          const int64_t c = tl * kGnCols + col;
          if (c < ix.params) {
            part[(chunk * ix.params + c) * 2] = tile[col];
            part[(chunk * ix.params + c) * 2 + 1] = tile[kGnThreads + col];
          }
        }
      }
  } else {
    for (int64_t r = 0; r < ix.groups * ix.blocks; ++r) {
      for (int t = 0; t < kGnThreads; ++t) {
        double two[2];
        gn_run_partials<T>(ix, x, dy, mean, invstd, r, t, two);
        tile[t] = two[0], tile[kGnThreads + t] = two[1];
      }
      for (int s = kGnThreads / 2; s > 0; s >>= 1)
        for (int t = 0; t < kGnThreads; ++t) gn_tree_level(tile, 2, t, s);
      const int64_t slot = gn_run_slot(ix, r);
      part[slot * 2] = tile[0];
      part[slot * 2 + 1] = tile[kGnThreads];
    }
  }
  for (int64_t p = 0; p < ix.params; ++p) gn_param_finish<T>(ix, part, p, dgamma, dbeta);
}
#endif

// Host side: the index of a planned norm op, its operands validated by the
// reference planner (x flattened to [n, c, spatial], or [rows, d] for
// layer norm).
inline GnIndex gn_index_of(const std::string& op, const spora::plugin::Shape& x, const spora::plugin::AttrList& attrs) {
  GnIndex ix;
  ix.backward = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
  ix.kind = op.rfind("batch_norm", 0) == 0   ? GnKind::kBatch
            : op.rfind("layer_norm", 0) == 0 ? GnKind::kLayer
                                             : GnKind::kGroup;
  ix.eps = attrs.get_float("eps", 1e-5);
  ix.momentum = attrs.get_float("momentum", 0.1);
  ix.training = attrs.get_bool("training", false);
  if (ix.kind == GnKind::kBatch) {
    const int64_t n = x.dims[0], c = x.dims[1], sp = x.dims[2];
    ix.groups = c, ix.blocks = n, ix.len = sp, ix.stride = c * sp, ix.qstride = sp;
    ix.pmod = c > 0 ? c : 1, ix.pmul = 1, ix.params = c;
  } else if (ix.kind == GnKind::kLayer) {
    const int64_t r = x.dims[0], d = x.dims[1];
    ix.groups = r, ix.blocks = 1, ix.len = d, ix.qstride = d, ix.per_element = true, ix.params = d;
    int64_t chunks = (r + kGnLanes * kGnRowsPerLane - 1) / (kGnLanes * kGnRowsPerLane);
    ix.partials = chunks < 1 ? 1 : chunks > kGnMaxChunks ? kGnMaxChunks : chunks;
  } else {
    const int64_t n = x.dims[0], c = x.dims[1], sp = x.dims[2], g = attrs.get_int("groups", 1);
    ix.groups = n * g, ix.blocks = c / g, ix.len = sp, ix.stride = sp, ix.qstride = c / g * sp;
    ix.pmod = g, ix.pmul = c / g, ix.pstep = 1, ix.params = c;
    ix.partials = n;
  }
  return ix;
}

}  // namespace spora::gpu
