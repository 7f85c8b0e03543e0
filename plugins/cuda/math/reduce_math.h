// Reductions of the GPU plugins: sum, mean, max, min, prod, logsumexp, var,
// std over any set of axes; argmax/argmin. One thread block reduces one
// output element: thread t folds reduced positions t, t + kRedThreads, ...
// into its accumulator, then the block combines the accumulators as a
// binary tree (red_tree). red_block_emulate runs exactly that order on the
// host, which is what tests/gpu compares with the reference kernels.
//
// Accumulation as the reference: floats in double, integers in uint64
// (wrapping), max/min in the compute type with NaN sticky, arg* keeps the
// first NaN, else the first of equal extremes (a total order, so the tree
// picks the same index as a sequential scan).
#pragma once
#include <cstdint>
#include <limits>

#include <string>
#include <vector>

#include "fmath.h"
#include "hd.h"
#include "kernel_plan.h"  // plugins/common: Shape, AttrList (host side)

namespace spora::gpu {

enum class RedKind : int32_t { kSum, kMean, kMax, kMin, kProd, kLogSumExp, kVar, kStd, kArgMax, kArgMin };

constexpr int kRedThreads = 256;  // a power of two (the tree halves it)
constexpr int kRedMaxRank = 8;

// Where the elements of one output live in the input.
struct RedIndex {
  RedKind kind = RedKind::kSum;
  int32_t kept_rank = 0;  // non-reduced input dims, in order
  int64_t kept_dims[kRedMaxRank] = {};
  int64_t kept_strides[kRedMaxRank] = {};
  int32_t red_rank = 0;  // reduced input dims, in order
  int64_t red_dims[kRedMaxRank] = {};
  int64_t red_strides[kRedMaxRank] = {};
  int64_t count = 1;  // elements per output
  int64_t outputs = 1;
  int64_t correction = 0;  // var, std
};

// Input offset of output o's first element.
SPORA_HD inline int64_t red_base(const RedIndex& ix, int64_t o) {
  int64_t off = 0;
  for (int d = ix.kept_rank - 1; d >= 0; --d) {
    off += (o % ix.kept_dims[d]) * ix.kept_strides[d];
    o /= ix.kept_dims[d];
  }
  return off;
}

// Offset (from the base) of reduced position r, row-major over the reduced dims.
SPORA_HD inline int64_t red_offset(const RedIndex& ix, int64_t r) {
  int64_t off = 0;
  for (int d = ix.red_rank - 1; d >= 0; --d) {
    off += (r % ix.red_dims[d]) * ix.red_strides[d];
    r /= ix.red_dims[d];
  }
  return off;
}

SPORA_HD inline bool red_two_pass(RedKind k) {
  return k == RedKind::kLogSumExp || k == RedKind::kVar || k == RedKind::kStd;
}

// One accumulator, wide enough for every kind.
template <class C>
struct RedAcc {
  double d;    // float sums and products, two-pass sums
  uint64_t u;  // integer sums and products
  C c;         // max/min, arg* value
  int64_t pos; // arg*: -1 = none yet
};

template <class C>
SPORA_HD inline RedAcc<C> red_init(RedKind k, int pass) {
  RedAcc<C> a;
  a.d = (k == RedKind::kProd) ? 1.0 : 0.0;
  if (pass == 0 && k == RedKind::kLogSumExp) a.d = -HUGE_VAL;  // pass 0 of logsumexp is a max
  a.u = (k == RedKind::kProd) ? 1u : 0u;
  if constexpr (is_float_c<C>) a.c = k == RedKind::kMax ? C(-HUGE_VAL) : C(HUGE_VAL);
  else a.c = k == RedKind::kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  a.pos = -1;
  return a;
}

// Folds element v (reduced position pos) into a. `pass` 0 is the only pass,
// or the first of a two-pass kind (the max for logsumexp, the sum for the
// mean of var/std); pass 1 uses `center` from pass 0.
template <class C>
SPORA_HD inline void red_step(RedKind k, int pass, RedAcc<C>& a, C v, int64_t pos, double center) {
  switch (k) {
    case RedKind::kSum:
    case RedKind::kMean:
      if constexpr (is_float_c<C>) a.d += static_cast<double>(v);
      else a.u += static_cast<uint64_t>(v);
      return;
    case RedKind::kProd:
      if constexpr (is_float_c<C>) a.d *= static_cast<double>(v);
      else a.u *= static_cast<uint64_t>(v);
      return;
    case RedKind::kMax:
      if (v > a.c || is_nan(v)) a.c = v;
      return;
    case RedKind::kMin:
      if (v < a.c || is_nan(v)) a.c = v;
      return;
    case RedKind::kArgMax:
    case RedKind::kArgMin: {
      const bool better = k == RedKind::kArgMax ? v > a.c : v < a.c;
      if (a.pos < 0 || better || (is_nan(v) && !is_nan(a.c))) {
        a.c = v;
        a.pos = pos;
      }
      return;
    }
    case RedKind::kLogSumExp: {
      const double w = static_cast<double>(v);
      if (pass == 0) {
        if (w > a.d || w != w) a.d = w;
      } else if (center - center == 0.0) {  // finite center
        a.d += fm::exp(w - center);
      }
      return;
    }
    case RedKind::kVar:
    case RedKind::kStd: {
      const double w = static_cast<double>(v);
      if (pass == 0) {
        a.d += w;
      } else {
        const double dv = w - center;
        a.d += dv * dv;
      }
      return;
    }
  }
}

// a = a (+) b, where b holds positions after a's in the tree's pairing.
// Every combine agrees with red_step's sequential result.
template <class C>
SPORA_HD inline void red_combine(RedKind k, int pass, RedAcc<C>& a, const RedAcc<C>& b) {
  switch (k) {
    case RedKind::kSum:
    case RedKind::kMean:
      a.d += b.d;
      a.u += b.u;
      return;
    case RedKind::kProd:
      a.d *= b.d;
      a.u *= b.u;
      return;
    case RedKind::kMax:
      if (!is_nan(a.c) && (is_nan(b.c) || b.c > a.c)) a.c = b.c;
      return;
    case RedKind::kMin:
      if (!is_nan(a.c) && (is_nan(b.c) || b.c < a.c)) a.c = b.c;
      return;
    case RedKind::kArgMax:
    case RedKind::kArgMin: {
      if (b.pos < 0) return;
      if (a.pos < 0) {
        a = b;
        return;
      }
      const bool na = is_nan(a.c), nb = is_nan(b.c);
      bool take_b;
      if (na || nb) take_b = na && nb ? b.pos < a.pos : nb;
      else if (a.c != b.c) take_b = k == RedKind::kArgMax ? b.c > a.c : b.c < a.c;
      else take_b = b.pos < a.pos;
      if (take_b) a = b;
      return;
    }
    case RedKind::kLogSumExp:
      if (pass == 0) {
        if (!(a.d != a.d) && (b.d != b.d || b.d > a.d)) a.d = b.d;
      } else {
        a.d += b.d;
      }
      return;
    case RedKind::kVar:
    case RedKind::kStd: a.d += b.d; return;
  }
}

// What pass 1 needs from pass 0's result.
template <class C>
SPORA_HD inline double red_center(const RedIndex& ix, const RedAcc<C>& a) {
  return ix.kind == RedKind::kLogSumExp ? a.d : a.d / static_cast<double>(ix.count);
}

// The output value from the final accumulator (pass 1's for two-pass
// kinds); arg* kinds use a.pos instead.
template <class C>
SPORA_HD inline C red_finish(const RedIndex& ix, const RedAcc<C>& a, double center) {
  switch (ix.kind) {
    case RedKind::kSum:
    case RedKind::kProd:
      if constexpr (is_float_c<C>) return static_cast<C>(a.d);
      else return static_cast<C>(a.u);
    case RedKind::kMean:
      if constexpr (is_float_c<C>) return static_cast<C>(a.d / static_cast<double>(ix.count));
      else return static_cast<C>(a.u);  // integer mean is refused at plan time
    case RedKind::kMax:
    case RedKind::kMin: return a.c;
    case RedKind::kLogSumExp: return static_cast<C>(center - center == 0.0 ? center + fm::log(a.d) : center);
    case RedKind::kVar:
    case RedKind::kStd: {
      const double denom = static_cast<double>(ix.count > ix.correction ? ix.count - ix.correction : 0);
      const double v = a.d / denom;
      return static_cast<C>(ix.kind == RedKind::kStd ? fm::sqrt(v) : v);
    }
    default: return C(0);
  }
}

// Thread t's accumulator over its strided share of output o's elements.
template <class T>
SPORA_HD inline RedAcc<compute_of<T>> red_thread(const RedIndex& ix, const T* x, int64_t base, int t, int pass,
                                                 double center) {
  using C = compute_of<T>;
  RedAcc<C> a = red_init<C>(ix.kind, pass);
  for (int64_t r = t; r < ix.count; r += kRedThreads)
    red_step<C>(ix.kind, pass, a, elem<T>::load(x[base + red_offset(ix, r)]), r, center);
  return a;
}

// The block's combine order: halving strides, as the device's shared-memory
// tree does (with a barrier between levels).
template <class C>
SPORA_HD inline void red_tree_level(RedKind k, int pass, RedAcc<C>* acc, int t, int s) {
  if (t < s) red_combine<C>(k, pass, acc[t], acc[t + s]);
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of one block: the same per-thread folds and tree levels,
// run sequentially. Returns the final accumulator; *center_out gets pass 0's
// center for two-pass kinds.
template <class T>
inline RedAcc<compute_of<T>> red_block_emulate(const RedIndex& ix, const T* x, int64_t o, double* center_out) {
  using C = compute_of<T>;
  static thread_local RedAcc<C> acc[kRedThreads];
  const int64_t base = red_base(ix, o);
  double center = 0;
  const int passes = red_two_pass(ix.kind) ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    for (int t = 0; t < kRedThreads; ++t) acc[t] = red_thread<T>(ix, x, base, t, pass, center);
    for (int s = kRedThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < kRedThreads; ++t) red_tree_level<C>(ix.kind, pass, acc, t, s);
    if (pass == 0 && passes == 2) center = red_center<C>(ix, acc[0]);
  }
  *center_out = center;
  return acc[0];
}
#endif

// Host side: the kind of a reduction op by name (false if it is none).
inline bool red_kind_of(const std::string& op, RedKind* k) {
  static const char* const kNames[] = {"sum", "mean", "max", "min", "prod", "logsumexp", "var", "std", "argmax", "argmin"};
  for (int i = 0; i < 10; ++i)
    if (op == kNames[i]) {
      *k = static_cast<RedKind>(i);
      return true;
    }
  return false;
}

// Host side: the index of a reduction of `in` whose attributes are `attrs`
// (axes for the reductions, an int axis or none for arg*), as the
// reference planner reads them.
inline RedIndex red_index_of(RedKind kind, const spora::plugin::Shape& in, const spora::plugin::AttrList& attrs) {
  RedIndex ix;
  ix.kind = kind;
  bool reduce[kRedMaxRank] = {};
  std::vector<int64_t> axes;
  const bool is_arg = kind == RedKind::kArgMax || kind == RedKind::kArgMin;
  const spora::plugin::Attr* axis = attrs.find("axis");
  if (!is_arg) axes = attrs.get_ints("axes");
  else if (axis && axis->type == SPORA_ATTR_INT) axes.push_back(axis->i);
  if (axes.empty())
    for (int i = 0; i < in.rank; ++i) axes.push_back(i);
  for (int64_t a : axes)
    if (a >= 0 && a < in.rank) reduce[a] = true;
  int64_t stride[kRedMaxRank] = {};
  int64_t run = 1;
  for (int d = in.rank - 1; d >= 0; --d) {
    stride[d] = run;
    run *= in.dims[d];
  }
  ix.count = 1;
  ix.outputs = 1;
  for (int d = 0; d < in.rank; ++d) {
    if (reduce[d]) {
      ix.red_dims[ix.red_rank] = in.dims[d];
      ix.red_strides[ix.red_rank++] = stride[d];
      ix.count *= in.dims[d];
    } else {
      ix.kept_dims[ix.kept_rank] = in.dims[d];
      ix.kept_strides[ix.kept_rank++] = stride[d];
      ix.outputs *= in.dims[d];
    }
  }
  ix.correction = attrs.get_int("correction", 0);
  return ix;
}

}  // namespace spora::gpu
