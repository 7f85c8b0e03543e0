// Shared by every kernel family (OpenCL C 2.0, compiled to SPIR-V at build
// time). Shapes travel as long8 vectors by value (rank <= 8, the plugin
// ABI's SPORA_MAX_RANK): plain vector arguments, which every OpenCL and
// Level Zero implementation passes, unlike structs by value.
#ifndef SPORA_ZE_KERNELS_COMMON_H
#define SPORA_ZE_KERNELS_COMMON_H

// Offset of row-major position `idx` of a `rank`-dim index space with
// extents `dims`, in a tensor whose strides (elements, 0 = broadcast) are
// `strides`.
static inline long offset_of(long idx, int rank, long8 dims, long8 strides) {
  // Component by component: vstore8 into a private array would take a
  // generic-address-space pointer, which SPIR 1.2 consumers (PoCL) lack.
  const long d[8] = {dims.s0, dims.s1, dims.s2, dims.s3, dims.s4, dims.s5, dims.s6, dims.s7};
  const long s[8] = {strides.s0, strides.s1, strides.s2, strides.s3, strides.s4, strides.s5, strides.s6, strides.s7};
  long off = 0;
  for (int i = rank - 1; i >= 0; --i) {
    const long q = idx % d[i];
    idx /= d[i];
    off += q * s[i];
  }
  return off;
}

// Reads a one-element scalar input of dtype `dt` (spora_dtype_t: 1 f32,
// 5 i32, 6 i64) as float. f64 scalars are refused at plan time: an NPU
// need not support doubles.
static inline float read_scalar(__global const uchar* p, int dt) {
  if (dt == 5) return (float)(*(__global const int*)p);
  if (dt == 6) return (float)(*(__global const long*)p);
  return *(__global const float*)p;
}

#endif
