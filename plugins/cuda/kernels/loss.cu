// cross_entropy and nll_loss: per-sample threads (reduction "none"), or one
// block folding every sample's loss and count (mean, sum), with the
// arithmetic of math/loss_math.h.
#include <string>

#include "gpu_device.h"
#include "math/loss_math.h"

namespace spora::gpu {
namespace {

template <class T, class I>
__global__ void ce_none_kernel(CeIndex ix, const T* x, const I* target, T* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < ix.n * ix.s;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    bool counted = false;
    y[i] = elem<T>::store(ce_sample<T, I>(ix, x, target, i, &counted));
  }
}

template <class T, class I>
__global__ void ce_reduce_kernel(CeIndex ix, const T* x, const I* target, T* y) {
  __shared__ double loss[kCeThreads];
  __shared__ double count[kCeThreads];
  const int t = static_cast<int>(threadIdx.x);
  ce_thread<T, I>(ix, x, target, t, &loss[t], &count[t]);
  __syncthreads();
  for (int h = kCeThreads / 2; h > 0; h >>= 1) {
    if (t < h) {
      loss[t] += loss[t + h];
      count[t] += count[t + h];
    }
    __syncthreads();
  }
  if (t == 0) y[0] = elem<T>::store(ce_finish(ix, loss[0], count[0]));
}

struct CeState {
  CeIndex ix;
  int32_t dtype;
  int32_t target_dtype;
};

template <class T, class I>
cudaError_t launch_t(const CeState& s, const void* x, const void* target, void* y, cudaStream_t stream) {
  if (s.ix.reduction == CeReduction::kNone) {
    if (s.ix.n * s.ix.s == 0) return cudaSuccess;
    ce_none_kernel<T, I><<<grid_for(s.ix.n * s.ix.s), kBlock, 0, stream>>>(s.ix, static_cast<const T*>(x),
                                                                           static_cast<const I*>(target), static_cast<T*>(y));
  } else {
    ce_reduce_kernel<T, I><<<1, kCeThreads, 0, stream>>>(s.ix, static_cast<const T*>(x), static_cast<const I*>(target),
                                                         static_cast<T*>(y));
  }
  return launched();
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const CeState& s = plan.get<CeState>();
  cudaError_t e = cudaErrorInvalidValue;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      if (s.target_dtype == SPORA_DTYPE_I32) e = launch_t<T, int32_t>(s, in[0], in[1], out[0], stream);
      else e = launch_t<T, int64_t>(s, in[0], in[1], out[0], stream);
    }
  });
  return e;
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  auto s = std::make_shared<CeState>();
  s->ix.from_logits = p.op == "cross_entropy";
  const std::string r = p.attrs.get_string("reduction", "mean");
  s->ix.reduction = r == "sum" ? CeReduction::kSum : r == "none" ? CeReduction::kNone : CeReduction::kMean;
  s->ix.smoothing = p.attrs.get_float("label_smoothing", 0);
  s->ix.ignore = p.attrs.get_int("ignore_index", -100);
  s->ix.n = p.in[0].shape.dims[0];
  s->ix.c = p.in[0].shape.dims[1];
  s->ix.s = p.in[0].shape.dims[2];
  if (p.in[1].shape.numel() == 0) s->ix.n = s->ix.s = 0;
  s->dtype = p.in[0].dtype;
  s->target_dtype = p.in[1].dtype;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_loss_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"cross_entropy", plan});
  out.push_back({"nll_loss", plan});
}

}  // namespace spora::gpu
