// Element movement shared by the layout and indexing kernels: a strided
// copy engine, fills, and the plan functions of the layout families. Plans
// and their state are public so that a plugin can run the same plan over
// disjoint output ranges (on several threads, say) without re-deriving it.
//
// Layout kernels never compute with elements, so they work on bytes: one
// code path per element size serves every dtype.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernel_plan.h"

namespace spora::plugin {

// tile splits each output dim in two (repeat, source), hence twice the rank.
constexpr int kMaxCopyRank = 2 * SPORA_MAX_RANK;

// y (dense, row-major) = elements of x picked by an affine map: the output
// element at index i reads x[offset + sum_d i_d * stride[d]]. Strides are
// in elements and may be 0 (repeat) or negative (reverse). Plans build one
// after checking every read stays inside x.
struct StridedCopy {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t stride[kMaxCopyRank] = {};
  int64_t offset = 0;
  int64_t elem = 0;   // bytes per element: 1, 2, 4 or 8
  int64_t numel = 0;  // output elements

  // Appends an output dim (outermost first).
  void push(int64_t dim, int64_t step);
  // Drops size-1 dims and merges dims that x walks contiguously, so that
  // inner runs are as long as possible (a copy of contiguous data becomes one
  // memcpy).
  void simplify();
  // Copies output elements [begin, end); disjoint ranges may run
  // concurrently. The whole range walks transposes in cache tiles.
  void run(const void* x, void* y, int64_t begin, int64_t end) const;
};

// Writes `n` copies of the `elem`-byte value at `value` to y.
void fill(void* y, const void* value, int64_t n, int64_t elem);

// The bit pattern of `v` in `dtype` (at most 8 bytes), converted as the
// kernels' store<T> does. False when v does not fit (integers must be whole
// and in range, bools 0 or 1): converting it would be undefined.
bool encode_value(int32_t dtype, double v, uint64_t* bits);

// Row-major strides (elements) of `s`.
void dense_strides(const Shape& s, int64_t* strides);

// Plans (kernels/layout.cpp, kernels/concat.cpp). The strided-copy ops
// (transpose, broadcast_to, tile, flip, slice, strided_slice) keep a
// StridedCopy as plan state; concat, stack and split keep a RowCopy.
spora_plugin_error_t* plan_strided_copy(KernelPlan& p);

// concat/stack/split on 2-D views: each of `parts` operands holds
// `width[i]` bytes per row, the whole holds their sum.
struct RowCopy {
  int parts = 0;
  int64_t rows = 0;
  int64_t width[kMaxOperands] = {};   // bytes per row of each part
  int64_t offset[kMaxOperands] = {};  // byte offset of each part in a whole row
  int64_t total = 0;                  // bytes per whole row
  bool join = true;                   // concat/stack (parts -> whole) or split

  // Copies rows [begin, end).
  void run(const void* const* in, void* const* out, int64_t begin, int64_t end) const;
};
spora_plugin_error_t* plan_row_copy(KernelPlan& p);

}  // namespace spora::plugin
