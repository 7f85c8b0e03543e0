// Reference layout kernels: transpose (any permutation).
#include "kernel_plan.h"

namespace spora::plugin {
namespace {

template <class T>
void transpose_t(const KernelPlan& p, const T* x, T* y) {
  const Shape& si = p.in[0];
  const Shape& so = p.out;
  const int r = so.rank;
  const int64_t n = so.numel();
  if (n == 0) return;
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  int64_t st_in[SPORA_MAX_RANK] = {};
  int64_t s = 1;
  for (int i = si.rank - 1; i >= 0; --i) {
    st_in[i] = s;
    s *= si.dims[i];
  }
  // Stride in the input for a step along each output dimension.
  int64_t st[SPORA_MAX_RANK] = {};
  for (int i = 0; i < r; ++i) st[i] = st_in[p.perm[i]];
  int64_t idx[SPORA_MAX_RANK] = {};
  int64_t off = 0;
  const int64_t inner = so.dims[r - 1], is = st[r - 1];
  for (int64_t done = 0; done < n; done += inner) {
    for (int64_t j = 0; j < inner; ++j) y[j] = x[off + j * is];
    y += inner;
    for (int d = r - 2; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < so.dims[d]) break;
      off -= st[d] * so.dims[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void ref_transpose(const KernelPlan& p, const void* x, void* y) {
  if (p.dtype == SPORA_DTYPE_F32) transpose_t(p, static_cast<const float*>(x), static_cast<float*>(y));
  else transpose_t(p, static_cast<const double*>(x), static_cast<double*>(y));
}

}  // namespace spora::plugin
