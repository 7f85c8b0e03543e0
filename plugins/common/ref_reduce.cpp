// Reference reductions (sum, mean) over any set of axes, and softmax along
// one axis.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

template <class T>
void reduce_t(const KernelPlan& p, const T* x, T* y) {
  const Shape& si = p.in[0];
  const int r = si.rank;
  const int64_t n_out = p.out.numel();
  const int64_t n_in = si.numel();
  // Accumulate in double for both dtypes: sums of many f32 values keep
  // their precision, at no cost that matters for a reference kernel.
  std::vector<double> acc(static_cast<size_t>(n_out), 0.0);
  if (n_in > 0) {
    int64_t st_o[SPORA_MAX_RANK];
    int64_t ro = 1;
    for (int i = r - 1; i >= 0; --i) {
      st_o[i] = p.reduce_axis[i] ? 0 : ro;
      ro *= p.reduce_axis[i] ? 1 : si.dims[i];
    }
    int64_t idx[SPORA_MAX_RANK] = {};
    int64_t off = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      acc[static_cast<size_t>(off)] += static_cast<double>(x[i]);
      for (int d = r - 1; d >= 0; --d) {
        off += st_o[d];
        if (++idx[d] < si.dims[d]) break;
        off -= st_o[d] * si.dims[d];
        idx[d] = 0;
      }
    }
  }
  double count = 1;
  for (int i = 0; i < r; ++i)
    if (p.reduce_axis[i]) count *= static_cast<double>(si.dims[i]);
  const bool mean = p.kind == OpKind::kMean;
  for (int64_t i = 0; i < n_out; ++i)
    y[i] = static_cast<T>(mean ? acc[static_cast<size_t>(i)] / count : acc[static_cast<size_t>(i)]);
}

template <class T>
void softmax_t(const KernelPlan& p, const T* x, T* y) {
  const Shape& s = p.in[0];
  if (s.rank == 0) {
    y[0] = T(1);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < p.axis; ++i) outer *= s.dims[i];
  for (int i = p.axis + 1; i < s.rank; ++i) inner *= s.dims[i];
  const int64_t len = s.dims[p.axis];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* xs = x + o * len * inner + in;
      T* ys = y + o * len * inner + in;
      T mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, xs[j * inner]);
      T total = 0;
      for (int64_t j = 0; j < len; ++j) {
        T e = std::exp(xs[j * inner] - mx);
        ys[j * inner] = e;
        total += e;
      }
      const T inv = T(1) / total;
      for (int64_t j = 0; j < len; ++j) ys[j * inner] *= inv;
    }
  }
}

}  // namespace

void ref_reduce(const KernelPlan& p, const void* x, void* y) {
  if (p.dtype == SPORA_DTYPE_F32) reduce_t(p, static_cast<const float*>(x), static_cast<float*>(y));
  else reduce_t(p, static_cast<const double*>(x), static_cast<double*>(y));
}

void ref_softmax(const KernelPlan& p, const void* x, void* y) {
  if (p.dtype == SPORA_DTYPE_F32) softmax_t(p, static_cast<const float*>(x), static_cast<float*>(y));
  else softmax_t(p, static_cast<const double*>(x), static_cast<double*>(y));
}

}  // namespace spora::plugin
