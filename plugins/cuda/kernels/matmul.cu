// matmul, linear, linear_act, linear_add_act. On CUDA: cuBLASLt with the
// algorithm chosen at plan time (gpu_blas.h), else cuBLAS (f32/f64), else
// the tiled GEMM of math/gemm_math.h, which is all the ROCm build has.
// Grid: (column tiles, row tiles, batch), the batch walked grid-stride
// beyond the grid's z limit.
#include <string>

#include "gpu_device.h"
#include "math/blas_args.h"
#include "math/gemm_math.h"
#if !defined(SPORA_GPU_HIP)
#include "gpu_blas.h"
#endif

namespace spora::gpu {
namespace {

// bias/residual/ep: linear and its fused forms (NULL for matmul).
template <class T>
__global__ void gemm_kernel(GemmIndex g, const T* a, const T* b, T* y, const T* bias, const T* residual,
                            int32_t use_ep, GemmEpilogue ep) {
  using C = compute_of<T>;
  __shared__ C as[kGemmTile][kGemmTile];
  __shared__ C bs[kGemmTile][kGemmTile];
  const int ty = static_cast<int>(threadIdx.y), tx = static_cast<int>(threadIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kGemmTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kGemmTile;
  for (int64_t bi = blockIdx.z; bi < g.batch; bi += gridDim.z) {
    int64_t oa = 0, ob = 0;
    gemm_batch_offsets(g, bi, &oa, &ob);
    C acc = gemm_init<T>(bias, col0 + tx, g.n);
    for (int64_t k0 = 0; k0 < g.k; k0 += kGemmTile) {
      gemm_load<T>(g, a + oa, b + ob, row0, col0, k0, ty, tx, as, bs);
      __syncthreads();
      const int kn = static_cast<int>(g.k - k0 < kGemmTile ? g.k - k0 : kGemmTile);
      acc = gemm_accumulate<C>(acc, ty, tx, kn, as, bs);
      __syncthreads();
    }
    if (row0 + ty < g.m && col0 + tx < g.n) {
      const int64_t o = bi * g.m * g.n + (row0 + ty) * g.n + col0 + tx;
      y[o] = gemm_store<T>(use_ep ? &ep : nullptr, acc, residual ? residual + o : nullptr);
    }
  }
}

// The epilogue alone, after cuBLAS computed bias + x w^T in place.
template <class T>
__global__ void epilogue_kernel(GemmEpilogue ep, T* y, const T* residual, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = gemm_store<T>(&ep, elem<T>::load(y[i]), residual ? residual + i : nullptr);
}

// y[i, j] = bias[j]: cuBLAS then adds x w^T (beta = 1).
template <class T>
__global__ void bias_rows_kernel(const T* bias, T* y, int64_t m, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = bias[i % n];
}

struct MmState {
  GemmIndex g;
  int32_t dtype;
  // cuBLAS takes the call when each operand's batch is either the output's
  // (stride: one matrix) or a single matrix for all (stride 0).
  bool strided = false;
  int64_t stride_a = 0, stride_b = 0;
  // linear, linear_act, linear_add_act: inputs x, w, b (, residual).
  bool linear = false;
  bool use_ep = false;
  GemmEpilogue ep;
#if !defined(SPORA_GPU_HIP)
  std::shared_ptr<const blas::LtPlan> lt;  // NULL: Lt takes no form of this call
#endif
};

template <class T>
cudaError_t launch_t(const MmState& s, const void* const* in, void* const* out, void* workspace, cudaStream_t stream) {
  const GemmIndex& g = s.g;
  const T* bias = s.linear ? static_cast<const T*>(in[2]) : nullptr;
  const T* residual = s.linear && s.ep.has_add ? static_cast<const T*>(in[3]) : nullptr;
  T* y = static_cast<T*>(out[0]);
#if !defined(SPORA_GPU_HIP)
  if (s.lt) {
    const LtArgs& x = blas::lt_args(*s.lt);
    if (x.beta_one) {
      bias_rows_kernel<T><<<grid_for(g.m * g.n), kBlock, 0, stream>>>(bias, y, g.m, g.n);
      if (cudaError_t e = launched(); e != cudaSuccess) return e;
    }
    bool used = false;
    const cudaError_t e = blas::lt_matmul(*s.lt, stream, in[0], in[1], x.epilogue != LtEpilogue::kDefault ? bias : nullptr,
                                          y, workspace, &used);
    if (e != cudaSuccess) return e;
    if (used) {
      if (!x.own_epilogue) return cudaSuccess;
      epilogue_kernel<T><<<grid_for(g.m * g.n), kBlock, 0, stream>>>(s.ep, y, residual, g.m * g.n);
      return launched();
    }
    // Refused at launch (alignment): the paths below write all of y.
  }
  if (s.strided && (s.dtype == SPORA_DTYPE_F32 || s.dtype == SPORA_DTYPE_F64) && blas::available()) {
    if (bias) {
      bias_rows_kernel<T><<<grid_for(g.m * g.n), kBlock, 0, stream>>>(bias, y, g.m, g.n);
      if (cudaError_t e = launched(); e != cudaSuccess) return e;
    }
    bool used = false;
    const cudaError_t e = blas::gemm(stream, s.dtype, g.ta, g.tb, g.m, g.n, g.k, in[0], s.stride_a, in[1], s.stride_b,
                                     y, g.batch, bias != nullptr, &used);
    if (e != cudaSuccess) return e;
    if (used) {
      if (!s.use_ep) return cudaSuccess;
      epilogue_kernel<T><<<grid_for(g.m * g.n), kBlock, 0, stream>>>(s.ep, y, residual, g.m * g.n);
      return launched();
    }
  }
#endif
  const dim3 block(kGemmTile, kGemmTile);
  const dim3 grid(static_cast<unsigned>((g.n + kGemmTile - 1) / kGemmTile),
                  static_cast<unsigned>((g.m + kGemmTile - 1) / kGemmTile),
                  static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535));
  gemm_kernel<T><<<grid, block, 0, stream>>>(g, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), y, bias,
                                             residual, s.use_ep ? 1 : 0, s.ep);
  return launched();
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace, cudaStream_t stream) {
  const MmState& s = plan.get<MmState>();
  if (s.g.batch == 0 || s.g.m == 0 || s.g.n == 0) return cudaSuccess;
  switch (s.dtype) {
    case SPORA_DTYPE_F32: return launch_t<float>(s, in, out, workspace, stream);
    case SPORA_DTYPE_F64: return launch_t<double>(s, in, out, workspace, stream);
    case SPORA_DTYPE_F16: return launch_t<half_t>(s, in, out, workspace, stream);
    case SPORA_DTYPE_BF16: return launch_t<bhalf_t>(s, in, out, workspace, stream);
    default: return cudaErrorInvalidValue;  // refused at plan time
  }
}

spora_plugin_error_t* check_tiles(const spora::plugin::KernelPlan& p) {
  const int r = p.out[0].shape.rank;
  if ((p.out[0].shape.dims[r - 2] + kGemmTile - 1) / kGemmTile > 65535)
    return spora::plugin::unsupported(p, "output has more than 65535 row tiles (1048560 rows)");
  if (r - 2 > kGemmMaxBatchRank) return spora::plugin::unsupported(p, "more than 6 batch dimensions");
  return nullptr;
}

// The user's matmul precision (the core adds "matmul_precision" to the
// descriptor only when it is not "highest").
spora_plugin_error_t* precision_of(const spora::plugin::KernelPlan& p, MatmulPrecision* out) {
  const std::string v = p.attrs.get_string("matmul_precision", "highest");
  if (!matmul_precision_of(v, out))
    return spora::plugin::invalid(p, "matmul_precision must be \"highest\", \"high\" or \"medium\", got \"" + v + "\"");
  return nullptr;
}

// Plans the Lt call when each operand's batch is the output's or one matrix
// for all (strided), and k > 0 (Lt needs a product; the own GEMM writes the
// bias alone). The kernel's workspace is what Lt's algorithm needs.
void plan_lt(GpuPlan& gp, MmState& s, MatmulPrecision prec) {
#if !defined(SPORA_GPU_HIP)
  if (!s.strided || s.g.k == 0) return;
  const LtArgs base = lt_args_row_major(s.dtype, prec, s.g.ta, s.g.tb, s.g.m, s.g.n, s.g.k, s.g.batch, s.stride_a,
                                        s.stride_b);
  std::string why;
  s.lt = blas::lt_plan(lt_candidates(base, s.linear, s.use_ep ? &s.ep : nullptr), &why);
  if (s.lt) gp.workspace = blas::lt_workspace(*s.lt);
#else
  (void)gp;
  (void)s;
  (void)prec;
#endif
}

spora_plugin_error_t* plan_matmul(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated: ranks equal >= 2, shapes contract, batch dims broadcast
  if (auto* e = check_tiles(p)) return e;
  const int r = p.out[0].shape.rank;
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
  MatmulPrecision prec = MatmulPrecision::kHighest;
  if (auto* e = precision_of(p, &prec)) return e;
  plan_lt(gp, *s, prec);
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

spora_plugin_error_t* plan_linear(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated: x [M, K], w [N, K], b [N] (, residual [M, N])
  if (auto* e = check_tiles(p)) return e;
  auto s = std::make_shared<MmState>();
  s->g = gemm_index_of(p.in[0].shape, p.in[1].shape, p.out[0].shape, false, true);
  s->dtype = p.out[0].dtype;
  s->strided = true;
  s->linear = true;
  if (p.op != "linear") {
    if (!gemm_epilogue_of(p.attrs.get_string("activation", "none"), p.op == "linear_add_act", &s->ep))
      return spora::plugin::invalid(p, "unknown activation");
    s->use_ep = true;
  }
  MatmulPrecision prec = MatmulPrecision::kHighest;
  if (auto* e = precision_of(p, &prec)) return e;
  plan_lt(gp, *s, prec);
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_matmul_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"matmul", plan_matmul});
  for (const char* op : {"linear", "linear_act", "linear_add_act"}) out.push_back({op, plan_linear});
}

}  // namespace spora::gpu
