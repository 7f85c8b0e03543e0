// Reference 2-D convolutions, NCHW (see core/src/ops/conv.cpp for the
// contract): conv2d, conv2d_bias, conv2d_grad_input (also conv2d_transpose)
// and conv2d_grad_weight.
//
// Direct loops, no im2col: for each weight tap the valid output range is
// computed once, so the innermost loop is a bounds-check-free axpy along a
// row (contiguous when the stride is 1, which the compiler vectorises). Whole
// planes accumulate in compute precision and are rounded once at the end.
#include <algorithm>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct Geom {
  int64_t stride[2], dil[2], pad[4];  // pad: top, bottom, left, right
  int64_t groups;
};

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The range [lo, hi) of output positions o whose tap o*stride + off lands in
// [0, n_in); off = k*dilation - pad.
struct Range {
  int64_t lo, hi;
};
Range tap_range(int64_t n_in, int64_t n_out, int64_t stride, int64_t off) {
  const int64_t lo = std::max<int64_t>(0, ceil_div(-off, stride));
  const int64_t hi = std::min<int64_t>(n_out, floor_div(n_in - 1 - off, stride) + 1);
  return {lo, std::max(lo, hi)};
}

// One kernel row (or column) i: its input offset i*dilation - pad and the
// output positions whose tap lands inside the input.
struct Tap {
  int64_t off;
  Range out;
};
struct Taps {
  std::vector<Tap> rows, cols;
  const Tap& row(int64_t i) const { return rows[static_cast<size_t>(i)]; }
  const Tap& col(int64_t j) const { return cols[static_cast<size_t>(j)]; }
};
Taps make_taps(const Geom& g, int64_t kh, int64_t kw, int64_t h_in, int64_t w_in, int64_t h_out, int64_t w_out) {
  Taps t;
  for (int64_t i = 0; i < kh; ++i) {
    const int64_t off = i * g.dil[0] - g.pad[0];
    t.rows.push_back({off, tap_range(h_in, h_out, g.stride[0], off)});
  }
  for (int64_t j = 0; j < kw; ++j) {
    const int64_t off = j * g.dil[1] - g.pad[2];
    t.cols.push_back({off, tap_range(w_in, w_out, g.stride[1], off)});
  }
  return t;
}

// Sizes the kernels index with, from the forward convolution's
// x [N,C,H,W], w [O,C/g,kH,kW] and y [N,O,OH,OW].
struct Dims {
  int64_t n_batch, cin, h, wd;  // x
  int64_t o_all, cg, kh, kw;    // w
  int64_t oh, ow, og;           // y; og = output channels per group
};
Dims dims_of(const Geom& g, const Shape& x, const Shape& w, const Shape& y) {
  return {x.dims[0], x.dims[1], x.dims[2], x.dims[3], w.dims[0],           w.dims[1],
          w.dims[2], w.dims[3], y.dims[2], y.dims[3], w.dims[0] / g.groups};
}

// One kernel tap k = i*kW + j seen from the output: output (r, q) reads the
// input plane at base(r) + q*stride_w for r in [r_lo, r_hi), q in
// [q_lo, q_hi); every such index is inside the plane.
struct TapRows {
  int64_t k, r_lo, r_hi, q_lo, q_hi;
  int64_t row_step, row_off, col_off, wd;
  int64_t base(int64_t r) const { return (r * row_step + row_off) * wd + col_off; }
};

// Calls fn(const TapRows&) for every kernel tap, in (i, j) order.
template <class Fn>
void for_each_tap(const Geom& g, const Taps& t, const Dims& d, Fn&& fn) {
  for (int64_t i = 0; i < d.kh; ++i) {
    for (int64_t j = 0; j < d.kw; ++j) {
      const Tap &rt = t.row(i), &ct = t.col(j);
      fn(TapRows{i * d.kw + j, rt.out.lo, rt.out.hi, ct.out.lo, ct.out.hi, g.stride[0], rt.off, ct.off, d.wd});
    }
  }
}

// y[n, o] = b[o] + sum over c in o's group, taps: w[o, c, i, j] * x[n, c, oh*s + off_i, ow*s + off_j]
template <class T>
void forward_t(const KernelPlan& p, const T* x, const T* w, const T* b, T* y) {
  using C = compute_t<T>;
  const Geom& g = p.get<Geom>();
  const Dims d = dims_of(g, p.in[0].shape, p.in[1].shape, p.out[0].shape);
  const Taps t = make_taps(g, d.kh, d.kw, d.h, d.wd, d.oh, d.ow);
  const int64_t sw = g.stride[1], ow = d.ow;
  std::vector<C> acc(static_cast<size_t>(d.oh * ow));
  for (int64_t n = 0; n < d.n_batch; ++n) {
    for (int64_t o = 0; o < d.o_all; ++o) {
      std::fill(acc.begin(), acc.end(), b ? load(b[o]) : C(0));
      const int64_t c0 = (o / d.og) * d.cg;
      for (int64_t c = 0; c < d.cg; ++c) {
        const T* xp = x + (n * d.cin + c0 + c) * d.h * d.wd;
        const T* wp = w + (o * d.cg + c) * d.kh * d.kw;
        for_each_tap(g, t, d, [&](const TapRows& tr) {
          const C wv = load(wp[tr.k]);
          for (int64_t r = tr.r_lo; r < tr.r_hi; ++r) {
            const int64_t base = tr.base(r);
            C* ar = acc.data() + r * ow;
            if (sw == 1) {
              for (int64_t q = tr.q_lo; q < tr.q_hi; ++q) ar[q] += wv * load(xp[base + q]);
            } else {
              for (int64_t q = tr.q_lo; q < tr.q_hi; ++q) ar[q] += wv * load(xp[base + q * sw]);
            }
          }
        });
      }
      T* yp = y + (n * d.o_all + o) * d.oh * ow;
      for (int64_t k = 0; k < d.oh * ow; ++k) yp[k] = store<T>(acc[static_cast<size_t>(k)]);
    }
  }
}

// The adjoint of forward_t in x: dx[n, c] += w[o, c', i, j] * dy[n, o] scattered
// to (oh*s + off_i, ow*s + off_j). Also conv2d_transpose.
template <class T>
void backward_data_t(const KernelPlan& p, const T* dy, const T* w, T* dx) {
  using C = compute_t<T>;
  const Geom& g = p.get<Geom>();
  const Dims d = dims_of(g, p.out[0].shape, p.in[1].shape, p.in[0].shape);
  const Taps t = make_taps(g, d.kh, d.kw, d.h, d.wd, d.oh, d.ow);
  const int64_t sw = g.stride[1], ow = d.ow;
  std::vector<C> acc(static_cast<size_t>(d.h * d.wd));
  for (int64_t n = 0; n < d.n_batch; ++n) {
    for (int64_t c = 0; c < d.cin; ++c) {
      std::fill(acc.begin(), acc.end(), C(0));
      const int64_t grp = c / d.cg, cc = c % d.cg;
      for (int64_t o = grp * d.og; o < (grp + 1) * d.og; ++o) {
        const T* dp = dy + (n * d.o_all + o) * d.oh * ow;
        const T* wp = w + (o * d.cg + cc) * d.kh * d.kw;
        for_each_tap(g, t, d, [&](const TapRows& tr) {
          const C wv = load(wp[tr.k]);
          for (int64_t r = tr.r_lo; r < tr.r_hi; ++r) {
            const int64_t base = tr.base(r);
            C* ar = acc.data();
            const T* dr = dp + r * ow;
            if (sw == 1) {
              for (int64_t q = tr.q_lo; q < tr.q_hi; ++q) ar[base + q] += wv * load(dr[q]);
            } else {
              for (int64_t q = tr.q_lo; q < tr.q_hi; ++q) ar[base + q * sw] += wv * load(dr[q]);
            }
          }
        });
      }
      T* xp = dx + (n * d.cin + c) * d.h * d.wd;
      for (int64_t k = 0; k < d.h * d.wd; ++k) xp[k] = store<T>(acc[static_cast<size_t>(k)]);
    }
  }
}

// dw[o, c, i, j] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, c0 + c, oh*s + off_i, ow*s + off_j].
// Sums run over N*OH*OW terms, so they accumulate in double.
template <class T>
void backward_weight_t(const KernelPlan& p, const T* x, const T* dy, T* dw) {
  const Geom& g = p.get<Geom>();
  const Dims d = dims_of(g, p.in[0].shape, p.out[0].shape, p.in[1].shape);
  const Taps t = make_taps(g, d.kh, d.kw, d.h, d.wd, d.oh, d.ow);
  const int64_t sw = g.stride[1], ow = d.ow;
  std::vector<double> acc(static_cast<size_t>(d.kh * d.kw));
  for (int64_t o = 0; o < d.o_all; ++o) {
    const int64_t c0 = (o / d.og) * d.cg;
    for (int64_t c = 0; c < d.cg; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < d.n_batch; ++n) {
        const T* xp = x + (n * d.cin + c0 + c) * d.h * d.wd;
        const T* dp = dy + (n * d.o_all + o) * d.oh * ow;
        for_each_tap(g, t, d, [&](const TapRows& tr) {
          double s = 0;
          for (int64_t r = tr.r_lo; r < tr.r_hi; ++r) {
            const int64_t base = tr.base(r);
            const T* dr = dp + r * ow;
            for (int64_t q = tr.q_lo; q < tr.q_hi; ++q)
              s += static_cast<double>(load(dr[q])) * static_cast<double>(load(xp[base + q * sw]));
          }
          acc[static_cast<size_t>(tr.k)] += s;
        });
      }
      T* wp = dw + (o * d.cg + c) * d.kh * d.kw;
      for (int64_t k = 0; k < d.kh * d.kw; ++k) wp[k] = store<T>(acc[static_cast<size_t>(k)]);
    }
  }
}

enum class Kind { kForward, kData, kWeight };

template <Kind K>
void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      const T* a = static_cast<const T*>(in[0]);
      const T* b = static_cast<const T*>(in[1]);
      T* y = static_cast<T*>(out[0]);
      if constexpr (K == Kind::kForward)
        forward_t(p, a, b, p.num_inputs == 3 ? static_cast<const T*>(in[2]) : nullptr, y);
      else if constexpr (K == Kind::kData)
        backward_data_t(p, a, b, y);
      else
        backward_weight_t(p, a, b, y);
    }
  });
}

// Reads and checks the canonical attributes (see core/src/ops/conv.cpp).
spora_plugin_error_t* parse_geom(const KernelPlan& p, Geom* g) {
  const auto s = p.attrs.get_ints("stride"), d = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  if (s.size() != 2 || d.size() != 2 || pad.size() != 4)
    return invalid(p, "expects canonical stride (2), dilation (2) and padding (4) attributes");
  for (int i = 0; i < 2; ++i) {
    if (s[i] < 1 || d[i] < 1) return invalid(p, "stride and dilation must be positive");
    g->stride[i] = s[i];
    g->dil[i] = d[i];
  }
  for (int i = 0; i < 4; ++i) {
    if (pad[i] < 0) return invalid(p, "padding must be non-negative");
    g->pad[i] = pad[i];
  }
  g->groups = p.attrs.get_int("groups", 1);
  if (g->groups < 1) return invalid(p, "groups must be positive");
  // Inference bounds these; re-checked because it keeps the tap arithmetic
  // (k*dilation - pad, o*stride) far from int64 overflow.
  constexpr int64_t kMax = int64_t{1} << 31;
  for (int64_t v :
       {g->stride[0], g->stride[1], g->dil[0], g->dil[1], g->pad[0], g->pad[1], g->pad[2], g->pad[3], g->groups})
    if (v > kMax) return invalid(p, "stride, dilation, padding or groups out of range");
  for (int i = 0; i < p.num_inputs; ++i)
    for (int d = 0; d < p.in[i].shape.rank; ++d)
      if (p.in[i].shape.dims[d] > (int64_t{1} << 40)) return invalid(p, "dimension out of range");
  for (int d = 0; d < p.out[0].shape.rank; ++d)
    if (p.out[0].shape.dims[d] > (int64_t{1} << 40)) return invalid(p, "dimension out of range");
  return nullptr;
}

bool forward_relation(const Geom& g, const Shape& x, const Shape& w, const Shape& y) {
  for (int i = 0; i < 2; ++i) {
    const int64_t span = x.dims[2 + i] + g.pad[2 * i] + g.pad[2 * i + 1] - g.dil[i] * (w.dims[2 + i] - 1) - 1;
    if (span < 0 || y.dims[2 + i] != span / g.stride[i] + 1) return false;
  }
  return true;
}

// Checks that x [N,C,H,W], w [O,C/g,kH,kW] and y [N,O,OH,OW] agree in batch
// and channels (the loops index with them), and that kernel offsets
// (k*dilation) stay far from int64 overflow.
bool channels_agree(const Geom& g, const Shape& x, const Shape& w, const Shape& y) {
  return x.rank == 4 && w.rank == 4 && y.rank == 4 && x.dims[0] == y.dims[0] && w.dims[0] == y.dims[1] &&
         w.dims[0] % g.groups == 0 && x.dims[1] % g.groups == 0 && x.dims[1] / g.groups == w.dims[1] &&
         w.dims[2] >= 1 && w.dims[3] >= 1 && w.dims[2] <= (int64_t{1} << 31) && w.dims[3] <= (int64_t{1} << 31);
}

spora_plugin_error_t* check_dtypes(const KernelPlan& p) {
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dt) return invalid(p, "operands differ in dtype");
  return nullptr;
}

// Plans one of the three kernels. Operands are (in[0], in[1]) -> out[0] in
// every case; as (x, w, y) of the forward convolution they are (x, w) -> y,
// (dy, w) -> dx and (x, dy) -> dw.
template <Kind K>
spora_plugin_error_t* plan(KernelPlan& p) {
  const bool bias = K == Kind::kForward && p.op == "conv2d_bias";
  if (auto* e = expect_operands(p, bias ? 3 : 2, 1)) return e;
  if (auto* e = check_dtypes(p)) return e;
  Geom g;
  if (auto* e = parse_geom(p, &g)) return e;
  const Shape &a = p.in[0].shape, &b = p.in[1].shape, &out = p.out[0].shape;
  const Shape& x = K == Kind::kData ? out : a;
  const Shape& w = K == Kind::kWeight ? out : b;
  const Shape& y = K == Kind::kForward ? out : K == Kind::kData ? a : b;
  // Backward data leaves the output size free (conv2d_transpose's
  // output_padding), so only channels are checked there.
  if (!channels_agree(g, x, w, y) || (K != Kind::kData && !forward_relation(g, x, w, y)))
    return invalid(p, "shapes " + a.str() + ", " + b.str() + " -> " + out.str() + " do not fit the attributes");
  if (bias && (p.in[2].shape.rank != 1 || p.in[2].shape.dims[0] != w.dims[0]))
    return invalid(p, "bias must have one value per output channel");
  p.state = std::make_shared<Geom>(g);
  p.run = run<K>;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"conv2d", "ref", plan<Kind::kForward>});
  t.add({"conv2d_bias", "ref", plan<Kind::kForward>});
  t.add({"conv2d_grad_input", "ref", plan<Kind::kData>});
  t.add({"conv2d_transpose", "ref", plan<Kind::kData>});
  t.add({"conv2d_grad_weight", "ref", plan<Kind::kWeight>});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
