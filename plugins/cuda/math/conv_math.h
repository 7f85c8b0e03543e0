// The GPU plugins' own 2-D convolutions, NCHW (the kernels the ROCm build
// always uses and CUDA uses without cuDNN): conv2d and its bias/epilogue
// forms, conv2d_grad_input and conv2d_transpose (the same gather), and
// conv2d_grad_weight. Semantics and summation order are those of the
// reference (plugins/common/kernels/conv.cpp, epilogue.cpp):
//   forward: one thread per output position and up to kConvMaxOut output
//     channels of one group (each input value loaded once for all of
//     them); per element the bias starts the sum, then channels of the
//     group, kernel rows, kernel columns, in the compute type -- the
//     reference's order, so results are bit-exact on the host (a GPU
//     compiler may contract to FMA).
//   data: one thread per input element gathering the output positions that
//     read it, in the reference's (output channel, row, column) order; no
//     atomics, deterministic.
//   weight: one block per weight element; thread t sums the valid output
//     positions t, t + kConvThreads, ... in double (as the reference), then
//     a halving tree in shared memory. conv_weight_emulate runs it on the
//     host for tests/gpu.
#pragma once
#include <cstdint>
#include <string>

#include "gemm_math.h"
#include "hd.h"
#include "kernel_plan.h"  // plugins/common: KernelPlan (host side)

namespace spora::gpu {

enum class ConvKind : int32_t { kForward, kData, kWeight };

constexpr int kConvThreads = 256;
constexpr int kConvMaxOut = 4;  // output channels per forward thread

// Sizes of the forward convolution x [N,C,H,W] * w [O,C/g,kH,kW] -> y
// [N,O,OH,OW], whatever the op's operand order.
struct ConvIndex {
  ConvKind kind = ConvKind::kForward;
  int64_t n = 0, cin = 0, h = 0, w = 0;    // x
  int64_t o_all = 0, cg = 0, kh = 0, kw = 0;  // w; cg = input channels per group
  int64_t oh = 0, ow = 0, og = 0;          // y; og = output channels per group
  int64_t stride[2] = {1, 1}, dil[2] = {1, 1}, pad[4] = {0, 0, 0, 0};  // pad: top, bottom, left, right
  // Kernel rows (columns) reaching one input row from output rows step
  // apart: stride / gcd(stride, dilation) kernel rows, rstep output rows.
  int64_t kstep[2] = {1, 1}, rstep[2] = {1, 1};
  int64_t ob = 1;  // output channels per forward thread: divides og, <= kConvMaxOut
  int32_t has_bias = 0, has_ep = 0;
  GemmEpilogue ep;
};

SPORA_HD inline int64_t conv_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The output positions [lo, hi) whose tap o*stride + off lands in [0, n_in).
SPORA_HD inline void conv_tap_range(int64_t n_in, int64_t n_out, int64_t stride, int64_t off, int64_t* lo,
                                    int64_t* hi) {
  int64_t l = -conv_floor_div(off, stride);  // ceil(-off / stride)
  if (l < 0) l = 0;
  int64_t h = conv_floor_div(n_in - 1 - off, stride) + 1;
  if (h > n_out) h = n_out;
  *lo = l;
  *hi = h < l ? l : h;
}

// The kernel taps [lo, hi) whose position base + k*dil lies in [0, n_in).
SPORA_HD inline void conv_valid_taps(int64_t base, int64_t dil, int64_t k, int64_t n_in, int64_t* lo, int64_t* hi) {
  int64_t l = base >= 0 ? 0 : (-base + dil - 1) / dil;
  int64_t h = base > n_in - 1 ? 0 : (n_in - 1 - base) / dil + 1;
  if (h > k) h = k;
  *lo = l;
  *hi = h < l ? l : h;
}

// Forward thread e: output position (n, r, q) for output channels o0 ..
// o0 + ob - 1 (with the fused epilogue; `residual` is the whole residual
// tensor, shaped like y). Writes its ob elements of y.
template <class T>
SPORA_HD inline void conv_fwd_thread(const ConvIndex& ix, const T* x, const T* w, const T* b, const T* residual,
                                     T* y, int64_t e) {
  using C = compute_of<T>;
  const int64_t blocks = ix.o_all / ix.ob;
  const int64_t q = e % ix.ow, r = (e / ix.ow) % ix.oh, o0 = ((e / (ix.ow * ix.oh)) % blocks) * ix.ob,
                n = e / (ix.ow * ix.oh * blocks);
  C acc[kConvMaxOut];
  for (int u = 0; u < kConvMaxOut; ++u) acc[u] = ix.has_bias && u < ix.ob ? elem<T>::load(b[o0 + u]) : C(0);
  const int64_t c0 = (o0 / ix.og) * ix.cg, taps = ix.kh * ix.kw, wnext = ix.cg * taps;
  const int64_t h0 = r * ix.stride[0] - ix.pad[0], w0 = q * ix.stride[1] - ix.pad[2];
  int64_t i_lo, i_hi, j_lo, j_hi;
  conv_valid_taps(h0, ix.dil[0], ix.kh, ix.h, &i_lo, &i_hi);
  conv_valid_taps(w0, ix.dil[1], ix.kw, ix.w, &j_lo, &j_hi);
  for (int64_t c = 0; c < ix.cg; ++c) {
    const T* xp = x + (n * ix.cin + c0 + c) * ix.h * ix.w;
    const T* wp = w + (o0 * ix.cg + c) * taps;
    for (int64_t i = i_lo; i < i_hi; ++i) {
      const T* xr = xp + (h0 + i * ix.dil[0]) * ix.w + w0;
      for (int64_t j = j_lo; j < j_hi; ++j) {
        const C xv = elem<T>::load(xr[j * ix.dil[1]]);
        const int64_t k = i * ix.kw + j;
        for (int u = 0; u < kConvMaxOut; ++u)
          if (u < ix.ob) acc[u] += elem<T>::load(wp[u * wnext + k]) * xv;
      }
    }
  }
  for (int u = 0; u < kConvMaxOut; ++u) {
    if (u >= ix.ob) break;
    const int64_t yi = ((n * ix.o_all + o0 + u) * ix.oh + r) * ix.ow + q;
    y[yi] = gemm_store<T>(ix.has_ep ? &ix.ep : nullptr, acc[u], ix.has_ep && ix.ep.has_add ? residual + yi : nullptr);
  }
}

// The kernel taps k (ascending) that read input position `in_pos` along one
// axis, as k = k0 + m*kstep with output position o = o0 - m*rstep for m in
// [0, count): k*dil = in_pos + pad - o*stride has solutions k every
// stride/gcd(stride, dil), and o must stay in [0, n_out). Found once per
// thread so the gather's inner loops carry no division.
SPORA_HD inline int64_t conv_taps_of(int64_t in_pos, int64_t pad, int64_t k, int64_t dil, int64_t stride,
                                     int64_t n_out, int64_t kstep, int64_t rstep, int64_t* k0, int64_t* o0) {
  for (int64_t i = 0; i < k && i < kstep; ++i) {
    const int64_t t = in_pos + pad - i * dil;  // = o * stride
    if (t < 0) return 0;                        // later taps reach further back
    if (t % stride != 0) continue;
    // The first solution; skip the ones above the output range.
    int64_t o = t / stride, m = 0;
    if (o >= n_out) m = (o - n_out) / rstep + 1;
    *k0 = i + m * kstep;
    *o0 = o - m * rstep;
    if (*k0 >= k || *o0 < 0) return 0;
    const int64_t by_k = (k - 1 - *k0) / kstep, by_o = *o0 / rstep;
    return (by_k < by_o ? by_k : by_o) + 1;
  }
  return 0;
}

// Input-gradient element e of dx [N,C,H,W] (also conv2d_transpose's output):
// the sum over output channels of the group, kernel rows, kernel columns of
// w * dy at the output position whose tap is this element -- the
// reference's order.
template <class T>
SPORA_HD inline T conv_data_elem(const ConvIndex& ix, const T* dy, const T* w, int64_t e) {
  using C = compute_of<T>;
  const int64_t iw = e % ix.w, ih = (e / ix.w) % ix.h, c = (e / (ix.w * ix.h)) % ix.cin,
                n = e / (ix.w * ix.h * ix.cin);
  const int64_t grp = c / ix.cg, cc = c % ix.cg;
  int64_t i0 = 0, r0 = 0, j0 = 0, q0 = 0;
  const int64_t ni = conv_taps_of(ih, ix.pad[0], ix.kh, ix.dil[0], ix.stride[0], ix.oh, ix.kstep[0], ix.rstep[0], &i0, &r0);
  const int64_t nj = conv_taps_of(iw, ix.pad[2], ix.kw, ix.dil[1], ix.stride[1], ix.ow, ix.kstep[1], ix.rstep[1], &j0, &q0);
  C acc = C(0);
  if (ni == 0 || nj == 0) return elem<T>::store(acc);
  for (int64_t o = grp * ix.og; o < (grp + 1) * ix.og; ++o) {
    const T* dp = dy + (n * ix.o_all + o) * ix.oh * ix.ow;
    const T* wp = w + (o * ix.cg + cc) * ix.kh * ix.kw;
    for (int64_t mi = 0; mi < ni; ++mi) {
      const int64_t i = i0 + mi * ix.kstep[0], r = r0 - mi * ix.rstep[0];
      for (int64_t mj = 0; mj < nj; ++mj)
        acc += elem<T>::load(wp[i * ix.kw + j0 + mj * ix.kstep[1]]) *
               elem<T>::load(dp[r * ix.ow + q0 - mj * ix.rstep[1]]);
    }
  }
  return elem<T>::store(acc);
}

// The valid output positions of weight element `we` (= ((o*cg + c)*kH + i)*kW + j):
// rows [r_lo, r_hi) x columns [q_lo, q_hi) in every batch entry.
struct ConvWeightTap {
  int64_t o, c0c, i, j;  // c0c: the input channel read
  int64_t r_lo, r_hi, q_lo, q_hi, off_h, off_w;
};

SPORA_HD inline ConvWeightTap conv_weight_tap(const ConvIndex& ix, int64_t we) {
  ConvWeightTap t;
  t.j = we % ix.kw;
  t.i = (we / ix.kw) % ix.kh;
  const int64_t c = (we / (ix.kw * ix.kh)) % ix.cg;
  t.o = we / (ix.kw * ix.kh * ix.cg);
  t.c0c = (t.o / ix.og) * ix.cg + c;
  t.off_h = t.i * ix.dil[0] - ix.pad[0];
  t.off_w = t.j * ix.dil[1] - ix.pad[2];
  conv_tap_range(ix.h, ix.oh, ix.stride[0], t.off_h, &t.r_lo, &t.r_hi);
  conv_tap_range(ix.w, ix.ow, ix.stride[1], t.off_w, &t.q_lo, &t.q_hi);
  return t;
}

// Thread t's double partial of weight element `we`: dy * x over the valid
// (n, r, q) positions t, t + kConvThreads, ... (row-major), the position
// advanced by carries instead of divisions.
template <class T>
SPORA_HD inline double conv_weight_partial(const ConvIndex& ix, const T* x, const T* dy, const ConvWeightTap& tp,
                                           int t) {
  const int64_t nr = tp.r_hi - tp.r_lo, nq = tp.q_hi - tp.q_lo, total = ix.n * nr * nq;
  double s = 0;
  if (t >= total) return s;
  int64_t q = t % nq, r = (t / nq) % nr, n = t / (nq * nr);
  const int64_t sq = kConvThreads % nq, rows = kConvThreads / nq, sr = rows % nr, sn = rows / nr;
  for (int64_t k = t; k < total; k += kConvThreads) {
    const int64_t yr = tp.r_lo + r, yq = tp.q_lo + q;
    const int64_t ih = yr * ix.stride[0] + tp.off_h, iw = yq * ix.stride[1] + tp.off_w;
    s += static_cast<double>(elem<T>::load(dy[((n * ix.o_all + tp.o) * ix.oh + yr) * ix.ow + yq])) *
         static_cast<double>(elem<T>::load(x[((n * ix.cin + tp.c0c) * ix.h + ih) * ix.w + iw]));
    q += sq;
    if (q >= nq) {
      q -= nq;
      ++r;
    }
    r += sr;
    if (r >= nr) {
      r -= nr;
      ++n;
    }
    n += sn;
  }
  return s;
}

SPORA_HD inline void conv_tree_level(double* acc, int t, int s) {
  if (t < s) acc[t] += acc[t + s];
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the block computing weight element `we`, in the device's order.
template <class T>
inline T conv_weight_emulate(const ConvIndex& ix, const T* x, const T* dy, int64_t we) {
  double acc[kConvThreads];
  const ConvWeightTap tp = conv_weight_tap(ix, we);
  for (int t = 0; t < kConvThreads; ++t) acc[t] = conv_weight_partial<T>(ix, x, dy, tp, t);
  for (int s = kConvThreads / 2; s > 0; s >>= 1)
    for (int t = 0; t < kConvThreads; ++t) conv_tree_level(acc, t, s);
  return elem<T>::store(acc[0]);
}
#endif

// Host side: the index of a validated conv descriptor (the reference planner
// checked shapes and attributes). Returns false with `why` for an op or
// activation it does not know.
inline bool conv_index_of(const spora::plugin::KernelPlan& p, ConvIndex* ix, std::string* why) {
  const std::string& op = p.op;
  const bool fwd = op == "conv2d" || op == "conv2d_bias" || op == "conv2d_act" || op == "conv2d_add_act";
  const bool data = op == "conv2d_grad_input" || op == "conv2d_transpose";
  const bool weight = op == "conv2d_grad_weight";
  if (!fwd && !data && !weight) {
    *why = "not a convolution";
    return false;
  }
  ix->kind = fwd ? ConvKind::kForward : data ? ConvKind::kData : ConvKind::kWeight;
  const spora::plugin::Shape &a = p.in[0].shape, &b = p.in[1].shape, &out = p.out[0].shape;
  const spora::plugin::Shape& x = data ? out : a;
  const spora::plugin::Shape& w = weight ? out : b;
  const spora::plugin::Shape& y = fwd ? out : data ? a : b;
  const auto s = p.attrs.get_ints("stride"), d = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  if (s.size() != 2 || d.size() != 2 || pad.size() != 4 || x.rank != 4 || w.rank != 4 || y.rank != 4) {
    *why = "expects NCHW operands and canonical stride, dilation and padding";
    return false;
  }
  const int64_t groups = p.attrs.get_int("groups", 1);
  for (int i = 0; i < 2; ++i) {
    ix->stride[i] = s[static_cast<size_t>(i)];
    ix->dil[i] = d[static_cast<size_t>(i)];
  }
  for (int i = 0; i < 4; ++i) ix->pad[i] = pad[static_cast<size_t>(i)];
  for (int i = 0; i < 2; ++i) {
    int64_t a = ix->stride[i], b = ix->dil[i];  // gcd; both >= 1 (checked by the reference planner)
    while (b) {
      const int64_t r = a % b;
      a = b;
      b = r;
    }
    ix->kstep[i] = a > 0 ? ix->stride[i] / a : 1;
    ix->rstep[i] = a > 0 ? ix->dil[i] / a : 1;  // kstep * dil / stride
  }
  ix->n = x.dims[0];
  ix->cin = x.dims[1];
  ix->h = x.dims[2];
  ix->w = x.dims[3];
  ix->o_all = w.dims[0];
  ix->cg = w.dims[1];
  ix->kh = w.dims[2];
  ix->kw = w.dims[3];
  ix->oh = y.dims[2];
  ix->ow = y.dims[3];
  ix->og = groups > 0 ? w.dims[0] / groups : 0;
  ix->ob = ix->og % 4 == 0 ? 4 : ix->og % 2 == 0 ? 2 : 1;
  if (ix->ob > kConvMaxOut) ix->ob = kConvMaxOut;
  ix->has_bias = op != "conv2d" && fwd;
  ix->has_ep = op == "conv2d_act" || op == "conv2d_add_act";
  if (ix->has_ep &&
      !gemm_epilogue_of(p.attrs.get_string("activation", "none"), op == "conv2d_add_act", &ix->ep)) {
    *why = "unknown activation \"" + p.attrs.get_string("activation", "none") + "\"";
    return false;
  }
  return true;
}

// Threads (blocks for dw) the launch covers: forward positions times
// channel blocks, dx elements, dw elements.
inline int64_t conv_work(const ConvIndex& ix) {
  switch (ix.kind) {
    case ConvKind::kForward: return ix.n * (ix.o_all / ix.ob) * ix.oh * ix.ow;
    case ConvKind::kData: return ix.n * ix.cin * ix.h * ix.w;
    case ConvKind::kWeight: return ix.o_all * ix.cg * ix.kh * ix.kw;
  }
  return 0;
}

}  // namespace spora::gpu
