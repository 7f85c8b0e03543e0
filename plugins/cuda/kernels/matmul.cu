// matmul: the tiled GEMM of math/gemm_math.h. Grid: (column tiles, row
// tiles, batch), the batch walked grid-stride beyond the grid's z limit.
#include <string>

#include "gpu_device.h"
#include "math/gemm_math.h"
#if !defined(SPORA_GPU_HIP)
#include "gpu_blas.h"
#endif

namespace spora::gpu {
namespace {

template <class T>
__global__ void gemm_kernel(GemmIndex g, const T* a, const T* b, T* y) {
  using C = compute_of<T>;
  __shared__ C as[kGemmTile][kGemmTile];
  __shared__ C bs[kGemmTile][kGemmTile];
  const int ty = static_cast<int>(threadIdx.y), tx = static_cast<int>(threadIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kGemmTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kGemmTile;
  for (int64_t bi = blockIdx.z; bi < g.batch; bi += gridDim.z) {
    int64_t oa = 0, ob = 0;
    gemm_batch_offsets(g, bi, &oa, &ob);
    C acc = C(0);
    for (int64_t k0 = 0; k0 < g.k; k0 += kGemmTile) {
      gemm_load<T>(g, a + oa, b + ob, row0, col0, k0, ty, tx, as, bs);
      __syncthreads();
      const int kn = static_cast<int>(g.k - k0 < kGemmTile ? g.k - k0 : kGemmTile);
      acc = gemm_accumulate<C>(acc, ty, tx, kn, as, bs);
      __syncthreads();
    }
    if (row0 + ty < g.m && col0 + tx < g.n) y[bi * g.m * g.n + (row0 + ty) * g.n + col0 + tx] = elem<T>::store(acc);
  }
}

struct MmState {
  GemmIndex g;
  int32_t dtype;
  // cuBLAS takes the call when each operand's batch is either the output's
  // (stride: one matrix) or a single matrix for all (stride 0).
  bool strided = false;
  int64_t stride_a = 0, stride_b = 0;
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const MmState& s = plan.get<MmState>();
  const GemmIndex& g = s.g;
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
#if !defined(SPORA_GPU_HIP)
  if (s.strided && (s.dtype == SPORA_DTYPE_F32 || s.dtype == SPORA_DTYPE_F64)) {
    bool used = false;
    const cudaError_t e = blas::gemm(stream, s.dtype, g.ta, g.tb, g.m, g.n, g.k, in[0], s.stride_a, in[1], s.stride_b,
                                     out[0], g.batch, &used);
    if (e != cudaSuccess || used) return e;
  }
#endif
  const dim3 block(kGemmTile, kGemmTile);
  const dim3 grid(static_cast<unsigned>((g.n + kGemmTile - 1) / kGemmTile),
                  static_cast<unsigned>((g.m + kGemmTile - 1) / kGemmTile),
                  static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535));
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      gemm_kernel<T><<<grid, block, 0, stream>>>(g, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                                                 static_cast<T*>(out[0]));
      ok = true;
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated: ranks equal >= 2, shapes contract, batch dims broadcast
  const int r = p.out[0].shape.rank;
  const int64_t tiles_m = (p.out[0].shape.dims[r - 2] + kGemmTile - 1) / kGemmTile;
  const int64_t tiles_n = (p.out[0].shape.dims[r - 1] + kGemmTile - 1) / kGemmTile;
  if (tiles_m > 65535 || tiles_n > 0x7fffffff)
    return spora::plugin::unsupported(p, "output has more than 65535 row tiles (1048560 rows)");
  if (r - 2 > kGemmMaxBatchRank) return spora::plugin::unsupported(p, "more than 6 batch dimensions");
  auto s = std::make_shared<MmState>();
  s->g = gemm_index_of(p.in[0].shape, p.in[1].shape, p.out[0].shape, p.attrs.get_bool("transpose_a", false),
                       p.attrs.get_bool("transpose_b", false));
  s->dtype = p.out[0].dtype;
  bool a_full = true, a_one = true, b_full = true, b_one = true;
  for (int d = 0; d < r - 2; ++d) {
    a_full = a_full && p.in[0].shape.dims[d] == p.out[0].shape.dims[d];
    a_one = a_one && p.in[0].shape.dims[d] == 1;
    b_full = b_full && p.in[1].shape.dims[d] == p.out[0].shape.dims[d];
    b_one = b_one && p.in[1].shape.dims[d] == 1;
  }
  s->strided = (a_full || a_one) && (b_full || b_one);
  s->stride_a = a_full ? s->g.mat_a : 0;
  s->stride_b = b_full ? s->g.mat_b : 0;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_matmul_kernels(std::vector<GpuKernelEntry>& out) { out.push_back({"matmul", plan}); }

}  // namespace spora::gpu
