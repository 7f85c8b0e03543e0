// uniform, normal, truncated_normal and dropout: one thread per Philox
// block (grid-stride), each writing the elements that block's words feed
// (math/random_math.h), so the output is the reference's whatever the grid,
// for every float dtype: log, sin/cos, erfc and exp come from
// spora/sdk/exact_math.h on both sides, not from the device's libm.
#include <string>

#include "gpu_device.h"
#include "math/random_math.h"

namespace spora::gpu {
namespace {

// Grid-stride index over Philox blocks.
__device__ inline int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline int64_t stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void uniform_kernel(UniformArgs a, T* y, int64_t n, int64_t blocks) {
  for (int64_t b = first_index(); b < blocks; b += stride()) uniform_block<T>(a, y, b, n);
}

template <class T>
__global__ void normal_kernel(NormalArgs a, T* y, int64_t n, int64_t blocks) {
  for (int64_t b = first_index(); b < blocks; b += stride()) normal_block<T>(a, y, b, n);
}

template <class T>
__global__ void trunc_kernel(TruncArgs a, T* y, int64_t n, int64_t blocks) {
  for (int64_t b = first_index(); b < blocks; b += stride()) trunc_block<T>(a, y, b, n);
}

template <class T>
__global__ void dropout_kernel(DropoutArgs a, const T* x, T* y, bool_t* mask, int64_t n, int64_t blocks) {
  for (int64_t b = first_index(); b < blocks; b += stride()) dropout_block<T>(a, x, y, mask, b, n);
}

struct RndState {
  RndKind kind;
  int32_t dtype;
  int64_t n;
  UniformArgs uniform;
  NormalArgs normal;
  TruncArgs trunc;
  DropoutArgs dropout;
};

// Launches the kernel of s.kind for storage type T (a float type).
template <class T>
void launch_t(const RndState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  T* y = static_cast<T*>(out[0]);
  switch (s.kind) {
    case RndKind::kUniform: {
      const int64_t blocks = rnd_blocks<T>(s.n);
      uniform_kernel<T><<<grid_for(blocks), kBlock, 0, stream>>>(s.uniform, y, s.n, blocks);
      return;
    }
    case RndKind::kNormal: {
      const int64_t blocks = rnd_blocks<T>(s.n);
      normal_kernel<T><<<grid_for(blocks), kBlock, 0, stream>>>(s.normal, y, s.n, blocks);
      return;
    }
    case RndKind::kTrunc: {
      const int64_t blocks = rnd_blocks<T>(s.n);
      trunc_kernel<T><<<grid_for(blocks), kBlock, 0, stream>>>(s.trunc, y, s.n, blocks);
      return;
    }
    case RndKind::kDropout: {
      const int64_t blocks = dropout_blocks(s.n);
      dropout_kernel<T><<<grid_for(blocks), kBlock, 0, stream>>>(s.dropout, static_cast<const T*>(in[0]), y,
                                                                 static_cast<bool_t*>(out[1]), s.n, blocks);
      return;
    }
  }
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const RndState& s = plan.get<RndState>();
  if (s.n == 0) return cudaSuccess;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      launch_t<T>(s, in, out, stream);
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;
  auto s = std::make_shared<RndState>();
  if (!rnd_kind_of(p.op, &s->kind)) return spora::plugin::unsupported(p, "not a random op");
  // The reference planner accepted the dtype: f32, f64, f16 or bf16.
  s->dtype = s->kind == RndKind::kDropout ? p.in[0].dtype : p.out[0].dtype;
  s->n = p.out[0].shape.numel();
  switch (s->kind) {
    case RndKind::kUniform: s->uniform = uniform_args_of(p); break;
    case RndKind::kNormal: s->normal = normal_args_of(p); break;
    case RndKind::kTrunc: s->trunc = trunc_args_of(p); break;
    case RndKind::kDropout: s->dropout = dropout_args_of(p); break;
  }
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_random_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"uniform", "normal", "truncated_normal", "dropout"}) out.push_back({op, plan});
}

}  // namespace spora::gpu
