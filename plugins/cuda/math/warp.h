// The warp of the GPU plugins' kernels: its width (32 lanes on NVIDIA, 64
// on the AMD GPUs the ROCm plugin targets) and, in device code, a
// shuffle-down that works on either toolchain. The reduction and softmax
// trees built from it are halving trees over the lanes (lane t takes lane
// t + s for s = width/2, ..., 1), which the host emulations run in the same
// order with the same width.
#pragma once
#include <cstdint>
#include <cstring>

#include "hd.h"

// Full unrolling of a loop whose trip count is a constant once inlined
// (register-held arrays must not be indexed at run time); nothing on the
// host compiler.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define SPORA_UNROLL _Pragma("unroll")
#define SPORA_UNROLL4 _Pragma("unroll 4")
#else
#define SPORA_UNROLL
#define SPORA_UNROLL4
#endif

namespace spora::gpu {

#if defined(SPORA_GPU_HIP)
constexpr int kWarp = 64;
#else
constexpr int kWarp = 32;
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// Lane t gets lane t + s's v (its own where t + s is past the warp); every
// lane of the warp takes part. Any trivially copyable value, 4 bytes at a
// time.
template <class V>
__device__ inline V shfl_down(const V& v, int s) {
  constexpr int kWords = (sizeof(V) + 3) / 4;
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(V));
#pragma unroll
  for (int k = 0; k < kWords; ++k) {
#if defined(SPORA_GPU_HIP)
    w[k] = static_cast<uint32_t>(__shfl_down(static_cast<int>(w[k]), s, kWarp));
#else
    w[k] = __shfl_down_sync(0xffffffffu, w[k], s);
#endif
  }
  V r;
  memcpy(&r, w, sizeof(V));
  return r;
}

// Lane 0's v, in every lane.
__device__ inline double shfl_first(double v) {
#if defined(SPORA_GPU_HIP)
  return __shfl(v, 0, kWarp);
#else
  return __shfl_sync(0xffffffffu, v, 0);
#endif
}
#endif

}  // namespace spora::gpu
