// Host-side planning helpers of the elementwise kernels, shared by
// kernels/elementwise.cu and tests/gpu: the op code of an op name and the
// broadcast index of a plan (coalesced by plugins/common's make_bcast, the
// same iteration space the reference kernels use).
#pragma once
#include <string>

#include "ew_math.h"
#include "kernels/elementwise.h"  // plugins/common

namespace spora::gpu {

// Op name -> EwOp; false for where, cast and unknown names.
inline bool ew_op_of(const std::string& name, EwOp* op) {
  // EwOp's rows of the table, by the same per-kind filter (ew_math.h).
#define SPORA_EW_GPU_NAME_UNARY(name) name,
#define SPORA_EW_GPU_NAME_NOT(name) name,
#define SPORA_EW_GPU_NAME_CAST(name)
#define SPORA_EW_GPU_NAME_BINARY(name) name,
#define SPORA_EW_GPU_NAME_COMPARE(name) name,
#define SPORA_EW_GPU_NAME_WHERE(name)
  static const char* const kNames[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_EW_GPU_NAME_##kind(name)
#include <spora/ops_elementwise.def>
  };
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(EwOp::kCount), "one name per EwOp");
  for (int i = 0; i < static_cast<int>(EwOp::kCount); ++i)
    if (name == kNames[i]) {
      *op = static_cast<EwOp>(i);
      return true;
    }
  return false;
}

// The broadcast index of `n` inputs (padded to the output's rank) over `out`.
inline EwIndex ew_index_of(const spora::plugin::Shape& out, const spora::plugin::Shape* in, int n) {
  const spora::plugin::ew::Bcast b = spora::plugin::ew::make_bcast(out, in, n);
  EwIndex ix;
  ix.rank = b.rank;
  ix.num_in = n;
  for (int d = 0; d < b.rank; ++d) {
    ix.dims[d] = b.dims[d];
    for (int k = 0; k < n; ++k) ix.strides[k][d] = b.strides[k][d];
  }
  ix.flat = b.rank == 1;
  return ix;
}

// Attributes of the elementwise ops, with the reference's defaults.
inline EwParams ew_params_of(const spora::plugin::AttrList& a) {
  EwParams p;
  p.alpha = a.get_float("alpha", 0.01);
  p.beta = a.get_float("beta", 1.0);
  p.threshold = a.get_float("threshold", 20.0);
  p.lo = a.get_float("min", -HUGE_VAL);
  p.hi = a.get_float("max", HUGE_VAL);
  p.gelu_tanh = a.get_string("approximate", "none") == "tanh";
  return p;
}

}  // namespace spora::gpu
