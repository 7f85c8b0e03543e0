// softmax / log_softmax and their gradients: one block per line, the
// partials and tree of math/softmax_math.h in shared memory.
#include <string>

#include "gpu_device.h"
#include "math/softmax_math.h"

namespace spora::gpu {
namespace {

template <class T>
__global__ void softmax_kernel(SmIndex ix, const T* x, const T* dy, T* y) {
  using C = compute_of<T>;
  __shared__ double acc[kSmThreads];
  const int t = static_cast<int>(threadIdx.x);
  const bool fwd = ix.kind == SmKind::kSoftmax || ix.kind == SmKind::kLogSoftmax;
  const int64_t lines = ix.outer * ix.inner;
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const int64_t base = sm_base(ix, l);
    acc[t] = sm_partial0<T>(ix, x, dy, base, t);
    __syncthreads();
    for (int s = kSmThreads / 2; s > 0; s >>= 1) {
      sm_tree_level(fwd, acc, t, s);
      __syncthreads();
    }
    C mx = C(0);
    double total = acc[0];
    __syncthreads();
    if (fwd) {
      mx = static_cast<C>(total);
      acc[t] = sm_partial1<T>(ix, x, base, t, mx);
      __syncthreads();
      for (int s = kSmThreads / 2; s > 0; s >>= 1) {
        sm_tree_level(false, acc, t, s);
        __syncthreads();
      }
      total = acc[0];
      __syncthreads();
    }
    sm_write<T>(ix, x, dy, y, base, t, mx, total);
  }
}

struct SmState {
  SmIndex ix;
  int32_t dtype;
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const SmState& s = plan.get<SmState>();
  const int64_t lines = s.ix.outer * s.ix.inner;
  if (lines == 0 || s.ix.len == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(lines < 65535 * 8 ? lines : 65535 * 8);
  const bool fwd = s.ix.kind == SmKind::kSoftmax || s.ix.kind == SmKind::kLogSoftmax;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      softmax_kernel<T><<<grid, kSmThreads, 0, stream>>>(s.ix, static_cast<const T*>(in[0]),
                                                         fwd ? nullptr : static_cast<const T*>(in[1]),
                                                         static_cast<T*>(out[0]));
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;
  auto s = std::make_shared<SmState>();
  s->ix = sm_index_of(p.op, p.out[0].shape, p.attrs);
  s->dtype = p.out[0].dtype;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_softmax_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"}) out.push_back({op, plan});
}

}  // namespace spora::gpu
