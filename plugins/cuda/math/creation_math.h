// arange and eye, one output element at a time, as the reference
// (plugins/common/kernels/creation.cpp) computes them:
//   arange: floats start + i * step in double (the product rounded on its
//     own, rounded.h: no FMA), rounded once to the dtype
//     (16-bit floats through float, as the reference's store); integers
//     start + i * step in int64 (the planner checked every element fits);
//   eye: ones on the main diagonal of an (n, m) matrix, zeros elsewhere.
#pragma once
#include <cstdint>

#include "hd.h"
#include "kernel_plan.h"  // plugins/common: KernelPlan (host side)
#include "rounded.h"

namespace spora::gpu {

struct ArangeIndex {
  double start = 0, step = 1;  // floats
  int64_t istart = 0, istep = 1;  // integers
};

template <class T>
SPORA_HD inline T arange_elem(const ArangeIndex& a, int64_t i) {
  using C = compute_of<T>;
  if constexpr (is_float_c<C>) return elem<T>::store(a.start + rn_mul(static_cast<double>(i), a.step));
  else return elem<T>::store(wrap_add(a.istart, wrap_mul(i, a.istep)));  // never wraps: every element fits
}

// Element e of an eye with m columns.
template <class T>
SPORA_HD inline T eye_elem(int64_t m, int64_t e) {
  return elem<T>::store(e / m == e % m ? 1.0 : 0.0);
}

// Host side: start and step of an arange plan the reference planner
// validated (integers exact there).
inline ArangeIndex arange_index_of(const spora::plugin::KernelPlan& p) {
  ArangeIndex a;
  a.start = p.attrs.get_float("start", 0.0);
  a.step = p.attrs.get_float("step", 1.0);
  const int32_t dt = p.out[0].dtype;
  if (dt == SPORA_DTYPE_I32 || dt == SPORA_DTYPE_I64 || dt == SPORA_DTYPE_U8) {
    a.istart = static_cast<int64_t>(a.start);
    a.istep = static_cast<int64_t>(a.step);
  }
  return a;
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulations: every output element, as its thread computes it.
template <class T>
inline void arange_emulate(const ArangeIndex& a, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = arange_elem<T>(a, i);
}
template <class T>
inline void eye_emulate(int64_t n, int64_t m, T* y) {
  for (int64_t e = 0; e < n * m; ++e) y[e] = eye_elem<T>(m, e);
}
#endif

}  // namespace spora::gpu
