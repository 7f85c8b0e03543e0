// Reference matmul with broadcast batch dimensions and transposes. Loop order
// (i, k, j) over row-major data; plugins plan faster implementations first.
#include <algorithm>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct State {
  bool ta, tb;
};

template <class T>
void gemm(const T* a, const T* b, T* y, int64_t m, int64_t n, int64_t k, bool ta, bool tb, compute_t<T>* acc) {
  using C = compute_t<T>;
  // Element (i, kk) of op(A) and (kk, j) of op(B).
  const int64_t a_i = ta ? 1 : k, a_k = ta ? m : 1;
  const int64_t b_k = tb ? 1 : n, b_j = tb ? k : 1;
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc, acc + n, C(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      const C av = load(a[i * a_i + kk * a_k]);
      const T* br = b + kk * b_k;
      if (b_j == 1) {
        for (int64_t j = 0; j < n; ++j) acc[j] += av * load(br[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) acc[j] += av * load(br[j * b_j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = store<T>(acc[j]);
  }
}

template <class T>
void matmul_t(const KernelPlan& p, const T* a, const T* b, T* y) {
  const State& s = p.get<State>();
  const Shape &sa = p.in[0].shape, &sb = p.in[1].shape, &so = p.out[0].shape;
  const int r = so.rank;
  const int64_t m = so.dims[r - 2], n = so.dims[r - 1];
  const int64_t k = s.ta ? sa.dims[r - 2] : sa.dims[r - 1];
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= so.dims[i];
  if (batch == 0 || m == 0 || n == 0) return;
  std::vector<compute_t<T>> acc(static_cast<size_t>(n));
  const int64_t mat_a = sa.dims[r - 2] * sa.dims[r - 1], mat_b = sb.dims[r - 2] * sb.dims[r - 1];
  for (int64_t bi = 0; bi < batch; ++bi) {
    // Map the output batch index onto each operand, repeating size-1 dims.
    int64_t rem = bi, off_a = 0, off_b = 0, st_a = 1, st_b = 1;
    for (int d = r - 3; d >= 0; --d) {
      const int64_t id = rem % so.dims[d];
      rem /= so.dims[d];
      if (sa.dims[d] != 1) off_a += id * st_a;
      if (sb.dims[d] != 1) off_b += id * st_b;
      st_a *= sa.dims[d];
      st_b *= sb.dims[d];
    }
    gemm(a + off_a * mat_a, b + off_b * mat_b, y + bi * m * n, m, n, k, s.ta, s.tb, acc.data());
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      matmul_t(p, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 2, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.in[0].dtype != dt || p.in[1].dtype != dt) return invalid(p, "operands and output differ in dtype");
  State s{p.attrs.get_bool("transpose_a", false), p.attrs.get_bool("transpose_b", false)};
  const Shape &a = p.in[0].shape, &b = p.in[1].shape, &y = p.out[0].shape;
  const int r = y.rank;
  if (r < 2 || a.rank != r || b.rank != r) return invalid(p, "operands must have the output's rank (>= 2)");
  const int64_t m = s.ta ? a.dims[r - 1] : a.dims[r - 2];
  const int64_t ka = s.ta ? a.dims[r - 2] : a.dims[r - 1];
  const int64_t kb = s.tb ? b.dims[r - 1] : b.dims[r - 2];
  const int64_t n = s.tb ? b.dims[r - 2] : b.dims[r - 1];
  if (ka != kb || y.dims[r - 2] != m || y.dims[r - 1] != n) return invalid(p, "shapes do not contract");
  for (int i = 0; i < r - 2; ++i)
    if ((a.dims[i] != y.dims[i] && a.dims[i] != 1) || (b.dims[i] != y.dims[i] && b.dims[i] != 1))
      return invalid(p, "batch dimensions do not broadcast");
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) { t.add({"matmul", "ref", plan}); }
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin

namespace spora::plugin {
namespace {

// linear: y[M, N] = x[M, K] @ w[N, K]^T + b[N] (the host flattened x).
template <class T>
void linear_t(const KernelPlan& p, const T* x, const T* w, const T* b, T* y) {
  using C = compute_t<T>;
  const int64_t m = p.in[0].shape.dims[0], k = p.in[0].shape.dims[1], n = p.in[1].shape.dims[0];
  for (int64_t i = 0; i < m; ++i) {
    const T* xr = x + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const T* wr = w + j * k;
      C acc = load(b[j]);
      for (int64_t kk = 0; kk < k; ++kk) acc += load(xr[kk]) * load(wr[kk]);
      y[i * n + j] = store<T>(acc);
    }
  }
}

void run_linear(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      linear_t(p, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<const T*>(in[2]),
               static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan_linear(KernelPlan& p) {
  if (auto* e = expect_operands(p, 3, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (!(dt == SPORA_DTYPE_F32 || dt == SPORA_DTYPE_F64 || dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16))
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < 3; ++i)
    if (p.in[i].dtype != dt) return invalid(p, "operands and output differ in dtype");
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &b = p.in[2].shape, &y = p.out[0].shape;
  if (x.rank != 2 || w.rank != 2 || b.rank != 1 || y.rank != 2 || x.dims[1] != w.dims[1] || b.dims[0] != w.dims[0] ||
      y.dims[0] != x.dims[0] || y.dims[1] != w.dims[0])
    return invalid(p, "expected x [M, K], weight [N, K], bias [N], y [M, N]");
  p.run = run_linear;
  return nullptr;
}

void register_linear(KernelTable& t) { t.add({"linear", "ref", plan_linear}); }
SPORA_REFERENCE_KERNELS(register_linear);

}  // namespace
}  // namespace spora::plugin
