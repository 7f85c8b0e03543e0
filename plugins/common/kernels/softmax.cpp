// Reference softmax family along one axis: softmax, log_softmax (computed
// stably, the max subtracted) and their gradients from the forward output.
//
// The tensor is viewed as (outer, len, inner) around the axis. Each outer
// slice is processed inner-contiguously with per-column accumulators, so an
// axis that is not the last is read sequentially instead of with stride
// `inner`. Sums accumulate in double: long axes keep f32 precision.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kSoftmaxGrad, kLogSoftmaxGrad };

struct State {
  Kind kind;
  int64_t outer, len, inner;
};

template <class T>
void forward(const State& s, const T* x, T* y) {
  using C = compute_t<T>;
  const bool log = s.kind == Kind::kLogSoftmax;
  std::vector<C> mx(static_cast<size_t>(s.inner));
  std::vector<double> total(static_cast<size_t>(s.inner));
  for (int64_t o = 0; o < s.outer; ++o) {
    const T* xs = x + o * s.len * s.inner;
    T* ys = y + o * s.len * s.inner;
    std::fill(mx.begin(), mx.end(), -INFINITY);
    std::fill(total.begin(), total.end(), 0.0);
    for (int64_t j = 0; j < s.len; ++j)
      for (int64_t i = 0; i < s.inner; ++i) mx[i] = std::max(mx[i], load(xs[j * s.inner + i]));
    for (int64_t j = 0; j < s.len; ++j)
      for (int64_t i = 0; i < s.inner; ++i) total[i] += static_cast<double>(std::exp(load(xs[j * s.inner + i]) - mx[i]));
    for (int64_t i = 0; i < s.inner; ++i) total[i] = log ? std::log(total[i]) : 1.0 / total[i];
    for (int64_t j = 0; j < s.len; ++j)
      for (int64_t i = 0; i < s.inner; ++i) {
        const C v = load(xs[j * s.inner + i]) - mx[i];
        ys[j * s.inner + i] = store<T>(log ? v - static_cast<C>(total[i]) : std::exp(v) * static_cast<C>(total[i]));
      }
  }
}

template <class T>
void backward(const State& s, const T* y, const T* dy, T* dx) {
  using C = compute_t<T>;
  const bool log = s.kind == Kind::kLogSoftmaxGrad;
  std::vector<double> dot(static_cast<size_t>(s.inner));
  for (int64_t o = 0; o < s.outer; ++o) {
    const int64_t base = o * s.len * s.inner;
    std::fill(dot.begin(), dot.end(), 0.0);
    for (int64_t j = 0; j < s.len; ++j)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t k = base + j * s.inner + i;
        dot[i] += static_cast<double>(log ? load(dy[k]) : load(dy[k]) * load(y[k]));
      }
    for (int64_t j = 0; j < s.len; ++j)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t k = base + j * s.inner + i;
        const C d = static_cast<C>(dot[i]);
        dx[k] = store<T>(log ? load(dy[k]) - std::exp(load(y[k])) * d : load(y[k]) * (load(dy[k]) - d));
      }
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      if (s.kind == Kind::kSoftmax || s.kind == Kind::kLogSoftmax)
        forward(s, static_cast<const T*>(in[0]), static_cast<T*>(out[0]));
      else
        backward(s, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(out[0]));
    }
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  State s{};
  s.kind = p.op == "softmax"       ? Kind::kSoftmax
           : p.op == "log_softmax" ? Kind::kLogSoftmax
           : p.op == "softmax_grad" ? Kind::kSoftmaxGrad
                                    : Kind::kLogSoftmaxGrad;
  const int inputs = s.kind == Kind::kSoftmax || s.kind == Kind::kLogSoftmax ? 1 : 2;
  if (auto* e = expect_operands(p, inputs, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < inputs; ++i)
    if (p.in[i].dtype != dt || p.in[i].shape != p.out[0].shape) return invalid(p, "inputs and output differ");
  const Shape& sh = p.out[0].shape;
  const int64_t ax = p.attrs.get_int("axis", sh.rank - 1);
  if (sh.rank > 0 && (ax < 0 || ax >= sh.rank)) return invalid(p, "axis out of range");
  // With no elements the loops do nothing (and partial products could overflow).
  if (sh.numel() > 0) {
    s.outer = s.inner = 1;
    s.len = sh.rank ? sh.dims[ax] : 1;
    for (int i = 0; i < sh.rank; ++i) {
      if (i < ax) s.outer *= sh.dims[i];
      if (i > ax) s.inner *= sh.dims[i];
    }
  }
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const char* op : {"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"}) t.add({op, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
