// Reference 2-D pooling, NCHW (see core/src/ops/pool.cpp for the contract):
// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their gradients. Each
// (n, c) plane is independent; gradients accumulate a plane in compute
// precision and round once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct Window {
  int64_t k[2], stride[2], dil[2], pad[4];  // pad: top, bottom, left, right
  bool include_pad;
};

// Plane geometry from the operands: input (h, w), output (oh, ow), planes.
struct Planes {
  int64_t count, h, w, oh, ow;
};
Planes planes(const Shape& x, const Shape& y) {
  return {x.dims[0] * x.dims[1], x.dims[2], x.dims[3], y.dims[2], y.dims[3]};
}

// Flat input index of the first maximum of window (r, q), or -1 when no tap
// is inside the input. A NaN wins over everything and stops the search.
template <class T>
int64_t argmax(const Window& g, const Planes& s, const T* x, int64_t r, int64_t q) {
  using C = compute_t<T>;
  int64_t best = -1;
  C bv = C(0);
  for (int64_t i = 0; i < g.k[0]; ++i) {
    const int64_t ih = r * g.stride[0] - g.pad[0] + i * g.dil[0];
    if (ih < 0 || ih >= s.h) continue;
    for (int64_t j = 0; j < g.k[1]; ++j) {
      const int64_t iw = q * g.stride[1] - g.pad[2] + j * g.dil[1];
      if (iw < 0 || iw >= s.w) continue;
      const C v = load(x[ih * s.w + iw]);
      if (std::isnan(static_cast<double>(v))) return ih * s.w + iw;
      if (best < 0 || v > bv) {
        best = ih * s.w + iw;
        bv = v;
      }
    }
  }
  return best;
}

template <class T>
void max_t(const KernelPlan& p, const T* x, T* y) {
  const Window& g = p.get<Window>();
  const Planes s = planes(p.in[0].shape, p.out[0].shape);
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* xp = x + pl * s.h * s.w;
    T* yp = y + pl * s.oh * s.ow;
    for (int64_t r = 0; r < s.oh; ++r)
      for (int64_t q = 0; q < s.ow; ++q) {
        const int64_t a = argmax(g, s, xp, r, q);
        yp[r * s.ow + q] = a >= 0 ? xp[a] : store<T>(-INFINITY);
      }
  }
}

template <class T>
void max_grad_t(const KernelPlan& p, const T* x, const T* dy, T* dx) {
  using C = compute_t<T>;
  const Window& g = p.get<Window>();
  const Planes s = planes(p.in[0].shape, p.in[1].shape);
  std::vector<C> acc(static_cast<size_t>(s.h * s.w));
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* xp = x + pl * s.h * s.w;
    const T* dp = dy + pl * s.oh * s.ow;
    std::fill(acc.begin(), acc.end(), C(0));
    for (int64_t r = 0; r < s.oh; ++r)
      for (int64_t q = 0; q < s.ow; ++q) {
        const int64_t a = argmax(g, s, xp, r, q);
        if (a >= 0) acc[static_cast<size_t>(a)] += load(dp[r * s.ow + q]);
      }
    T* out = dx + pl * s.h * s.w;
    for (int64_t k = 0; k < s.h * s.w; ++k) out[k] = store<T>(acc[static_cast<size_t>(k)]);
  }
}

// PyTorch's avg window: [start, end) clipped to the padded input for the
// include-pad divisor, then to the input for the taps.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};
AvgWindow avg_window(const Window& g, const Planes& s, int64_t r, int64_t q) {
  int64_t h0 = r * g.stride[0] - g.pad[0], w0 = q * g.stride[1] - g.pad[2];
  int64_t h1 = std::min(h0 + g.k[0], s.h + g.pad[1]), w1 = std::min(w0 + g.k[1], s.w + g.pad[3]);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, s.h);
  w1 = std::min(w1, s.w);
  if (h1 <= h0 || w1 <= w0) return {0, 0, 0, 0, 0};
  return {h0, h1, w0, w1, g.include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <class T>
void avg_t(const KernelPlan& p, const T* x, T* y) {
  using C = compute_t<T>;
  const Window& g = p.get<Window>();
  const Planes s = planes(p.in[0].shape, p.out[0].shape);
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* xp = x + pl * s.h * s.w;
    T* yp = y + pl * s.oh * s.ow;
    for (int64_t r = 0; r < s.oh; ++r)
      for (int64_t q = 0; q < s.ow; ++q) {
        const AvgWindow a = avg_window(g, s, r, q);
        C sum = C(0);
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += load(xp[ih * s.w + iw]);
        yp[r * s.ow + q] = store<T>(a.divisor ? sum / static_cast<C>(a.divisor) : C(0));
      }
  }
}

template <class T>
void avg_grad_t(const KernelPlan& p, const T* dy, T* dx) {
  using C = compute_t<T>;
  const Window& g = p.get<Window>();
  const Planes s = planes(p.out[0].shape, p.in[0].shape);
  std::vector<C> acc(static_cast<size_t>(s.h * s.w));
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* dp = dy + pl * s.oh * s.ow;
    std::fill(acc.begin(), acc.end(), C(0));
    for (int64_t r = 0; r < s.oh; ++r)
      for (int64_t q = 0; q < s.ow; ++q) {
        const AvgWindow a = avg_window(g, s, r, q);
        if (!a.divisor) continue;
        const C v = load(dp[r * s.ow + q]) / static_cast<C>(a.divisor);
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) acc[static_cast<size_t>(ih * s.w + iw)] += v;
      }
    T* out = dx + pl * s.h * s.w;
    for (int64_t k = 0; k < s.h * s.w; ++k) out[k] = store<T>(acc[static_cast<size_t>(k)]);
  }
}

// Adaptive bin i of n over a length: [floor(i*len/n), ceil((i+1)*len/n)).
// The plan checks len*n fits in int64.
int64_t bin_start(int64_t i, int64_t n, int64_t len) { return i * len / n; }
int64_t bin_end(int64_t i, int64_t n, int64_t len) { return ((i + 1) * len + n - 1) / n; }

template <class T>
void adaptive_t(const KernelPlan& p, const T* x, T* y) {
  using C = compute_t<T>;
  const Planes s = planes(p.in[0].shape, p.out[0].shape);
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* xp = x + pl * s.h * s.w;
    T* yp = y + pl * s.oh * s.ow;
    for (int64_t r = 0; r < s.oh; ++r) {
      const int64_t h0 = bin_start(r, s.oh, s.h), h1 = bin_end(r, s.oh, s.h);
      for (int64_t q = 0; q < s.ow; ++q) {
        const int64_t w0 = bin_start(q, s.ow, s.w), w1 = bin_end(q, s.ow, s.w);
        C sum = C(0);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += load(xp[ih * s.w + iw]);
        yp[r * s.ow + q] = store<T>(sum / static_cast<C>((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

template <class T>
void adaptive_grad_t(const KernelPlan& p, const T* dy, T* dx) {
  using C = compute_t<T>;
  const Planes s = planes(p.out[0].shape, p.in[0].shape);
  std::vector<C> acc(static_cast<size_t>(s.h * s.w));
  for (int64_t pl = 0; pl < s.count; ++pl) {
    const T* dp = dy + pl * s.oh * s.ow;
    std::fill(acc.begin(), acc.end(), C(0));
    for (int64_t r = 0; r < s.oh; ++r) {
      const int64_t h0 = bin_start(r, s.oh, s.h), h1 = bin_end(r, s.oh, s.h);
      for (int64_t q = 0; q < s.ow; ++q) {
        const int64_t w0 = bin_start(q, s.ow, s.w), w1 = bin_end(q, s.ow, s.w);
        const C v = load(dp[r * s.ow + q]) / static_cast<C>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc[static_cast<size_t>(ih * s.w + iw)] += v;
      }
    }
    T* out = dx + pl * s.h * s.w;
    for (int64_t k = 0; k < s.h * s.w; ++k) out[k] = store<T>(acc[static_cast<size_t>(k)]);
  }
}

enum class Kind { kMax, kMaxGrad, kAvg, kAvgGrad, kAdaptive, kAdaptiveGrad };

template <Kind K>
void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      const T* a = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      if constexpr (K == Kind::kMax) max_t(p, a, y);
      if constexpr (K == Kind::kMaxGrad) max_grad_t(p, a, static_cast<const T*>(in[1]), y);
      if constexpr (K == Kind::kAvg) avg_t(p, a, y);
      if constexpr (K == Kind::kAvgGrad) avg_grad_t(p, a, y);
      if constexpr (K == Kind::kAdaptive) adaptive_t(p, a, y);
      if constexpr (K == Kind::kAdaptiveGrad) adaptive_grad_t(p, a, y);
    }
  });
}

spora_plugin_error_t* check_dtypes(const KernelPlan& p) {
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dt) return invalid(p, "operands differ in dtype");
  return nullptr;
}

// The big (input-side) and small (output-side) shapes must be rank 4 and
// agree in batch and channels: the loops index planes with them.
spora_plugin_error_t* check_planes(const KernelPlan& p, const Shape& big, const Shape& small) {
  if (big.rank != 4 || small.rank != 4 || big.dims[0] != small.dims[0] || big.dims[1] != small.dims[1])
    return invalid(p, "shapes " + big.str() + " and " + small.str() + " must be NCHW with equal N and C");
  return nullptr;
}

spora_plugin_error_t* parse_window(const KernelPlan& p, Window* g) {
  const auto k = p.attrs.get_ints("kernel_size"), s = p.attrs.get_ints("stride"), pad = p.attrs.get_ints("padding");
  auto d = p.attrs.get_ints("dilation");
  if (d.empty()) d = {1, 1};
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || pad.size() != 4)
    return invalid(p, "expects canonical kernel_size (2), stride (2), dilation (2) and padding (4) attributes");
  for (int i = 0; i < 2; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1) return invalid(p, "kernel_size, stride and dilation must be positive");
    g->k[i] = k[i];
    g->stride[i] = s[i];
    g->dil[i] = d[i];
  }
  for (int i = 0; i < 4; ++i) {
    if (pad[i] < 0) return invalid(p, "padding must be non-negative");
    g->pad[i] = pad[i];
  }
  g->include_pad = p.attrs.get_bool("count_include_pad", true);
  return nullptr;
}

template <Kind K>
spora_plugin_error_t* plan(KernelPlan& p) {
  constexpr bool two_inputs = K == Kind::kMaxGrad;
  if (auto* e = expect_operands(p, two_inputs ? 2 : 1, 1)) return e;
  if (auto* e = check_dtypes(p)) return e;
  constexpr bool grad = K == Kind::kMaxGrad || K == Kind::kAvgGrad || K == Kind::kAdaptiveGrad;
  const Shape& big = grad ? p.out[0].shape : p.in[0].shape;
  const Shape& small = grad ? p.in[p.num_inputs - 1].shape : p.out[0].shape;
  if (auto* e = check_planes(p, big, small)) return e;
  if (K == Kind::kMaxGrad && p.in[0].shape != p.out[0].shape) return invalid(p, "dx must have x's shape");
  if (K == Kind::kAdaptive || K == Kind::kAdaptiveGrad) {
    for (int i = 2; i < 4; ++i) {
      int64_t prod;
      if (small.dims[i] < 1 || __builtin_mul_overflow(big.dims[i], small.dims[i] + 1, &prod))
        return invalid(p, "adaptive bins of " + big.str() + " -> " + small.str() + " are out of range");
    }
  } else {
    Window g;
    if (auto* e = parse_window(p, &g)) return e;
    // What inference guarantees, re-checked because it keeps the loops'
    // window arithmetic far from int64 overflow.
    constexpr int64_t kMax = int64_t{1} << 31;
    for (int i = 0; i < 2; ++i) {
      const int64_t padded = big.dims[2 + i] + g.pad[2 * i] + g.pad[2 * i + 1];
      if (g.k[i] > kMax || g.stride[i] > kMax || g.dil[i] > kMax || g.pad[2 * i] > kMax || g.pad[2 * i + 1] > kMax ||
          big.dims[2 + i] > (int64_t{1} << 60) || small.dims[2 + i] > padded / g.stride[i] + 2)
        return invalid(p, "window attributes do not fit " + big.str() + " -> " + small.str());
    }
    p.state = std::make_shared<Window>(g);
  }
  p.run = run<K>;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"max_pool2d", "ref", plan<Kind::kMax>});
  t.add({"max_pool2d_grad", "ref", plan<Kind::kMaxGrad>});
  t.add({"avg_pool2d", "ref", plan<Kind::kAvg>});
  t.add({"avg_pool2d_grad", "ref", plan<Kind::kAvgGrad>});
  t.add({"adaptive_avg_pool2d", "ref", plan<Kind::kAdaptive>});
  t.add({"adaptive_avg_pool2d_grad", "ref", plan<Kind::kAdaptiveGrad>});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
