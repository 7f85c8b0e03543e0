// pad (constant, reflect, edge): one thread per output element with the
// source lookup of math/pad_math.h; one kernel per element size.
#include <string>

#include "gpu_device.h"
#include "math/pad_math.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin;
static_assert(kPadMaxRank == SPORA_MAX_RANK, "pad math holds every rank");

template <class U>
__global__ void pad_kernel(PadIndex s, const U* x, U value, U* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = pad_elem<U>(s, x, value, e);
}

struct PadState {
  PadIndex ix;
  uint64_t value;  // the constant's bits in the output dtype
  int64_t elem, total;
};

template <class U>
void launch_t(const PadState& s, const void* in, void* out, cudaStream_t stream) {
  pad_kernel<U><<<grid_for(s.total), kBlock, 0, stream>>>(s.ix, static_cast<const U*>(in), static_cast<U>(s.value),
                                                          static_cast<U*>(out), s.total);
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const PadState& s = plan.get<PadState>();
  if (s.total == 0) return cudaSuccess;
  switch (s.elem) {
    case 1: launch_t<uint8_t>(s, in[0], out[0], stream); break;
    case 2: launch_t<uint16_t>(s, in[0], out[0], stream); break;
    case 4: launch_t<uint32_t>(s, in[0], out[0], stream); break;
    case 8: launch_t<uint64_t>(s, in[0], out[0], stream); break;
    default: return cudaErrorInvalidValue;
  }
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner (mode, pads, value)
  auto s = std::make_shared<PadState>();
  if (!pad_index_of(p, &s->ix, &s->value))
    return ref::invalid(p, "value is not representable in the output dtype");
  s->elem = static_cast<int64_t>(ref::dtype_size(p.out[0].dtype));
  s->total = p.out[0].shape.numel();
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_pad_kernels(std::vector<GpuKernelEntry>& out) { out.push_back({"pad", plan}); }

}  // namespace spora::gpu
