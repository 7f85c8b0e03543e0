// How a row-major matmul maps onto a column-major BLAS call (cuBLAS): the
// row-major y (m x n) is the column-major y^T, and y^T = op(B)^T op(A)^T, so
// the call takes B first and A second, each keeping its transpose flag, with
// the leading dimensions of their column-major views. gpu_blas.cpp makes
// the call with these; tests/gpu runs a textbook column-major GEMM with the
// same arguments against the reference matmul.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gemm_math.h"  // GemmEpilogue: linear's fused epilogue, run after Lt when Lt cannot

namespace spora::gpu {

struct BlasArgs {
  bool trans_first, trans_second;  // CUBLAS_OP_T for the first (B) / second (A) operand
  int64_t rows, cols, inner;       // the BLAS m, n, k
  int64_t ld_first, ld_second, ld_out;
};

inline BlasArgs blas_args_row_major(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  BlasArgs a;
  a.trans_first = tb;
  a.trans_second = ta;
  a.rows = n;
  a.cols = m;
  a.inner = k;
  a.ld_first = tb ? k : n;   // B stored n x k (tb) or k x n, row-major
  a.ld_second = ta ? m : k;  // A stored k x m (ta) or m x k, row-major
  a.ld_out = n;
  return a;
}

// ---- cuBLASLt ----
//
// The same column-major view as a cublasLtMatmul: D (m x n, column-major) =
// epilogue(alpha op(A) op(B) + beta C), with Lt's A our B and Lt's B our A.
// Layouts give each operand's stored (not transposed) rows, columns,
// leading dimension and batch stride; C shares D's layout. gpu_blas.cpp
// builds the descriptors from LtArgs; tests/gpu emulates the call's
// column-major semantics from the same LtArgs against the reference.

// Float matmul precision (the kernel attribute "matmul_precision"):
// highest = exact FP32 products; high = TF32 allowed; medium = bf16 or
// TF32 allowed. Only f32 matmuls are affected.
enum class MatmulPrecision : int32_t { kHighest, kHigh, kMedium };

inline bool matmul_precision_of(const std::string& s, MatmulPrecision* out) {
  if (s == "highest") *out = MatmulPrecision::kHighest;
  else if (s == "high") *out = MatmulPrecision::kHigh;
  else if (s == "medium") *out = MatmulPrecision::kMedium;
  else return false;
  return true;
}

// cuBLAS compute types: f16/bf16 multiply on tensor cores and accumulate in
// f32 (the reference's compute type), f32 in exact FP32 unless the user
// allowed TF32 / bf16, f64 in f64.
enum class LtCompute : int32_t { k32F, k32FFastTF32, k32FFast16BF, k64F };

inline LtCompute lt_compute_of(int32_t dtype, MatmulPrecision p) {
  if (dtype == SPORA_DTYPE_F64) return LtCompute::k64F;
  if (dtype == SPORA_DTYPE_F32 && p == MatmulPrecision::kHigh) return LtCompute::k32FFastTF32;
  if (dtype == SPORA_DTYPE_F32 && p == MatmulPrecision::kMedium) return LtCompute::k32FFast16BF;
  return LtCompute::k32F;
}

// kBias adds bias[row of D] (our column) after the product; the activation
// ones then apply relu / tanh-form gelu, rounding once to D's type.
enum class LtEpilogue : int32_t { kDefault, kBias, kReluBias, kGeluBias };

struct LtLayout {
  int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
};

struct LtArgs {
  int32_t dtype = SPORA_DTYPE_F32;  // A, B, C, D and the bias
  LtCompute compute = LtCompute::k32F;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  LtLayout a, b, d;
  int64_t batch = 1;
  LtEpilogue epilogue = LtEpilogue::kDefault;
  // D holds the bias rows before the call (the plugin's bias_rows kernel):
  // C = D and beta = 1, for when Lt takes no bias epilogue.
  bool beta_one = false;
  // The residual add and/or activation still to run (gemm_store over D).
  bool own_epilogue = false;
};

// Row-major y[b] (m x n) = op(a[b]) op(b[b]) for b < batch; stride_a /
// stride_b are the elements between batch entries (0: one matrix for all).
inline LtArgs lt_args_row_major(int32_t dtype, MatmulPrecision p, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                int64_t batch, int64_t stride_a, int64_t stride_b) {
  LtArgs x;
  x.dtype = dtype;
  x.compute = lt_compute_of(dtype, p);
  x.trans_a = tb;
  x.trans_b = ta;
  x.m = n;
  x.n = m;
  x.k = k;
  // Lt's A is our B: stored n x k (tb) or k x n, row-major.
  x.a = tb ? LtLayout{k, n, k, stride_b} : LtLayout{n, k, n, stride_b};
  // Lt's B is our A: stored k x m (ta) or m x k, row-major.
  x.b = ta ? LtLayout{m, k, m, stride_a} : LtLayout{k, m, k, stride_a};
  x.d = LtLayout{n, m, n, m * n};
  x.batch = batch;
  return x;
}

// The ways to run matmul (ep == NULL, no bias) or linear and its fused
// forms (bias; ep: the fused epilogue, NULL for plain linear) through Lt, in
// order of preference; the plugin takes the first Lt has an algorithm for.
// Lt's activation epilogue is used only where it rounds as the reference
// does closely enough: relu (relu commutes with rounding) without a residual
// add; gelu's tanh form for f16/bf16 only (Lt evaluates it from the
// unrounded sum with its own tanh, within the half types' tolerance but not
// f32's). Otherwise Lt adds the bias and the plugin's epilogue kernel runs
// the add (rounded) then the activation (rounded), as the reference does.
inline std::vector<LtArgs> lt_candidates(const LtArgs& base, bool linear, const GemmEpilogue* ep) {
  std::vector<LtArgs> out;
  if (!linear) {
    out.push_back(base);
    return out;
  }
  const bool rest = ep && (ep->has_add || ep->has_act);
  if (ep && ep->has_act && !ep->has_add) {
    const bool half = base.dtype == SPORA_DTYPE_F16 || base.dtype == SPORA_DTYPE_BF16;
    LtArgs x = base;
    if (ep->act == EwOp::kRelu) x.epilogue = LtEpilogue::kReluBias;
    else if (ep->act == EwOp::kGelu && ep->act_params.gelu_tanh && half) x.epilogue = LtEpilogue::kGeluBias;
    if (x.epilogue != LtEpilogue::kDefault) out.push_back(x);
  }
  LtArgs bias = base;
  bias.epilogue = LtEpilogue::kBias;
  bias.own_epilogue = rest;
  out.push_back(bias);
  LtArgs rows = base;
  rows.beta_one = true;
  rows.own_epilogue = rest;
  out.push_back(rows);
  return out;
}

}  // namespace spora::gpu
