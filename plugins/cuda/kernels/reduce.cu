// Reduction kernels (math/reduce_math.h): a block, a warp or a thread per
// chunk of an output's positions, the schedule picked at plan time; with
// several chunks per output, partial accumulators in the workspace and a
// second kernel combining them, a warp per output in a fixed order.
#include <string>

#include "gpu_device.h"
#include "math/reduce_math.h"

namespace spora::gpu {
namespace {

// Writes output o from its final accumulator.
template <class T>
__device__ inline void red_write(const RedIndex& ix, void* out, int64_t o, const RedAcc<compute_of<T>>& a,
                                 double center) {
  if (ix.kind == RedKind::kArgMax || ix.kind == RedKind::kArgMin) static_cast<int64_t*>(out)[o] = a.pos;
  else static_cast<T*>(out)[o] = elem<T>::store(red_finish<compute_of<T>>(ix, a, center));
}

// One pass of unit (thread t of it) over part p of the output at `base`;
// the result is valid in thread 0 of the unit (every thread of a block).
template <class T, RedUnit U>
__device__ inline RedAcc<compute_of<T>> red_unit_pass(const RedIndex& ix, const T* x, int64_t base, int64_t p, int t,
                                                      int pass, double center, RedAcc<compute_of<T>>* sh) {
  using C = compute_of<T>;
  constexpr int kWidth = U == RedUnit::kBlock ? kRedThreads : U == RedUnit::kWarp ? kWarp : 1;
  RedAcc<C> a = red_fold<T>(ix, x, base, p, t, kWidth, pass, center);
  if constexpr (U == RedUnit::kBlock) {
    sh[t] = a;
    __syncthreads();
    for (int s = kRedThreads / 2; s > 0; s >>= 1) {
      red_tree_level<C>(ix.kind, pass, sh, t, s);
      __syncthreads();
    }
    a = sh[0];
    __syncthreads();  // everyone has read sh[0] before it is overwritten
  } else if constexpr (U == RedUnit::kWarp) {
#pragma unroll
    for (int s = kWarp / 2; s > 0; s >>= 1) {
      const RedAcc<C> b = shfl_down(a, s);
      red_combine<C>(ix.kind, pass, a, b);
    }
  }
  return a;
}

// Unit u = (output o = u % outputs, part p = u / outputs). One part: every
// pass, then the output. Several: pass `pass` only, into the partials
// (pass 1 reading pass 0's centers).
template <class T, RedUnit U>
__global__ void __launch_bounds__(kRedThreads) red_unit_kernel(RedIndex ix, const T* x, void* out, int pass,
                                                               const double* centers, RedAcc<compute_of<T>>* partials) {
  using C = compute_of<T>;
  constexpr int kWidth = U == RedUnit::kBlock ? kRedThreads : U == RedUnit::kWarp ? kWarp : 1;
  constexpr int kPerBlock = kRedThreads / kWidth;
  __shared__ RedAcc<C> sh[U == RedUnit::kBlock ? kRedThreads : 1];
  const int t = static_cast<int>(threadIdx.x) % kWidth;
  const int64_t units = ix.outputs * ix.parts;
  const bool two = red_two_pass(ix.kind);
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * kPerBlock + threadIdx.x / kWidth; u < units;
       u += static_cast<int64_t>(gridDim.x) * kPerBlock) {
    const int64_t o = u % ix.outputs, p = u / ix.outputs;
    const int64_t base = red_base(ix, o);
    if (ix.parts > 1) {
      const RedAcc<C> a = red_unit_pass<T, U>(ix, x, base, p, t, pass, pass == 1 ? centers[o] : 0.0, sh);
      if (t == 0) partials[o * ix.parts + p] = a;
      continue;
    }
    RedAcc<C> a = red_unit_pass<T, U>(ix, x, base, 0, t, 0, 0.0, sh);
    double center = 0;
    if (two) {
      center = red_center<C>(ix, a);  // valid in thread 0 (every thread of a block)
      if constexpr (U == RedUnit::kWarp) center = shfl_first(center);
      a = red_unit_pass<T, U>(ix, x, base, 0, t, 1, center, sh);
    }
    if (t == 0) red_write<T>(ix, out, o, a, center);
  }
}

// A warp per output combines its partials of pass `pass`: pass 0 of a
// two-pass kind gives the center, otherwise the output.
template <class T>
__global__ void __launch_bounds__(kRedThreads) red_combine_kernel(RedIndex ix, void* out, int pass, double* centers,
                                                                  const RedAcc<compute_of<T>>* partials) {
  using C = compute_of<T>;
  constexpr int kPerBlock = kRedThreads / kWarp;
  const int l = static_cast<int>(threadIdx.x) % kWarp;
  const bool two = red_two_pass(ix.kind);
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kPerBlock + threadIdx.x / kWarp; o < ix.outputs;
       o += static_cast<int64_t>(gridDim.x) * kPerBlock) {
    RedAcc<C> a = red_gather<C>(ix, partials + o * ix.parts, l, pass);
#pragma unroll
    for (int s = kWarp / 2; s > 0; s >>= 1) {
      const RedAcc<C> b = shfl_down(a, s);
      red_combine<C>(ix.kind, pass, a, b);
    }
    if (l != 0) continue;
    if (two && pass == 0) centers[o] = red_center<C>(ix, a);
    else red_write<T>(ix, out, o, a, two ? centers[o] : 0.0);
  }
}

unsigned capped(int64_t blocks) { return static_cast<unsigned>(blocks < 1 ? 1 : blocks < 65535 * 8 ? blocks : 65535 * 8); }

template <class T>
void launch_t(const RedIndex& ix, const T* x, void* out, void* workspace, cudaStream_t stream) {
  using C = compute_of<T>;
  // One part: no workspace (plan asked for none), nothing read or written there.
  double* centers = ix.parts > 1 ? static_cast<double*>(workspace) : nullptr;
  auto* partials =
      ix.parts > 1 ? reinterpret_cast<RedAcc<C>*>(static_cast<char*>(workspace) + red_partials_offset(ix)) : nullptr;
  const int64_t units = ix.outputs * ix.parts;
  auto units_pass = [&](int pass) {
    switch (ix.unit) {
      case RedUnit::kBlock:
        red_unit_kernel<T, RedUnit::kBlock><<<capped(units), kRedThreads, 0, stream>>>(ix, x, out, pass, centers, partials);
        break;
      case RedUnit::kWarp:
        red_unit_kernel<T, RedUnit::kWarp><<<capped((units + kRedThreads / kWarp - 1) / (kRedThreads / kWarp)), kRedThreads,
                                             0, stream>>>(ix, x, out, pass, centers, partials);
        break;
      case RedUnit::kThread:
        red_unit_kernel<T, RedUnit::kThread><<<capped((units + kRedThreads - 1) / kRedThreads), kRedThreads, 0, stream>>>(
            ix, x, out, pass, centers, partials);
        break;
    }
  };
  if (ix.parts == 1) {
    units_pass(0);
    return;
  }
  const unsigned combine_grid = capped((ix.outputs + kRedThreads / kWarp - 1) / (kRedThreads / kWarp));
  const int passes = red_two_pass(ix.kind) ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    units_pass(pass);
    red_combine_kernel<T><<<combine_grid, kRedThreads, 0, stream>>>(ix, out, pass, centers, partials);
  }
}

struct RedState {
  RedIndex ix;
  int32_t dtype;
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace, cudaStream_t stream) {
  const RedState& s = plan.get<RedState>();
  if (s.ix.outputs == 0) return cudaSuccess;
  const bool known = visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same<T, bool_t>::value) launch_t<T>(s.ix, static_cast<const T*>(in[0]), out[0], workspace, stream);
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
  visit_storage(s->dtype, [&](auto tag) {
    using T = decltype(tag);
    gp.workspace = red_workspace(s->ix, sizeof(RedAcc<compute_of<T>>));
  });
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
