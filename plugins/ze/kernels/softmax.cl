// softmax and log_softmax along one axis, for f32, f16 and bf16 storage
// (arithmetic in float). The tensor is viewed as (outer, len, inner); one
// work-item per (outer, inner) line makes three passes over it: the max,
// the sum of exp(x - max), the result.
#include "common.h"

#define SOFTMAX_KERNEL(S)                                                                                   \
  __kernel void softmax_##S(__global const STOR_##S* x, __global STOR_##S* y, long outer, long len,         \
                            long inner, int log_out) {                                                      \
    const long id = get_global_id(0);                                                                       \
    if (id >= outer * inner) return;                                                                        \
    const long base = (id / inner) * len * inner + id % inner;                                              \
    float m = -INFINITY;                                                                                    \
    for (long k = 0; k < len; ++k) m = fmax(m, LOAD_##S(x, base + k * inner));                              \
    float s = 0.0f;                                                                                         \
    for (long k = 0; k < len; ++k) s += exp(LOAD_##S(x, base + k * inner) - m);                             \
    const float ls = log(s), inv = 1.0f / s;                                                                \
    for (long k = 0; k < len; ++k) {                                                                        \
      const float d = LOAD_##S(x, base + k * inner) - m;                                                    \
      STORE_##S(y, base + k * inner, log_out ? d - ls : exp(d) * inv);                                      \
    }                                                                                                       \
  }
SOFTMAX_KERNEL(f32)
SOFTMAX_KERNEL(f16)
SOFTMAX_KERNEL(bf16)

// The gradients from the forward output y and the incoming dy:
// softmax_grad dx = y * (dy - sum(dy * y)), log_softmax_grad
// dx = dy - exp(y) * sum(dy), along the axis (the reference's formulas).
#define SOFTMAX_GRAD_KERNEL(S)                                                                              \
  __kernel void softmax_grad_##S(__global const STOR_##S* y, __global const STOR_##S* dy,                   \
                                 __global STOR_##S* dx, long outer, long len, long inner, int log_out) {    \
    const long id = get_global_id(0);                                                                       \
    if (id >= outer * inner) return;                                                                        \
    const long base = (id / inner) * len * inner + id % inner;                                              \
    float dot = 0.0f;                                                                                       \
    for (long k = 0; k < len; ++k) {                                                                        \
      const long j = base + k * inner;                                                                      \
      dot += log_out ? LOAD_##S(dy, j) : LOAD_##S(dy, j) * LOAD_##S(y, j);                                  \
    }                                                                                                       \
    for (long k = 0; k < len; ++k) {                                                                        \
      const long j = base + k * inner;                                                                      \
      const float yv = LOAD_##S(y, j), g = LOAD_##S(dy, j);                                                 \
      STORE_##S(dx, j, log_out ? g - exp(yv) * dot : yv * (g - dot));                                       \
    }                                                                                                       \
  }
SOFTMAX_GRAD_KERNEL(f32)
SOFTMAX_GRAD_KERNEL(f16)
SOFTMAX_GRAD_KERNEL(bf16)
