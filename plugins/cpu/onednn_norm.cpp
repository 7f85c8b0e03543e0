// Normalisation on the cpu plugin: batch_norm, layer_norm, group_norm and
// their gradients (contract: core/src/ops/norm.cpp).
//
// "onednn": oneDNN 2.6's layer_normalization primitives (forward and
// backward, use_scale | use_shift) for f32 and bf16, and its
// batch_normalization ones for f32 input without spatial dims, the one
// case where they beat the own loops (see plan_dnnl), made once at plan
// time. oneDNN keeps statistics and scale/shift in f32; bf16 gamma/beta are
// converted in the kernel's workspace. It works with variances where Spora
// saves invstd, so:
//  - forward: the variance is written into the invstd output and turned
//    into 1/sqrt(var + eps) in place (batch_norm's running statistics are
//    updated from it first);
//  - backward: variance = 1/invstd^2 goes to the workspace and the
//    primitive is made with eps = 0, so oneDNN recovers invstd (to rounding).
// "cpu": own loops for everything else (most batch norms, f64, f16,
// group_norm, empty tensors): the reference kernel's group formulation run
// in parallel over groups; per-parameter gradient sums are kept per chunk
// and added in chunk order, so results do not depend on scheduling.
//
// Both check their operands by planning the reference kernel first: the
// contract is enforced in one place.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::bf16;
using plugin::compute_t;
using plugin::KernelPlan;
using plugin::load;
using plugin::store;

enum class Op { kBatch, kLayer, kGroup };

struct Info {
  Op op;
  bool backward, training;
  int32_t dt;
  int64_t n, c, s, g;  // layer_norm: n = rows, c = normalized size, s = 1
  double eps, momentum;
};

spora_plugin_error_t* describe(KernelPlan& p, Info* info) {
  KernelPlan probe = p;
  for (const plugin::KernelImpl* ref : plugin::reference_kernels().find(p.op))
    if (auto* e = ref->plan(probe)) return e;
  Info& i = *info;
  i.backward = p.op.size() > 5 && p.op.compare(p.op.size() - 5, 5, "_grad") == 0;
  i.op = p.op.rfind("batch_norm", 0) == 0 ? Op::kBatch : p.op.rfind("layer_norm", 0) == 0 ? Op::kLayer : Op::kGroup;
  i.dt = p.in[0].dtype;
  const plugin::Shape& x = p.in[0].shape;
  i.n = x.dims[0], i.c = x.dims[1], i.s = x.rank > 2 ? x.dims[2] : 1;
  i.g = i.op == Op::kGroup ? p.attrs.get_int("groups", 1) : 1;
  i.eps = p.attrs.get_float("eps", 1e-5);
  i.momentum = p.attrs.get_float("momentum", 0.1);
  i.training = p.attrs.get_bool("training", false);
  return nullptr;
}

// ---- oneDNN ----

struct DnnlState {
  Info info;
  memory::desc data, stat, param;  // param: gamma-sized f32
  dnnl::primitive prim;
};

float* f32(void* p) { return static_cast<float*>(p); }
const float* f32(const void* p) { return static_cast<const float*>(p); }

// Gamma-sized f32 view of a parameter: itself for f32, else converted into `ws`.
const float* as_f32(const DnnlState& s, const void* v, float* ws, int64_t count) {
  if (s.info.dt == SPORA_DTYPE_F32) return f32(v);
  const bf16* b = static_cast<const bf16*>(v);
  for (int64_t i = 0; i < count; ++i) ws[i] = load(b[i]);
  return ws;
}

// batch_norm (f32 only, see plan_dnnl): running statistics from the batch
// variance oneDNN left in the invstd output, which then becomes invstd.
void update_running(const Info& i, const void* const* in, void* const* out) {
  const float *rm = f32(in[3]), *rv = f32(in[4]), *mean = f32(out[1]);
  float *nrm = f32(out[3]), *nrv = f32(out[4]), *var = f32(out[2]);
  const double m = static_cast<double>(i.n) * static_cast<double>(i.s);
  for (int64_t c = 0; c < i.c; ++c) {
    const double v = var[c];
    double a = rm[c], b = rv[c];
    if (i.training) {
      a = (1 - i.momentum) * a + i.momentum * mean[c];
      b = (1 - i.momentum) * b + i.momentum * v * m / (m - 1);  // m > 1: checked by inference
    }
    nrm[c] = static_cast<float>(a);
    nrv[c] = static_cast<float>(b);
    var[c] = static_cast<float>(1.0 / std::sqrt(v + i.eps));
  }
}

void run_dnnl(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const DnnlState& s = p.get<DnnlState>();
  const Info& i = s.info;
  const bool half = i.dt == SPORA_DTYPE_BF16;
  const int64_t params = i.c, stats = i.op == Op::kBatch ? i.c : i.n;
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  auto mem = [&](const memory::desc& d, const void* ptr) { return memory(d, eng, const_cast<void*>(ptr)); };
  float* ws = f32(workspace);
  if (!i.backward) {
    const float* scale = as_f32(s, in[1], ws, params);
    const float* shift = as_f32(s, in[2], ws + (half ? params : 0), params);
    float* mean = f32(out[1]);
    float* var = f32(out[2]);
    if (i.op == Op::kBatch && !i.training) {  // running statistics are the primitive's inputs
      std::copy(f32(in[3]), f32(in[3]) + stats, mean);
      std::copy(f32(in[4]), f32(in[4]) + stats, var);
    }
    s.prim.execute(strm, {{DNNL_ARG_SRC, mem(s.data, in[0])},
                          {DNNL_ARG_DST, mem(s.data, out[0])},
                          {DNNL_ARG_SCALE, mem(s.param, scale)},
                          {DNNL_ARG_SHIFT, mem(s.param, shift)},
                          {DNNL_ARG_MEAN, mem(s.stat, mean)},
                          {DNNL_ARG_VARIANCE, mem(s.stat, var)}});
    strm.wait();
    if (i.op == Op::kBatch) {
      update_running(i, in, out);
    } else {
      for (int64_t r = 0; r < stats; ++r) var[r] = static_cast<float>(1.0 / std::sqrt(double{var[r]} + i.eps));
    }
    return;
  }
  // Backward. Workspace: variance, then (bf16) scale, diff_scale, diff_shift.
  float* var = ws;
  const float* invstd = f32(in[4]);
  for (int64_t k = 0; k < stats; ++k) var[k] = static_cast<float>(1.0 / (double{invstd[k]} * invstd[k]));
  const float* scale = as_f32(s, in[2], ws + stats, params);
  float* dscale = half ? ws + stats + params : f32(out[1]);
  float* dshift = half ? ws + stats + 2 * params : f32(out[2]);
  s.prim.execute(strm, {{DNNL_ARG_SRC, mem(s.data, in[0])},
                        {DNNL_ARG_DIFF_DST, mem(s.data, in[1])},
                        {DNNL_ARG_SCALE, mem(s.param, scale)},
                        // oneDNN 2.6 insists on a shift argument it does not read.
                        {DNNL_ARG_SHIFT, mem(s.param, scale)},
                        {DNNL_ARG_MEAN, mem(s.stat, in[3])},
                        {DNNL_ARG_VARIANCE, mem(s.stat, var)},
                        {DNNL_ARG_DIFF_SRC, mem(s.data, out[0])},
                        {DNNL_ARG_DIFF_SCALE, mem(s.param, dscale)},
                        {DNNL_ARG_DIFF_SHIFT, mem(s.param, dshift)}});
  strm.wait();
  if (half) {
    for (int64_t k = 0; k < params; ++k) {
      static_cast<bf16*>(out[1])[k] = bf16(dscale[k]);
      static_cast<bf16*>(out[2])[k] = bf16(dshift[k]);
    }
  }
}

spora_plugin_error_t* plan_dnnl(KernelPlan& p) {
  auto s = std::make_shared<DnnlState>();
  if (auto* e = describe(p, &s->info)) return e;
  const Info& i = s->info;
  if (i.op == Op::kGroup) return plugin::unsupported(p, "oneDNN 2.6 has no group normalization");
  // oneDNN 2.6's only non-reference batch norm for plain layouts,
  // ncsp_bnorm, measured 2-8x slower than the own loops (Zen4, 1 and 2
  // threads) with spatial dims or in bf16; it wins, by ~20%, only for f32
  // (N, C) input.
  if (i.op == Op::kBatch && (i.dt != SPORA_DTYPE_F32 || i.s != 1))
    return plugin::unsupported(p, "ncsp_bnorm is slower than the own loops here");
  if (i.dt != SPORA_DTYPE_F32 && i.dt != SPORA_DTYPE_BF16)
    return plugin::unsupported(p, std::string("oneDNN has no ") + plugin::dtype_name(i.dt) + " normalization");
  if (p.in[0].shape.numel() == 0) return plugin::unsupported(p, "empty tensor");
  memory::data_type mdt;
  onednn_dtype(i.dt, &mdt);
  const auto f = memory::data_type::f32;
  const bool half = i.dt == SPORA_DTYPE_BF16;
  using dnnl::normalization_flags;
  using dnnl::prop_kind;
  normalization_flags flags = normalization_flags::use_scale | normalization_flags::use_shift;
  // The backward pass gets variance = 1/invstd^2 and eps 0 (see the top).
  const float eps = i.backward ? 0.0f : static_cast<float>(i.eps);
  auto* err = plan_guarded(p, [&]() -> spora_plugin_error_t* {
    s->param = memory::desc({i.c}, f, memory::format_tag::a);
    if (i.op == Op::kBatch) {
      s->data = memory::desc({i.n, i.c, i.s, 1}, mdt, memory::format_tag::nchw);
      s->stat = memory::desc({i.c}, f, memory::format_tag::a);
      using fwd = dnnl::batch_normalization_forward;
      using bwd = dnnl::batch_normalization_backward;
      const bool inference = !i.backward && !i.training;
      fwd::primitive_desc fpd({inference ? prop_kind::forward_inference : prop_kind::forward_training, s->data, eps,
                               inference ? flags | normalization_flags::use_global_stats : flags},
                              onednn_engine());
      if (!i.backward) {
        if (auto* e = reject_ref(p, fpd)) return e;
        s->prim = fwd(fpd);
      } else {
        bwd::primitive_desc bpd({prop_kind::backward, s->data, s->data, eps, flags}, onednn_engine(), fpd);
        if (auto* e = reject_ref(p, bpd)) return e;
        s->prim = bwd(bpd);
      }
    } else {
      s->data = memory::desc({i.n, i.c}, mdt, memory::format_tag::ab);
      s->stat = memory::desc({i.n}, f, memory::format_tag::a);
      using fwd = dnnl::layer_normalization_forward;
      using bwd = dnnl::layer_normalization_backward;
      fwd::primitive_desc fpd({prop_kind::forward_training, s->data, s->stat, eps, flags}, onednn_engine());
      if (!i.backward) {
        if (auto* e = reject_ref(p, fpd)) return e;
        s->prim = fwd(fpd);
      } else {
        bwd::primitive_desc bpd({prop_kind::backward, s->data, s->data, s->stat, eps, flags}, onednn_engine(), fpd);
        if (auto* e = reject_ref(p, bpd)) return e;
        s->prim = bwd(bpd);
      }
    }
    return nullptr;
  });
  if (err) return err;
  const int64_t stats = i.op == Op::kBatch ? i.c : i.n;
  const int64_t floats = i.backward ? stats + (half ? 3 * i.c : 0) : (half ? 2 * i.c : 0);
  p.workspace = static_cast<size_t>(floats) * sizeof(float);
  p.state = s;
  p.run = run_dnnl;
  return nullptr;
}

// ---- own loops ----

// Group q is `blocks` runs of `len` contiguous elements from q * qstride,
// run b at stride `stride`; run b's parameter is q % pmod * pmul + b * pstep,
// or the element's position when per_element (layer norm).
struct Layout {
  int64_t groups, blocks, len, stride, qstride, pmod, pmul, pstep, params;
  bool per_element;
};

Layout layout_of(const Info& i) {
  switch (i.op) {
    case Op::kBatch: return {i.c, i.n, i.s, i.c * i.s, i.s, std::max<int64_t>(i.c, 1), 1, 0, i.c, false};
    case Op::kLayer: return {i.n, 1, i.c, 0, i.c, 1, 0, 0, i.c, true};
    default: return {i.n * i.g, i.c / i.g, i.s, i.s, i.c / i.g * i.s, i.g, i.c / i.g, 1, i.c, false};
  }
}

// fn(chunk, begin, end) over [0, items) in at most one chunk per thread,
// parallel when the work is worth a parallel region.
int64_t chunk_count(int64_t items, int64_t work_per_item) {
  const int64_t by_work = std::max<int64_t>(1, items * std::max<int64_t>(work_per_item, 1) / kParallelGrain);
  return std::max<int64_t>(1, std::min<int64_t>({items, omp_get_max_threads(), by_work}));
}

template <class Fn>
void chunked(int64_t items, int64_t work_per_item, Fn&& fn) {
  const int64_t chunks = chunk_count(items, work_per_item);
  if (chunks == 1) return fn(int64_t{0}, int64_t{0}, items);
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) fn(c, items * c / chunks, items * (c + 1) / chunks);
  });
}

struct LoopState {
  Info info;
  Layout L;
};

template <class T>
void loops_forward(const LoopState& st, const void* const* in, void* const* out) {
  using C = compute_t<T>;
  const Info& i = st.info;
  const Layout& L = st.L;
  const T* x = static_cast<const T*>(in[0]);
  const T* gamma = static_cast<const T*>(in[1]);
  const T* beta = static_cast<const T*>(in[2]);
  T* y = static_cast<T*>(out[0]);
  C* mean_out = static_cast<C*>(out[1]);
  C* inv_out = static_cast<C*>(out[2]);
  const bool batch_stats = i.op != Op::kBatch || i.training;
  const double m = static_cast<double>(L.blocks) * static_cast<double>(L.len);
  chunked(L.groups, L.blocks * L.len, [&](int64_t, int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t base = q * L.qstride, pbase = q % L.pmod * L.pmul;
      double mean, var;
      if (batch_stats) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < L.blocks; ++b) {
          const T* r = x + base + b * L.stride;
#pragma omp simd reduction(+ : sum)
          for (int64_t e = 0; e < L.len; ++e) sum += static_cast<double>(load(r[e]));
        }
        mean = sum / m;
        for (int64_t b = 0; b < L.blocks; ++b) {
          const T* r = x + base + b * L.stride;
#pragma omp simd reduction(+ : sq)
          for (int64_t e = 0; e < L.len; ++e) {
            const double d = static_cast<double>(load(r[e])) - mean;
            sq += d * d;
          }
        }
        var = sq / m;
      } else {
        mean = static_cast<double>(load(static_cast<const T*>(in[3])[q]));
        var = static_cast<double>(load(static_cast<const T*>(in[4])[q]));
      }
      const C mu = static_cast<C>(mean), inv = static_cast<C>(1.0 / std::sqrt(var + i.eps));
      mean_out[q] = mu;
      inv_out[q] = inv;
      for (int64_t b = 0; b < L.blocks; ++b) {
        const int64_t off = base + b * L.stride, pr = pbase + b * L.pstep;
        if (L.per_element) {
          for (int64_t e = 0; e < L.len; ++e)
            y[off + e] = store<T>((load(x[off + e]) - mu) * (inv * load(gamma[e])) + load(beta[e]));
        } else {
          const C a = inv * load(gamma[pr]), sh = load(beta[pr]);
          for (int64_t e = 0; e < L.len; ++e) y[off + e] = store<T>((load(x[off + e]) - mu) * a + sh);
        }
      }
      if (i.op == Op::kBatch) {
        double rm = load(static_cast<const T*>(in[3])[q]), rv = load(static_cast<const T*>(in[4])[q]);
        if (i.training && m > 0) {
          rm = (1 - i.momentum) * rm + i.momentum * mean;
          rv = (1 - i.momentum) * rv + i.momentum * (m > 1 ? var * m / (m - 1) : var);
        }
        static_cast<T*>(out[3])[q] = store<T>(rm);
        static_cast<T*>(out[4])[q] = store<T>(rv);
      }
    }
  });
}

template <class T>
void loops_backward(const LoopState& st, const void* const* in, void* const* out) {
  using C = compute_t<T>;
  const Layout& L = st.L;
  const T* x = static_cast<const T*>(in[0]);
  const T* dy = static_cast<const T*>(in[1]);
  const T* gamma = static_cast<const T*>(in[2]);
  const C* mean = static_cast<const C*>(in[3]);
  const C* invstd = static_cast<const C*>(in[4]);
  T* dx = static_cast<T*>(out[0]);
  const double m = static_cast<double>(L.blocks) * static_cast<double>(L.len);
  const int64_t P = L.params;
  const int64_t work = L.blocks * L.len, chunks = chunk_count(L.groups, work);
  // Per chunk: dgamma then dbeta partial sums.
  std::vector<double> partial(static_cast<size_t>(chunks * 2 * P), 0.0);
  chunked(L.groups, work, [&](int64_t chunk, int64_t q0, int64_t q1) {
    double* dg = partial.data() + chunk * 2 * P;
    double* db = dg + P;
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t base = q * L.qstride, pbase = q % L.pmod * L.pmul;
      const C mu = mean[q], inv = invstd[q];
      double sa = 0, sax = 0;
      for (int64_t b = 0; b < L.blocks; ++b) {
        const int64_t off = base + b * L.stride, pr = pbase + b * L.pstep;
        double r_dy = 0, r_dyxh = 0;
        if (L.per_element) {
          for (int64_t e = 0; e < L.len; ++e) {
            const C g = load(dy[off + e]), xh = (load(x[off + e]) - mu) * inv, a = g * load(gamma[e]);
            sa += a;
            sax += a * xh;
            dg[e] += g * xh;
            db[e] += g;
          }
        } else {
#pragma omp simd reduction(+ : r_dy, r_dyxh)
          for (int64_t e = 0; e < L.len; ++e) {
            const C g = load(dy[off + e]);
            r_dy += g;
            r_dyxh += g * ((load(x[off + e]) - mu) * inv);
          }
          const double gp = load(gamma[pr]);
          sa += gp * r_dy;
          sax += gp * r_dyxh;
          dg[pr] += r_dyxh;
          db[pr] += r_dy;
        }
      }
      const C ma = static_cast<C>(sa / m), max = static_cast<C>(sax / m);
      for (int64_t b = 0; b < L.blocks; ++b) {
        const int64_t off = base + b * L.stride, pr = pbase + b * L.pstep;
        for (int64_t e = 0; e < L.len; ++e) {
          const C xh = (load(x[off + e]) - mu) * inv, gp = load(gamma[L.per_element ? e : pr]);
          dx[off + e] = store<T>(inv * (load(dy[off + e]) * gp - ma - xh * max));
        }
      }
    }
  });
  T* dgamma = static_cast<T*>(out[1]);
  T* dbeta = static_cast<T*>(out[2]);
  for (int64_t k = 0; k < P; ++k) {
    double a = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      a += partial[static_cast<size_t>(c * 2 * P + k)];
      b += partial[static_cast<size_t>(c * 2 * P + P + k)];
    }
    dgamma[k] = store<T>(a);
    dbeta[k] = store<T>(b);
  }
}

void run_loops(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const LoopState& s = p.get<LoopState>();
  plugin::visit_dtype(s.info.dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (plugin::is_float_v<T>) {
      if (s.info.backward)
        loops_backward<T>(s, in, out);
      else
        loops_forward<T>(s, in, out);
    }
  });
}

spora_plugin_error_t* plan_loops(KernelPlan& p) {
  auto s = std::make_shared<LoopState>();
  if (auto* e = describe(p, &s->info)) return e;
  s->L = layout_of(s->info);
  p.state = s;
  p.run = run_loops;
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"batch_norm", "batch_norm_grad", "layer_norm", "layer_norm_grad"})
    t.add({op, "onednn", plan_dnnl});
  for (const char* op : {"batch_norm", "batch_norm_grad", "layer_norm", "layer_norm_grad", "group_norm",
                         "group_norm_grad"})
    t.add({op, "cpu", plan_loops});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
