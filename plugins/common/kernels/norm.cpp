// Reference normalisation kernels: batch_norm, layer_norm, group_norm and
// their gradients (shapes as core/src/ops/norm.cpp flattens them).
//
// All three normalise "groups" of elements, so one forward and one backward
// implementation serve them through a Layout: group q is `blocks` runs of
// `len` contiguous elements, and each element has an affine parameter index
// (per run for batch and group norm, per position for layer norm).
// Statistics are computed in double with two passes (mean, then the squared
// deviations), which stays accurate for large groups and any dtype.
#include <cmath>
#include <initializer_list>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

enum class Op { kBatch, kLayer, kGroup };

struct Layout {
  // Group q: `blocks` runs of `len` contiguous elements from q * qstride,
  // run b at b * stride. Run b's parameter is q % pmod * pmul + b * pstep, or
  // the element's position in the run when per_element (layer norm).
  int64_t groups = 0, blocks = 0, len = 0, stride = 0, qstride = 0;
  int64_t pmod = 1, pmul = 0, pstep = 0;
  bool per_element = false;
  int64_t params = 0;  // elements of gamma
};

struct State {
  Op op;
  bool backward;
  Layout layout;
  bool training;  // batch_norm only
  double eps, momentum;
};

template <class F>
inline void for_group(const Layout& L, int64_t q, F&& f) {
  const int64_t base = q * L.qstride, pbase = q % L.pmod * L.pmul;
  for (int64_t b = 0; b < L.blocks; ++b) {
    const int64_t off = base + b * L.stride, p = pbase + b * L.pstep;
    for (int64_t e = 0; e < L.len; ++e) f(off + e, L.per_element ? e : p);
  }
}

template <class T>
void forward(const State& s, const void* const* in, void* const* out) {
  using C = compute_t<T>;  // also the stats dtype
  const Layout& L = s.layout;
  const T* x = static_cast<const T*>(in[0]);
  const T* gamma = static_cast<const T*>(in[1]);
  const T* beta = static_cast<const T*>(in[2]);
  T* y = static_cast<T*>(out[0]);
  C* mean_out = static_cast<C*>(out[1]);
  C* invstd_out = static_cast<C*>(out[2]);
  const bool batch_stats = s.op != Op::kBatch || s.training;
  const double m = static_cast<double>(L.blocks) * static_cast<double>(L.len);
  for (int64_t q = 0; q < L.groups; ++q) {
    double mean, var;
    if (batch_stats) {
      double sum = 0, sq = 0;
      for_group(L, q, [&](int64_t k, int64_t) { sum += static_cast<double>(load(x[k])); });
      mean = sum / m;  // NaN for an empty group
      for_group(L, q, [&](int64_t k, int64_t) {
        const double d = static_cast<double>(load(x[k])) - mean;
        sq += d * d;
      });
      var = sq / m;
    } else {
      mean = static_cast<double>(load(static_cast<const T*>(in[3])[q]));
      var = static_cast<double>(load(static_cast<const T*>(in[4])[q]));
    }
    const C mu = static_cast<C>(mean), inv = static_cast<C>(1.0 / std::sqrt(var + s.eps));
    mean_out[q] = mu;
    invstd_out[q] = inv;
    for_group(L, q, [&](int64_t k, int64_t p) {
      y[k] = store<T>((load(x[k]) - mu) * inv * load(gamma[p]) + load(beta[p]));
    });
    if (s.op == Op::kBatch) {
      const double rm = static_cast<double>(load(static_cast<const T*>(in[3])[q]));
      const double rv = static_cast<double>(load(static_cast<const T*>(in[4])[q]));
      double nm = rm, nv = rv;
      if (s.training && m > 0) {
        const double unbiased = m > 1 ? var * m / (m - 1) : var;
        nm = (1 - s.momentum) * rm + s.momentum * mean;
        nv = (1 - s.momentum) * rv + s.momentum * unbiased;
      }
      static_cast<T*>(out[3])[q] = store<T>(nm);
      static_cast<T*>(out[4])[q] = store<T>(nv);
    }
  }
}

// dx = invstd * (a - mean(a) - xhat * mean(a * xhat)), a = dy * gamma, over
// each group; dgamma = sum(dy * xhat) and dbeta = sum(dy) per parameter.
template <class T>
void backward(const State& s, const void* const* in, void* const* out) {
  using C = compute_t<T>;
  const Layout& L = s.layout;
  const T* x = static_cast<const T*>(in[0]);
  const T* dy = static_cast<const T*>(in[1]);
  const T* gamma = static_cast<const T*>(in[2]);
  const C* mean = static_cast<const C*>(in[3]);
  const C* invstd = static_cast<const C*>(in[4]);
  T* dx = static_cast<T*>(out[0]);
  std::vector<double> dg(static_cast<size_t>(L.params)), db(static_cast<size_t>(L.params));
  const double m = static_cast<double>(L.blocks) * static_cast<double>(L.len);
  for (int64_t q = 0; q < L.groups; ++q) {
    const C mu = mean[q], inv = invstd[q];
    double sa = 0, sax = 0;
    for_group(L, q, [&](int64_t k, int64_t p) {
      const C g = load(dy[k]), xh = (load(x[k]) - mu) * inv, a = g * load(gamma[p]);
      sa += static_cast<double>(a);
      sax += static_cast<double>(a * xh);
      dg[p] += static_cast<double>(g * xh);
      db[p] += static_cast<double>(g);
    });
    const C ma = static_cast<C>(sa / m), max = static_cast<C>(sax / m);
    for_group(L, q, [&](int64_t k, int64_t p) {
      const C xh = (load(x[k]) - mu) * inv;
      dx[k] = store<T>(inv * (load(dy[k]) * load(gamma[p]) - ma - xh * max));
    });
  }
  T* dgamma = static_cast<T*>(out[1]);
  T* dbeta = static_cast<T*>(out[2]);
  for (int64_t p = 0; p < L.params; ++p) {
    dgamma[p] = store<T>(dg[p]);
    dbeta[p] = store<T>(db[p]);
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      if (s.backward)
        backward<T>(s, in, out);
      else
        forward<T>(s, in, out);
    }
  });
}

Shape dims(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.dims[s.rank++] = v;
  return s;
}

// Checks every operand against the contract: memory safety depends on it.
spora_plugin_error_t* expect(const KernelPlan& p, std::initializer_list<TensorInfo> in,
                             std::initializer_list<TensorInfo> out) {
  if (auto* e = expect_operands(p, static_cast<int>(in.size()), static_cast<int>(out.size()))) return e;
  int i = 0;
  for (const TensorInfo& t : in) {
    if (p.in[i].dtype != t.dtype || p.in[i].shape != t.shape)
      return invalid(p, "input " + std::to_string(i) + " is " + dtype_name(p.in[i].dtype) + p.in[i].shape.str() +
                            ", expected " + dtype_name(t.dtype) + t.shape.str());
    ++i;
  }
  i = 0;
  for (const TensorInfo& t : out) {
    if (p.out[i].dtype != t.dtype || p.out[i].shape != t.shape)
      return invalid(p, "output " + std::to_string(i) + " is " + dtype_name(p.out[i].dtype) + p.out[i].shape.str() +
                            ", expected " + dtype_name(t.dtype) + t.shape.str());
    ++i;
  }
  return nullptr;
}

spora_plugin_error_t* plan(KernelPlan& p) {
  State s{};
  s.backward = p.op.size() > 5 && p.op.compare(p.op.size() - 5, 5, "_grad") == 0;
  s.op = p.op.rfind("batch_norm", 0) == 0 ? Op::kBatch : p.op.rfind("layer_norm", 0) == 0 ? Op::kLayer : Op::kGroup;
  s.eps = p.attrs.get_float("eps", 1e-5);
  s.momentum = p.attrs.get_float("momentum", 0.1);
  s.training = p.attrs.get_bool("training", false);
  if (p.num_inputs < 1) return invalid(p, "missing input");
  const int32_t dt = p.in[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  const int32_t st = dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : dt;
  const Shape& x = p.in[0].shape;
  const bool flat2 = s.op == Op::kLayer;
  if (x.rank != (flat2 ? 2 : 3)) return invalid(p, "input must be flattened to rank " + std::string(flat2 ? "2" : "3"));
  // Offsets multiply trailing dims, which a zero leading dim lets grow past int64.
  int64_t tail;
  if (__builtin_mul_overflow(x.dims[1], flat2 ? 1 : x.dims[2], &tail)) return invalid(p, "shape too large");
  Layout& L = s.layout;
  const TensorInfo X{dt, x};
  spora_plugin_error_t* e = nullptr;
  if (s.op == Op::kBatch) {
    const int64_t n = x.dims[0], c = x.dims[1], sp = x.dims[2];
    const TensorInfo P{dt, dims({c})}, S{st, dims({c})};
    e = s.backward ? expect(p, {X, X, P, S, S}, {X, P, P}) : expect(p, {X, P, P, P, P}, {X, S, S, P, P});
    L.groups = c, L.blocks = n, L.len = sp, L.stride = c * sp, L.qstride = sp;
    L.pmod = c > 0 ? c : 1, L.pmul = 1, L.params = c;
  } else if (s.op == Op::kLayer) {
    const int64_t r = x.dims[0], d = x.dims[1];
    const TensorInfo P{dt, dims({d})}, S{st, dims({r})};
    e = s.backward ? expect(p, {X, X, P, S, S}, {X, P, P}) : expect(p, {X, P, P}, {X, S, S});
    L.groups = r, L.blocks = 1, L.len = d, L.qstride = d, L.per_element = true, L.params = d;
  } else {
    const int64_t n = x.dims[0], c = x.dims[1], sp = x.dims[2], g = p.attrs.get_int("groups", 0);
    if (g < 1 || c % g != 0) return invalid(p, "groups must be positive and divide the channels");
    const TensorInfo P{dt, dims({c})}, S{st, dims({n, g})};
    e = s.backward ? expect(p, {X, X, P, S, S}, {X, P, P}) : expect(p, {X, P, P}, {X, S, S});
    L.groups = n * g, L.blocks = c / g, L.len = sp, L.stride = sp, L.qstride = c / g * sp;
    L.pmod = g, L.pmul = c / g, L.pstep = 1, L.params = c;
  }
  if (e) return e;
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const char* op : {"batch_norm", "batch_norm_grad", "layer_norm", "layer_norm_grad", "group_norm",
                         "group_norm_grad"})
    t.add({op, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
