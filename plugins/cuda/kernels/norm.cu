// layer_norm, group_norm, batch_norm and their gradients: one thread block
// per group for the statistics and dx, deterministic parameter sums
// (math/group_norm_math.h has the arithmetic and the order). batch_norm is
// planned here only when gpu_dnn_ops.cpp picks the own kernel
// (plan_own_batch_norm): ROCm, or CUDA without cuDNN's help. layer_norm
// rows that fit in registers take the register kernels instead
// (math/layer_norm_fast.h): one read of x (and dy), one write of y (dx).
#include <memory>
#include <string>

#include "gpu_device.h"
#include "math/group_norm_math.h"
#include "math/layer_norm_fast.h"
#include "math/vec_io.h"

namespace spora::gpu {
namespace {

constexpr int64_t kGnMaxGrid = 65535 * 8;

bool al16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

unsigned grid_of(int64_t blocks) {
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > kGnMaxGrid ? kGnMaxGrid : blocks);
}

template <class T>
__global__ void gn_forward_kernel(GnIndex ix, const T* x, const T* gamma, const T* beta, const T* rm, const T* rv, T* y,
                                  compute_of<T>* mean_out, compute_of<T>* invstd_out, T* rm_out, T* rv_out) {
  using C = compute_of<T>;
  __shared__ double acc[kGnThreads];
  const int t = static_cast<int>(threadIdx.x);
  const double m = static_cast<double>(gn_size(ix));
  for (int64_t q = blockIdx.x; q < ix.groups; q += gridDim.x) {
    double mean, var;
    if (gn_batch_stats(ix)) {
      acc[t] = gn_sum_partial<T>(ix, x, q, t);
      __syncthreads();
      for (int s = kGnThreads / 2; s > 0; s >>= 1) {
        gn_tree_level(acc, 1, t, s);
        __syncthreads();
      }
      mean = acc[0] / m;
      __syncthreads();
      acc[t] = gn_sq_partial<T>(ix, x, q, t, mean);
      __syncthreads();
      for (int s = kGnThreads / 2; s > 0; s >>= 1) {
        gn_tree_level(acc, 1, t, s);
        __syncthreads();
      }
      var = acc[0] / m;
      __syncthreads();
    } else {
      mean = static_cast<double>(elem<T>::load(rm[q]));
      var = static_cast<double>(elem<T>::load(rv[q]));
    }
    if (t == 0) gn_write_stats<T>(ix, q, mean, var, rm, rv, mean_out, invstd_out, rm_out, rv_out);
    const C mu = static_cast<C>(mean), inv = static_cast<C>(1.0 / fm::sqrt(var + ix.eps));
    gn_fwd_write<T>(ix, x, gamma, beta, y, q, t, mu, inv);
  }
}

template <class T>
__global__ void gn_backward_kernel(GnIndex ix, const T* x, const T* dy, const T* gamma, const compute_of<T>* mean,
                                   const compute_of<T>* invstd, T* dx, T* dgamma, T* dbeta) {
  using C = compute_of<T>;
  __shared__ double acc[kGnBwdSums * kGnThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t q = blockIdx.x; q < ix.groups; q += gridDim.x) {
    const C mu = mean[q], inv = invstd[q];
    double part[kGnBwdSums];
    gn_bwd_partials<T>(ix, x, dy, gamma, q, t, mu, inv, part);
    for (int i = 0; i < kGnBwdSums; ++i) acc[i * kGnThreads + t] = part[i];
    __syncthreads();
    for (int s = kGnThreads / 2; s > 0; s >>= 1) {
      gn_tree_level(acc, kGnBwdSums, t, s);
      __syncthreads();
    }
    const double sa = acc[0], sax = acc[kGnThreads];
    if (ix.kind == GnKind::kBatch && t == 0) {
      dgamma[q] = elem<T>::template store<double>(acc[3 * kGnThreads]);
      dbeta[q] = elem<T>::template store<double>(acc[2 * kGnThreads]);
    }
    __syncthreads();
    gn_bwd_write<T>(ix, x, dy, gamma, dx, q, t, mu, inv, sa, sax);
  }
}

// Layer norm: blockIdx.y is the row chunk; x strides over column tiles.
template <class T>
__global__ void gn_col_kernel(GnIndex ix, const T* x, const T* dy, const compute_of<T>* mean,
                              const compute_of<T>* invstd, double* ws) {
  __shared__ double tile[2 * kGnThreads];
  const int t = static_cast<int>(threadIdx.x), col = t % kGnCols, lane = t / kGnCols;
  const int64_t chunk = blockIdx.y, tiles = (ix.params + kGnCols - 1) / kGnCols;
  for (int64_t tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
    double two[2];
    gn_col_partials<T>(ix, x, dy, mean, invstd, tl, chunk, col, lane, two);
    tile[t] = two[0], tile[kGnThreads + t] = two[1];
    __syncthreads();
    for (int s = kGnLanes / 2; s > 0; s >>= 1) {
      gn_tree_level(tile, 2, t, s * kGnCols);
      __syncthreads();
    }
    const int64_t c = tl * kGnCols + col;
    if (lane == 0 && c < ix.params) {
      ws[(chunk * ix.params + c) * 2] = tile[col];
      ws[(chunk * ix.params + c) * 2 + 1] = tile[kGnThreads + col];
    }
    __syncthreads();
  }
}

// Group norm: one block per run (sample, channel).
template <class T>
__global__ void gn_run_kernel(GnIndex ix, const T* x, const T* dy, const compute_of<T>* mean,
                              const compute_of<T>* invstd, double* ws) {
  __shared__ double tile[2 * kGnThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int64_t runs = ix.groups * ix.blocks;
  for (int64_t r = blockIdx.x; r < runs; r += gridDim.x) {
    double two[2];
    gn_run_partials<T>(ix, x, dy, mean, invstd, r, t, two);
    tile[t] = two[0], tile[kGnThreads + t] = two[1];
    __syncthreads();
    for (int s = kGnThreads / 2; s > 0; s >>= 1) {
      gn_tree_level(tile, 2, t, s);
      __syncthreads();
    }
    if (t == 0) {
      const int64_t slot = gn_run_slot(ix, r);
      ws[slot * 2] = tile[0];
      ws[slot * 2 + 1] = tile[kGnThreads];
    }
    __syncthreads();
  }
}

template <class T>
__global__ void gn_finish_kernel(GnIndex ix, const double* ws, T* dgamma, T* dbeta) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < ix.params;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x)
    gn_param_finish<T>(ix, ws, p, dgamma, dbeta);
}

// ---- layer_norm rows held in registers ----

// The halving tree of a sum over the THREADS threads of a row, every
// thread getting the result: the levels of a warp and more in shared
// memory, the rest by shuffles (the same pairs as the host emulation).
template <int THREADS>
__device__ inline double ln_group_sum(double a, double* sh, int t) {
  if constexpr (THREADS > kWarp) {
    sh[t] = a;
    __syncthreads();
    for (int s = THREADS / 2; s >= kWarp; s >>= 1) {
      if (t < s) sh[t] += sh[t + s];
      __syncthreads();
    }
    a = sh[t];
  }
  constexpr int kFirst = (THREADS < kWarp ? THREADS : kWarp) / 2;
#pragma unroll
  for (int s = kFirst; s > 0; s >>= 1) a += shfl_down(a, s);
  if constexpr (THREADS > kWarp) {
    __syncthreads();  // every warp has read sh before it is reused
    if (t == 0) sh[0] = a;
    __syncthreads();
    a = sh[0];
    __syncthreads();
  } else {
    a = shfl_first(a);
  }
  return a;
}

// THREADS threads per row (a warp, or the whole block), PER elements per
// thread in vectors of V. The loop bound is uniform over a row's threads.
template <class T, int THREADS, int PER, int V>
__global__ void __launch_bounds__(kLnThreads)
    ln_reg_kernel(GnIndex ix, const T* x, const T* gamma, const T* beta, T* y, compute_of<T>* mean_out,
                  compute_of<T>* invstd_out) {
  using C = compute_of<T>;
  constexpr int kRows = kLnThreads / THREADS;
  __shared__ double sh[THREADS > kWarp ? THREADS : 1];
  const int t = static_cast<int>(threadIdx.x) % THREADS;
  const double m = static_cast<double>(ix.len);
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / THREADS; q < ix.groups;
       q += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t base = q * ix.qstride;
    T v[PER];
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = ln_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) load_vec<V>(x, base + pos, &v[k]);
    }
    const double mean = ln_group_sum<THREADS>(ln_reg_sum<T>(v, PER, THREADS, V, t, ix.len), sh, t) / m;
    const double var = ln_group_sum<THREADS>(ln_reg_sq<T>(v, PER, THREADS, V, t, ix.len, mean), sh, t) / m;
    const double invstd = ln_invstd(var, ix.eps);
    if (t == 0) {
      mean_out[q] = static_cast<C>(mean);
      invstd_out[q] = static_cast<C>(invstd);
    }
    const C mu = static_cast<C>(mean), inv = static_cast<C>(invstd);
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = ln_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) {
        T g[V], b[V], o[V];
        load_vec<V>(gamma, pos, g);
        load_vec<V>(beta, pos, b);
#pragma unroll
        for (int u = 0; u < V; ++u) o[u] = ln_reg_out<T>(v[k + u], g[u], b[u], mu, inv);
        store_vec<V>(y, base + pos, o);
      }
    }
  }
}

// The gradient's dx: x and a = dy * gamma cached per thread.
template <class T, int THREADS, int PER, int V>
__global__ void __launch_bounds__(kLnThreads)
    ln_reg_bwd_kernel(GnIndex ix, const T* x, const T* dy, const T* gamma, const compute_of<T>* mean,
                      const compute_of<T>* invstd, T* dx) {
  using C = compute_of<T>;
  constexpr int kRows = kLnThreads / THREADS;
  __shared__ double sh[THREADS > kWarp ? THREADS : 1];
  const int t = static_cast<int>(threadIdx.x) % THREADS;
  const double m = static_cast<double>(ix.len);
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / THREADS; q < ix.groups;
       q += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t base = q * ix.qstride;
    const C mu = mean[q], inv = invstd[q];
    T v[PER];
    C w[PER];
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = ln_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) {
        T g[V], gm[V];
        load_vec<V>(x, base + pos, &v[k]);
        load_vec<V>(dy, base + pos, g);
        load_vec<V>(gamma, pos, gm);
#pragma unroll
        for (int u = 0; u < V; ++u) w[k + u] = ln_reg_a<T>(g[u], gm[u]);
      }
    }
    double sa, sax;
    ln_reg_bwd_sums<T>(v, w, PER, THREADS, V, t, ix.len, mu, inv, &sa, &sax);
    const C ma = static_cast<C>(ln_group_sum<THREADS>(sa, sh, t) / m);
    const C max = static_cast<C>(ln_group_sum<THREADS>(sax, sh, t) / m);
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = ln_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) {
        T o[V];
#pragma unroll
        for (int u = 0; u < V; ++u) o[u] = ln_reg_dx<T>(v[k + u], w[k + u], mu, inv, ma, max);
        store_vec<V>(dx, base + pos, o);
      }
    }
  }
}

template <int N>
struct Int {
  static constexpr int value = N;
};

// Launches the register kernel (forward, or the gradient's dx) of
// configuration c (from ln_reg_cfg); false for a configuration without one.
template <class T>
bool launch_ln_reg(const GnIndex& ix, const LnRegCfg& c, const void* const* in, void* const* out,
                   cudaStream_t stream) {
  using C = compute_of<T>;
  constexpr int kFull = static_cast<int>(16 / sizeof(T));
  bool done = false;
  auto go = [&](auto th, auto per, auto vec) {
    constexpr int TH = decltype(th)::value, P = decltype(per)::value, V = decltype(vec)::value;
    constexpr int64_t kRows = kLnThreads / TH;
    const unsigned grid = grid_of((ix.groups + kRows - 1) / kRows);
    if (!ix.backward) {
      done = true;
      ln_reg_kernel<T, TH, P, V><<<grid, kLnThreads, 0, stream>>>(
          ix, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<const T*>(in[2]),
          static_cast<T*>(out[0]), static_cast<C*>(out[1]), static_cast<C*>(out[2]));
    } else if constexpr (P <= 32) {  // ln_block_max_per's limit of the gradient
      done = true;
      ln_reg_bwd_kernel<T, TH, P, V><<<grid, kLnThreads, 0, stream>>>(
          ix, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<const T*>(in[2]),
          static_cast<const C*>(in[3]), static_cast<const C*>(in[4]), static_cast<T*>(out[0]));
    }
  };
  auto warp = [&](auto per) {
    constexpr int P = decltype(per)::value;
    if (c.vec > 1) go(Int<kWarp>{}, per, Int<(kFull < P ? kFull : P)>{});
    else if constexpr (P <= 16) go(Int<kWarp>{}, per, Int<1>{});  // ln_reg_cfg's limit
  };
  auto block = [&](auto per) {
    constexpr int P = decltype(per)::value;
    go(Int<kLnThreads>{}, per, Int<(kFull < P ? kFull : P)>{});
  };
  if (c.threads == kWarp) {
    switch (c.per) {
      case 4: warp(Int<4>{}); break;
      case 8: warp(Int<8>{}); break;
      case 16: warp(Int<16>{}); break;
      case 32:
        if constexpr (sizeof(T) < 8) warp(Int<32>{});
        break;
      default: break;
    }
  } else if (c.threads == kLnThreads) {
    switch (c.per) {
      case 8: block(Int<8>{}); break;
      case 16: block(Int<16>{}); break;
      case 32:
        if constexpr (sizeof(T) < 8) block(Int<32>{});
        break;
      case 64:
        if constexpr (sizeof(T) < 4) block(Int<64>{});
        break;
      default: break;
    }
  }
  return done;
}

struct GnState {
  GnIndex ix;
  int32_t dtype;
};

template <class T>
cudaError_t launch_forward(const GnIndex& ix, const void* const* in, void* const* out, cudaStream_t stream) {
  using C = compute_of<T>;
  if (ix.groups == 0) return cudaSuccess;
  if (ix.kind == GnKind::kLayer) {
    const bool vec_ok = al16(in[0]) && al16(in[1]) && al16(in[2]) && al16(out[0]);
    const LnRegCfg c = ln_reg_cfg(ix, sizeof(T), vec_ok);
    if (c.threads > 0 && launch_ln_reg<T>(ix, c, in, out, stream)) return launched();
  }
  const bool bn = ix.kind == GnKind::kBatch;
  gn_forward_kernel<T><<<grid_of(ix.groups), kGnThreads, 0, stream>>>(
      ix, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<const T*>(in[2]),
      bn ? static_cast<const T*>(in[3]) : nullptr, bn ? static_cast<const T*>(in[4]) : nullptr,
      static_cast<T*>(out[0]), static_cast<C*>(out[1]), static_cast<C*>(out[2]),
      bn ? static_cast<T*>(out[3]) : nullptr, bn ? static_cast<T*>(out[4]) : nullptr);
  return launched();
}

template <class T>
cudaError_t launch_backward(const GnIndex& ix, const void* const* in, void* const* out, void* workspace,
                            cudaStream_t stream) {
  using C = compute_of<T>;
  const T* x = static_cast<const T*>(in[0]);
  const T* dy = static_cast<const T*>(in[1]);
  const C* mean = static_cast<const C*>(in[3]);
  const C* invstd = static_cast<const C*>(in[4]);
  T* dgamma = static_cast<T*>(out[1]);
  T* dbeta = static_cast<T*>(out[2]);
  LnRegCfg reg;
  if (ix.kind == GnKind::kLayer) {
    reg = ln_reg_cfg(ix, sizeof(T), al16(in[0]) && al16(in[1]) && al16(in[2]) && al16(out[0]));
  }
  if (ix.groups > 0 && reg.threads > 0 && launch_ln_reg<T>(ix, reg, in, out, stream)) {
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
  } else if (ix.groups > 0) {
    gn_backward_kernel<T><<<grid_of(ix.groups), kGnThreads, 0, stream>>>(
        ix, x, dy, static_cast<const T*>(in[2]), mean, invstd, static_cast<T*>(out[0]), dgamma, dbeta);
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
  }
  if (ix.kind == GnKind::kBatch || ix.params == 0) return cudaSuccess;
  auto* ws = static_cast<double*>(workspace);
  if (ix.kind == GnKind::kLayer) {
    const int64_t tiles = (ix.params + kGnCols - 1) / kGnCols;
    const dim3 grid(grid_of(tiles), static_cast<unsigned>(ix.partials));
    gn_col_kernel<T><<<grid, kGnThreads, 0, stream>>>(ix, x, dy, mean, invstd, ws);
  } else {
    // No runs means no samples (no partials to add) or no parameters.
    const int64_t runs = ix.groups * ix.blocks;
    if (runs > 0) gn_run_kernel<T><<<grid_of(runs), kGnThreads, 0, stream>>>(ix, x, dy, mean, invstd, ws);
  }
  if (cudaError_t e = launched(); e != cudaSuccess) return e;
  gn_finish_kernel<T><<<grid_for(ix.params), kBlock, 0, stream>>>(ix, ws, dgamma, dbeta);
  return launched();
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                   cudaStream_t stream) {
  const GnState& s = plan.get<GnState>();
  cudaError_t err = cudaErrorInvalidValue;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value)
      err = s.ix.backward ? launch_backward<T>(s.ix, in, out, workspace, stream)
                          : launch_forward<T>(s.ix, in, out, stream);
  });
  return err;
}

// Operands, shapes and attributes were validated by the reference planner
// (gpu_kernels.cpp), which also refuses non-float dtypes.
spora_plugin_error_t* plan_norm(GpuPlan& gp) {
  const auto& p = gp.desc;
  const int32_t dt = p.in[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return spora::plugin::unsupported(p, std::string("dtype ") + spora::plugin::dtype_name(dt) + " has no kernel");
  auto s = std::make_shared<GnState>();
  s->ix = gn_index_of(p.op, p.in[0].shape, p.attrs);
  s->dtype = dt;
  gp.state = s;
  gp.launch = launch;
  gp.workspace = gn_workspace(s->ix);
  return nullptr;
}

}  // namespace

spora_plugin_error_t* plan_own_batch_norm(GpuPlan& gp) { return plan_norm(gp); }

void add_norm_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"layer_norm", "layer_norm_grad", "group_norm", "group_norm_grad"})
    out.push_back({op, plan_norm});
}

}  // namespace spora::gpu
