// Elementwise kernels: unary, binary (numpy broadcasting), comparisons,
// where and cast. The arithmetic is math/ew_math.h; here only the
// grid-stride loops and the host-side plan and dispatch.
//
// Three paths, chosen at launch; every one computes each element with the
// same function, so they give the same bits:
// - vector: outputs below 2^31 elements whose operands are 16-byte aligned
//   and whose rows are whole vectors (math/ew_fast.h): each thread moves
//   16 bytes per operand (a broadcast operand is one value), 32-bit index
//   math with the broadcast dims divided by multiply-high, and the op
//   resolved once per kernel (a switch outside the loop);
// - scalar fast: the same index math one element at a time, the op a
//   runtime switch (unaligned views, rows that are not whole vectors);
// - general: 64-bit indices, for 2^31 elements and more.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "gpu_device.h"
#include "kernels/elementwise.h"  // plugins/common: the op table
#include "math/ew_fast.h"
#include "math/ew_plan.h"
#include "math/vec_io.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin::ew;

// ---- vectors ----

// An operand's W values of one vector: contiguous, or one broadcast value.
template <int W, class T>
__device__ inline void load_operand(const T* p, uint32_t off, bool contiguous, T* v) {
  if (contiguous) {
    load_vec<W>(p, off, v);
  } else {
    const T s = p[off];
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = s;
  }
}

template <int W>
struct Width {
  static constexpr int value = W;
};

// Calls body(Width<W>, i, off) for each vector of V outputs starting at
// element i (off: the N inputs' offsets of element i), then for the n % V
// elements left (rank 1 only) with W = 1.
template <int V, int N, class Body>
__device__ inline void ew_loop(const EwFast& f, uint32_t n, Body body) {
  const uint32_t stride = gridDim.x * blockDim.x, t0 = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t nv = n / V;
  for (uint32_t j = t0; j < nv; j += stride) {
    uint32_t off[N];
    ew_fast_offsets<N>(f, j * V, off);
    body(Width<V>{}, j * V, off);
  }
  if constexpr (V > 1) {
    for (uint32_t i = nv * V + t0; i < n; i += stride) {
      uint32_t off[N];
      ew_fast_offsets<N>(f, i, off);
      body(Width<1>{}, i, off);
    }
  }
}

// Unary: the op fixed at compile time.
template <EwOp Op, class T, int V>
__device__ inline void unary_run(const EwParams& p, const EwFast& f, const T* x, T* y, uint32_t n) {
  using C = compute_of<T>;
  ew_loop<V, 1>(f, n, [&](auto w, uint32_t i, const uint32_t*) {
    constexpr int W = decltype(w)::value;
    T v[W];
    load_vec<W>(x, i, v);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = elem<T>::store(ew_unary<C>(Op, elem<T>::load(v[k]), p));
    store_vec<W>(y, i, v);
  });
}

#define SPORA_EW_VEC_UNARY_UNARY(Id) \
  case EwOp::k##Id:                  \
    unary_run<EwOp::k##Id, T, V>(p, f, x, y, n); \
    return;
#define SPORA_EW_VEC_UNARY_NOT(Id) SPORA_EW_VEC_UNARY_UNARY(Id)
#define SPORA_EW_VEC_UNARY_CAST(Id)
#define SPORA_EW_VEC_UNARY_BINARY(Id)
#define SPORA_EW_VEC_UNARY_COMPARE(Id)
#define SPORA_EW_VEC_UNARY_WHERE(Id)

template <class T, int V>
__global__ void unary_vec_kernel(EwOp op, EwParams p, EwFast f, const T* x, T* y, uint32_t n) {
  switch (op) {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_EW_VEC_UNARY_##kind(Id)
#include <spora/ops_elementwise.def>
    default: return;
  }
}

// Binary and comparison: fn(a, b) gives the stored output element.
template <class T, class TO, int V, class F>
__device__ inline void binary_run(const EwFast& f, const T* a, const T* b, TO* y, uint32_t n, F fn) {
  using C = compute_of<T>;
  const bool ca = f.strides[0][0] != 0, cb = f.strides[1][0] != 0;
  ew_loop<V, 2>(f, n, [&](auto w, uint32_t i, const uint32_t* off) {
    constexpr int W = decltype(w)::value;
    T va[W], vb[W];
    TO vy[W];
    load_operand<W>(a, off[0], ca, va);
    load_operand<W>(b, off[1], cb, vb);
#pragma unroll
    for (int k = 0; k < W; ++k) vy[k] = fn(elem<T>::load(va[k]), elem<T>::load(vb[k]));
    store_vec<W>(y, i, vy);
  });
}

#define SPORA_EW_VEC_BINARY_UNARY(Id)
#define SPORA_EW_VEC_BINARY_NOT(Id)
#define SPORA_EW_VEC_BINARY_CAST(Id)
#define SPORA_EW_VEC_BINARY_BINARY(Id)                                                                        \
  case EwOp::k##Id:                                                                                           \
    if constexpr (!std::is_same<T, bool_t>::value)                                                            \
      binary_run<T, T, V>(f, a, b, static_cast<T*>(y), n,                                                     \
                          [](C u, C v) { return elem<T>::store(ew_arith<C>(EwOp::k##Id, u, v)); });           \
    return;
#define SPORA_EW_VEC_BINARY_COMPARE(Id)                                                                       \
  case EwOp::k##Id:                                                                                           \
    binary_run<T, bool_t, V>(f, a, b, static_cast<bool_t*>(y), n, [](C u, C v) {                              \
      return bool_t{static_cast<uint8_t>(ew_compare<C>(EwOp::k##Id, u, v))};                                 \
    });                                                                                                       \
    return;
#define SPORA_EW_VEC_BINARY_WHERE(Id)

// V > 1: the op fixed per case. V == 1 (the scalar fast path): one runtime
// switch per element, one kernel per dtype.
template <class T, int V>
__global__ void binary_vec_kernel(EwOp op, EwFast f, const T* a, const T* b, void* y, uint32_t n) {
  using C = compute_of<T>;
  if constexpr (V == 1) {
    if (ew_is_compare(op))
      binary_run<T, bool_t, 1>(f, a, b, static_cast<bool_t*>(y), n,
                               [op](C u, C v) { return bool_t{static_cast<uint8_t>(ew_compare<C>(op, u, v))}; });
    else if constexpr (!std::is_same<T, bool_t>::value)
      binary_run<T, T, 1>(f, a, b, static_cast<T*>(y), n, [op](C u, C v) { return elem<T>::store(ew_arith<C>(op, u, v)); });
  } else {
    switch (op) {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_EW_VEC_BINARY_##kind(Id)
#include <spora/ops_elementwise.def>
      default: return;
    }
  }
}

// where moves bits: one kernel per element size.
template <class U, int V>
__global__ void where_vec_kernel(EwFast f, const bool_t* c, const U* x, const U* y, U* z, uint32_t n) {
  const bool cc = f.strides[0][0] != 0, cx = f.strides[1][0] != 0, cy = f.strides[2][0] != 0;
  ew_loop<V, 3>(f, n, [&](auto w, uint32_t i, const uint32_t* off) {
    constexpr int W = decltype(w)::value;
    bool_t vc[W];
    U vx[W], vy[W];
    load_operand<W>(c, off[0], cc, vc);
    load_operand<W>(x, off[1], cx, vx);
    load_operand<W>(y, off[2], cy, vy);
#pragma unroll
    for (int k = 0; k < W; ++k) vx[k] = vc[k].v ? vx[k] : vy[k];
    store_vec<W>(z, i, vx);
  });
}

template <class TI, class TO, int V>
__global__ void cast_vec_kernel(EwFast f, const TI* x, TO* y, uint32_t n) {
  ew_loop<V, 1>(f, n, [&](auto w, uint32_t i, const uint32_t*) {
    constexpr int W = decltype(w)::value;
    TI vx[W];
    TO vy[W];
    load_vec<W>(x, i, vx);
#pragma unroll
    for (int k = 0; k < W; ++k) vy[k] = cast_elem<TI, TO>(vx[k]);
    store_vec<W>(y, i, vy);
  });
}

// ---- general path (64-bit indices) ----

template <class T>
__global__ void unary_kernel(EwOp op, EwParams p, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = elem<T>::store(ew_unary<compute_of<T>>(op, elem<T>::load(x[i]), p));
}

template <class T>
__global__ void arith_kernel(EwOp op, EwIndex ix, const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    y[i] = elem<T>::store(ew_arith<compute_of<T>>(op, elem<T>::load(a[off[0]]), elem<T>::load(b[off[1]])));
  }
}

template <class T>
__global__ void compare_kernel(EwOp op, EwIndex ix, const T* a, const T* b, bool_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    y[i] = bool_t{static_cast<uint8_t>(ew_compare<compute_of<T>>(op, elem<T>::load(a[off[0]]), elem<T>::load(b[off[1]])))};
  }
}

// where moves bits: one kernel per element size.
template <class U>
__global__ void where_kernel(EwIndex ix, const bool_t* c, const U* x, const U* y, U* z, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    z[i] = c[off[0]].v ? x[off[1]] : y[off[2]];
  }
}

template <class TI, class TO>
__global__ void cast_kernel(const TI* x, TO* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = cast_elem<TI, TO>(x[i]);
}

enum class Form { kUnary, kArith, kCompare, kWhere, kCast };

struct EwState {
  Form form;
  EwOp op;
  EwParams prm;
  EwIndex ix;     // unary, cast: one contiguous input
  EwFast fast;    // ix in 32 bits, when `fits`
  bool fits = false;  // fewer than 2^31 elements
  bool vec = false;   // rows are whole vectors (pointers are checked at launch)
  int64_t n;
  int32_t dtype;  // unary/binary: the operands'; where: x's; cast: the source's
  int32_t to;     // cast: the target dtype
};

// Whether p can be accessed in vectors of `bytes`.
bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Blocks for one vector of V elements per thread (the loops stride over
// the grid; below 2^31 elements this is at most 2^23 blocks).
unsigned vec_grid(int64_t n, int V) {
  const int64_t blocks = (n / V + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// The vector path of storage type T over the given operands (each with its
// element size), or false when it does not apply.
bool use_vec(const EwState& s, int V, std::initializer_list<std::pair<const void*, size_t>> ops) {
  if (!s.fits || !s.vec || V <= 1) return false;
  for (const auto& [p, size] : ops)
    if (!aligned(p, V * size)) return false;
  return true;
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const EwState& s = plan.get<EwState>();
  if (s.n == 0) return cudaSuccess;
  const unsigned grid = grid_for(s.n);
  const uint32_t n32 = static_cast<uint32_t>(s.fits ? s.n : 0);
  bool known = true;
  switch (s.form) {
    case Form::kUnary:
      known = visit_storage(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = ew_vec_width<T>();
        const T* x = static_cast<const T*>(in[0]);
        T* y = static_cast<T*>(out[0]);
        if (use_vec(s, V, {{x, sizeof(T)}, {y, sizeof(T)}}))
          unary_vec_kernel<T, V><<<vec_grid(s.n, V), kBlock, 0, stream>>>(s.op, s.prm, s.fast, x, y, n32);
        else
          unary_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.prm, x, y, s.n);
      });
      break;
    case Form::kArith:
    case Form::kCompare:
      known = visit_storage(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = ew_vec_width<T>();
        const T* a = static_cast<const T*>(in[0]);
        const T* b = static_cast<const T*>(in[1]);
        const size_t out_size = s.form == Form::kCompare ? 1 : sizeof(T);
        if (use_vec(s, V, {{a, sizeof(T)}, {b, sizeof(T)}, {out[0], out_size}}))
          binary_vec_kernel<T, V><<<vec_grid(s.n, V), kBlock, 0, stream>>>(s.op, s.fast, a, b, out[0], n32);
        else if (s.fits)
          binary_vec_kernel<T, 1><<<vec_grid(s.n, 1), kBlock, 0, stream>>>(s.op, s.fast, a, b, out[0], n32);
        else if (s.form == Form::kCompare)
          compare_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.ix, a, b, static_cast<bool_t*>(out[0]), s.n);
        else if constexpr (!std::is_same<T, bool_t>::value)
          arith_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.ix, a, b, static_cast<T*>(out[0]), s.n);
      });
      break;
    case Form::kWhere: {
      const auto* c = static_cast<const bool_t*>(in[0]);
      auto run = [&](auto tag) {
        using U = decltype(tag);
        constexpr int V = ew_vec_width<U>();
        const U* x = static_cast<const U*>(in[1]);
        const U* y = static_cast<const U*>(in[2]);
        U* z = static_cast<U*>(out[0]);
        if (use_vec(s, V, {{c, 1}, {x, sizeof(U)}, {y, sizeof(U)}, {z, sizeof(U)}}))
          where_vec_kernel<U, V><<<vec_grid(s.n, V), kBlock, 0, stream>>>(s.fast, c, x, y, z, n32);
        else if (s.fits)
          where_vec_kernel<U, 1><<<vec_grid(s.n, 1), kBlock, 0, stream>>>(s.fast, c, x, y, z, n32);
        else
          where_kernel<U><<<grid, kBlock, 0, stream>>>(s.ix, c, x, y, z, s.n);
      };
      switch (spora::plugin::dtype_size(s.dtype)) {
        case 1: run(uint8_t{}); break;
        case 2: run(uint16_t{}); break;
        case 4: run(uint32_t{}); break;
        case 8: run(uint64_t{}); break;
        default: known = false;
      }
      break;
    }
    case Form::kCast:
      known = visit_storage(s.dtype, [&](auto ti) {
        known = visit_storage(s.to, [&](auto to) {
          using TI = decltype(ti);
          using TO = decltype(to);
          constexpr int V = ew_vec_width<TI, TO>();
          const TI* x = static_cast<const TI*>(in[0]);
          TO* y = static_cast<TO*>(out[0]);
          if (use_vec(s, V, {{x, sizeof(TI)}, {y, sizeof(TO)}}))
            cast_vec_kernel<TI, TO, V><<<vec_grid(s.n, V), kBlock, 0, stream>>>(s.fast, x, y, n32);
          else
            cast_kernel<TI, TO><<<grid, kBlock, 0, stream>>>(x, y, s.n);
        });
      }) && known;
      break;
  }
  if (!known) return cudaErrorInvalidValue;  // unreachable: plan checked the dtypes
  return launched();
}

// Widest element size among the operands: the vector width's.
size_t widest(const spora::plugin::KernelPlan& p) {
  size_t w = 1;
  for (int i = 0; i < p.num_inputs; ++i) w = std::max(w, spora::plugin::dtype_size(p.in[i].dtype));
  return std::max(w, spora::plugin::dtype_size(p.out[0].dtype));
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // already validated by the reference planner
  auto s = std::make_shared<EwState>();
  s->n = p.out[0].shape.numel();
  s->op = EwOp::kNeg;
  s->prm = ew_params_of(p.attrs);
  if (p.op == "cast") {
    s->form = Form::kCast;
    s->dtype = p.in[0].dtype;
    s->to = p.out[0].dtype;
  } else if (p.op == "where") {
    s->form = Form::kWhere;
    s->dtype = p.in[1].dtype;
  } else {
    if (!ew_op_of(p.op, &s->op)) return spora::plugin::unsupported(p, "not an elementwise op");
    s->dtype = p.in[0].dtype;
    s->form = s->op < EwOp::kAdd ? Form::kUnary : ew_is_compare(s->op) ? Form::kCompare : Form::kArith;
  }
  if (s->form != Form::kUnary && s->form != Form::kCast) {
    spora::plugin::Shape shapes[kEwMaxIn];
    for (int i = 0; i < p.num_inputs; ++i) shapes[i] = p.in[i].shape;
    s->ix = ew_index_of(p.out[0].shape, shapes, p.num_inputs);
  } else {  // one input, the output's own layout
    s->ix.rank = 1;
    s->ix.num_in = 1;
    s->ix.dims[0] = s->n;
    s->ix.strides[0][0] = 1;
    s->ix.flat = 1;
  }
  s->fits = s->n > 0 && ew_fast_fits(s->ix, s->n);
  if (s->fits) {
    s->fast = ew_fast_of(s->ix);
    s->vec = ew_vec_fits(s->ix, static_cast<int>(16 / widest(p)));
  }
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_elementwise_kernels(std::vector<GpuKernelEntry>& out) {
  for (int i = 0; i < ref::kNumOps; ++i) out.push_back({ref::kOps[i].name, plan});
}

}  // namespace spora::gpu
