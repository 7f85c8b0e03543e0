// pad: constant, reflect (numpy's: the edge is not repeated, pads wider
// than the dim keep reflecting) and edge modes, as the reference
// (plugins/common/kernels/pad.cpp). Each output element finds its source
// per dim; any dim in the constant's border gives the constant. Elements
// are moved as bits (U of the element's size).
#pragma once
#include <cstdint>
#include <string>

#include "hd.h"
#include "kernel_plan.h"   // plugins/common: KernelPlan (host side)
#include "kernels/copy.h"  // plugins/common: dense_strides, encode_value

namespace spora::gpu {

constexpr int kPadMaxRank = 8;  // SPORA_MAX_RANK

enum class PadMode : int32_t { kConstant, kReflect, kEdge };

struct PadIndex {
  int32_t rank = 0;
  PadMode mode = PadMode::kConstant;
  int64_t in_dims[kPadMaxRank] = {};
  int64_t out_dims[kPadMaxRank] = {};
  int64_t before[kPadMaxRank] = {};
  int64_t in_st[kPadMaxRank] = {};
};

// Source index along dim d for output index o, or -1 for the constant.
SPORA_HD inline int64_t pad_source(const PadIndex& s, int d, int64_t o) {
  const int64_t i = o - s.before[d], n = s.in_dims[d];
  if (i >= 0 && i < n) return i;
  switch (s.mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      // Reflection without repeating the edge is periodic in 2(n-1).
      const int64_t m = 2 * (n - 1);
      int64_t t = i % m;
      if (t < 0) t += m;
      return t < n ? t : m - t;
    }
  }
  return -1;
}

// Output element e (row-major over out_dims).
template <class U>
SPORA_HD inline U pad_elem(const PadIndex& s, const U* x, U value, int64_t e) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const int64_t i = pad_source(s, d, e % s.out_dims[d]);
    e /= s.out_dims[d];
    if (i < 0) return value;
    off += i * s.in_st[d];
  }
  return x[off];
}

// Host side: the index math and the constant's bits of a pad plan the
// reference planner validated; false when the value does not fit the
// dtype (which the planner has already refused).
inline bool pad_index_of(const spora::plugin::KernelPlan& p, PadIndex* s, uint64_t* value) {
  const spora::plugin::Shape &in = p.in[0].shape, &out = p.out[0].shape;
  const std::string mode = p.attrs.get_string("mode", "constant");
  s->mode = mode == "reflect" ? PadMode::kReflect : mode == "edge" ? PadMode::kEdge : PadMode::kConstant;
  s->rank = in.rank;
  const std::vector<int64_t> pads = p.attrs.get_ints("pads");
  for (int d = 0; d < in.rank; ++d) {
    s->in_dims[d] = in.dims[d];
    s->out_dims[d] = out.dims[d];
    s->before[d] = pads[2 * d];
  }
  spora::plugin::dense_strides(in, s->in_st);
  *value = 0;
  return s->mode != PadMode::kConstant ||
         spora::plugin::encode_value(p.out[0].dtype, p.attrs.get_float("value", 0), value);
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation: every output element, as its thread computes it.
template <class U>
inline void pad_emulate(const PadIndex& s, const U* x, U value, U* y, int64_t total) {
  for (int64_t e = 0; e < total; ++e) y[e] = pad_elem<U>(s, x, value, e);
}
#endif

}  // namespace spora::gpu
