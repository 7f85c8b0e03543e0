// Strided copies (transpose, broadcast_to) for any dtype, by element width:
// output element i reads the input at offset_of(i, rank, dims, strides),
// strides in elements (0 where broadcast).
#include "common.h"

#define COPY_KERNEL(W, TYPE)                                                                               \
  __kernel void copy_##W(__global const TYPE* x, __global TYPE* y, long n, int rank, long8 dims,          \
                         long8 strides) {                                                                  \
    const long i = get_global_id(0);                                                                       \
    if (i >= n) return;                                                                                    \
    y[i] = x[offset_of(i, rank, dims, strides)];                                                           \
  }
COPY_KERNEL(1, uchar)
COPY_KERNEL(2, ushort)
COPY_KERNEL(4, uint)
COPY_KERNEL(8, ulong)
