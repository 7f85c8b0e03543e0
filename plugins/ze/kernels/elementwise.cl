// Elementwise f32 kernels: unary ops, and binary ops with numpy
// broadcasting. Op codes are ZeUnary/ZeBinary in ze_recipe.h.
#include "common.h"

// Split by sign so exp never overflows (as the reference kernels do).
static inline float sigmoid(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + exp(-v));
  const float e = exp(v);
  return e / (1.0f + e);
}

__kernel void ew_unary(__global const float* x, __global float* y, long n, int op) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const float v = x[i];
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
    default: r = NAN; break;
  }
  y[i] = r;
}

__kernel void ew_binary(__global const float* a, __global const float* b, __global float* c, long n, int op,
                        int rank, long8 dims, long8 sa, long8 sb) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const float x = a[offset_of(i, rank, dims, sa)];
  const float y = b[offset_of(i, rank, dims, sb)];
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
  c[i] = r;
}
