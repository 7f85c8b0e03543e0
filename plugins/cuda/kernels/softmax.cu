// softmax / log_softmax and their gradients (math/softmax_math.h). Lines
// along the innermost axis that fit are held in registers: one warp (short
// lines) or one block per line reads it once in 16-byte vectors, reduces
// with shared-memory levels down to a warp and shuffles below, and writes
// it once. Other lines: one block per line, three passes.
#include <cstdint>
#include <string>

#include "gpu_device.h"
#include "math/softmax_math.h"
#include "math/vec_io.h"

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

// ---- lines held in registers ----

// The halving tree over the THREADS threads of a line (max or sum), every
// thread getting the result: the levels of a warp and more in shared
// memory, the rest by shuffles (the same pairs, sm_tree_level's order).
template <int THREADS>
__device__ inline double sm_group_tree(bool is_max, double a, double* sh, int t) {
  if constexpr (THREADS > kWarp) {
    sh[t] = a;
    __syncthreads();
    for (int s = THREADS / 2; s >= kWarp; s >>= 1) {
      if (t < s) sh[t] = is_max ? sm_max(sh[t], sh[t + s]) : sh[t] + sh[t + s];
      __syncthreads();
    }
    a = sh[t];
  }
  constexpr int kFirst = (THREADS < kWarp ? THREADS : kWarp) / 2;
#pragma unroll
  for (int s = kFirst; s > 0; s >>= 1) {
    const double b = shfl_down(a, s);
    a = is_max ? sm_max(a, b) : a + b;
  }
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

// THREADS threads per line (a warp, or the whole block), PER elements per
// thread in vectors of V.
template <class T, int THREADS, int PER, int V>
__global__ void __launch_bounds__(kSmThreads) sm_reg_kernel(SmIndex ix, const T* x, const T* dy, T* y) {
  using C = compute_of<T>;
  constexpr int kLines = kSmThreads / THREADS;
  __shared__ double sh[THREADS > kWarp ? THREADS : 1];
  const int t = static_cast<int>(threadIdx.x) % THREADS;
  const bool fwd = ix.kind == SmKind::kSoftmax || ix.kind == SmKind::kLogSoftmax;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * kLines + threadIdx.x / THREADS; l < ix.outer;
       l += static_cast<int64_t>(gridDim.x) * kLines) {
    const int64_t base = l * ix.len;
    T v[PER];
    C w[PER];  // dy for the gradients, exp(x - max) for softmax
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = sm_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) {
        load_vec<V>(x, base + pos, &v[k]);
        if (!fwd) {
          T g[V];
          load_vec<V>(dy, base + pos, g);
#pragma unroll
          for (int u = 0; u < V; ++u) w[k + u] = elem<T>::load(g[u]);
        }
      }
    }
    double total = sm_group_tree<THREADS>(fwd, sm_reg_partial0<T>(ix.kind, v, w, PER, THREADS, V, t, ix.len), sh, t);
    C mx = C(0);
    if (fwd) {
      mx = static_cast<C>(total);
      total = sm_group_tree<THREADS>(false, sm_reg_partial1<T>(v, w, PER, THREADS, V, t, ix.len, mx), sh, t);
    }
    const C scale = sm_reg_scale<C>(ix.kind, total);
#pragma unroll
    for (int k = 0; k < PER; k += V) {
      const int64_t pos = sm_reg_pos(THREADS, V, t, k);
      if (pos < ix.len) {
        T o[V];
#pragma unroll
        for (int u = 0; u < V; ++u) o[u] = sm_reg_out<T>(ix.kind, v[k + u], w[k + u], mx, scale);
        store_vec<V>(y, base + pos, o);
      }
    }
  }
}

template <int N>
struct Int {
  static constexpr int value = N;
};

// Launches the register kernel of configuration c; false for a
// configuration without one (sm_reg_cfg gives none such).
template <class T>
bool launch_reg(const SmIndex& ix, const SmRegCfg& c, const T* x, const T* dy, T* y, cudaStream_t stream) {
  constexpr int kFull = static_cast<int>(16 / sizeof(T));
  bool done = false;
  auto go = [&](auto th, auto per, auto vec) {
    done = true;
    constexpr int TH = decltype(th)::value, P = decltype(per)::value, V = decltype(vec)::value;
    constexpr int64_t kLines = kSmThreads / TH;
    const int64_t blocks = (ix.outer + kLines - 1) / kLines;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
    sm_reg_kernel<T, TH, P, V><<<grid, kSmThreads, 0, stream>>>(ix, x, dy, y);
  };
  auto warp = [&](auto per) {
    constexpr int P = decltype(per)::value;
    if (c.vec > 1) go(Int<kWarp>{}, per, Int<(kFull < P ? kFull : P)>{});
    else if constexpr (P <= 16) go(Int<kWarp>{}, per, Int<1>{});  // sm_reg_cfg's limit
  };
  auto block = [&](auto per) {
    constexpr int P = decltype(per)::value;
    go(Int<kSmThreads>{}, per, Int<(kFull < P ? kFull : P)>{});
  };
  if (c.threads == kWarp) {
    switch (c.per) {
      case 4: warp(Int<4>{}); break;
      case 8: warp(Int<8>{}); break;
      case 16: warp(Int<16>{}); break;
      default:
        if constexpr (sizeof(T) < 8) warp(Int<32>{});
        break;
    }
  } else {
    switch (c.per) {
      case 8: block(Int<8>{}); break;
      case 16: block(Int<16>{}); break;
      default:
        if constexpr (sizeof(T) < 8) block(Int<32>{});
        break;
    }
  }
  return done;
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
  auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec_ok = al16(in[0]) && al16(out[0]) && (fwd || al16(in[1]));
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<compute_of<T>>::value) {
      const SmRegCfg c = sm_reg_cfg(s.ix, sizeof(T), vec_ok);
      ok = true;
      if (c.threads > 0 && launch_reg<T>(s.ix, c, static_cast<const T*>(in[0]),
                                         fwd ? nullptr : static_cast<const T*>(in[1]), static_cast<T*>(out[0]), stream))
        return;
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
