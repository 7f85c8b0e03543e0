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

// Storage types. Arithmetic is in float for every one of them; 16-bit
// values are converted on load and rounded to nearest even on store, as
// the reference kernels do. Both 16-bit types are handled as ushort bits
// with integer conversions: no cl_khr_fp16 needed, and no vload_half,
// whose OpenCL 2.0 generic-address-space overloads SPIR 1.2 consumers
// (PoCL, which checks these kernels) do not have.
#define STOR_f32 float
#define LOAD_f32(p, i) ((p)[i])
#define STORE_f32(p, i, v) ((p)[i] = (v))
#define STOR_f16 ushort
#define LOAD_f16(p, i) half_to_float((p)[i])
#define STORE_f16(p, i, v) ((p)[i] = float_to_half(v))
#define STOR_bf16 ushort
#define LOAD_bf16(p, i) as_float(((uint)(p)[i]) << 16)
#define STORE_bf16(p, i, v) ((p)[i] = float_to_bf16(v))

static inline float half_to_float(ushort h) {
  const uint sign = (uint)(h & 0x8000u) << 16;
  const uint em = h & 0x7fffu;
  if (em >= 0x7c00u) return as_float(sign | 0x7f800000u | (em & 0x3ffu) << 13);  // inf, NaN
  if (em < 0x0400u) return as_float(as_uint((float)em * 0x1p-24f) | sign);      // zero, subnormal
  return as_float(sign | ((em << 13) + (112u << 23)));
}

static inline ushort float_to_half(float f) {
  const uint x = as_uint(f);
  const uint sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (ushort)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN, inf
  if (ax >= 0x477ff000u) return (ushort)(sign | 0x7c00u);                                   // overflow
  if (ax < 0x38800000u) {                                                                    // subnormal, zero
    if (ax < 0x33000000u) return (ushort)sign;
    const uint shift = 126u - (ax >> 23), m = (ax & 0x7fffffu) | 0x800000u;
    uint r = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (r & 1u))) ++r;
    return (ushort)(sign | r);
  }
  uint r = (ax >> 13) - (112u << 10);
  const uint rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (ushort)(sign | r);
}

static inline ushort float_to_bf16(float v) {
  const uint x = as_uint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);  // keep NaN a NaN
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif
