// Max pooling with non-overlapping windows (kernel == stride, no padding,
// no dilation: LeNet's and most CNNs' 2x2/2) as own loops, f32 and bf16:
// max_pool2d and max_pool2d_grad. The gradient's are registered ahead of
// oneDNN (onednn_pool.cpp, which handles every other window); the forward
// ones run where they time faster than oneDNN's kernel.
//
// Why: max_pool2d_grad gets x, not saved indices, so oneDNN must run its
// training forward pass (argmax workspace) and then its backward pass:
// 2.1 ms per LeNet b64 first layer on this AVX-512 Xeon (jit, NCHW), 3 ms
// on AVX2 (simple_nchw; jit:avx2 with the workspace took 8 ms). With
// disjoint windows one pass over x does it: each window's first maximum
// gets dy, everything else 0. Reading x and dy and writing dx once is
// memory-bound work of ~3 MB there.
//
// Results are the reference kernel's bit for bit (plugins/common/kernels/
// pool.cpp): the first maximum in row-major window order wins, a NaN wins
// over everything (the first one), and since windows are disjoint no
// gradient is summed, so dx holds dy's values. Input rows and
// columns past the last whole window get 0.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "cpu_pool.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
using plugin::load;
using plugin::store;

struct Tiles {
  int64_t planes, h, w, oh, ow, kh, kw;
};

// Offset (within the plane) of the first maximum of window (r, q).
template <class T>
int64_t window_argmax(const Tiles& t, const T* x, int64_t r, int64_t q) {
  const int64_t h0 = r * t.kh, w0 = q * t.kw;
  int64_t best = h0 * t.w + w0;
  float bv = load(x[best]);
  if (std::isnan(bv)) return best;
  for (int64_t i = 0; i < t.kh; ++i)
    for (int64_t j = 0; j < t.kw; ++j) {
      const int64_t at = (h0 + i) * t.w + w0 + j;
      const float v = load(x[at]);
      if (std::isnan(v)) return at;
      if (v > bv) {
        best = at;
        bv = v;
      }
    }
  return best;
}

template <class T>
void forward_t(const Tiles& t, const T* x, T* y) {
  parallel_for(t.planes, std::max<int64_t>(1, kParallelGrain / (t.h * t.w)), [&](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = x + pl * t.h * t.w;
      T* yp = y + pl * t.oh * t.ow;
      for (int64_t r = 0; r < t.oh; ++r)
        for (int64_t q = 0; q < t.ow; ++q) yp[r * t.ow + q] = xp[window_argmax(t, xp, r, q)];
    }
  });
}

template <class T>
void grad_t(const Tiles& t, const T* x, const T* dy, T* dx) {
  const T zero = store<T>(0.0f);
  parallel_for(t.planes, std::max<int64_t>(1, kParallelGrain / (t.h * t.w)), [&](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = x + pl * t.h * t.w;
      const T* dp = dy + pl * t.oh * t.ow;
      T* out = dx + pl * t.h * t.w;
      for (int64_t k = 0; k < t.h * t.w; ++k) out[k] = zero;
      for (int64_t r = 0; r < t.oh; ++r)
        for (int64_t q = 0; q < t.ow; ++q)
          // 0 + dy as the reference's accumulator computes it: -0 becomes
          // +0, and a denormal dy 0 under the launch's denormals-are-zero.
          out[window_argmax(t, xp, r, q)] = store<T>(0.0f + load(dp[r * t.ow + q]));
    }
  });
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Tiles& t = p.get<Tiles>();
  const bool grad = p.num_inputs == 2;
  if (p.out[0].dtype == SPORA_DTYPE_F32) {
    if (grad)
      grad_t(t, static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), static_cast<float*>(out[0]));
    else
      forward_t(t, static_cast<const float*>(in[0]), static_cast<float*>(out[0]));
  } else {
    using plugin::bf16;
    if (grad)
      grad_t(t, static_cast<const bf16*>(in[0]), static_cast<const bf16*>(in[1]), static_cast<bf16*>(out[0]));
    else
      forward_t(t, static_cast<const bf16*>(in[0]), static_cast<bf16*>(out[0]));
  }
}

}  // namespace

spora_plugin_error_t* plan_max_pool_tiles(KernelPlan& p) {
  // The reference plan checks the operands and attributes against the
  // contract (core/src/ops/pool.cpp) in one place.
  KernelPlan probe = p;
  for (const plugin::KernelImpl* ref : plugin::reference_kernels().find(p.op))
    if (auto* e = ref->plan(probe)) return e;
  const int32_t dtype = p.out[0].dtype;
  if (dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16)
    return plugin::unsupported(p, std::string("own max pooling loops are f32 and bf16 only, not ") +
                                      plugin::dtype_name(dtype));
  const bool grad = p.op == "max_pool2d_grad";
  const plugin::Shape& x = p.in[0].shape;
  const plugin::Shape& y = grad ? p.in[1].shape : p.out[0].shape;
  const auto k = p.attrs.get_ints("kernel_size"), s = p.attrs.get_ints("stride"), pad = p.attrs.get_ints("padding");
  auto d = p.attrs.get_ints("dilation");
  if (d.empty()) d = {1, 1};
  if (k.size() != 2 || s.size() != 2 || pad.size() != 4 || d.size() != 2 || x.rank != 4 || y.rank != 4)
    return plugin::invalid(p, "expects canonical kernel_size, stride, dilation and padding attributes");
  if (k != s || d[0] != 1 || d[1] != 1 || pad[0] || pad[1] || pad[2] || pad[3])
    return plugin::unsupported(p, "windows overlap, are padded or dilated");
  // No ceil_mode overhang: every output window lies inside the input.
  if (y.dims[2] != x.dims[2] / k[0] || y.dims[3] != x.dims[3] / k[1] || y.numel() == 0)
    return plugin::unsupported(p, "windows reach past the input or there are none");
  p.state = std::make_shared<Tiles>(
      Tiles{x.dims[0] * x.dims[1], x.dims[2], x.dims[3], y.dims[2], y.dims[3], k[0], k[1]});
  p.run = run;
  p.workspace = 0;
  return nullptr;
}

}  // namespace spora::cpu
