// sgd_update and adam_update: one thread computes the coefficients from the
// scalar inputs (device memory) into the workspace, then one grid-stride
// kernel per tensor of the group applies math/optim_math.h's element
// update. The group's operands are validated by the reference describe().
#include <string>

#include "gpu_device.h"
#include "kernels/optim.h"  // plugins/common: describe(), the group layout
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

}  // namespace

void add_optim_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"sgd_update", plan});
  out.push_back({"adam_update", plan});
}

}  // namespace spora::gpu
