// Reductions over any set of axes (sum, mean, max, min) for f32, f16 and
// bf16 storage, accumulating in float. One work-group of 64 items per output
// element: each item folds a strided share of the reduced elements, then a
// tree in local memory combines the shares. The input index space is split
// into kept dims (kdims/kstr, in the output's row-major order) and reduced
// dims (rdims/rstr).
#include "common.h"

#define RED_GROUP 64

// op: 0 sum (times scale: mean), 1 max, 2 min; NaN propagates through max/min.
static inline float red_init(int op) { return op == 0 ? 0.0f : (op == 1 ? -INFINITY : INFINITY); }
static inline float red_add(int op, float acc, float v) {
  if (op == 0) return acc + v;
  if (op == 1) return (v > acc || isnan(v)) ? v : acc;
  return (v < acc || isnan(v)) ? v : acc;
}

// Combines the group's shares in `part`; every item returns the result.
static float red_tree(__local float* part, int op, float acc) {
  const int t = (int)get_local_id(0);
  part[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = RED_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) part[t] = red_add(op, part[t], part[t + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return part[0];
}

#define REDUCE_KERNEL(S)                                                                                    \
  __kernel __attribute__((reqd_work_group_size(RED_GROUP, 1, 1))) void reduce_##S(                        \
      __global const STOR_##S* x, __global STOR_##S* y, int op, long count, float scale, int krank,         \
      long8 kdims, long8 kstr, int rrank, long8 rdims, long8 rstr) {                                        \
    __local float part[RED_GROUP];                                                                          \
    const long o = get_group_id(0);                                                                         \
    const long base = offset_of(o, krank, kdims, kstr);                                                     \
    float acc = red_init(op);                                                                               \
    for (long r = get_local_id(0); r < count; r += RED_GROUP)                                               \
      acc = red_add(op, acc, LOAD_##S(x, base + offset_of(r, rrank, rdims, rstr)));                         \
    const float total = red_tree(part, op, acc);                                                            \
    if (get_local_id(0) == 0) STORE_##S(y, o, op == 0 ? total * scale : total);                             \
  }
REDUCE_KERNEL(f32)
REDUCE_KERNEL(f16)
REDUCE_KERNEL(bf16)
