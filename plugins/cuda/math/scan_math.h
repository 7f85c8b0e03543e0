// cumsum and topk along one axis, seen as lines: (outer, n, inner) with
// line l = o * inner + c holding elements base + j * inner. One thread per
// line runs the reference's sequential algorithm, so results are the
// reference's bit for bit (plugins/common/kernels/scan.cpp):
//   cumsum: floats sum in double, integers in uint64 (wrapping), in index
//     order (reversed for `reverse`), `exclusive` writing the sum before
//     the element;
//   topk: the first k of the total order "larger (smaller) first, NaN above
//     every number, ties to the lower index", sorted by that order, or by
//     index when not `sorted`; indices are int64.
#pragma once
#include <cstdint>
#include <type_traits>

#include "hd.h"
#include "kernel_plan.h"  // plugins/common: KernelPlan (host side)
#include "reduce_ops.h"   // plugins/common: lines_of

namespace spora::gpu {

struct ScanIndex {
  int64_t outer = 1, n = 1, inner = 1;
  bool exclusive = false, reverse = false;  // cumsum
  int64_t k = 0;                            // topk
  bool largest = true, sorted = true;       // topk
};

SPORA_HD inline int64_t scan_lines(const ScanIndex& s) { return s.outer * s.inner; }

// Offset of line l's first element in a tensor whose axis has length len.
SPORA_HD inline int64_t scan_base(const ScanIndex& s, int64_t len, int64_t l) {
  return (l / s.inner) * len * s.inner + l % s.inner;
}

// ---- cumsum ----

template <class T>
using scan_acc_t = typename std::conditional<is_float_c<compute_of<T>>, double, uint64_t>::type;

template <class T>
SPORA_HD inline void cumsum_line(const ScanIndex& s, const T* x, T* y, int64_t l) {
  using A = scan_acc_t<T>;
  const int64_t base = scan_base(s, s.n, l);
  A acc = 0;
  for (int64_t j = 0; j < s.n; ++j) {
    const int64_t k = base + (s.reverse ? s.n - 1 - j : j) * s.inner;
    const A v = static_cast<A>(elem<T>::load(x[k]));
    if (s.exclusive) {
      y[k] = elem<T>::store(acc);
      acc += v;
    } else {
      acc += v;
      y[k] = elem<T>::store(acc);
    }
  }
}

// ---- topk ----

// True when (a, ia) comes before (b, ib) in topk's order.
template <class C>
SPORA_HD inline bool topk_before(bool largest, C a, int64_t ia, C b, int64_t ib) {
  const bool na = is_nan(a), nb = is_nan(b);
  if (na || nb) return na && nb ? ia < ib : (largest ? na : nb);
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// Line l of topk: an insertion into the k slots of the outputs, kept in
// order, as x is read in index order (O(n k) at worst, O(n) when few
// elements beat the current k-th). Values are stored as the reference
// stores them (load then store), so reading a slot back gives the value
// compared. Unsorted output then takes, in index order, every element not
// after the k-th, which are exactly the k chosen.
template <class T>
SPORA_HD inline void topk_line(const ScanIndex& s, const T* x, T* values, int64_t* indices, int64_t l) {
  using C = compute_of<T>;
  const int64_t k = s.k, st = s.inner;
  if (k == 0) return;
  const T* xs = x + scan_base(s, s.n, l);
  T* vs = values + scan_base(s, k, l);
  int64_t* is = indices + scan_base(s, k, l);
  int64_t count = 0;
  for (int64_t j = 0; j < s.n; ++j) {
    const C v = elem<T>::load(xs[j * st]);
    // j is above every index held, so an equal value stays behind.
    if (count == k && !topk_before<C>(s.largest, v, j, elem<T>::load(vs[(k - 1) * st]), is[(k - 1) * st])) continue;
    int64_t p = count < k ? count++ : k - 1;
    while (p > 0 && topk_before<C>(s.largest, v, j, elem<T>::load(vs[(p - 1) * st]), is[(p - 1) * st])) {
      vs[p * st] = vs[(p - 1) * st];
      is[p * st] = is[(p - 1) * st];
      --p;
    }
    vs[p * st] = elem<T>::store(v);
    is[p * st] = j;
  }
  if (s.sorted) return;
  const C tv = elem<T>::load(vs[(k - 1) * st]);
  const int64_t ti = is[(k - 1) * st];
  int64_t out = 0;
  for (int64_t j = 0; j < s.n && out < k; ++j) {
    const C v = elem<T>::load(xs[j * st]);
    if (j != ti && !topk_before<C>(s.largest, v, j, tv, ti)) continue;
    vs[out * st] = elem<T>::store(v);
    is[out * st] = j;
    ++out;
  }
}

// Host side: the lines of a cumsum or topk plan the reference planner
// validated.
inline ScanIndex scan_index_of(const spora::plugin::KernelPlan& p) {
  ScanIndex s;
  spora::plugin::Lines l;
  spora::plugin::lines_of(p.in[0].shape, p.attrs.get_int("axis", p.in[0].shape.rank - 1), &l);
  s.outer = l.outer;
  s.n = l.n;
  s.inner = l.inner;
  if (p.op == "cumsum") {
    s.exclusive = p.attrs.get_bool("exclusive", false);
    s.reverse = p.attrs.get_bool("reverse", false);
  } else {
    s.k = p.attrs.get_int("k", -1);
    s.largest = p.attrs.get_bool("largest", true);
    s.sorted = p.attrs.get_bool("sorted", true);
  }
  return s;
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulations: every line, as its thread computes it.
template <class T>
inline void cumsum_emulate(const ScanIndex& s, const T* x, T* y) {
  for (int64_t l = 0; l < scan_lines(s); ++l) cumsum_line<T>(s, x, y, l);
}
template <class T>
inline void topk_emulate(const ScanIndex& s, const T* x, T* values, int64_t* indices) {
  for (int64_t l = 0; l < scan_lines(s); ++l) topk_line<T>(s, x, values, indices, l);
}
#endif

}  // namespace spora::gpu
