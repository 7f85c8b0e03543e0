// 16-byte (and narrower) vector loads and stores of the bandwidth-bound
// kernels (elementwise, softmax): W consecutive elements moved as one
// access of W * sizeof(T) bytes. Device code only; the caller guarantees
// the alignment (checked at launch).
#pragma once
#include <cstdint>
#include <cstring>

#include "hd.h"

namespace spora::gpu {

#if defined(__CUDACC__) || defined(__HIPCC__)
template <int B>
struct RawOf;
template <>
struct RawOf<1> {
  using type = uint8_t;
};
template <>
struct RawOf<2> {
  using type = uint16_t;
};
template <>
struct RawOf<4> {
  using type = uint32_t;
};
template <>
struct RawOf<8> {
  using type = uint2;
};
template <>
struct RawOf<16> {
  using type = uint4;
};

// W consecutive elements from p + i (aligned to W elements) in one access.
template <int W, class T, class I>
__device__ inline void load_vec(const T* p, I i, T* v) {
  using R = typename RawOf<W * sizeof(T)>::type;
  const R r = *reinterpret_cast<const R*>(p + i);
  memcpy(v, &r, sizeof(R));
}
template <int W, class T, class I>
__device__ inline void store_vec(T* p, I i, const T* v) {
  using R = typename RawOf<W * sizeof(T)>::type;
  R r;
  memcpy(&r, v, sizeof(R));
  *reinterpret_cast<R*>(p + i) = r;
}
#endif

}  // namespace spora::gpu
