// The plugin's own 2-D pooling (ROCm always; CUDA without cuDNN or with
// SPORA_GPU_OWN_DNN=1): grid-stride loops around math/pool_math.h, one
// thread per output element; max_pool2d_grad runs two kernels (window
// argmaxes into the workspace, then the per-input gather).
#include <string>

#include "gpu_device.h"
#include "math/pool_math.h"

namespace spora::gpu {
namespace {

template <class T>
__global__ void pool_fwd_kernel(PoolIndex ix, const T* x, T* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    switch (ix.kind) {
      case PoolKind::kMax: y[e] = pool_max_elem<T>(ix, x, e); break;
      case PoolKind::kAvg: y[e] = pool_avg_elem<T>(ix, x, e); break;
      default: y[e] = pool_adaptive_elem<T>(ix, x, e); break;
    }
  }
}

template <class T>
__global__ void pool_argmax_kernel(PoolIndex ix, const T* x, int64_t* arg, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    arg[e] = pool_argmax_elem<T>(ix, x, e);
}

template <class T>
__global__ void pool_grad_kernel(PoolIndex ix, const int64_t* arg, const T* dy, T* dx, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    switch (ix.kind) {
      case PoolKind::kMaxGrad: dx[e] = pool_max_grad_elem<T>(ix, arg, dy, e); break;
      case PoolKind::kAvgGrad: dx[e] = pool_avg_grad_elem<T>(ix, dy, e); break;
      default: dx[e] = pool_adaptive_grad_elem<T>(ix, dy, e); break;
    }
  }
}

struct PoolState {
  PoolIndex ix;
  int32_t dtype;
};

template <class T>
void launch_t(const PoolIndex& ix, const void* const* in, void* const* out, void* workspace, cudaStream_t stream) {
  const int64_t total = pool_out_elems(ix);
  T* y = static_cast<T*>(out[0]);
  switch (ix.kind) {
    case PoolKind::kMax:
    case PoolKind::kAvg:
    case PoolKind::kAdaptive:
      pool_fwd_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(ix, static_cast<const T*>(in[0]), y, total);
      return;
    case PoolKind::kMaxGrad: {
      const int64_t windows = ix.planes * ix.oh * ix.ow;
      int64_t* arg = static_cast<int64_t*>(workspace);
      if (windows > 0)
        pool_argmax_kernel<T><<<grid_for(windows), kBlock, 0, stream>>>(ix, static_cast<const T*>(in[0]), arg, windows);
      pool_grad_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(ix, arg, static_cast<const T*>(in[1]), y, total);
      return;
    }
    case PoolKind::kAvgGrad:
    case PoolKind::kAdaptiveGrad:
      pool_grad_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(ix, nullptr, static_cast<const T*>(in[0]), y, total);
      return;
  }
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                   cudaStream_t stream) {
  const PoolState& s = plan.get<PoolState>();
  if (pool_out_elems(s.ix) == 0) return cudaSuccess;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      launch_t<T>(s.ix, in, out, workspace, stream);
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

}  // namespace

spora_plugin_error_t* plan_own_pool(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return spora::plugin::unsupported(p, "the own pooling kernels take float dtypes only");
  auto s = std::make_shared<PoolState>();
  std::string why;
  if (!pool_index_of(p, &s->ix, &why)) return spora::plugin::unsupported(p, why);
  s->dtype = dt;
  if (s->ix.kind == PoolKind::kMaxGrad)
    gp.workspace = static_cast<size_t>(s->ix.planes * s->ix.oh * s->ix.ow) * sizeof(int64_t);
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace spora::gpu
