// Elementwise kernels for f32, f16 and bf16 storage: unary ops, and binary
// ops with numpy broadcasting. Op codes are the table's (enum spora_ew_op,
// spora/ops_elementwise.def); ze_recipe.cpp sends every UNARY row to
// ew_unary and every BINARY row to ew_binary. Each switch is on the enum
// with no default and names the other kinds' codes through the table, so
// clang's -Wswitch (an error here: -Werror) fails the build when a row of
// the table has no case.
#include <spora/ops_elementwise.h>

#include "common.h"

// The `case` labels of the rows a switch does not compute, by kind: rows of
// the switch's own kind expand to nothing, so each of them needs a case.
#define EW_NOT_UNARY_UNARY(Id)
#define EW_NOT_UNARY_NOT(Id) case SPORA_EW_##Id:
#define EW_NOT_UNARY_CAST(Id) case SPORA_EW_##Id:
#define EW_NOT_UNARY_BINARY(Id) case SPORA_EW_##Id:
#define EW_NOT_UNARY_COMPARE(Id) case SPORA_EW_##Id:
#define EW_NOT_UNARY_WHERE(Id) case SPORA_EW_##Id:
#define EW_NOT_BINARY_UNARY(Id) case SPORA_EW_##Id:
#define EW_NOT_BINARY_NOT(Id) case SPORA_EW_##Id:
#define EW_NOT_BINARY_CAST(Id) case SPORA_EW_##Id:
#define EW_NOT_BINARY_BINARY(Id)
#define EW_NOT_BINARY_COMPARE(Id) case SPORA_EW_##Id:
#define EW_NOT_BINARY_WHERE(Id) case SPORA_EW_##Id:

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
  switch ((enum spora_ew_op)op) {
    case SPORA_EW_Neg: r = -v; break;
    case SPORA_EW_Abs: r = fabs(v); break;
    case SPORA_EW_Square: r = v * v; break;
    case SPORA_EW_Relu: r = v < 0.0f ? 0.0f : v; break;  // relu, NaN stays NaN
    case SPORA_EW_Exp: r = exp(v); break;
    case SPORA_EW_Log: r = log(v); break;
    case SPORA_EW_Sqrt: r = sqrt(v); break;
    case SPORA_EW_Rsqrt: r = rsqrt(v); break;
    case SPORA_EW_Reciprocal: r = 1.0f / v; break;
    case SPORA_EW_Sin: r = sin(v); break;
    case SPORA_EW_Cos: r = cos(v); break;
    case SPORA_EW_Tanh: r = tanh(v); break;
    case SPORA_EW_Sigmoid: r = sigmoid(v); break;
    case SPORA_EW_Silu: r = v * sigmoid(v); break;
    case SPORA_EW_Sign: r = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v); break;  // sign, keeps NaN and -0
    case SPORA_EW_Log1p: r = log1p(v); break;
    case SPORA_EW_Erf: r = erf(v); break;
    case SPORA_EW_Floor: r = floor(v); break;
    case SPORA_EW_Ceil: r = ceil(v); break;
    case SPORA_EW_Round: r = rint(v); break;  // round half to even
    case SPORA_EW_LeakyRelu: r = (v < 0.0f ? 0.0f : v) + p0 * (v < 0.0f ? v : 0.0f); break;
    case SPORA_EW_Gelu:  // gelu; no 1 + erf(..) cancellation
      r = p0 != 0.0f ? v * sigmoid(2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v))
                     : 0.5f * v * erfc(v * -0.7071067811865476f);
      break;
    case SPORA_EW_Softplus: r = v * p0 > p1 ? v : log1p(exp(v * p0)) / p0; break;  // softplus (beta, threshold)
    case SPORA_EW_Clip: {  // clip, NaN stays NaN
      const float t = v < p0 ? p0 : v;
      r = t > p1 ? p1 : t;
      break;
    }
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) EW_NOT_UNARY_##kind(Id)
#include <spora/ops_elementwise.def>
    case SPORA_EW_COUNT: r = NAN; break;
  }
  return r;
}

static float binary_op(float x, float y, int op) {
  float r;
  switch ((enum spora_ew_op)op) {
    case SPORA_EW_Add: r = x + y; break;
    case SPORA_EW_Sub: r = x - y; break;
    case SPORA_EW_Mul: r = x * y; break;
    case SPORA_EW_Div: r = x / y; break;
    case SPORA_EW_Pow: r = pow(x, y); break;
    case SPORA_EW_Maximum: r = (x > y || isnan(x)) ? x : y; break;  // maximum, NaN propagates (numpy)
    case SPORA_EW_Minimum: r = (x < y || isnan(x)) ? x : y; break;  // minimum
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) EW_NOT_BINARY_##kind(Id)
#include <spora/ops_elementwise.def>
    case SPORA_EW_COUNT: r = NAN; break;
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
