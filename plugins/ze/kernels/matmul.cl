// Batched matmul for f32, f16 and bf16 storage (accumulating in float),
// tiled: each 16x16 work-group computes a 16x16 block of C, staging 16x16
// tiles of A and B in local memory as floats. Batch dims broadcast through
// strides (0 on a size-1 operand dim); ta/tb read A or B transposed
// (A stored (K, M), B stored (N, K)).
#include "common.h"

#define TILE 16

#define MATMUL_KERNEL(S)                                                                                    \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void matmul_##S(                          \
      __global const STOR_##S* a, __global const STOR_##S* b, __global STOR_##S* c, long M, long N, long K, \
      int ta, int tb, int brank, long8 bdims, long8 bsa, long8 bsb) {                                       \
    __local float As[TILE][TILE];                                                                           \
    __local float Bs[TILE][TILE + 1]; /* +1: no bank conflicts on the column read */                        \
    const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);                                         \
    const long col = get_group_id(0) * TILE + lx;                                                           \
    const long row = get_group_id(1) * TILE + ly;                                                           \
    const long batch = get_global_id(2);                                                                    \
    const long oa = offset_of(batch, brank, bdims, bsa);                                                    \
    const long ob = offset_of(batch, brank, bdims, bsb);                                                    \
    float acc = 0.0f;                                                                                       \
    for (long k0 = 0; k0 < K; k0 += TILE) {                                                                 \
      const long ka = k0 + lx, kb = k0 + ly;                                                                \
      As[ly][lx] = (row < M && ka < K) ? LOAD_##S(a, oa + (ta ? ka * M + row : row * K + ka)) : 0.0f;       \
      Bs[ly][lx] = (kb < K && col < N) ? LOAD_##S(b, ob + (tb ? col * K + kb : kb * N + col)) : 0.0f;       \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                         \
      for (int k = 0; k < TILE; ++k) acc = fma(As[ly][k], Bs[k][lx], acc);                                  \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                         \
    }                                                                                                       \
    if (row < M && col < N) STORE_##S(c, batch * M * N + row * N + col, acc);                               \
  }
MATMUL_KERNEL(f32)
MATMUL_KERNEL(f16)
MATMUL_KERNEL(bf16)
