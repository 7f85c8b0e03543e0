// The GPU plugins' own GEMM (batched, broadcast batch dims, transposes):
// output tiles of kGemmTile x kGemmTile, one element per thread, the k
// dimension walked in tiles staged through shared memory. A thread block
// alternates two phases separated by barriers: every thread loads one
// element of the A tile and one of the B tile (gemm_load), then every
// thread accumulates its output over the staged k range (gemm_accumulate).
// Accumulation is in the compute type in ascending k, like the reference
// kernel; gemm_block_emulate runs the phases on the host for tests/gpu.
// (On a GPU the compiler may contract a*b+c into an FMA; the host does not.)
#pragma once
#include <cstdint>
#include <string>

#include "ew_math.h"
#include "hd.h"
#include "kernel_plan.h"  // plugins/common: Shape (host side)

namespace spora::gpu {

constexpr int kGemmTile = 16;
constexpr int kGemmMaxBatchRank = 6;

struct GemmIndex {
  int64_t m = 0, n = 0, k = 0;
  int32_t ta = 0, tb = 0;
  int64_t batch = 1;  // output matrices
  int32_t batch_rank = 0;
  int64_t batch_dims[kGemmMaxBatchRank] = {};
  int64_t a_bstride[kGemmMaxBatchRank] = {};  // in matrices; 0 where A broadcasts
  int64_t b_bstride[kGemmMaxBatchRank] = {};
  int64_t mat_a = 0, mat_b = 0;  // elements per A / B matrix
};

// Element offsets of output matrix `bi`'s A and B operands.
SPORA_HD inline void gemm_batch_offsets(const GemmIndex& g, int64_t bi, int64_t* oa, int64_t* ob) {
  int64_t a = 0, b = 0;
  for (int d = g.batch_rank - 1; d >= 0; --d) {
    const int64_t c = bi % g.batch_dims[d];
    bi /= g.batch_dims[d];
    a += c * g.a_bstride[d];
    b += c * g.b_bstride[d];
  }
  *oa = a * g.mat_a;
  *ob = b * g.mat_b;
}

// op(A)[i, kk] and op(B)[kk, j], zero outside the matrix.
template <class T>
SPORA_HD inline compute_of<T> gemm_a(const GemmIndex& g, const T* a, int64_t i, int64_t kk) {
  if (i >= g.m || kk >= g.k) return compute_of<T>(0);
  return elem<T>::load(g.ta ? a[kk * g.m + i] : a[i * g.k + kk]);
}
template <class T>
SPORA_HD inline compute_of<T> gemm_b(const GemmIndex& g, const T* b, int64_t kk, int64_t j) {
  if (kk >= g.k || j >= g.n) return compute_of<T>(0);
  return elem<T>::load(g.tb ? b[j * g.k + kk] : b[kk * g.n + j]);
}

// Phase 1 for thread (ty, tx) of the block at tile (row0, col0), k tile k0.
template <class T>
SPORA_HD inline void gemm_load(const GemmIndex& g, const T* a, const T* b, int64_t row0, int64_t col0, int64_t k0,
                               int ty, int tx, compute_of<T> (*as)[kGemmTile], compute_of<T> (*bs)[kGemmTile]) {
  as[ty][tx] = gemm_a<T>(g, a, row0 + ty, k0 + tx);
  bs[ty][tx] = gemm_b<T>(g, b, k0 + ty, col0 + tx);
}

// Phase 2: thread (ty, tx) adds the staged k range to its output. Only the
// `kn` valid k entries are added, so padding never touches the sum.
template <class C>
SPORA_HD inline C gemm_accumulate(C acc, int ty, int tx, int kn, const C (*as)[kGemmTile], const C (*bs)[kGemmTile]) {
  for (int kk = 0; kk < kn; ++kk) acc += as[ty][kk] * bs[kk][tx];
  return acc;
}

// linear and its epilogue-fused forms (linear_act, linear_add_act): the
// bias is the accumulator's initial value (as the reference linear adds the
// products to it), then each step rounds to T like the unfused ops: the
// product sum, the residual add, the activation.
struct GemmEpilogue {
  int32_t has_add = 0;
  int32_t has_act = 0;
  EwOp act = EwOp::kRelu;
  EwParams act_params;
};

template <class T>
SPORA_HD inline compute_of<T> gemm_init(const T* bias, int64_t col, int64_t n) {
  return bias && col < n ? elem<T>::load(bias[col]) : compute_of<T>(0);
}

// The stored output element from its accumulator (and residual element).
template <class T>
SPORA_HD inline T gemm_store(const GemmEpilogue* ep, compute_of<T> acc, const T* residual) {
  T y = elem<T>::store(acc);
  if (!ep) return y;
  if (ep->has_add) y = elem<T>::store(elem<T>::load(y) + elem<T>::load(*residual));
  if (ep->has_act) y = elem<T>::store(ew_unary<compute_of<T>>(ep->act, elem<T>::load(y), ep->act_params));
  return y;
}

// Host side: the epilogue of linear_act / linear_add_act from the
// activation attribute (the reference's names); false if unknown.
inline bool gemm_epilogue_of(const std::string& act, bool residual, GemmEpilogue* ep) {
  ep->has_add = residual;
  ep->has_act = act != "none";
  if (act == "relu") ep->act = EwOp::kRelu;
  else if (act == "sigmoid") ep->act = EwOp::kSigmoid;
  else if (act == "tanh") ep->act = EwOp::kTanh;
  else if (act == "gelu" || act == "gelu_tanh") {
    ep->act = EwOp::kGelu;
    ep->act_params.gelu_tanh = act == "gelu_tanh";
  } else if (act != "none") {
    return false;
  }
  return true;
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of the block computing tile (row0, col0) of one output
// matrix (operands already offset to that batch entry); bias, residual and
// ep as for linear (NULL for matmul).
template <class T>
inline void gemm_block_emulate(const GemmIndex& g, const T* a, const T* b, T* y, int64_t row0, int64_t col0,
                               const T* bias = nullptr, const T* residual = nullptr,
                               const GemmEpilogue* ep = nullptr) {
  using C = compute_of<T>;
  C as[kGemmTile][kGemmTile], bs[kGemmTile][kGemmTile], acc[kGemmTile][kGemmTile];
  for (int ty = 0; ty < kGemmTile; ++ty)
    for (int tx = 0; tx < kGemmTile; ++tx) acc[ty][tx] = gemm_init<T>(bias, col0 + tx, g.n);
  for (int64_t k0 = 0; k0 < g.k; k0 += kGemmTile) {
    for (int ty = 0; ty < kGemmTile; ++ty)
      for (int tx = 0; tx < kGemmTile; ++tx) gemm_load<T>(g, a, b, row0, col0, k0, ty, tx, as, bs);
    const int kn = static_cast<int>(g.k - k0 < kGemmTile ? g.k - k0 : kGemmTile);
    for (int ty = 0; ty < kGemmTile; ++ty)
      for (int tx = 0; tx < kGemmTile; ++tx) acc[ty][tx] = gemm_accumulate<C>(acc[ty][tx], ty, tx, kn, as, bs);
  }
  for (int ty = 0; ty < kGemmTile; ++ty)
    for (int tx = 0; tx < kGemmTile; ++tx)
      if (row0 + ty < g.m && col0 + tx < g.n) {
        const int64_t o = (row0 + ty) * g.n + col0 + tx;
        y[o] = gemm_store<T>(ep, acc[ty][tx], residual ? residual + o : nullptr);
      }
}
#endif

// Host side: the index of matmul(a, b) -> y (operands padded to y's rank
// >= 2, batch dims broadcasting), with the transpose flags.
inline GemmIndex gemm_index_of(const spora::plugin::Shape& a, const spora::plugin::Shape& b,
                               const spora::plugin::Shape& y, bool ta, bool tb) {
  GemmIndex g;
  const int r = y.rank;
  g.ta = ta;
  g.tb = tb;
  g.m = y.dims[r - 2];
  g.n = y.dims[r - 1];
  g.k = ta ? a.dims[r - 2] : a.dims[r - 1];
  g.mat_a = a.dims[r - 2] * a.dims[r - 1];
  g.mat_b = b.dims[r - 2] * b.dims[r - 1];
  // Batch dims, merged into at most kGemmMaxBatchRank (rank <= 8 leaves <= 6).
  g.batch_rank = r - 2;
  int64_t sa = 1, sb = 1;
  for (int d = r - 3; d >= 0; --d) {
    g.batch_dims[d] = y.dims[d];
    g.a_bstride[d] = a.dims[d] == 1 ? 0 : sa;
    g.b_bstride[d] = b.dims[d] == 1 ? 0 : sb;
    sa *= a.dims[d];
    sb *= b.dims[d];
    g.batch *= y.dims[d];
  }
  return g;
}

}  // namespace spora::gpu
