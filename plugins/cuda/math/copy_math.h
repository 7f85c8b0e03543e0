// Element movement (transpose, broadcast_to, tile, flip, slice,
// strided_slice): output element i reads x[offset + sum_d i_d * stride[d]],
// the affine map plugins/common's StridedCopy plans (and bounds-checks) for
// the reference kernels. The GPU kernel evaluates it per element; tests/gpu
// compares that with StridedCopy::run.
#pragma once
#include <cstdint>

#include "hd.h"
#include "kernels/copy.h"  // plugins/common: StridedCopy (host side)

namespace spora::gpu {

constexpr int kCopyMaxRank = spora::plugin::kMaxCopyRank;

struct CopyIndex {
  int32_t rank = 0;
  int64_t dims[kCopyMaxRank] = {};
  int64_t stride[kCopyMaxRank] = {};
  int64_t offset = 0;
  int64_t numel = 0;
};

// Source element of output element i.
SPORA_HD inline int64_t copy_offset(const CopyIndex& c, int64_t i) {
  int64_t off = c.offset;
  for (int d = c.rank - 1; d >= 0; --d) {
    off += (i % c.dims[d]) * c.stride[d];
    i /= c.dims[d];
  }
  return off;
}

// Host side: the index of a planned (simplified) StridedCopy.
inline CopyIndex copy_index_of(const spora::plugin::StridedCopy& s) {
  CopyIndex c;
  c.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) {
    c.dims[d] = s.dims[d];
    c.stride[d] = s.stride[d];
  }
  c.offset = s.offset;
  c.numel = s.numel;
  return c;
}

}  // namespace spora::gpu
