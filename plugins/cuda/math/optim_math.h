// The fused optimizer updates (sgd_update, adam_update; semantics in
// docs/ops-optim.md) as per-element functions. The scalar inputs (lr, step,
// grad_scale) live in device memory, so the coefficients are computed on
// the device (opt_coeffs, one thread) into the launch's workspace and read
// by every update thread. Formulas and their types follow the reference
// loops (plugins/common/kernels/optim.h) operation for operation; tests/gpu
// compares the two on the same tensors.
#pragma once
#include <cstdint>

#include "fmath.h"
#include "hd.h"

namespace spora::gpu {

struct OptParams {
  int32_t adam = 0;
  int32_t momentum_bufs = 0, nesterov = 0, decoupled = 0, amsgrad = 0;
  double momentum = 0, dampening = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  int32_t scalar_dtype[3] = {};  // spora_dtype_t of lr, (step), grad_scale
};

struct OptCoeffs {
  double lr, grad_scale;
  double step_size;  // adam: lr / (1 - beta1^step), NaN when step < 1
  double bc2_sqrt;   // adam: sqrt(1 - beta2^step)
  double decay;      // adam decoupled: 1 - lr * weight_decay
  double l2;         // weight decay added to the gradient (adam, not decoupled)
};

// One scalar input of dtype f32 (1), f64 (2), i32 (5) or i64 (6).
SPORA_HD inline double opt_read_scalar(const void* p, int32_t dtype) {
  switch (dtype) {
    case 1: { float v; memcpy(&v, p, 4); return v; }
    case 2: { double v; memcpy(&v, p, 8); return v; }
    case 5: { int32_t v; memcpy(&v, p, 4); return static_cast<double>(v); }
    case 6: { int64_t v; memcpy(&v, p, 8); return static_cast<double>(v); }
    default: return HUGE_VAL - HUGE_VAL;  // NaN; refused at plan time
  }
}

// s[] are the scalar inputs in order: sgd (lr, grad_scale), adam (lr, step, grad_scale).
SPORA_HD inline OptCoeffs opt_coeffs(const OptParams& u, const void* const* s) {
  OptCoeffs c{};
  c.lr = opt_read_scalar(s[0], u.scalar_dtype[0]);
  c.grad_scale = 1;
  c.step_size = 0;
  c.bc2_sqrt = 1;
  c.decay = 1;
  c.l2 = 0;
  if (!u.adam) {
    c.grad_scale = opt_read_scalar(s[1], u.scalar_dtype[1]);
    return c;
  }
  const double step = opt_read_scalar(s[1], u.scalar_dtype[1]);
  c.grad_scale = opt_read_scalar(s[2], u.scalar_dtype[2]);
  if (step >= 1) {
    c.step_size = c.lr / (1 - fm::pow(u.beta1, step));
    c.bc2_sqrt = fm::sqrt(1 - fm::pow(u.beta2, step));
  } else {
    c.step_size = c.bc2_sqrt = HUGE_VAL - HUGE_VAL;  // bias correction divides by zero at step 0: NaN
  }
  c.decay = u.decoupled ? 1 - c.lr * u.weight_decay : 1;
  c.l2 = u.decoupled ? 0 : u.weight_decay;
  return c;
}

// Element j of one tensor of an sgd_update. Reads everything of j before
// writing (the outputs may be the input buffers). S is the state type.
template <class T>
SPORA_HD inline void sgd_elem(const OptParams& u, const OptCoeffs& c, const T* p, const T* g,
                              const compute_of<T>* b, T* p_out, compute_of<T>* b_out, int64_t j) {
  using F = compute_of<T>;
  const F lr = static_cast<F>(c.lr), gs = static_cast<F>(c.grad_scale), wd = static_cast<F>(u.weight_decay),
          mom = static_cast<F>(u.momentum), keep = static_cast<F>(1.0 - u.dampening);
  const F pj = elem<T>::load(p[j]);
  F d = gs * elem<T>::load(g[j]) + wd * pj;
  if (u.momentum_bufs) {
    const F bj = mom * b[j] + keep * d;
    b_out[j] = bj;
    d = u.nesterov ? d + mom * bj : bj;
  }
  p_out[j] = elem<T>::store(pj - lr * d);
}

// Element j of one tensor of an adam_update.
template <class T>
SPORA_HD inline void adam_elem(const OptParams& u, const OptCoeffs& c, const T* p, const T* g, const compute_of<T>* m,
                               const compute_of<T>* v, const compute_of<T>* vmax, T* p_out, compute_of<T>* m_out,
                               compute_of<T>* v_out, compute_of<T>* vmax_out, int64_t j) {
  using F = compute_of<T>;
  const F gs = static_cast<F>(c.grad_scale), l2 = static_cast<F>(c.l2), decay = static_cast<F>(c.decay),
          b1 = static_cast<F>(u.beta1), b2 = static_cast<F>(u.beta2), a1 = static_cast<F>(1.0 - u.beta1),
          a2 = static_cast<F>(1.0 - u.beta2), step = static_cast<F>(c.step_size),
          inv_bc2 = static_cast<F>(1.0 / c.bc2_sqrt), eps = static_cast<F>(u.eps);
  const F pj = elem<T>::load(p[j]);
  const F d = gs * elem<T>::load(g[j]) + l2 * pj;
  const F mj = b1 * m[j] + a1 * d;
  const F vj = b2 * v[j] + a2 * (d * d);
  F vm = vj;
  if (u.amsgrad) {
    const F old = vmax[j];
    vm = old >= vj ? old : vj;  // a NaN v propagates
  }
  m_out[j] = mj;
  v_out[j] = vj;
  if (u.amsgrad) vmax_out[j] = vm;
  p_out[j] = elem<T>::store(pj * decay - step * mj / (fm::sqrt(vm) * inv_bc2 + eps));
}

}  // namespace spora::gpu
