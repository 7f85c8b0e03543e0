// Indexing ops whose indices are device data: one_hot and take (gather,
// embedding, index_select). Indices are checked per element, where they are
// read: a position outside [-n, n) selects nothing (one_hot leaves the row
// at off_value, take writes zeros), as the reference kernels
// (plugins/common/kernels/indexing.cpp) do. Elements are moved as bits.
#pragma once
#include <cstdint>

#include "hd.h"

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
