// arange and eye: one thread per output element with the arithmetic of
// math/creation_math.h. (zeros, ones and full are plain fills, planned
// elsewhere.)
#include <string>

#include "gpu_device.h"
#include "math/creation_math.h"

namespace spora::gpu {
namespace {

template <class T>
__global__ void arange_kernel(ArangeIndex a, T* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = arange_elem<T>(a, e);
}

template <class T>
__global__ void eye_kernel(int64_t m, T* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = eye_elem<T>(m, e);
}

struct CreationState {
  bool eye;
  ArangeIndex a;
  int64_t m;  // eye's columns
  int32_t dtype;
  int64_t total;
};

cudaError_t launch(const GpuPlan& plan, const void* const*, void* const* out, void*, cudaStream_t stream) {
  const CreationState& s = plan.get<CreationState>();
  if (s.total == 0) return cudaSuccess;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (s.eye) {
      eye_kernel<T><<<grid_for(s.total), kBlock, 0, stream>>>(s.m, static_cast<T*>(out[0]), s.total);
      ok = true;
    } else if constexpr (!is_bool_c<compute_of<T>>) {  // the reference has no bool arange
      arange_kernel<T><<<grid_for(s.total), kBlock, 0, stream>>>(s.a, static_cast<T*>(out[0]), s.total);
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner (rank, integer ranges, no bool arange)
  auto s = std::make_shared<CreationState>();
  s->eye = p.op == "eye";
  if (s->eye) s->m = p.out[0].shape.dims[1];
  else s->a = arange_index_of(p);
  s->dtype = p.out[0].dtype;
  s->total = p.out[0].shape.numel();
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_creation_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"arange", plan});
  out.push_back({"eye", plan});
}

}  // namespace spora::gpu
