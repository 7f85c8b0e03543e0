// What the reduction, cumsum and topk kernels share between the reference
// implementations (kernels/reduce.cpp, kernels/scan.cpp) and the cpu
// plugin's own loops (cpu_reduce.cpp): the reduction kinds by op name, a
// tensor seen as lines along one axis, and the order topk selects in. One
// copy, so a device checked against cpu agrees with it by construction on
// NaN handling and ties.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernel_plan.h"

namespace spora::plugin {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kLogSumExp, kVar, kStd, kArgMax, kArgMin };

struct ReduceKindName {
  const char* op;
  ReduceKind kind;
};
inline constexpr ReduceKindName kReduceKinds[] = {
    {"sum", ReduceKind::kSum},       {"mean", ReduceKind::kMean},
    {"max", ReduceKind::kMax},       {"min", ReduceKind::kMin},
    {"prod", ReduceKind::kProd},     {"logsumexp", ReduceKind::kLogSumExp},
    {"var", ReduceKind::kVar},       {"std", ReduceKind::kStd},
    {"argmax", ReduceKind::kArgMax}, {"argmin", ReduceKind::kArgMin},
};

// The kind of reduction op `op`; false when it is not one.
inline bool reduce_kind_of(const std::string& op, ReduceKind* kind) {
  for (const auto& k : kReduceKinds) {
    if (op == k.op) {
      *kind = k.kind;
      return true;
    }
  }
  return false;
}

template <class C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

// The op's axis of length n, with the dims before and after it merged.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

// The lines along `axis` of `s`; false when the axis is out of range. A
// scalar is one line of one element (axis 0 or -1).
inline bool lines_of(const Shape& s, int64_t axis, Lines* l) {
  if (s.rank == 0) return axis == 0 || axis == -1;
  if (axis < 0 || axis >= s.rank) return false;
  for (int i = 0; i < s.rank; ++i) {
    if (i < axis) l->outer *= s.dims[i];
    if (i == axis) l->n = s.dims[i];
    if (i > axis) l->inner *= s.dims[i];
  }
  return true;
}

// A topk candidate: value (in compute precision) and index along the axis.
template <class C>
struct TopkItem {
  C v;
  int64_t i;
};

// topk's selection order: larger (smaller) first, NaN above every number,
// ties to the lower index. A total order, so any selection algorithm picks
// the same k.
template <class C>
struct TopkFirst {
  bool largest;
  bool operator()(const TopkItem<C>& a, const TopkItem<C>& b) const {
    const bool na = is_nan(a.v), nb = is_nan(b.v);
    if (na || nb) return na && nb ? a.i < b.i : (largest ? na : nb);
    if (a.v != b.v) return largest ? a.v > b.v : a.v < b.v;
    return a.i < b.i;
  }
};

}  // namespace spora::plugin
