// The GPU plugins' own 2-D pooling, NCHW (ROCm always; CUDA without cuDNN):
// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their gradients, with the
// reference's semantics (plugins/common/kernels/pool.cpp): max takes the
// first maximum in (row, column) order and a NaN wins; avg windows follow
// PyTorch (count_include_pad divisor from the padded window); adaptive bins
// are [floor(i*len/n), ceil((i+1)*len/n)).
//
// Forwards: one thread per output element. Gradients: one thread per input
// element gathering the output windows that cover it, in the reference's
// ascending (row, column) order of outputs, so sums match it bit for bit
// and need no atomics. max_pool2d_grad first writes every window's argmax
// (plane-local index) to the workspace, then gathers.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "hd.h"
#include "kernel_plan.h"  // plugins/common: KernelPlan (host side)

namespace spora::gpu {

enum class PoolKind : int32_t { kMax, kMaxGrad, kAvg, kAvgGrad, kAdaptive, kAdaptiveGrad };

struct PoolIndex {
  PoolKind kind = PoolKind::kMax;
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;  // input (big) and output (small) planes
  int64_t k[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1}, pad[4] = {0, 0, 0, 0};  // pad: top, bottom, left, right
  int32_t include_pad = 1;
};

SPORA_HD inline int64_t pool_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Plane-local index of the first maximum of window (r, q) of plane xp, or
// -1 when no tap is inside the input; a NaN wins and stops the search.
template <class T>
SPORA_HD inline int64_t pool_argmax(const PoolIndex& ix, const T* xp, int64_t r, int64_t q) {
  using C = compute_of<T>;
  int64_t best = -1;
  C bv = C(0);
  for (int64_t i = 0; i < ix.k[0]; ++i) {
    const int64_t ih = r * ix.stride[0] - ix.pad[0] + i * ix.dil[0];
    if (ih < 0 || ih >= ix.h) continue;
    for (int64_t j = 0; j < ix.k[1]; ++j) {
      const int64_t iw = q * ix.stride[1] - ix.pad[2] + j * ix.dil[1];
      if (iw < 0 || iw >= ix.w) continue;
      const C v = elem<T>::load(xp[ih * ix.w + iw]);
      if (is_nan(v)) return ih * ix.w + iw;
      if (best < 0 || v > bv) {
        best = ih * ix.w + iw;
        bv = v;
      }
    }
  }
  return best;
}

// max_pool2d output element e (the input's value itself, -inf for a window
// outside the input).
template <class T>
SPORA_HD inline T pool_max_elem(const PoolIndex& ix, const T* x, int64_t e) {
  const int64_t q = e % ix.ow, r = (e / ix.ow) % ix.oh, pl = e / (ix.ow * ix.oh);
  const T* xp = x + pl * ix.h * ix.w;
  const int64_t a = pool_argmax<T>(ix, xp, r, q);
  return a >= 0 ? xp[a] : elem<T>::store(-HUGE_VAL);
}

// max_pool2d_grad, pass 1: the argmax of window e (plane-local, -1 none).
template <class T>
SPORA_HD inline int64_t pool_argmax_elem(const PoolIndex& ix, const T* x, int64_t e) {
  const int64_t q = e % ix.ow, r = (e / ix.ow) % ix.oh, pl = e / (ix.ow * ix.oh);
  return pool_argmax<T>(ix, x + pl * ix.h * ix.w, r, q);
}

// Calls fn(r) for the output rows whose window taps input row ih (some
// kernel row i with r*stride - pad + i*dil == ih), ascending: kernel rows
// descending give output rows ascending.
template <class Fn>
SPORA_HD inline void pool_tap_outputs(int64_t in_pos, int64_t pad, int64_t k, int64_t dil, int64_t stride,
                                      int64_t n_out, Fn&& fn) {
  for (int64_t i = k - 1; i >= 0; --i) {
    const int64_t t = in_pos + pad - i * dil;
    if (t < 0 || t % stride != 0) continue;
    const int64_t r = t / stride;
    if (r < n_out) fn(r);
  }
}

// max_pool2d_grad, pass 2: dx element e sums dy over the windows whose
// first maximum it is, in ascending (r, q).
template <class T>
SPORA_HD inline T pool_max_grad_elem(const PoolIndex& ix, const int64_t* arg, const T* dy, int64_t e) {
  using C = compute_of<T>;
  const int64_t iw = e % ix.w, ih = (e / ix.w) % ix.h, pl = e / (ix.w * ix.h);
  const int64_t me = ih * ix.w + iw, base = pl * ix.oh * ix.ow;
  C acc = C(0);
  pool_tap_outputs(ih, ix.pad[0], ix.k[0], ix.dil[0], ix.stride[0], ix.oh, [&](int64_t r) {
    pool_tap_outputs(iw, ix.pad[2], ix.k[1], ix.dil[1], ix.stride[1], ix.ow, [&](int64_t q) {
      const int64_t o = base + r * ix.ow + q;
      if (arg[o] == me) acc += elem<T>::load(dy[o]);
    });
  });
  return elem<T>::store(acc);
}

// PyTorch's avg window of output (r, q): [start, end) clipped to the padded
// input for the include-pad divisor, then to the input for the taps;
// divisor 0 for a window outside the input.
struct PoolAvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
SPORA_HD inline PoolAvgWindow pool_avg_window(const PoolIndex& ix, int64_t r, int64_t q) {
  int64_t h0 = r * ix.stride[0] - ix.pad[0], w0 = q * ix.stride[1] - ix.pad[2];
  int64_t h1 = h0 + ix.k[0], w1 = w0 + ix.k[1];
  if (h1 > ix.h + ix.pad[1]) h1 = ix.h + ix.pad[1];
  if (w1 > ix.w + ix.pad[3]) w1 = ix.w + ix.pad[3];
  const int64_t padded = (h1 - h0) * (w1 - w0);
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  if (h1 > ix.h) h1 = ix.h;
  if (w1 > ix.w) w1 = ix.w;
  if (h1 <= h0 || w1 <= w0) return {0, 0, 0, 0, 0};
  return {h0, h1, w0, w1, ix.include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <class T>
SPORA_HD inline T pool_avg_elem(const PoolIndex& ix, const T* x, int64_t e) {
  using C = compute_of<T>;
  const int64_t q = e % ix.ow, r = (e / ix.ow) % ix.oh, pl = e / (ix.ow * ix.oh);
  const T* xp = x + pl * ix.h * ix.w;
  const PoolAvgWindow a = pool_avg_window(ix, r, q);
  C sum = C(0);
  for (int64_t ih = a.h0; ih < a.h1; ++ih)
    for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += elem<T>::load(xp[ih * ix.w + iw]);
  return elem<T>::store(a.divisor ? sum / static_cast<C>(a.divisor) : C(0));
}

// avg_pool2d_grad: dx element e sums dy / divisor over the windows that
// contain it, ascending (r, q). Candidate rows: the window [r*s - pad,
// r*s - pad + k) holds ih; the clipped window decides.
template <class T>
SPORA_HD inline T pool_avg_grad_elem(const PoolIndex& ix, const T* dy, int64_t e) {
  using C = compute_of<T>;
  const int64_t iw = e % ix.w, ih = (e / ix.w) % ix.h, pl = e / (ix.w * ix.h);
  const T* dp = dy + pl * ix.oh * ix.ow;
  int64_t r0 = pool_floor_div(ih + ix.pad[0] - ix.k[0], ix.stride[0]) + 1, r1 = pool_floor_div(ih + ix.pad[0], ix.stride[0]);
  int64_t q0 = pool_floor_div(iw + ix.pad[2] - ix.k[1], ix.stride[1]) + 1, q1 = pool_floor_div(iw + ix.pad[2], ix.stride[1]);
  if (r0 < 0) r0 = 0;
  if (q0 < 0) q0 = 0;
  if (r1 > ix.oh - 1) r1 = ix.oh - 1;
  if (q1 > ix.ow - 1) q1 = ix.ow - 1;
  C acc = C(0);
  for (int64_t r = r0; r <= r1; ++r)
    for (int64_t q = q0; q <= q1; ++q) {
      const PoolAvgWindow a = pool_avg_window(ix, r, q);
      if (!a.divisor || ih < a.h0 || ih >= a.h1 || iw < a.w0 || iw >= a.w1) continue;
      acc += elem<T>::load(dp[r * ix.ow + q]) / static_cast<C>(a.divisor);
    }
  return elem<T>::store(acc);
}

// Adaptive bin i of n over len: [floor(i*len/n), ceil((i+1)*len/n)).
SPORA_HD inline int64_t pool_bin_start(int64_t i, int64_t n, int64_t len) { return i * len / n; }
SPORA_HD inline int64_t pool_bin_end(int64_t i, int64_t n, int64_t len) { return ((i + 1) * len + n - 1) / n; }

template <class T>
SPORA_HD inline T pool_adaptive_elem(const PoolIndex& ix, const T* x, int64_t e) {
  using C = compute_of<T>;
  const int64_t q = e % ix.ow, r = (e / ix.ow) % ix.oh, pl = e / (ix.ow * ix.oh);
  const T* xp = x + pl * ix.h * ix.w;
  const int64_t h0 = pool_bin_start(r, ix.oh, ix.h), h1 = pool_bin_end(r, ix.oh, ix.h);
  const int64_t w0 = pool_bin_start(q, ix.ow, ix.w), w1 = pool_bin_end(q, ix.ow, ix.w);
  C sum = C(0);
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) sum += elem<T>::load(xp[ih * ix.w + iw]);
  return elem<T>::store(sum / static_cast<C>((h1 - h0) * (w1 - w0)));
}

// adaptive_avg_pool2d_grad: dx element e sums dy / bin size over the bins
// that contain it, ascending (r, q). Bin r holds position p for r from
// floor(p*n/len) to floor(((p+1)*n - 1)/len); membership is re-checked
// with the bin bounds themselves.
template <class T>
SPORA_HD inline T pool_adaptive_grad_elem(const PoolIndex& ix, const T* dy, int64_t e) {
  using C = compute_of<T>;
  const int64_t iw = e % ix.w, ih = (e / ix.w) % ix.h, pl = e / (ix.w * ix.h);
  const T* dp = dy + pl * ix.oh * ix.ow;
  int64_t r1 = ((ih + 1) * ix.oh - 1) / ix.h, q1 = ((iw + 1) * ix.ow - 1) / ix.w;
  if (r1 > ix.oh - 1) r1 = ix.oh - 1;
  if (q1 > ix.ow - 1) q1 = ix.ow - 1;
  C acc = C(0);
  for (int64_t r = ih * ix.oh / ix.h; r <= r1; ++r) {
    const int64_t h0 = pool_bin_start(r, ix.oh, ix.h), h1 = pool_bin_end(r, ix.oh, ix.h);
    if (ih < h0 || ih >= h1) continue;
    for (int64_t q = iw * ix.ow / ix.w; q <= q1; ++q) {
      const int64_t w0 = pool_bin_start(q, ix.ow, ix.w), w1 = pool_bin_end(q, ix.ow, ix.w);
      if (iw < w0 || iw >= w1) continue;
      acc += elem<T>::load(dp[r * ix.ow + q]) / static_cast<C>((h1 - h0) * (w1 - w0));
    }
  }
  return elem<T>::store(acc);
}

// Host side: the index of a validated pooling descriptor (the reference
// planner checked shapes and attributes); false with `why` for an op it
// does not know.
inline bool pool_index_of(const spora::plugin::KernelPlan& p, PoolIndex* ix, std::string* why) {
  const std::string& op = p.op;
  if (op == "max_pool2d") ix->kind = PoolKind::kMax;
  else if (op == "max_pool2d_grad") ix->kind = PoolKind::kMaxGrad;
  else if (op == "avg_pool2d") ix->kind = PoolKind::kAvg;
  else if (op == "avg_pool2d_grad") ix->kind = PoolKind::kAvgGrad;
  else if (op == "adaptive_avg_pool2d") ix->kind = PoolKind::kAdaptive;
  else if (op == "adaptive_avg_pool2d_grad") ix->kind = PoolKind::kAdaptiveGrad;
  else {
    *why = "not a pooling op";
    return false;
  }
  const bool grad = ix->kind == PoolKind::kMaxGrad || ix->kind == PoolKind::kAvgGrad ||
                    ix->kind == PoolKind::kAdaptiveGrad;
  const spora::plugin::Shape& big = grad ? p.out[0].shape : p.in[0].shape;
  const spora::plugin::Shape& small = grad ? p.in[p.num_inputs - 1].shape : p.out[0].shape;
  if (big.rank != 4 || small.rank != 4) {
    *why = "expects NCHW operands";
    return false;
  }
  ix->planes = big.dims[0] * big.dims[1];
  ix->h = big.dims[2];
  ix->w = big.dims[3];
  ix->oh = small.dims[2];
  ix->ow = small.dims[3];
  if (ix->kind == PoolKind::kAdaptive || ix->kind == PoolKind::kAdaptiveGrad) return true;
  const auto k = p.attrs.get_ints("kernel_size"), s = p.attrs.get_ints("stride"), pad = p.attrs.get_ints("padding");
  auto d = p.attrs.get_ints("dilation");
  if (d.empty()) d = {1, 1};
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || pad.size() != 4) {
    *why = "expects canonical kernel_size, stride, dilation and padding";
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    ix->k[i] = k[static_cast<size_t>(i)];
    ix->stride[i] = s[static_cast<size_t>(i)];
    ix->dil[i] = d[static_cast<size_t>(i)];
  }
  for (int i = 0; i < 4; ++i) ix->pad[i] = pad[static_cast<size_t>(i)];
  ix->include_pad = p.attrs.get_bool("count_include_pad", true);
  return true;
}

// Elements of the output the launch writes (y, or dx for gradients).
inline int64_t pool_out_elems(const PoolIndex& ix) {
  const bool grad =
      ix.kind == PoolKind::kMaxGrad || ix.kind == PoolKind::kAvgGrad || ix.kind == PoolKind::kAdaptiveGrad;
  return ix.planes * (grad ? ix.h * ix.w : ix.oh * ix.ow);
}

}  // namespace spora::gpu
