// Elementwise reference kernels: unary maps and numpy-broadcast binary ops.
#include <cmath>
#include <cstring>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

template <class T, class F>
void map1(const T* x, T* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <class T>
void unary_t(const KernelPlan& p, const T* x, T* y) {
  const int64_t n = p.out.numel();
  switch (p.kind) {
    case OpKind::kNeg: return map1(x, y, n, [](T v) { return -v; });
    case OpKind::kExp: return map1(x, y, n, [](T v) { return std::exp(v); });
    case OpKind::kLog: return map1(x, y, n, [](T v) { return std::log(v); });
    case OpKind::kTanh: return map1(x, y, n, [](T v) { return std::tanh(v); });
    case OpKind::kRelu: return map1(x, y, n, [](T v) { return v > T(0) ? v : T(0); });
    case OpKind::kSigmoid:
      // Written to avoid overflow of exp for large |v|.
      return map1(x, y, n, [](T v) {
        if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
        T e = std::exp(v);
        return e / (T(1) + e);
      });
    case OpKind::kCopy:
      if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(T));
      return;
    default: return;
  }
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
void binary_t(const KernelPlan& p, const T* a, const T* b, T* y) {
  switch (p.kind) {
    case OpKind::kAdd: return broadcast_loop(p.in[0], p.in[1], p.out, a, b, y, [](T u, T v) { return u + v; });
    case OpKind::kSub: return broadcast_loop(p.in[0], p.in[1], p.out, a, b, y, [](T u, T v) { return u - v; });
    case OpKind::kMul: return broadcast_loop(p.in[0], p.in[1], p.out, a, b, y, [](T u, T v) { return u * v; });
    case OpKind::kDiv: return broadcast_loop(p.in[0], p.in[1], p.out, a, b, y, [](T u, T v) { return u / v; });
    default: return;
  }
}

}  // namespace

void ref_unary(const KernelPlan& p, const void* x, void* y) {
  if (p.dtype == SPORA_DTYPE_F32) unary_t(p, static_cast<const float*>(x), static_cast<float*>(y));
  else unary_t(p, static_cast<const double*>(x), static_cast<double*>(y));
}

void ref_binary(const KernelPlan& p, const void* a, const void* b, void* y) {
  if (p.dtype == SPORA_DTYPE_F32)
    binary_t(p, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(y));
  else
    binary_t(p, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(y));
}

}  // namespace spora::plugin
