// Overloads of the C math functions for float and double, callable from
// host and device code alike: the single-precision C names (expf, logf...)
// exist in glibc, in CUDA's device library and in HIP's, while `std::exp`
// is not guaranteed in device code by every toolchain.
#pragma once
#include <math.h>

#include "hd.h"

namespace spora::gpu::fm {

#define SPORA_FM1(name)                                             \
  SPORA_HD inline float name(float v) { return ::name##f(v); }     \
  SPORA_HD inline double name(double v) { return ::name(v); }
SPORA_FM1(exp)
SPORA_FM1(log)
SPORA_FM1(log1p)
SPORA_FM1(sqrt)
SPORA_FM1(sin)
SPORA_FM1(cos)
SPORA_FM1(tanh)
SPORA_FM1(erf)
SPORA_FM1(erfc)
SPORA_FM1(fabs)
SPORA_FM1(floor)
SPORA_FM1(ceil)
SPORA_FM1(rint)  // round half to even in the default rounding mode
#undef SPORA_FM1

SPORA_HD inline float pow(float a, float b) { return ::powf(a, b); }
SPORA_HD inline double pow(double a, double b) { return ::pow(a, b); }
SPORA_HD inline float copysign(float a, float b) { return ::copysignf(a, b); }
SPORA_HD inline double copysign(double a, double b) { return ::copysign(a, b); }

}  // namespace spora::gpu::fm
