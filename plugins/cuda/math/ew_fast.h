// The elementwise kernels' fast paths: 32-bit index math for outputs of
// fewer than 2^31 elements, divisions by the (fixed) broadcast dims done
// as a multiply-high and a shift, and the 16-byte vectors the kernels load
// and store. tests/gpu checks the offsets against ew_offsets (and so
// numpy's broadcasting) and the divisions against '/'.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "ew_math.h"

namespace spora::gpu {

// n / d for a fixed 1 <= d < 2^31 and any n < 2^31: q = (mulhi(n, mul) + n)
// >> shift, with shift = ceil(log2 d) and mul = floor(2^32 (2^shift - d) / d)
// + 1 (Granlund and Montgomery's round-up method; hi + n stays below 2^32).
struct FastDiv {
  uint32_t d = 1, mul = 1, shift = 0;
};

inline FastDiv fast_div_of(uint32_t d) {
  FastDiv f;
  f.d = d;
  f.shift = 0;
  while ((uint64_t{1} << f.shift) < d) ++f.shift;
  f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - d)) / d + 1);
  return f;
}

SPORA_HD inline uint32_t fast_div(const FastDiv& f, uint32_t n) {
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * f.mul) >> 32);
  return (hi + n) >> f.shift;
}

// The broadcast index of EwIndex in 32 bits, dims innermost first (so an
// unrolled loop indexes it with constants).
struct EwFast {
  int32_t rank = 1;
  FastDiv div[kEwMaxRank];                     // div[e]: dim rank-1-e
  uint32_t strides[kEwMaxIn][kEwMaxRank] = {};  // strides[k][e]: input k over dim rank-1-e
};

// Whether ix fits 32-bit index math: fewer than 2^31 output elements (the
// inputs, broadcast into it, are no larger).
inline bool ew_fast_fits(const EwIndex& ix, int64_t n) {
  if (n >= (int64_t{1} << 31)) return false;
  for (int d = 0; d < ix.rank; ++d)
    for (int k = 0; k < ix.num_in; ++k)
      if (ix.strides[k][d] < 0 || ix.strides[k][d] >= (int64_t{1} << 31)) return false;
  return true;
}

inline EwFast ew_fast_of(const EwIndex& ix) {
  EwFast f;
  f.rank = ix.rank;
  for (int e = 0; e < ix.rank; ++e) {
    const int d = ix.rank - 1 - e;
    f.div[e] = fast_div_of(static_cast<uint32_t>(ix.dims[d] > 0 ? ix.dims[d] : 1));
    for (int k = 0; k < ix.num_in; ++k) f.strides[k][e] = static_cast<uint32_t>(ix.strides[k][d]);
  }
  return f;
}

// The offsets of output element i in the first N inputs.
template <int N>
SPORA_HD inline void ew_fast_offsets(const EwFast& f, uint32_t i, uint32_t* off) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#pragma unroll
#endif
  for (int k = 0; k < N; ++k) off[k] = 0;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#pragma unroll
#endif
  for (int e = 0; e < kEwMaxRank; ++e) {
    if (e >= f.rank) break;
    uint32_t c = i;
    if (e + 1 < f.rank) {  // the outermost dim's coordinate is what is left
      const uint32_t q = fast_div(f.div[e], i);
      c = i - q * f.div[e].d;
      i = q;
    }
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#pragma unroll
#endif
    for (int k = 0; k < N; ++k) off[k] += c * f.strides[k][e];
  }
}

// Elements per 16-byte vector of the widest of the types involved.
template <class... T>
constexpr int ew_vec_width() {
  size_t w = 1;
  for (size_t s : {sizeof(T)...}) w = s > w ? s : w;
  return static_cast<int>(16 / w);
}

// Whether the vector kernels can take ix: every input's innermost stride
// is 1 (a vector of it is contiguous) or 0 (one value broadcast over the
// vector), and with more than one dim the innermost is a multiple of `vec`
// (a vector never crosses a row; rank 1 leaves a scalar tail). Pointer
// alignment is checked at launch.
inline bool ew_vec_fits(const EwIndex& ix, int vec) {
  for (int k = 0; k < ix.num_in; ++k) {
    const int64_t s = ix.strides[k][ix.rank - 1];
    if (s != 0 && s != 1) return false;
    // Outer strides of a contiguous input are multiples of its row: a
    // vector at a multiple of `vec` stays aligned.
    for (int d = 0; d + 1 < ix.rank; ++d)
      if (s == 1 && ix.strides[k][d] % vec != 0) return false;
  }
  return ix.rank == 1 || ix.dims[ix.rank - 1] % vec == 0;
}

}  // namespace spora::gpu
