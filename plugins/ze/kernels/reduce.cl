// Reductions over any set of axes (sum, mean, max, min), f32. One work-group
// of 64 items per output element: each item folds a strided share of the
// reduced elements, then a tree in local memory combines the shares. The
// input index space is split into kept dims (kdims/kstr, in the output's
// row-major order) and reduced dims (rdims/rstr).
#include "common.h"

#define RED_GROUP 64

__kernel __attribute__((reqd_work_group_size(RED_GROUP, 1, 1)))
void reduce_f32(__global const float* x, __global float* y, int op, long count, float scale, int krank,
                long8 kdims, long8 kstr, int rrank, long8 rdims, long8 rstr) {
  __local float part[RED_GROUP];
  const long o = get_group_id(0);
  const int t = (int)get_local_id(0);
  const long base = offset_of(o, krank, kdims, kstr);
  float acc = op == 0 ? 0.0f : (op == 1 ? -INFINITY : INFINITY);
  for (long r = t; r < count; r += RED_GROUP) {
    const float v = x[base + offset_of(r, rrank, rdims, rstr)];
    if (op == 0) acc += v;
    else if (op == 1) acc = (v > acc || isnan(v)) ? v : acc;
    else acc = (v < acc || isnan(v)) ? v : acc;
  }
  part[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = RED_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) {
      const float a = part[t], b = part[t + s];
      if (op == 0) part[t] = a + b;
      else if (op == 1) part[t] = (b > a || isnan(b)) ? b : a;
      else part[t] = (b < a || isnan(b)) ? b : a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) y[o] = op == 0 ? part[0] * scale : part[0];
}
