// The elementwise kernels around gpu_dnn.cpp's cuDNN calls: the bias the
// convolution adds to, the conv2d_act / conv2d_add_act epilogue (rounding
// as the reference's: conv + bias once, then + residual, then the
// activation, each to T), and batch norm's parameter conversions. CUDA only
// (the ROCm build has no cuDNN path).
#include "gpu_device.h"
#include "gpu_dnn.h"
#include "math/dnn_args.h"
#include "math/gemm_math.h"

namespace spora::gpu::dnn {
namespace {

#define SPORA_DNN_LOOP(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void bias_kernel(T* y, const T* bias, int64_t c, int64_t hw, int64_t count) {
  SPORA_DNN_LOOP(i, count) y[i] = bias[i / hw % c];
}

template <class T>
__global__ void epilogue_kernel(GemmEpilogue ep, T* y, const T* residual, int64_t count) {
  SPORA_DNN_LOOP(i, count) y[i] = gemm_store<T>(&ep, elem<T>::load(y[i]), residual ? residual + i : nullptr);
}

template <class T>
__global__ void to_float_kernel(const T* src, float* dst, int64_t n) {
  SPORA_DNN_LOOP(i, n) dst[i] = static_cast<float>(elem<T>::load(src[i]));
}

template <class T>
__global__ void from_float_kernel(const float* src, T* dst, int64_t n) {
  SPORA_DNN_LOOP(i, n) dst[i] = elem<T>::store(src[i]);
}

template <class T>
__global__ void bn_stats_kernel(const T* rm, const T* rv, double eps, compute_of<T>* mean, compute_of<T>* invstd,
                                int64_t c) {
  using C = compute_of<T>;
  SPORA_DNN_LOOP(i, c) {
    mean[i] = static_cast<C>(static_cast<double>(elem<T>::load(rm[i])));
    invstd[i] = static_cast<C>(1.0 / sqrt(static_cast<double>(elem<T>::load(rv[i])) + eps));
  }
}

template <class T>
__global__ void max_pool_fix_kernel(PoolFix g, const T* x, T* y, int64_t count) {
  SPORA_DNN_LOOP(i, count) {
    const int64_t plane = i / (g.oh * g.ow), k = i % (g.oh * g.ow);
    y[i] = max_pool_fix<T>(g, x + plane * g.h * g.w, k / g.ow, k % g.ow, y[i]);
  }
}

#undef SPORA_DNN_LOOP

// Calls f(T{}) for the four float dtypes; false for any other.
template <class F>
bool visit_float(int32_t dtype, F&& f) {
  switch (dtype) {
    case SPORA_DTYPE_F32: f(float{}); return true;
    case SPORA_DTYPE_F64: f(double{}); return true;
    case SPORA_DTYPE_F16: f(half_t{}); return true;
    case SPORA_DTYPE_BF16: f(bhalf_t{}); return true;
    default: return false;
  }
}

}  // namespace

cudaError_t fill_bias(int32_t dtype, void* y, const void* bias, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t count = n * c * hw;
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        bias_kernel<T><<<grid_for(count), kBlock, 0, s>>>(static_cast<T*>(y), static_cast<const T*>(bias), c, hw,
                                                          count);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

cudaError_t apply_epilogue(int32_t dtype, const GemmEpilogue& ep, void* y, const void* residual, int64_t count,
                           cudaStream_t s) {
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        epilogue_kernel<T><<<grid_for(count), kBlock, 0, s>>>(ep, static_cast<T*>(y), static_cast<const T*>(residual),
                                                              count);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

cudaError_t to_float(int32_t dtype, const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        to_float_kernel<T><<<grid_for(n), kBlock, 0, s>>>(static_cast<const T*>(src), dst, n);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

cudaError_t from_float(int32_t dtype, const float* src, void* dst, int64_t n, cudaStream_t s) {
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        from_float_kernel<T><<<grid_for(n), kBlock, 0, s>>>(src, static_cast<T*>(dst), n);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

cudaError_t bn_inference_stats(int32_t dtype, const void* running_mean, const void* running_var, double eps,
                               void* mean, void* invstd, int64_t c, cudaStream_t s) {
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        using C = compute_of<T>;
        bn_stats_kernel<T><<<grid_for(c), kBlock, 0, s>>>(static_cast<const T*>(running_mean),
                                                          static_cast<const T*>(running_var), eps,
                                                          static_cast<C*>(mean), static_cast<C*>(invstd), c);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

cudaError_t max_pool_fixup(int32_t dtype, const PoolFix& g, const void* x, void* y, int64_t planes,
                           cudaStream_t s) {
  const int64_t count = planes * g.oh * g.ow;
  if (!visit_float(dtype, [&](auto tag) {
        using T = decltype(tag);
        max_pool_fix_kernel<T><<<grid_for(count), kBlock, 0, s>>>(g, static_cast<const T*>(x), static_cast<T*>(y),
                                                                  count);
      }))
    return cudaErrorInvalidValue;
  return launched();
}

}  // namespace spora::gpu::dnn
