// global_norm and clip_by_global_norm: per-tensor blocks of squared sums
// into the workspace, one thread adding them in order (math/norm_math.h),
// then per-tensor scaling for the clip.
//
// sgd_update and adam_update: one thread computes the coefficients from the
// scalar inputs (device memory) into the workspace, then one grid-stride
// kernel per tensor of the group applies math/optim_math.h's element
// update. The group's operands are validated by the reference describe().
#include <string>

#include "gpu_device.h"
#include "kernels/optim.h"  // plugins/common: describe(), the group layout
#include "math/norm_math.h"
#include "math/optim_math.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin::optim;

__global__ void coeff_kernel(OptParams u, const void* s0, const void* s1, const void* s2, OptCoeffs* out) {
  const void* s[3] = {s0, s1, s2};
  *out = opt_coeffs(u, s);
}

template <class T>
__global__ void sgd_kernel(OptParams u, const OptCoeffs* c, const T* p, const T* g, const compute_of<T>* b, T* p_out,
                           compute_of<T>* b_out, int64_t n) {
  const OptCoeffs k = *c;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    sgd_elem<T>(u, k, p, g, b, p_out, b_out, j);
}

template <class T>
__global__ void adam_kernel(OptParams u, const OptCoeffs* c, const T* p, const T* g, const compute_of<T>* m,
                            const compute_of<T>* v, const compute_of<T>* vmax, T* p_out, compute_of<T>* m_out,
                            compute_of<T>* v_out, compute_of<T>* vmax_out, int64_t n) {
  const OptCoeffs k = *c;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    adam_elem<T>(u, k, p, g, m, v, vmax, p_out, m_out, v_out, vmax_out, j);
}

struct OptState {
  OptParams u;
  int32_t dtype;
  int32_t n;        // tensors per role
  int32_t scalars;  // scalar inputs before the lists
  std::vector<int64_t> numel;
};

template <class T>
cudaError_t launch_t(const OptState& s, const void* const* in, void* const* out, OptCoeffs* c, cudaStream_t stream) {
  using S = compute_of<T>;
  auto input = [&](int role, int k) { return in[s.scalars + role * s.n + k]; };
  auto output = [&](int slot, int k) { return out[slot * s.n + k]; };
  for (int k = 0; k < s.n; ++k) {
    const int64_t n = s.numel[static_cast<size_t>(k)];
    if (n == 0) continue;
    const unsigned grid = grid_for(n);
    const T* p = static_cast<const T*>(input(0, k));
    const T* g = static_cast<const T*>(input(1, k));
    T* p_out = static_cast<T*>(output(0, k));
    if (!s.u.adam) {
      const S* b = s.u.momentum_bufs ? static_cast<const S*>(input(2, k)) : nullptr;
      S* b_out = s.u.momentum_bufs ? static_cast<S*>(output(1, k)) : nullptr;
      sgd_kernel<T><<<grid, kBlock, 0, stream>>>(s.u, c, p, g, b, p_out, b_out, n);
    } else {
      const S* vmax = s.u.amsgrad ? static_cast<const S*>(input(4, k)) : nullptr;
      S* vmax_out = s.u.amsgrad ? static_cast<S*>(output(3, k)) : nullptr;
      adam_kernel<T><<<grid, kBlock, 0, stream>>>(s.u, c, p, g, static_cast<const S*>(input(2, k)),
                                                  static_cast<const S*>(input(3, k)), vmax, p_out,
                                                  static_cast<S*>(output(1, k)), static_cast<S*>(output(2, k)), vmax_out, n);
    }
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void* ws, cudaStream_t stream) {
  const OptState& s = plan.get<OptState>();
  auto* c = static_cast<OptCoeffs*>(ws);
  coeff_kernel<<<1, 1, 0, stream>>>(s.u, in[0], in[1], s.scalars > 2 ? in[2] : in[1], c);
  if (cudaError_t e = launched(); e != cudaSuccess) return e;
  switch (s.dtype) {
    case SPORA_DTYPE_F32: return launch_t<float>(s, in, out, c, stream);
    case SPORA_DTYPE_F64: return launch_t<double>(s, in, out, c, stream);
    case SPORA_DTYPE_F16: return launch_t<half_t>(s, in, out, c, stream);
    case SPORA_DTYPE_BF16: return launch_t<bhalf_t>(s, in, out, c, stream);
    default: return cudaErrorInvalidValue;  // refused at plan time
  }
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;
  ref::Plan r;
  if (auto* e = ref::describe(p, &r)) return e;
  if (r.kind != ref::Kind::kSgd && r.kind != ref::Kind::kAdam) return spora::plugin::unsupported(p, "not an update");
  auto s = std::make_shared<OptState>();
  s->u.adam = r.kind == ref::Kind::kAdam;
  s->u.momentum_bufs = r.momentum_bufs;
  s->u.nesterov = r.nesterov;
  s->u.decoupled = r.decoupled;
  s->u.amsgrad = r.amsgrad;
  s->u.momentum = r.momentum;
  s->u.dampening = r.dampening;
  s->u.weight_decay = r.weight_decay;
  s->u.beta1 = r.beta1;
  s->u.beta2 = r.beta2;
  s->u.eps = r.eps;
  for (int i = 0; i < 3; ++i) s->u.scalar_dtype[i] = r.scalar_dtype[i];
  s->dtype = r.dtype;
  s->n = r.n;
  s->scalars = r.scalars;
  for (int k = 0; k < r.n; ++k) s->numel.push_back(r.offset[static_cast<size_t>(k) + 1] - r.offset[static_cast<size_t>(k)]);
  gp.state = s;
  gp.launch = launch;
  gp.workspace = sizeof(OptCoeffs);
  return nullptr;
}

template <class T>
__global__ void sumsq_kernel(const T* x, int64_t n, int64_t blocks, double* partials) {
  __shared__ double acc[kNormThreads];
  const int t = static_cast<int>(threadIdx.x);
  acc[t] = norm_thread<T>(x, n, blockIdx.x, blocks, t);
  __syncthreads();
  for (int s = kNormThreads / 2; s > 0; s >>= 1) {
    if (t < s) acc[t] += acc[t + s];
    __syncthreads();
  }
  if (t == 0) partials[blockIdx.x] = acc[0];
}

// partials[count] receives the clip factor; `norm_out` is f32 or f64.
__global__ void norm_finish_kernel(double* partials, int64_t count, double max_norm, int32_t f64, void* norm_out) {
  const double norm = norm_finish(partials, count);
  partials[count] = norm_clip_factor(max_norm, norm);
  if (f64) *static_cast<double*>(norm_out) = norm;
  else *static_cast<float*>(norm_out) = static_cast<float>(norm);
}

template <class T>
__global__ void scale_kernel(const T* x, T* y, int64_t n, const double* factor) {
  const double f = *factor;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = norm_scale<T>(x[i], f);
}

struct NormState {
  bool clip;
  double max_norm;
  int32_t dtype;
  std::vector<int64_t> numel, first_partial;  // per tensor
  int64_t partials;
};

template <class T>
cudaError_t launch_norm_t(const NormState& s, const void* const* in, void* const* out, double* ws, cudaStream_t stream) {
  const int n = static_cast<int>(s.numel.size());
  for (int k = 0; k < n; ++k) {
    const int64_t blocks = norm_blocks_of(s.numel[static_cast<size_t>(k)]);
    sumsq_kernel<T><<<static_cast<unsigned>(blocks), kNormThreads, 0, stream>>>(
        static_cast<const T*>(in[k]), s.numel[static_cast<size_t>(k)], blocks, ws + s.first_partial[static_cast<size_t>(k)]);
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
  }
  norm_finish_kernel<<<1, 1, 0, stream>>>(ws, s.partials, s.max_norm, s.dtype == SPORA_DTYPE_F64, out[s.clip ? n : 0]);
  if (cudaError_t e = launched(); e != cudaSuccess) return e;
  if (!s.clip) return cudaSuccess;
  for (int k = 0; k < n; ++k) {
    const int64_t m = s.numel[static_cast<size_t>(k)];
    if (m == 0) continue;
    scale_kernel<T><<<grid_for(m), kBlock, 0, stream>>>(static_cast<const T*>(in[k]), static_cast<T*>(out[k]), m,
                                                       ws + s.partials);
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_norm(const GpuPlan& plan, const void* const* in, void* const* out, void* ws, cudaStream_t stream) {
  const NormState& s = plan.get<NormState>();
  auto* w = static_cast<double*>(ws);
  switch (s.dtype) {
    case SPORA_DTYPE_F32: return launch_norm_t<float>(s, in, out, w, stream);
    case SPORA_DTYPE_F64: return launch_norm_t<double>(s, in, out, w, stream);
    case SPORA_DTYPE_F16: return launch_norm_t<half_t>(s, in, out, w, stream);
    case SPORA_DTYPE_BF16: return launch_norm_t<bhalf_t>(s, in, out, w, stream);
    default: return cudaErrorInvalidValue;
  }
}

spora_plugin_error_t* plan_norm(GpuPlan& gp) {
  const auto& p = gp.desc;
  ref::Plan r;
  if (auto* e = ref::describe(p, &r)) return e;
  auto s = std::make_shared<NormState>();
  s->clip = r.kind == ref::Kind::kClip;
  s->max_norm = r.max_norm;
  s->dtype = r.dtype;
  s->partials = 0;
  for (int k = 0; k < r.n; ++k) {
    const int64_t m = r.offset[static_cast<size_t>(k) + 1] - r.offset[static_cast<size_t>(k)];
    s->numel.push_back(m);
    s->first_partial.push_back(s->partials);
    s->partials += norm_blocks_of(m);
  }
  gp.state = s;
  gp.launch = launch_norm;
  gp.workspace = static_cast<size_t>(s->partials + 1) * sizeof(double);  // + the clip factor
  return nullptr;
}

}  // namespace

void add_optim_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"sgd_update", plan});
  out.push_back({"adam_update", plan});
  out.push_back({"global_norm", plan_norm});
  out.push_back({"clip_by_global_norm", plan_norm});
}

}  // namespace spora::gpu
