// Reductions of the GPU plugins: sum, mean, max, min, prod, logsumexp, var,
// std over any set of axes; argmax/argmin.
//
// An output's reduced positions are split into `parts` chunks; a unit of
// `width` threads reduces one chunk: thread t folds chunk positions t, t +
// width, ... into its accumulator, then the unit combines them as a
// halving tree (red_tree_level). Units are a block (kRedThreads threads,
// long rows), a warp (rows of up to a few thousand along the innermost
// axis: shuffles), or one thread (short rows, and reductions over outer
// axes, where adjacent threads own adjacent outputs and reads coalesce).
// With more than one part, the units write partial accumulators to the
// workspace and a warp per output combines them (lane l takes parts l, l +
// warp, ... in order, then the tree): no atomics, the same bits every run.
// red_schedule picks the unit and parts from the shape alone;
// red_output_emulate runs exactly that order on the host, which is what
// tests/gpu compares with the reference kernels.
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
#include "warp.h"
#include "kernel_plan.h"  // plugins/common: Shape, AttrList (host side)

namespace spora::gpu {

enum class RedKind : int32_t { kSum, kMean, kMax, kMin, kProd, kLogSumExp, kVar, kStd, kArgMax, kArgMin };

constexpr int kRedThreads = 256;  // a power of two (the tree halves it)
constexpr int kRedMaxRank = 8;

enum class RedUnit : int32_t { kBlock, kWarp, kThread };

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
  // The schedule (red_schedule).
  RedUnit unit = RedUnit::kBlock;
  int32_t width = kRedThreads;  // threads per unit
  int32_t warp = kWarp;         // lanes of the partials' combining warp
  int64_t parts = 1;            // chunks per output
  int64_t chunk = 1;            // reduced positions per chunk
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
  if (ix.red_rank == 1) return r * ix.red_strides[0];  // the usual case once adjacent dims are merged
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

// Byte offset of the partials in the workspace (after the centers).
inline size_t red_partials_offset(const RedIndex& ix) {
  return (static_cast<size_t>(ix.outputs) * sizeof(double) + 63) / 64 * 64;
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

// Positions [*begin, *end) of part p of an output.
SPORA_HD inline void red_part_range(const RedIndex& ix, int64_t p, int64_t* begin, int64_t* end) {
  *begin = p * ix.chunk;
  *end = *begin + ix.chunk < ix.count ? *begin + ix.chunk : ix.count;
}

template <RedKind K, class T>
SPORA_HD inline RedAcc<compute_of<T>> red_fold_k(const RedIndex& ix, const T* x, int64_t base, int64_t begin,
                                                 int64_t end, int64_t step, int pass, double center) {
  using C = compute_of<T>;
  RedAcc<C> a = red_init<C>(K, pass);
  SPORA_UNROLL4
  for (int64_t r = begin; r < end; r += step) red_step<C>(K, pass, a, elem<T>::load(x[base + red_offset(ix, r)]), r, center);
  return a;
}

// Thread t of a unit of `width` over part p of the output at `base`: the
// fold of positions begin + t, begin + t + width, ... (the kind resolved
// once, outside the loop).
template <class T>
SPORA_HD inline RedAcc<compute_of<T>> red_fold(const RedIndex& ix, const T* x, int64_t base, int64_t p, int t,
                                               int width, int pass, double center) {
  int64_t begin, end;
  red_part_range(ix, p, &begin, &end);
  begin += t;
  switch (ix.kind) {
    case RedKind::kSum: return red_fold_k<RedKind::kSum, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kMean: return red_fold_k<RedKind::kMean, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kMax: return red_fold_k<RedKind::kMax, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kMin: return red_fold_k<RedKind::kMin, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kProd: return red_fold_k<RedKind::kProd, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kLogSumExp: return red_fold_k<RedKind::kLogSumExp, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kVar: return red_fold_k<RedKind::kVar, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kStd: return red_fold_k<RedKind::kStd, T>(ix, x, base, begin, end, width, pass, center);
    case RedKind::kArgMax: return red_fold_k<RedKind::kArgMax, T>(ix, x, base, begin, end, width, pass, center);
    default: return red_fold_k<RedKind::kArgMin, T>(ix, x, base, begin, end, width, pass, center);
  }
}

// Lane l of the combining warp over an output's partials (parts p = l, l +
// warp, ... in order).
template <class C>
SPORA_HD inline RedAcc<C> red_gather(const RedIndex& ix, const RedAcc<C>* partials, int l, int pass) {
  RedAcc<C> a = red_init<C>(ix.kind, pass);
  for (int64_t p = l; p < ix.parts; p += ix.warp) red_combine<C>(ix.kind, pass, a, partials[p]);
  return a;
}

// The block's combine order: halving strides, as the device's shared-memory
// tree does (with a barrier between levels).
template <class C>
SPORA_HD inline void red_tree_level(RedKind k, int pass, RedAcc<C>* acc, int t, int s) {
  if (t < s) red_combine<C>(k, pass, acc[t], acc[t + s]);
}

// Workspace of a schedule: the centers of two-pass kinds (a double per
// output), then the partials (acc_size bytes each); none with one part.
inline size_t red_workspace(const RedIndex& ix, size_t acc_size) {
  if (ix.parts <= 1) return 0;
  return red_partials_offset(ix) + static_cast<size_t>(ix.outputs * ix.parts) * acc_size;
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// Host emulation of one unit over part p of output o: the same per-thread
// folds and tree levels, run sequentially.
template <class T>
inline RedAcc<compute_of<T>> red_unit_emulate(const RedIndex& ix, const T* x, int64_t o, int64_t p, int pass,
                                              double center) {
  using C = compute_of<T>;
  std::vector<RedAcc<C>> acc(static_cast<size_t>(ix.width));
  const int64_t base = red_base(ix, o);
  for (int t = 0; t < ix.width; ++t) acc[t] = red_fold<T>(ix, x, base, p, t, ix.width, pass, center);
  for (int s = ix.width / 2; s > 0; s >>= 1)
    for (int t = 0; t < ix.width; ++t) red_tree_level<C>(ix.kind, pass, acc.data(), t, s);
  return acc[0];
}

// Host emulation of output o in the device's order (its schedule's units,
// partials and combining warp). Returns the final accumulator; *center_out
// gets pass 0's center for two-pass kinds.
template <class T>
inline RedAcc<compute_of<T>> red_output_emulate(const RedIndex& ix, const T* x, int64_t o, double* center_out) {
  using C = compute_of<T>;
  double center = 0;
  const int passes = red_two_pass(ix.kind) ? 2 : 1;
  RedAcc<C> a{};
  for (int pass = 0; pass < passes; ++pass) {
    if (ix.parts == 1) {
      a = red_unit_emulate<T>(ix, x, o, 0, pass, center);
    } else {
      std::vector<RedAcc<C>> partials(static_cast<size_t>(ix.parts)), lanes(static_cast<size_t>(ix.warp));
      for (int64_t p = 0; p < ix.parts; ++p) partials[p] = red_unit_emulate<T>(ix, x, o, p, pass, center);
      for (int l = 0; l < ix.warp; ++l) lanes[l] = red_gather<C>(ix, partials.data(), l, pass);
      for (int s = ix.warp / 2; s > 0; s >>= 1)
        for (int l = 0; l < ix.warp; ++l) red_tree_level<C>(ix.kind, pass, lanes.data(), l, s);
      a = lanes[0];
    }
    if (pass == 0 && passes == 2) center = red_center<C>(ix, a);
  }
  *center_out = center;
  return a;
}

// The former name (gpu_math_test.cpp): output o in the device's order.
template <class T>
inline RedAcc<compute_of<T>> red_block_emulate(const RedIndex& ix, const T* x, int64_t o, double* center_out) {
  return red_output_emulate<T>(ix, x, o, center_out);
}
#endif

// Host side: the unit and parts of ix (from its shape only, so every run
// and every device of a kind reduce in the same order). `warp`: the
// device's warp width.
inline void red_schedule(RedIndex& ix, int warp) {
  ix.warp = warp;
  ix.parts = 1;
  ix.chunk = ix.count > 0 ? ix.count : 1;
  const bool inner_reduced = ix.red_rank > 0 && ix.red_strides[ix.red_rank - 1] == 1;
  auto split = [&](int64_t parts) {  // chunks of a multiple of the unit's width
    if (parts <= 1 || ix.count <= 0) return;
    int64_t chunk = (ix.count + parts - 1) / parts;
    chunk = (chunk + ix.width - 1) / ix.width * ix.width;
    ix.chunk = chunk;
    ix.parts = (ix.count + chunk - 1) / chunk;
  };
  if (ix.count <= 32 || !inner_reduced) {
    // A thread per output: short rows, or outputs adjacent in memory (an
    // outer axis reduced). Few outputs: their columns split into parts
    // (up to 256) so that about 64K threads run.
    ix.unit = RedUnit::kThread;
    ix.width = 1;
    if (ix.count > 32) {
      int64_t parts = (65536 + ix.outputs - 1) / ix.outputs;
      const int64_t most = ix.count / 16 < 256 ? ix.count / 16 : 256;
      split(parts < most ? parts : most);
    }
    return;
  }
  if (ix.count <= 4096 && ix.outputs >= 256) {
    ix.unit = RedUnit::kWarp;
    ix.width = warp;
    return;
  }
  // A block per chunk: about 1024 blocks in all, chunks of at least 4096.
  ix.unit = RedUnit::kBlock;
  ix.width = kRedThreads;
  int64_t parts = (1024 + ix.outputs - 1) / ix.outputs;
  const int64_t most = (ix.count + 4095) / 4096;
  split(parts < most ? parts : most);
}

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
inline RedIndex red_index_of(RedKind kind, const spora::plugin::Shape& in, const spora::plugin::AttrList& attrs,
                             int warp = kWarp) {
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
  // Adjacent dims of the same role merge (the input is contiguous): the
  // row-major numbering of positions and outputs is unchanged.
  for (int d = 0; d < in.rank; ++d) {
    const bool merge = d > 0 && reduce[d] == reduce[d - 1];
    if (reduce[d]) {
      if (merge) {
        ix.red_dims[ix.red_rank - 1] *= in.dims[d];
        ix.red_strides[ix.red_rank - 1] = stride[d];
      } else {
        ix.red_dims[ix.red_rank] = in.dims[d];
        ix.red_strides[ix.red_rank++] = stride[d];
      }
      ix.count *= in.dims[d];
    } else {
      if (merge) {
        ix.kept_dims[ix.kept_rank - 1] *= in.dims[d];
        ix.kept_strides[ix.kept_rank - 1] = stride[d];
      } else {
        ix.kept_dims[ix.kept_rank] = in.dims[d];
        ix.kept_strides[ix.kept_rank++] = stride[d];
      }
      ix.outputs *= in.dims[d];
    }
  }
  ix.correction = attrs.get_int("correction", 0);
  red_schedule(ix, warp);
  return ix;
}

}  // namespace spora::gpu
