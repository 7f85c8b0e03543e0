// How a row-major matmul maps onto a column-major BLAS call (cuBLAS): the
// row-major y (m x n) is the column-major y^T, and y^T = op(B)^T op(A)^T, so
// the call takes B first and A second, each keeping its transpose flag, with
// the leading dimensions of their column-major views. gpu_blas.cpp makes
// the call with these; tests/gpu runs a textbook column-major GEMM with the
// same arguments against the reference matmul.
#pragma once
#include <cstdint>

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

}  // namespace spora::gpu
