// Reference matmul with broadcast batch dimensions and transposes. Cache-aware
// loop order (i, k, j) over row-major data; the cpu plugin uses oneDNN for the
// fast path and this for what oneDNN does not cover (f64).
#include <cstring>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

template <class T>
void gemm(const T* a, const T* b, T* y, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(T));
  // Element (i, kk) of op(A) and (kk, j) of op(B).
  const int64_t a_i = ta ? 1 : k, a_k = ta ? m : 1;
  const int64_t b_k = tb ? 1 : n, b_j = tb ? k : 1;
  for (int64_t i = 0; i < m; ++i) {
    T* yr = y + i * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const T av = a[i * a_i + kk * a_k];
      const T* br = b + kk * b_k;
      if (b_j == 1) {
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];
      } else {
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j * b_j];
      }
    }
  }
}

template <class T>
void matmul_t(const KernelPlan& p, const T* a, const T* b, T* y) {
  const Shape &sa = p.in[0], &sb = p.in[1], &so = p.out;
  const int r = so.rank;
  const int64_t m = so.dims[r - 2], n = so.dims[r - 1];
  const int64_t k = p.transpose_a ? sa.dims[r - 2] : sa.dims[r - 1];
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= so.dims[i];
  if (batch == 0 || m == 0 || n == 0) return;
  const int64_t mat_a = sa.dims[r - 2] * sa.dims[r - 1], mat_b = sb.dims[r - 2] * sb.dims[r - 1];
  for (int64_t bi = 0; bi < batch; ++bi) {
    // Decompose the output batch index and map it onto each operand,
    // repeating size-1 batch dimensions.
    int64_t rem = bi, off_a = 0, off_b = 0, st_a = 1, st_b = 1;
    for (int d = r - 3; d >= 0; --d) {
      const int64_t id = rem % so.dims[d];
      rem /= so.dims[d];
      if (sa.dims[d] != 1) off_a += id * st_a;
      if (sb.dims[d] != 1) off_b += id * st_b;
      st_a *= sa.dims[d];
      st_b *= sb.dims[d];
    }
    gemm(a + off_a * mat_a, b + off_b * mat_b, y + bi * m * n, m, n, k, p.transpose_a, p.transpose_b);
  }
}

}  // namespace

void ref_matmul(const KernelPlan& p, const void* a, const void* b, void* y) {
  if (p.dtype == SPORA_DTYPE_F32)
    matmul_t(p, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(y));
  else
    matmul_t(p, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(y));
}

}  // namespace spora::plugin
