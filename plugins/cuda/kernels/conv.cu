// The plugin's own 2-D convolutions (ROCm always; CUDA without cuDNN or with
// SPORA_GPU_OWN_DNN=1): the parallel loops around math/conv_math.h. Forward:
// one thread per output position and block of output channels; input
// gradient: one thread per dx element, grid-stride; weight gradient: one
// block per weight element with a shared-memory tree.
#include <string>

#include "gpu_device.h"
#include "math/conv_math.h"

namespace spora::gpu {
namespace {

template <class T>
__global__ void conv_fwd_kernel(ConvIndex ix, const T* x, const T* w, const T* b, const T* residual, T* y,
                                int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    conv_fwd_thread<T>(ix, x, w, b, residual, y, e);
}

template <class T>
__global__ void conv_data_kernel(ConvIndex ix, const T* dy, const T* w, T* dx, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dx[e] = conv_data_elem<T>(ix, dy, w, e);
}

template <class T>
__global__ void conv_weight_kernel(ConvIndex ix, const T* x, const T* dy, T* dw, int64_t total) {
  __shared__ double acc[kConvThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t we = blockIdx.x; we < total; we += gridDim.x) {
    const ConvWeightTap tp = conv_weight_tap(ix, we);
    acc[t] = conv_weight_partial<T>(ix, x, dy, tp, t);
    __syncthreads();
    for (int s = kConvThreads / 2; s > 0; s >>= 1) {
      conv_tree_level(acc, t, s);
      __syncthreads();
    }
    if (t == 0) dw[we] = elem<T>::store(acc[0]);
    __syncthreads();  // acc[0] is read before the next element overwrites it
  }
}

struct ConvState {
  ConvIndex ix;
  int32_t dtype;
};

template <class T>
void launch_t(const ConvIndex& ix, const void* const* in, void* const* out, cudaStream_t stream) {
  const int64_t total = conv_work(ix);
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* y = static_cast<T*>(out[0]);
  switch (ix.kind) {
    case ConvKind::kForward:
      conv_fwd_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(
          ix, a, b, ix.has_bias ? static_cast<const T*>(in[2]) : nullptr,
          ix.has_ep && ix.ep.has_add ? static_cast<const T*>(in[3]) : nullptr, y, total);
      break;
    case ConvKind::kData:
      conv_data_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(ix, a, b, y, total);
      break;
    case ConvKind::kWeight: {
      const unsigned grid = static_cast<unsigned>(total < 65535 * 8 ? total : 65535 * 8);
      conv_weight_kernel<T><<<grid, kConvThreads, 0, stream>>>(ix, a, b, y, total);
      break;
    }
  }
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const ConvState& s = plan.get<ConvState>();
  if (conv_work(s.ix) == 0) return cudaSuccess;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      launch_t<T>(s.ix, in, out, stream);
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

}  // namespace

spora_plugin_error_t* plan_own_conv(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return spora::plugin::unsupported(p, "the own convolution kernels take float dtypes only");
  auto s = std::make_shared<ConvState>();
  std::string why;
  if (!conv_index_of(p, &s->ix, &why)) return spora::plugin::unsupported(p, why);
  s->dtype = dt;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace spora::gpu
