// Element types for kernels: the storage types behind spora_dtype_t, 16-bit
// floats with exact conversions, and a visitor that dispatches on dtype.
#pragma once
#include <spora/plugin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace spora::plugin {

// IEEE binary16. Arithmetic happens in float (see compute_t).
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) : bits(from_float(v)) {}
  explicit operator float() const { return to_float(bits); }

  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
      if (man == 0) {
        bits = sign;
      } else {  // subnormal: normalise
        int e = -1;
        do {
          ++e;
          man <<= 1;
        } while ((man & 0x400u) == 0);
        bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
      }
    } else if (exp == 31) {
      bits = sign | 0x7f800000u | man << 13;
    } else {
      bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / inf
    if (ax >= 0x477ff000u) return sign | 0x7c00u;                                  // overflow
    if (ax < 0x38800000u) {                                                        // subnormal or zero
      if (ax < 0x33000000u) return sign;
      const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126 - e;  // 14..24
      uint32_t r = m >> shift;
      const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
      if (rem > half || (rem == half && (r & 1))) ++r;
      return sign | static_cast<uint16_t>(r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
};

// bfloat16: the top half of a float, rounded to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) {
    uint32_t x;
    std::memcpy(&x, &v, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((x >> 16) | 0x40u);  // keep NaN a NaN
    } else {
      x += 0x7fffu + ((x >> 16) & 1u);
      bits = static_cast<uint16_t>(x >> 16);
    }
  }
  explicit operator float() const {
    const uint32_t x = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

template <class T>
constexpr bool is_half_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// The type arithmetic on T is done in: float for 16-bit floats, else T.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

template <class T>
inline compute_t<T> load(T v) {
  return static_cast<compute_t<T>>(v);
}
template <class T, class V>
inline T store(V v) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != V(0);
  else return static_cast<T>(v);
}

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);

// Calls f(T{}) with T the storage type of `dtype`; returns false for an
// unknown dtype.
template <class F>
bool visit_dtype(int32_t dtype, F&& f) {
  switch (dtype) {
    case SPORA_DTYPE_F32: f(float{}); return true;
    case SPORA_DTYPE_F64: f(double{}); return true;
    case SPORA_DTYPE_F16: f(f16{}); return true;
    case SPORA_DTYPE_BF16: f(bf16{}); return true;
    case SPORA_DTYPE_I32: f(int32_t{}); return true;
    case SPORA_DTYPE_I64: f(int64_t{}); return true;
    case SPORA_DTYPE_U8: f(uint8_t{}); return true;
    case SPORA_DTYPE_BOOL: f(bool{}); return true;
    default: return false;
  }
}

}  // namespace spora::plugin
