// fused_elementwise on the cpu: the shared plan (kernels/fused.h: blocks of
// values in small stack buffers, inputs read once, the output written once)
// with three changes, all decided at plan time:
// - instructions run AVX-512 or AVX2 loops where the cpu has them (the
//   reference loops are baseline SSE2: in a block that stays in L1 the
//   arithmetic, not memory, is the cost);
// - exp, sigmoid, silu, tanh and tanh-gelu on f32 use vectorisable
//   polynomial versions (Cephes' expf/tanhf, ~1-2 ulp): libm's scalar calls
//   are what the unfused path avoids by calling oneDNN, and a fused block
//   cannot call oneDNN per 512 elements;
// - 16-bit floats convert with F16C, and large outputs are split across
//   threads (parallel_for, which also carries the launch's FTZ mode).
// Simple ops (add, mul, max, compare, ...) give the reference's bits
// exactly; the transcendental ones differ from libm by an ulp or two.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "kernels/fused.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
namespace ew = plugin::ew;
namespace fz = plugin::fused;

#define SPORA_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma,prefer-vector-width=512")))
#define SPORA_AVX2 __attribute__((target("avx2,fma")))
#define SPORA_INLINE inline __attribute__((always_inline))

// ---- 16-bit float blocks ----------------------------------------------------

__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = ew::half_to_float(x[i]);
}
__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = ew::float_to_half(x[i]);
}
SPORA_AVX2 void bf16_to_f32_avx2(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::bf16_to_float(x[i]);
}
SPORA_AVX2 void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_bf16(x[i]);
}
// The same integer loops, twice as wide (not VCVTNEPS2BF16: it flushes
// denormals, which the reference conversion keeps).
SPORA_AVX512 void bf16_to_f32_avx512(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::bf16_to_float(x[i]);
}
SPORA_AVX512 void f32_to_bf16_avx512(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_bf16(x[i]);
}

// ---- vectorisable f32 math --------------------------------------------------

SPORA_INLINE float as_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

// e^x, Cephes expf: x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
// e^r, 2^n applied in two halves so that results between 2^127 and FLT_MAX
// are right and larger ones overflow to inf (x is clamped to [-104, 89],
// beyond which the result is 0 or inf anyway). NaN stays NaN.
SPORA_INLINE float vexp(float x) {
  x = x > 89.0f ? 89.0f : x;
  x = x < -104.0f ? -104.0f : x;
  const float shift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + shift) - shift;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t e1 = ni >> 1, e2 = ni - e1;
  return p * as_float((e1 + 127) << 23) * as_float((e2 + 127) << 23);
}

SPORA_INLINE float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

// Cephes tanhf: an odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
// above; both computed and selected so the loop has no branch.
SPORA_INLINE float vtanh(float x) {
  const float a = std::fabs(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  const float small = p * s * x + x;
  const float big = std::copysign(1.0f - 2.0f / (vexp(2.0f * a) + 1.0f), x);
  return a < 0.625f ? small : big;
}

// ---- instruction loops ------------------------------------------------------

template <class C> struct Neg { C operator()(C v) const { return -v; } };
template <class C> struct Abs { C operator()(C v) const { return std::fabs(v); } };
template <class C> struct Relu { C operator()(C v) const { return v < C(0) ? C(0) : v; } };
template <class C> struct Square { C operator()(C v) const { return v * v; } };
template <class C> struct Reciprocal { C operator()(C v) const { return C(1) / v; } };
struct Exp { float operator()(float v) const { return vexp(v); } };
struct Sigmoid { float operator()(float v) const { return vsigmoid(v); } };
struct Silu { float operator()(float v) const { return v * vsigmoid(v); } };
struct Tanh { float operator()(float v) const { return vtanh(v); } };
struct GeluTanh {  // as the reference: x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))
  float operator()(float v) const {
    const float k = static_cast<float>(2 * 0.7978845608028654);
    return v * vsigmoid(k * (v + 0.044715f * v * v * v));
  }
};

template <class C> struct Add { C operator()(C a, C b) const { return a + b; } };
template <class C> struct Sub { C operator()(C a, C b) const { return a - b; } };
template <class C> struct Mul { C operator()(C a, C b) const { return a * b; } };
template <class C> struct Div { C operator()(C a, C b) const { return a / b; } };
// NaN propagates as in the reference: a NaN a is kept, a NaN b is taken.
template <class C> struct Maximum { C operator()(C a, C b) const { return (a > b) | (a != a) ? a : b; } };
template <class C> struct Minimum { C operator()(C a, C b) const { return (a < b) | (a != a) ? a : b; } };
template <class C> struct Greater { uint8_t operator()(C a, C b) const { return a > b; } };
template <class C> struct GreaterEqual { uint8_t operator()(C a, C b) const { return a >= b; } };
template <class C> struct Less { uint8_t operator()(C a, C b) const { return a < b; } };
template <class C> struct LessEqual { uint8_t operator()(C a, C b) const { return a <= b; } };

template <class C, class F>
SPORA_INLINE void unary_body(const void* const* in, void* const* out, int64_t begin, int64_t end) {
  const C* __restrict x = static_cast<const C*>(in[0]);
  auto* __restrict y = static_cast<C*>(out[0]);
  const F f{};
  for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
}

// Operands are block buffers (stride 1) or uniform values (stride 0).
template <class C, class F>
SPORA_INLINE void binary_body(const ew::State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  const C* __restrict x = static_cast<const C*>(in[0]);
  const C* __restrict y = static_cast<const C*>(in[1]);
  using R = decltype(F{}(C(0), C(0)));
  auto* __restrict z = static_cast<R*>(out[0]);
  const F f{};
  const bool sx = s.bc.inner(0) != 0, sy = s.bc.inner(1) != 0;
  if (sx && sy) {
    for (int64_t i = begin; i < end; ++i) z[i] = f(x[i], y[i]);
  } else if (sx) {
    const C b = y[0];
    for (int64_t i = begin; i < end; ++i) z[i] = f(x[i], b);
  } else if (sy) {
    const C a = x[0];
    for (int64_t i = begin; i < end; ++i) z[i] = f(a, y[i]);
  } else {
    const R v = f(x[0], y[0]);
    for (int64_t i = begin; i < end; ++i) z[i] = v;
  }
}

// sqrt and 1/sqrt with intrinsics: a std::sqrt loop stays scalar (it may
// have to set errno), and the square root instructions are correctly
// rounded like libm's.
#define SPORA_SQRT_LOOPS(NAME, ATTR, T, W, LOAD, STORE, SQRT, DIV, SET1, SCALAR)          \
  ATTR void NAME##_sqrt(const ew::State&, const void* const* in, void* const* out, int64_t b, int64_t e) { \
    const T* x = static_cast<const T*>(in[0]);                                            \
    T* y = static_cast<T*>(out[0]);                                                       \
    int64_t i = b;                                                                        \
    for (; i + W <= e; i += W) STORE(y + i, SQRT(LOAD(x + i)));                           \
    for (; i < e; ++i) y[i] = SCALAR(x[i]);                                               \
  }                                                                                       \
  ATTR void NAME##_rsqrt(const ew::State&, const void* const* in, void* const* out, int64_t b, int64_t e) { \
    const T* x = static_cast<const T*>(in[0]);                                            \
    T* y = static_cast<T*>(out[0]);                                                       \
    int64_t i = b;                                                                        \
    for (; i + W <= e; i += W) STORE(y + i, DIV(SET1(T(1)), SQRT(LOAD(x + i))));          \
    for (; i < e; ++i) y[i] = T(1) / SCALAR(x[i]);                                        \
  }

inline float sqrt1(float v) { return _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(v))); }
inline double sqrt1(double v) { return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(v))); }

SPORA_SQRT_LOOPS(f32_avx512, SPORA_AVX512, float, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_sqrt_ps, _mm512_div_ps,
                 _mm512_set1_ps, sqrt1)
SPORA_SQRT_LOOPS(f64_avx512, SPORA_AVX512, double, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_sqrt_pd, _mm512_div_pd,
                 _mm512_set1_pd, sqrt1)
SPORA_SQRT_LOOPS(f32_avx2, SPORA_AVX2, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_sqrt_ps, _mm256_div_ps,
                 _mm256_set1_ps, sqrt1)
SPORA_SQRT_LOOPS(f64_avx2, SPORA_AVX2, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_sqrt_pd, _mm256_div_pd,
                 _mm256_set1_pd, sqrt1)
#undef SPORA_SQRT_LOOPS

template <class C, class F>
SPORA_AVX512 void unary_avx512(const ew::State&, const void* const* in, void* const* out, int64_t b, int64_t e) {
  unary_body<C, F>(in, out, b, e);
}
template <class C, class F>
SPORA_AVX2 void unary_avx2(const ew::State&, const void* const* in, void* const* out, int64_t b, int64_t e) {
  unary_body<C, F>(in, out, b, e);
}
template <class C, class F>
SPORA_AVX512 void binary_avx512(const ew::State& s, const void* const* in, void* const* out, int64_t b, int64_t e) {
  binary_body<C, F>(s, in, out, b, e);
}
template <class C, class F>
SPORA_AVX2 void binary_avx2(const ew::State& s, const void* const* in, void* const* out, int64_t b, int64_t e) {
  binary_body<C, F>(s, in, out, b, e);
}

// where(c, x, y) on float values, as bits through a mask (like the
// reference's select): cond is a bool block or uniform, x and y blocks or
// uniform.
template <class U>
SPORA_INLINE void select_body(const ew::State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  const uint8_t* __restrict c = static_cast<const uint8_t*>(in[0]);
  const U* __restrict x = static_cast<const U*>(in[1]);
  const U* __restrict y = static_cast<const U*>(in[2]);
  U* __restrict z = static_cast<U*>(out[0]);
  const int pattern = static_cast<int>(s.bc.inner(0) * 4 + s.bc.inner(1) * 2 + s.bc.inner(2));
  auto loop = [&](auto sc, auto sx, auto sy) {
    constexpr int64_t SC = decltype(sc)::value, SX = decltype(sx)::value, SY = decltype(sy)::value;
    for (int64_t j = begin; j < end; ++j) {
      const U m = static_cast<U>(U(0) - static_cast<U>(c[j * SC] != 0));
      z[j] = static_cast<U>((x[j * SX] & m) | (y[j * SY] & static_cast<U>(~m)));
    }
  };
  using Z = std::integral_constant<int64_t, 0>;
  using O = std::integral_constant<int64_t, 1>;
  switch (pattern) {
    case 7: loop(O{}, O{}, O{}); break;
    case 6: loop(O{}, O{}, Z{}); break;
    case 5: loop(O{}, Z{}, O{}); break;
    case 4: loop(O{}, Z{}, Z{}); break;
    case 3: loop(Z{}, O{}, O{}); break;
    case 2: loop(Z{}, O{}, Z{}); break;
    case 1: loop(Z{}, Z{}, O{}); break;
    default: loop(Z{}, Z{}, Z{}); break;
  }
}
template <class U>
SPORA_AVX512 void select_avx512(const ew::State& s, const void* const* in, void* const* out, int64_t b, int64_t e) {
  select_body<U>(s, in, out, b, e);
}
template <class U>
SPORA_AVX2 void select_avx2(const ew::State& s, const void* const* in, void* const* out, int64_t b, int64_t e) {
  select_body<U>(s, in, out, b, e);
}

enum class Isa { kNone, kAvx2, kAvx512 };

Isa detect() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
    return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kNone;
}

template <class C, class F>
ew::RangeFn unary_for(Isa isa) {
  return isa == Isa::kAvx512 ? &unary_avx512<C, F> : &unary_avx2<C, F>;
}
template <class C, class F>
ew::RangeFn binary_for(Isa isa) {
  return isa == Isa::kAvx512 ? &binary_avx512<C, F> : &binary_avx2<C, F>;
}

// The faster loop for an instruction on compute type C, or null (keep the
// reference's). Only ops whose operands are C (not bool).
template <class C>
ew::RangeFn fast(const fz::Instr& ins, Isa isa) {
  constexpr bool f32 = std::is_same_v<C, float>;
  switch (ins.st.info->op) {
    case ew::Op::kNeg: return unary_for<C, Neg<C>>(isa);
    case ew::Op::kAbs: return unary_for<C, Abs<C>>(isa);
    case ew::Op::kRelu: return unary_for<C, Relu<C>>(isa);
    case ew::Op::kSquare: return unary_for<C, Square<C>>(isa);
    case ew::Op::kSqrt:
      if constexpr (f32) return isa == Isa::kAvx512 ? &f32_avx512_sqrt : &f32_avx2_sqrt;
      else return isa == Isa::kAvx512 ? &f64_avx512_sqrt : &f64_avx2_sqrt;
    case ew::Op::kRsqrt:
      if constexpr (f32) return isa == Isa::kAvx512 ? &f32_avx512_rsqrt : &f32_avx2_rsqrt;
      else return isa == Isa::kAvx512 ? &f64_avx512_rsqrt : &f64_avx2_rsqrt;
    case ew::Op::kReciprocal: return unary_for<C, Reciprocal<C>>(isa);
    case ew::Op::kExp: if constexpr (f32) return unary_for<float, Exp>(isa); else return nullptr;
    case ew::Op::kSigmoid: if constexpr (f32) return unary_for<float, Sigmoid>(isa); else return nullptr;
    case ew::Op::kSilu: if constexpr (f32) return unary_for<float, Silu>(isa); else return nullptr;
    case ew::Op::kTanh: if constexpr (f32) return unary_for<float, Tanh>(isa); else return nullptr;
    case ew::Op::kGelu:
      if constexpr (f32) return ins.st.prm.gelu_tanh ? unary_for<float, GeluTanh>(isa) : nullptr;
      else return nullptr;
    case ew::Op::kAdd: return binary_for<C, Add<C>>(isa);
    case ew::Op::kSub: return binary_for<C, Sub<C>>(isa);
    case ew::Op::kMul: return binary_for<C, Mul<C>>(isa);
    case ew::Op::kDiv: return binary_for<C, Div<C>>(isa);
    case ew::Op::kMaximum: return binary_for<C, Maximum<C>>(isa);
    case ew::Op::kMinimum: return binary_for<C, Minimum<C>>(isa);
    case ew::Op::kGreater: return binary_for<C, Greater<C>>(isa);
    case ew::Op::kGreaterEqual: return binary_for<C, GreaterEqual<C>>(isa);
    case ew::Op::kLess: return binary_for<C, Less<C>>(isa);
    case ew::Op::kLessEqual: return binary_for<C, LessEqual<C>>(isa);
    default: return nullptr;
  }
}

struct State {
  fz::Program prog;
  int64_t grain = kParallelGrain;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  void* y = out[0];
  parallel_for(s.prog.numel, s.grain, [&](int64_t begin, int64_t end) { fz::eval_range(s.prog, in, y, begin, end); });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = fz::plan(p)) return e;
  auto s = std::make_shared<State>();
  s->prog = p.get<fz::Program>();
  fz::Program& g = s->prog;
  const Isa isa = detect();
  if (isa != Isa::kNone) {
    for (fz::Instr& ins : g.body) {
      // Operands of bool kind (logical ops, comparisons of bools, where
      // between bools) keep the reference loops.
      if (ins.st.info->op == ew::Op::kWhere) {
        if (g.values[static_cast<size_t>(ins.args[1])].is_bool) continue;
        const bool f64 = g.cdtype == SPORA_DTYPE_F64;
        ins.st.range = isa == Isa::kAvx512 ? (f64 ? &select_avx512<uint64_t> : &select_avx512<uint32_t>)
                                           : (f64 ? &select_avx2<uint64_t> : &select_avx2<uint32_t>);
        continue;
      }
      bool any_bool = false;
      for (int a = 0; a < ins.nargs; ++a) any_bool = any_bool || g.values[static_cast<size_t>(ins.args[a])].is_bool;
      if (any_bool) continue;
      const ew::RangeFn f = g.cdtype == SPORA_DTYPE_F64 ? fast<double>(ins, isa) : fast<float>(ins, isa);
      if (f) ins.st.range = f;
    }
  }
  const bool avx2 = __builtin_cpu_supports("avx2"), f16c = avx2 && __builtin_cpu_supports("f16c");
  if (g.dtype == SPORA_DTYPE_F16 && f16c) {
    g.to_f32 = f16_to_f32_f16c;
    g.from_f32 = f32_to_f16_f16c;
  } else if (g.dtype == SPORA_DTYPE_BF16 && isa == Isa::kAvx512) {
    g.to_f32 = bf16_to_f32_avx512;
    g.from_f32 = f32_to_bf16_avx512;
  } else if (g.dtype == SPORA_DTYPE_BF16 && avx2) {
    g.to_f32 = bf16_to_f32_avx2;
    g.from_f32 = f32_to_bf16_avx2;
  }
  s->grain = std::max<int64_t>(2048, kParallelGrain / std::max(1, g.cost));
  p.state = s;
  p.run = run;
  p.impl = isa == Isa::kAvx512 ? "cpu-avx512" : isa == Isa::kAvx2 ? "cpu-avx2" : "cpu";
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) { t.add({"fused_elementwise", "cpu", plan}); }
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
