// Element types and conversions shared by the GPU kernels (compiled by nvcc
// or hipcc) and by their CPU unit test (compiled by g++).
//
// Everything in plugins/cuda/math/ is header-only arithmetic marked
// SPORA_HD: `__host__ __device__` under a GPU compiler, nothing under g++.
// The .cu kernels only add the parallel loop around these functions, so the
// test in tests/gpu runs the very arithmetic (conversions, broadcasting
// index math, reduction order, stable softmax, GEMM tiles) the GPU would,
// against the reference kernels in plugins/common.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SPORA_HD __host__ __device__
#else
#define SPORA_HD
#endif

namespace spora::gpu {

// Storage types. 16-bit floats and bool are stored as bits/bytes; the
// structs give each dtype its own pointer type without any device library
// (cuda_fp16.h / hip_fp16.h differ between the two toolchains).
struct half_t {
  uint16_t bits;
};
struct bhalf_t {
  uint16_t bits;
};
struct bool_t {
  uint8_t v;
};

SPORA_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
SPORA_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 -> float, exact (every half is a float).
SPORA_HD inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float.
    const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
    return bits_float(float_bits(mag) | sign);
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));  // inf, NaN (payload kept)
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// float -> binary16, round to nearest even; overflow gives inf, NaN stays
// a (quiet) NaN.
SPORA_HD inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal half
    if (ax < 0x33000000u) return sign;           // below 2^-25: rounds to 0
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = (ax >> 13) - (112u << 10);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent: correct
  return sign | static_cast<uint16_t>(r);
}

SPORA_HD inline float bhalf_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// float -> bfloat16, round to nearest even; NaN stays a quiet NaN.
SPORA_HD inline uint16_t float_to_bhalf(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// elem<T>: the compute type C of storage type T, and load/store.
template <class T>
struct elem {
  using C = T;
  SPORA_HD static C load(T v) { return v; }
  template <class V>
  SPORA_HD static T store(V v) {
    return static_cast<T>(v);
  }
};
template <>
struct elem<half_t> {
  using C = float;
  SPORA_HD static float load(half_t v) { return half_to_float(v.bits); }
  template <class V>
  SPORA_HD static half_t store(V v) {
    return half_t{float_to_half(static_cast<float>(v))};
  }
};
template <>
struct elem<bhalf_t> {
  using C = float;
  SPORA_HD static float load(bhalf_t v) { return bhalf_to_float(v.bits); }
  template <class V>
  SPORA_HD static bhalf_t store(V v) {
    return bhalf_t{float_to_bhalf(static_cast<float>(v))};
  }
};
template <>
struct elem<bool_t> {
  using C = bool;
  SPORA_HD static bool load(bool_t v) { return v.v != 0; }
  template <class V>
  SPORA_HD static bool_t store(V v) {
    return bool_t{static_cast<uint8_t>(v != V(0))};
  }
};

template <class T>
using compute_of = typename elem<T>::C;

template <class C>
constexpr bool is_float_c = std::is_floating_point<C>::value;
template <class C>
constexpr bool is_bool_c = std::is_same<C, bool>::value;
template <class C>
constexpr bool is_int_c = std::is_integral<C>::value && !is_bool_c<C>;
template <class C>
constexpr bool is_signed_int_c = is_int_c<C> && std::is_signed<C>::value;

// Wrapping integer arithmetic, as numpy (signed overflow is UB in C++).
template <class C>
SPORA_HD inline C wrap_add(C a, C b) {
  if constexpr (is_signed_int_c<C>) {
    using U = typename std::make_unsigned<C>::type;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<C>(a + b);
  }
}
template <class C>
SPORA_HD inline C wrap_sub(C a, C b) {
  if constexpr (is_signed_int_c<C>) {
    using U = typename std::make_unsigned<C>::type;
    return static_cast<C>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<C>(a - b);
  }
}
template <class C>
SPORA_HD inline C wrap_mul(C a, C b) {
  if constexpr (is_signed_int_c<C>) {
    using U = typename std::make_unsigned<C>::type;
    return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<C>(a * b);
  }
}

template <class C>
SPORA_HD inline bool is_nan(C v) {
  if constexpr (is_float_c<C>) return v != v;
  else return false;
}

}  // namespace spora::gpu

namespace spora::gpu {

// Calls f(T{}) with T the storage type of a spora_dtype_t value (1..8, as
// in spora/plugin.h); returns false for any other value. Host-side dispatch.
template <class F>
inline bool visit_storage(int32_t dtype, F&& f) {
  switch (dtype) {
    case 1: f(float{}); return true;
    case 2: f(double{}); return true;
    case 3: f(half_t{}); return true;
    case 4: f(bhalf_t{}); return true;
    case 5: f(int32_t{}); return true;
    case 6: f(int64_t{}); return true;
    case 7: f(uint8_t{}); return true;
    case 8: f(bool_t{}); return true;
    default: return false;
  }
}

}  // namespace spora::gpu
