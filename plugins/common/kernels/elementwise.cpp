// Reference elementwise kernels: unary maps and numpy-broadcast binary ops.
#include <cmath>
#include <cstring>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

enum class Fn { kNeg, kExp, kLog, kTanh, kRelu, kSigmoid, kAdd, kSub, kMul, kDiv };

struct FnName {
  const char* name;
  Fn fn;
  bool binary;
};
constexpr FnName kFns[] = {
    {"neg", Fn::kNeg, false},   {"exp", Fn::kExp, false}, {"log", Fn::kLog, false}, {"tanh", Fn::kTanh, false},
    {"relu", Fn::kRelu, false}, {"sigmoid", Fn::kSigmoid, false}, {"add", Fn::kAdd, true}, {"sub", Fn::kSub, true},
    {"mul", Fn::kMul, true},    {"div", Fn::kDiv, true},
};

struct State {
  Fn fn;
};

template <class C>
inline C apply_unary(Fn f, C v) {
  switch (f) {
    case Fn::kNeg: return -v;
    case Fn::kExp: return std::exp(v);
    case Fn::kLog: return std::log(v);
    case Fn::kTanh: return std::tanh(v);
    case Fn::kRelu: return v > C(0) ? v : C(0);
    case Fn::kSigmoid:
      // Split by sign so exp never overflows.
      if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
      else {
        const C e = std::exp(v);
        return e / (C(1) + e);
      }
    default: return v;
  }
}

template <class T, Fn F>
void unary_loop(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = store<T>(apply_unary<compute_t<T>>(F, load(x[i])));
}

template <class T>
void unary_t(Fn f, const T* x, T* y, int64_t n) {
  // One instantiation per function keeps the switch out of the inner loop.
  switch (f) {
    case Fn::kNeg: return unary_loop<T, Fn::kNeg>(x, y, n);
    case Fn::kExp: return unary_loop<T, Fn::kExp>(x, y, n);
    case Fn::kLog: return unary_loop<T, Fn::kLog>(x, y, n);
    case Fn::kTanh: return unary_loop<T, Fn::kTanh>(x, y, n);
    case Fn::kRelu: return unary_loop<T, Fn::kRelu>(x, y, n);
    case Fn::kSigmoid: return unary_loop<T, Fn::kSigmoid>(x, y, n);
    default: return;
  }
}

void run_unary(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Fn f = p.get<State>().fn;
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      unary_t(f, static_cast<const T*>(in[0]), static_cast<T*>(out[0]), p.out[0].shape.numel());
  });
}

template <class T, class F>
void broadcast_loop(const Shape& sa, const Shape& sb, const Shape& so, const T* a, const T* b, T* y, F f) {
  const int r = so.rank;
  const int64_t n = so.numel();
  if (n == 0) return;
  if (r == 0) {
    y[0] = f(a[0], b[0]);
    return;
  }
  // Strides in elements, 0 along broadcast dimensions.
  int64_t st_a[SPORA_MAX_RANK] = {}, st_b[SPORA_MAX_RANK] = {};
  int64_t ra = 1, rb = 1;
  for (int i = r - 1; i >= 0; --i) {
    st_a[i] = sa.dims[i] == 1 ? 0 : ra;
    st_b[i] = sb.dims[i] == 1 ? 0 : rb;
    ra *= sa.dims[i];
    rb *= sb.dims[i];
  }
  const int64_t inner = so.dims[r - 1];
  const int64_t ia = st_a[r - 1], ib = st_b[r - 1];
  int64_t idx[SPORA_MAX_RANK] = {};
  int64_t off_a = 0, off_b = 0;
  for (int64_t done = 0; done < n; done += inner) {
    const T* pa = a + off_a;
    const T* pb = b + off_b;
    if (ia == 1 && ib == 1) {
      for (int64_t j = 0; j < inner; ++j) y[j] = f(pa[j], pb[j]);
    } else if (ia == 1 && ib == 0) {
      const T vb = pb[0];
      for (int64_t j = 0; j < inner; ++j) y[j] = f(pa[j], vb);
    } else if (ia == 0 && ib == 1) {
      const T va = pa[0];
      for (int64_t j = 0; j < inner; ++j) y[j] = f(va, pb[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) y[j] = f(pa[j * ia], pb[j * ib]);
    }
    y += inner;
    // Advance the outer index like an odometer.
    for (int d = r - 2; d >= 0; --d) {
      off_a += st_a[d];
      off_b += st_b[d];
      if (++idx[d] < so.dims[d]) break;
      off_a -= st_a[d] * so.dims[d];
      off_b -= st_b[d] * so.dims[d];
      idx[d] = 0;
    }
  }
}

template <class T>
void binary_t(const KernelPlan& p, Fn f, const T* a, const T* b, T* y) {
  using C = compute_t<T>;
  const Shape &sa = p.in[0].shape, &sb = p.in[1].shape, &so = p.out[0].shape;
  auto go = [&](auto op) { broadcast_loop(sa, sb, so, a, b, y, [op](T u, T v) { return store<T>(op(load(u), load(v))); }); };
  switch (f) {
    case Fn::kAdd: return go([](C u, C v) { return u + v; });
    case Fn::kSub: return go([](C u, C v) { return u - v; });
    case Fn::kMul: return go([](C u, C v) { return u * v; });
    case Fn::kDiv: return go([](C u, C v) { return u / v; });
    default: return;
  }
}

void run_binary(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Fn f = p.get<State>().fn;
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      binary_t(p, f, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(out[0]));
  });
}

bool float_dtype(int32_t d) {
  return d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
}

spora_plugin_error_t* plan(KernelPlan& p) {
  const FnName* fn = nullptr;
  for (const auto& f : kFns)
    if (p.op == f.name) fn = &f;
  if (!fn) return unsupported(p, "not an elementwise op");
  if (auto* e = expect_operands(p, fn->binary ? 2 : 1, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (!float_dtype(dt)) return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dt) return invalid(p, "inputs and output differ in dtype");
  if (fn->binary) {
    if (!broadcastable(p.in[0].shape, p.out[0].shape) || !broadcastable(p.in[1].shape, p.out[0].shape))
      return invalid(p, "inputs do not broadcast to the output (pad inputs to the output rank)");
    p.run = run_binary;
  } else {
    if (p.in[0].shape.numel() != p.out[0].shape.numel()) return invalid(p, "input and output sizes differ");
    p.run = run_unary;
  }
  p.state = std::make_shared<State>(State{fn->fn});
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const auto& f : kFns) t.add({f.name, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
