// Reduction kernels: one block per output element (grid-stride over
// outputs), the per-thread folds and tree of math/reduce_math.h in shared
// memory.
#include <string>

#include "gpu_device.h"
#include "math/reduce_math.h"

namespace spora::gpu {
namespace {

template <class T, bool Arg>
__global__ void reduce_kernel(RedIndex ix, const T* x, void* out) {
  using C = compute_of<T>;
  __shared__ RedAcc<C> acc[kRedThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int passes = red_two_pass(ix.kind) ? 2 : 1;
  for (int64_t o = blockIdx.x; o < ix.outputs; o += gridDim.x) {
    const int64_t base = red_base(ix, o);
    double center = 0;
    for (int pass = 0; pass < passes; ++pass) {
      acc[t] = red_thread<T>(ix, x, base, t, pass, center);
      __syncthreads();
      for (int s = kRedThreads / 2; s > 0; s >>= 1) {
        red_tree_level<C>(ix.kind, pass, acc, t, s);
        __syncthreads();
      }
      if (pass == 0 && passes == 2) center = red_center<C>(ix, acc[0]);
      __syncthreads();  // everyone has read acc[0] before it is overwritten
    }
    if (t == 0) {
      if constexpr (Arg) static_cast<int64_t*>(out)[o] = acc[0].pos;
      else static_cast<T*>(out)[o] = elem<T>::store(red_finish<C>(ix, acc[0], center));
    }
    __syncthreads();
  }
}

struct RedState {
  RedIndex ix;
  int32_t dtype;
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const RedState& s = plan.get<RedState>();
  if (s.ix.outputs == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(s.ix.outputs < 65535 * 8 ? s.ix.outputs : 65535 * 8);
  const bool arg = s.ix.kind == RedKind::kArgMax || s.ix.kind == RedKind::kArgMin;
  const bool known = visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same<T, bool_t>::value) {
      if (arg) reduce_kernel<T, true><<<grid, kRedThreads, 0, stream>>>(s.ix, static_cast<const T*>(in[0]), out[0]);
      else reduce_kernel<T, false><<<grid, kRedThreads, 0, stream>>>(s.ix, static_cast<const T*>(in[0]), out[0]);
    }
  });
  if (!known) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  RedKind kind;
  if (!red_kind_of(p.op, &kind)) return spora::plugin::unsupported(p, "not a reduction");
  auto s = std::make_shared<RedState>();
  s->ix = red_index_of(kind, p.in[0].shape, p.attrs);
  s->dtype = p.in[0].dtype;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_reduce_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"sum", "mean", "max", "min", "prod", "logsumexp", "var", "std", "argmax", "argmin"})
    out.push_back({op, plan});
}

}  // namespace spora::gpu
