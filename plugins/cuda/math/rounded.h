// Arithmetic rounded after every operation and never contracted into an
// FMA, for kernels that must give the reference's bits: nvcc and hipcc
// contract a * b + c by default (g++ does where the target has FMA), and the
// reference rounds the product first. Double goes through
// spora/sdk/exact_math.h (the same operations the random ops' transcendental
// functions are built from); float uses __fmul_rn on CUDA and clang's
// contract(off) pragma under hipcc.
#pragma once
#include <spora/sdk/exact_math.h>

#include "hd.h"

namespace spora::gpu {

SPORA_HD inline double rn_add(double a, double b) { return spora::exact_math::add(a, b); }
SPORA_HD inline double rn_sub(double a, double b) { return spora::exact_math::sub(a, b); }
SPORA_HD inline double rn_mul(double a, double b) { return spora::exact_math::mul(a, b); }
SPORA_HD inline float rn_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a * b;
#endif
}

}  // namespace spora::gpu
