// Indexing ops whose indices are device data: one_hot, take (gather,
// embedding, index_select), gather_nd, gather_elements and scatter_add.
// Indices are checked per element, where they are read: a position outside
// [-n, n) selects nothing (one_hot leaves the row at off_value, the gathers
// write zeros, scatter_add drops the update), as the reference kernels
// (plugins/common/kernels/indexing.cpp) do. Gathered elements are moved as
// bits; scatter_add adds in the compute type.
#pragma once
#include <cstdint>

#include "hd.h"
#include "kernel_plan.h"   // plugins/common: KernelPlan (host side)
#include "kernels/copy.h"  // plugins/common: dense_strides

namespace spora::gpu {

// The position index i selects in a dim of size n (negative counts from
// the end), or -1.
SPORA_HD inline int64_t index_wrap(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n ? i : -1;
}

// Output element e of one_hot(idx) with `depth` classes: the on or off bits.
template <class I, class U>
SPORA_HD inline U one_hot_elem(const I* idx, int64_t depth, U on, U off, int64_t e) {
  const int64_t j = e / depth, c = e % depth;
  return index_wrap(static_cast<int64_t>(idx[j]), depth) == c ? on : off;
}

// take: y (outer, k, inner) from x (outer, n, inner) and idx (k); output
// element e, in units U of `inner` units per row.
template <class I, class U>
SPORA_HD inline U take_elem(const U* x, const I* idx, int64_t n, int64_t k, int64_t inner, int64_t e) {
  const int64_t w = e % inner, r = e / inner;
  const int64_t j = r % k, o = r / k;
  const int64_t i = index_wrap(static_cast<int64_t>(idx[j]), n);
  return i >= 0 ? x[(o * n + i) * inner + w] : U(0);
}

}  // namespace spora::gpu

namespace spora::gpu {

constexpr int kIxMaxRank = 8;  // SPORA_MAX_RANK

// gather_nd: y (m, inner) from x, whose leading q dims are indexed by the
// rows of idx (m, q); `inner` units U per gathered slice.
struct GatherNdIndex {
  int32_t q = 0;
  int64_t inner = 1;
  int64_t dims[kIxMaxRank] = {};  // x's leading q dims
  int64_t st[kIxMaxRank] = {};    // their strides, in slices
};

// Output element e of gather_nd: zeros when any index of its row is out
// of range.
template <class I, class U>
SPORA_HD inline U gather_nd_elem(const GatherNdIndex& g, const U* x, const I* idx, int64_t e) {
  const int64_t j = e / g.inner, w = e % g.inner;
  const I* row = idx + j * g.q;
  int64_t off = 0;
  for (int k = 0; k < g.q; ++k) {
    const int64_t i = index_wrap(static_cast<int64_t>(row[k]), g.dims[k]);
    if (i < 0) return U(0);
    off += i * g.st[k];
  }
  return x[off * g.inner + w];
}

// gather_elements: y has idx's shape; y[p] = x[p with p[axis] = idx[p]].
struct GatherElIndex {
  int32_t rank = 0, axis = 0;
  int64_t idx_dims[kIxMaxRank] = {};
  int64_t x_st[kIxMaxRank] = {};  // in elements
  int64_t axis_dim = 0;
};

// Output element e (row-major over idx's dims): zeros for an index out of
// range.
template <class I, class U>
SPORA_HD inline U gather_el_elem(const GatherElIndex& g, const U* x, const I* idx, int64_t e) {
  const int64_t i = index_wrap(static_cast<int64_t>(idx[e]), g.axis_dim);
  if (i < 0) return U(0);
  int64_t off = 0, r = e;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t p = r % g.idx_dims[d];
    r /= g.idx_dims[d];
    off += (d == g.axis ? i : p) * g.x_st[d];
  }
  return x[off];
}

// scatter_add: y = x, then for every index position p in row-major order,
// y[p with p[axis] = idx[p]] += updates[p] (dropped when out of range).
// The updates landing on one output element are exactly those at
// positions sharing its coordinates off the axis, visited by increasing
// p[axis] -- the reference's order -- so one thread per output element
// walks them sequentially and gets the reference's sums bit for bit.
struct ScatterIndex {
  int32_t rank = 0, axis = 0;
  int64_t x_dims[kIxMaxRank] = {};
  int64_t idx_dims[kIxMaxRank] = {};
  int64_t idx_st[kIxMaxRank] = {};  // dense strides of idx
  int64_t u_st[kIxMaxRank] = {};    // dense strides of updates
};

// Addition as scatter_add defines it: or for bool, wrapping for integers,
// the compute type (float for 16-bit floats) otherwise.
template <class C>
SPORA_HD inline C scatter_add_op(C a, C b) {
  if constexpr (is_bool_c<C>) return a || b;
  else if constexpr (is_int_c<C>) return wrap_add(a, b);
  else return a + b;
}

template <class T, class I>
SPORA_HD inline T scatter_add_elem(const ScatterIndex& s, const T* x, const I* idx, const T* upd, int64_t e) {
  using C = compute_of<T>;
  C acc = elem<T>::load(x[e]);
  int64_t pos[kIxMaxRank] = {};
  int64_t r = e;
  for (int d = s.rank - 1; d >= 0; --d) {
    pos[d] = r % s.x_dims[d];
    r /= s.x_dims[d];
  }
  int64_t ib = 0, ub = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (d == s.axis) continue;
    if (pos[d] >= s.idx_dims[d]) return elem<T>::store(acc);  // no index position shares these coordinates
    ib += pos[d] * s.idx_st[d];
    ub += pos[d] * s.u_st[d];
  }
  const int64_t n = s.idx_dims[s.axis], want = pos[s.axis], xn = s.x_dims[s.axis];
  for (int64_t t = 0; t < n; ++t) {
    if (index_wrap(static_cast<int64_t>(idx[ib + t * s.idx_st[s.axis]]), xn) == want)
      acc = scatter_add_op<C>(acc, static_cast<C>(elem<T>::load(upd[ub + t * s.u_st[s.axis]])));
  }
  return elem<T>::store(acc);
}

// Host side: the index math of a plan the reference planner validated
// (shapes and axis checked there).
inline GatherNdIndex gather_nd_index_of(const spora::plugin::KernelPlan& p) {
  const spora::plugin::Shape& x = p.in[0].shape;
  GatherNdIndex g;
  g.q = static_cast<int32_t>(p.in[1].shape.dims[1]);
  g.inner = p.out[0].shape.dims[1];
  int64_t st = 1;
  for (int k = g.q - 1; k >= 0; --k) {
    g.dims[k] = x.dims[k];
    g.st[k] = st;
    st *= x.dims[k];
  }
  return g;
}

inline GatherElIndex gather_el_index_of(const spora::plugin::KernelPlan& p) {
  const spora::plugin::Shape &x = p.in[0].shape, &idx = p.in[1].shape;
  GatherElIndex g;
  g.rank = x.rank;
  g.axis = static_cast<int32_t>(p.attrs.get_int("axis", -1));
  spora::plugin::dense_strides(x, g.x_st);
  for (int d = 0; d < x.rank; ++d) g.idx_dims[d] = idx.dims[d];
  g.axis_dim = x.dims[g.axis];
  return g;
}

inline ScatterIndex scatter_index_of(const spora::plugin::KernelPlan& p) {
  const spora::plugin::Shape &x = p.in[0].shape, &idx = p.in[1].shape;
  ScatterIndex s;
  s.rank = x.rank;
  s.axis = static_cast<int32_t>(p.attrs.get_int("axis", -1));
  for (int d = 0; d < x.rank; ++d) {
    s.x_dims[d] = x.dims[d];
    s.idx_dims[d] = idx.dims[d];
  }
  spora::plugin::dense_strides(idx, s.idx_st);
  spora::plugin::dense_strides(p.in[2].shape, s.u_st);
  return s;
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulations of the kernels: every output element, as its thread
// computes it.
template <class I, class U>
inline void gather_nd_emulate(const GatherNdIndex& g, const U* x, const I* idx, U* y, int64_t total) {
  for (int64_t e = 0; e < total; ++e) y[e] = gather_nd_elem<I, U>(g, x, idx, e);
}
template <class I, class U>
inline void gather_el_emulate(const GatherElIndex& g, const U* x, const I* idx, U* y, int64_t total) {
  for (int64_t e = 0; e < total; ++e) y[e] = gather_el_elem<I, U>(g, x, idx, e);
}
template <class T, class I>
inline void scatter_add_emulate(const ScatterIndex& s, const T* x, const I* idx, const T* upd, T* y, int64_t total) {
  for (int64_t e = 0; e < total; ++e) y[e] = scatter_add_elem<T, I>(s, x, idx, upd, e);
}
#endif

}  // namespace spora::gpu
