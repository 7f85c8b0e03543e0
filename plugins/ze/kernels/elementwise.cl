// Elementwise kernels for f32, f16 and bf16 storage: unary ops, and binary
// ops with numpy broadcasting. Op codes are the positions of the op names
// in ze_recipe.cpp (kUnary, kBinary).
#include "common.h"

// Split by sign so exp never overflows (as the reference kernels do).
static inline float sigmoid(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + exp(-v));
  const float e = exp(v);
  return e / (1.0f + e);
}

// p0, p1: the op's attributes (leaky_relu alpha; gelu 1 = tanh form;
// softplus beta, threshold; clip min, max), as the reference parses them.
static float unary_op(float v, int op, float p0, float p1) {
  float r;
  switch (op) {
    case 0: r = -v; break;                              // neg
    case 1: r = fabs(v); break;                         // abs
    case 2: r = v * v; break;                           // square
    case 3: r = v < 0.0f ? 0.0f : v; break;             // relu, NaN stays NaN
    case 4: r = exp(v); break;                          // exp
    case 5: r = log(v); break;                          // log
    case 6: r = sqrt(v); break;                         // sqrt
    case 7: r = rsqrt(v); break;                        // rsqrt
    case 8: r = 1.0f / v; break;                        // reciprocal
    case 9: r = sin(v); break;                          // sin
    case 10: r = cos(v); break;                         // cos
    case 11: r = tanh(v); break;                        // tanh
    case 12: r = sigmoid(v); break;
    case 13: r = v * sigmoid(v); break;                 // silu
    case 14: r = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v); break;  // sign, keeps NaN and -0
    case 15: r = log1p(v); break;
    case 16: r = erf(v); break;
    case 17: r = floor(v); break;
    case 18: r = ceil(v); break;
    case 19: r = rint(v); break;                        // round half to even
    case 20: r = (v < 0.0f ? 0.0f : v) + p0 * (v < 0.0f ? v : 0.0f); break;  // leaky_relu
    case 21:                                            // gelu; no 1 + erf(..) cancellation
      r = p0 != 0.0f ? v * sigmoid(2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v))
                     : 0.5f * v * erfc(v * -0.7071067811865476f);
      break;
    case 22: r = v * p0 > p1 ? v : log1p(exp(v * p0)) / p0; break;  // softplus (beta, threshold)
    case 23: {                                          // clip, NaN stays NaN
      const float t = v < p0 ? p0 : v;
      r = t > p1 ? p1 : t;
      break;
    }
    default: r = NAN; break;
  }
  return r;
}

static float binary_op(float x, float y, int op) {
  float r;
  switch (op) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = pow(x, y); break;
    case 5: r = (x > y || isnan(x)) ? x : y; break;  // maximum, NaN propagates (numpy)
    case 6: r = (x < y || isnan(x)) ? x : y; break;  // minimum
    default: r = NAN; break;
  }
  return r;
}

#define EW_KERNELS(S)                                                                                      \
  __kernel void ew_unary_##S(__global const STOR_##S* x, __global STOR_##S* y, long n, int op, float p0,  \
                             float p1) {                                                                   \
    const long i = get_global_id(0);                                                                       \
    if (i >= n) return;                                                                                    \
    STORE_##S(y, i, unary_op(LOAD_##S(x, i), op, p0, p1));                                                 \
  }                                                                                                        \
  __kernel void ew_binary_##S(__global const STOR_##S* a, __global const STOR_##S* b, __global STOR_##S* c, \
                              long n, int op, int rank, long8 dims, long8 sa, long8 sb) {                  \
    const long i = get_global_id(0);                                                                       \
    if (i >= n) return;                                                                                    \
    const float x = LOAD_##S(a, offset_of(i, rank, dims, sa));                                             \
    const float y = LOAD_##S(b, offset_of(i, rank, dims, sb));                                             \
    STORE_##S(c, i, binary_op(x, y, op));                                                                  \
  }
EW_KERNELS(f32)
EW_KERNELS(f16)
EW_KERNELS(bf16)
