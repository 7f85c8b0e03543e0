// The cpu plugin's own loops for the reduce family: reductions (sum, mean,
// max, min, prod, logsumexp, var, std, argmax, argmin), cumsum and topk.
// Contracts: core/src/ops/reduce.cpp and scan.cpp. Whole bf16 sums and
// means go to oneDNN instead (onednn_reduce.cpp says why only those).
//
// Reductions: plans regroup the input (size-1 dims dropped, adjacent dims
// that are both reduced or both kept merged). Most then fit x[A][B][C][D]
// reduced over B and D into y[A][C]: a row reduction when D > 1, a column
// one when D == 1; the rest (reduced dims in three separate runs) go to
// the reference kernel. Work runs in parallel over outputs, or over slices
// of each reduction when outputs are few.
//
// Accuracy: floats accumulate in double, in blocks, with several lanes per
// row, so a sum of 1e6 f32 values is exact to the f32 rounding of the
// result. Slices are cut by size alone and merged in order, so results do
// not depend on the thread count. var/std and logsumexp take two passes
// (mean or max first), which loses nothing to cancellation.
#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "reduce_ops.h"

namespace spora::cpu {
namespace {

using plugin::compute_t;
using plugin::is_float_v;
using plugin::KernelPlan;
using plugin::load;
using plugin::store;

using plugin::is_nan;
using plugin::kReduceKinds;
using plugin::Lines;
using plugin::lines_of;
using Kind = plugin::ReduceKind;

struct Geo {
  int64_t a = 1, b = 1, c = 1, d = 1;
  int64_t outputs() const { return a * c; }
  int64_t per_output() const { return b * d; }
};

struct State {
  Kind kind;
  Geo g;
  int64_t correction;
};

constexpr int kLanes = 8;
constexpr int64_t kBlock = 4096;  // elements summed before joining the running total
constexpr int64_t kColumns = 256;  // columns one task accumulates at once

// ---- accumulation policies ----
// Each has Acc, init(), add(acc, v, pos, o) for one element at reduction
// position pos of output o, row(x, n, pos0, o) for a contiguous run, and
// merge(acc, later) to join a partial result that follows acc's positions.

template <class T>
using wide_t = std::conditional_t<is_float_v<T>, double, uint64_t>;

template <class T>
inline wide_t<T> widen(T v) {
  if constexpr (is_float_v<T>) return static_cast<double>(load(v));
  else return static_cast<uint64_t>(v);  // wraps like the op's integer semantics
}

template <class T>
inline T narrow(wide_t<T> v) {
  if constexpr (is_float_v<T>) return store<T>(v);
  else return static_cast<T>(v);
}

// Joins f(x[i]) over a contiguous run: kLanes independent accumulators
// (which the compiler vectorises), in blocks of kBlock joined in order.
template <class A, class T, class F, class J>
A lanes(const T* x, int64_t n, A init, F f, J join) {
  A total = init;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const T* p = x + i0;
    const int64_t m = std::min(kBlock, n - i0);
    A l[kLanes];
    for (auto& v : l) v = init;
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int k = 0; k < kLanes; ++k) l[k] = join(l[k], f(p[i + k]));
    for (; i < m; ++i) l[0] = join(l[0], f(p[i]));
    for (int k = 1; k < kLanes; ++k) l[0] = join(l[0], l[k]);
    total = join(total, l[0]);
  }
  return total;
}

// acc[i] += r[i] for f32 rows into double accumulators: the column sums of
// bias gradients (128x512 -> 512 in an MLP step). The baseline build only
// has SSE2 (two doubles per add); AVX-512 and AVX2 copies of the same loop
// are picked once from the cpu (AVX-512 Xeon, that eager sum from Python:
// 23 -> 16 us). Each column still adds its rows in order, without fused
// multiply-adds, so the sums are the same bits on every path.
using AddColsF32 = void (*)(double*, const float*, int64_t);
__attribute__((target("avx512f"))) void add_cols_f32_avx512(double* acc, const float* r, int64_t w) {
  for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<double>(r[i]);
}
__attribute__((target("avx2"))) void add_cols_f32_avx2(double* acc, const float* r, int64_t w) {
  for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<double>(r[i]);
}
void add_cols_f32_base(double* acc, const float* r, int64_t w) {
  for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<double>(r[i]);
}
AddColsF32 pick_add_cols_f32() {
  if (__builtin_cpu_supports("avx512f")) return add_cols_f32_avx512;
  if (__builtin_cpu_supports("avx2")) return add_cols_f32_avx2;
  return add_cols_f32_base;
}
const AddColsF32 add_cols_f32 = pick_add_cols_f32();

template <class T, bool Prod>
struct SumProd {
  using Acc = wide_t<T>;
  static constexpr bool kFoldable = true;
  Acc init() const { return Acc(Prod ? 1 : 0); }
  void add(Acc& a, T v, int64_t, int64_t) const { a = Prod ? a * widen(v) : a + widen(v); }
  void merge(Acc& a, Acc b) const { a = Prod ? a * b : a + b; }
  Acc row(const T* x, int64_t n, int64_t, int64_t) const {
    return lanes(x, n, init(), widen<T>, [](Acc a, Acc b) { return Prod ? a * b : a + b; });
  }
  void cols(Acc* acc, const T* r, int64_t w, int64_t, int64_t) const {
    if constexpr (!Prod && std::is_same_v<T, float>) {
      add_cols_f32(acc, r, w);
    } else {
      for (int64_t i = 0; i < w; ++i) acc[i] = Prod ? acc[i] * widen(r[i]) : acc[i] + widen(r[i]);
    }
  }
};

// NaN replaces the accumulator and then sticks: nothing compares above it.
// Branch-free SSE2 for float and double (the compiler keeps the scalar form
// branchy); 16-bit floats go through float in chunks.
template <bool Max>
inline __m128 pick4(__m128 a, __m128 v) {
  const __m128 m = _mm_or_ps(Max ? _mm_cmpgt_ps(v, a) : _mm_cmplt_ps(v, a), _mm_cmpunord_ps(v, v));
  return _mm_or_ps(_mm_and_ps(m, v), _mm_andnot_ps(m, a));
}
template <bool Max>
inline __m128d pick2(__m128d a, __m128d v) {
  const __m128d m = _mm_or_pd(Max ? _mm_cmpgt_pd(v, a) : _mm_cmplt_pd(v, a), _mm_cmpunord_pd(v, v));
  return _mm_or_pd(_mm_and_pd(m, v), _mm_andnot_pd(m, a));
}

template <class T, bool Max>
struct Extreme {
  using C = compute_t<T>;
  using Acc = C;
  static constexpr bool kFoldable = true;
  Acc init() const {
    using L = std::numeric_limits<C>;
    if constexpr (L::has_infinity) return Max ? -L::infinity() : L::infinity();
    else return Max ? L::lowest() : L::max();
  }
  static C pick(C a, C v) { return ((Max ? v > a : v < a) || is_nan(v)) ? v : a; }
  void add(Acc& a, T v, int64_t, int64_t) const { a = pick(a, load(v)); }
  void merge(Acc& a, Acc b) const { a = is_nan(a) ? a : pick(a, b); }
  Acc row(const T* x, int64_t n, int64_t pos0, int64_t o) const {
    Acc a = init();
    if constexpr (plugin::is_half_v<T>) {
      float buf[kColumns];
      for (int64_t i0 = 0; i0 < n; i0 += kColumns) {
        const int64_t m = std::min(kColumns, n - i0);
        for (int64_t i = 0; i < m; ++i) buf[i] = load(x[i0 + i]);
        merge(a, Extreme<float, Max>().row(buf, m, pos0, o));
      }
      return a;
    }
    int64_t i = 0;
    C lanes[kLanes];
    if constexpr (std::is_same_v<T, float>) {
      __m128 l0 = _mm_set1_ps(a), l1 = l0;
      for (; i + 8 <= n; i += 8) {
        l0 = pick4<Max>(l0, _mm_loadu_ps(x + i));
        l1 = pick4<Max>(l1, _mm_loadu_ps(x + i + 4));
      }
      _mm_storeu_ps(lanes, l0);
      _mm_storeu_ps(lanes + 4, l1);
    } else if constexpr (std::is_same_v<T, double>) {
      __m128d l[4] = {_mm_set1_pd(a), _mm_set1_pd(a), _mm_set1_pd(a), _mm_set1_pd(a)};
      for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 4; ++k) l[k] = pick2<Max>(l[k], _mm_loadu_pd(x + i + 2 * k));
      for (int k = 0; k < 4; ++k) _mm_storeu_pd(lanes + 2 * k, l[k]);
    } else {
      for (auto& v : lanes) v = a;
      for (; i + kLanes <= n; i += kLanes)
        for (int k = 0; k < kLanes; ++k) lanes[k] = pick(lanes[k], load(x[i + k]));
    }
    for (; i < n; ++i) lanes[0] = pick(lanes[0], load(x[i]));
    for (int k = 0; k < kLanes; ++k) merge(a, lanes[k]);
    return a;
  }
  void cols(Acc* acc, const T* r, int64_t w, int64_t pos, int64_t o0) const {
    int64_t i = 0;
    if constexpr (plugin::is_half_v<T>) {
      float buf[kColumns];  // w <= kColumns
      for (int64_t k = 0; k < w; ++k) buf[k] = load(r[k]);
      return Extreme<float, Max>().cols(acc, buf, w, pos, o0);
    } else if constexpr (std::is_same_v<T, float>) {
      for (; i + 4 <= w; i += 4) _mm_storeu_ps(acc + i, pick4<Max>(_mm_loadu_ps(acc + i), _mm_loadu_ps(r + i)));
    } else if constexpr (std::is_same_v<T, double>) {
      for (; i + 2 <= w; i += 2) _mm_storeu_pd(acc + i, pick2<Max>(_mm_loadu_pd(acc + i), _mm_loadu_pd(r + i)));
    }
    for (; i < w; ++i) acc[i] = pick(acc[i], load(r[i]));
  }
};

// First position of the maximum (minimum); a NaN beats every number. Equal
// values go to the lower position whatever order partial results merge in.
template <class C>
struct ArgAcc {
  C v;
  int64_t pos;  // -1: no element yet
};

template <class T, bool Max>
struct Arg {
  using C = compute_t<T>;
  using Acc = ArgAcc<C>;
  static constexpr bool kFoldable = false;
  static bool better(C v, C best) { return (Max ? v > best : v < best) || (is_nan(v) && !is_nan(best)); }
  Acc init() const { return {C(0), -1}; }
  void add(Acc& a, T v, int64_t pos, int64_t) const {
    const C c = load(v);
    if (a.pos < 0 || better(c, a.v)) a = {c, pos};
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.pos < 0) return;
    if (a.pos < 0 || better(b.v, a.v) || (!better(a.v, b.v) && b.pos < a.pos)) a = b;
  }
  // The extreme value first (vectorised), then its first position.
  Acc row(const T* x, int64_t n, int64_t pos0, int64_t o) const {
    if (n == 0) return init();
    const C m = Extreme<T, Max>().row(x, n, pos0, o);
    const bool nan = is_nan(m);
    for (int64_t i = 0; i < n; ++i) {
      const C v = load(x[i]);
      if (nan ? is_nan(v) : v == m) return {v, pos0 + i};
    }
    return {m, pos0};  // not reached: m is one of the elements
  }
  void cols(Acc* acc, const T* r, int64_t w, int64_t pos, int64_t o0) const {
    for (int64_t i = 0; i < w; ++i) add(acc[i], r[i], pos, o0 + i);
  }
};

// Second pass of var/std: squared deviations from each output's mean.
template <class T>
struct SquaredDeviation {
  using Acc = double;
  static constexpr bool kFoldable = false;
  const double* mean;
  Acc init() const { return 0; }
  void add(Acc& a, T v, int64_t, int64_t o) const {
    const double d = static_cast<double>(load(v)) - mean[o];
    a += d * d;
  }
  void merge(Acc& a, Acc b) const { a += b; }
  Acc row(const T* x, int64_t n, int64_t, int64_t o) const {
    const double c = mean[o];
    auto sq = [c](T v) {
      const double d = static_cast<double>(load(v)) - c;
      return d * d;
    };
    return lanes(x, n, 0.0, sq, [](double a, double b) { return a + b; });
  }
  void cols(Acc* acc, const T* r, int64_t w, int64_t, int64_t o0) const {
    for (int64_t i = 0; i < w; ++i) {
      const double d = static_cast<double>(load(r[i])) - mean[o0 + i];
      acc[i] += d * d;
    }
  }
};

// Second pass of logsumexp: exp(x - max) never overflows. exp runs in the
// element's compute type (float for f32 and narrower), sums in double.
template <class T>
struct ShiftedExp {
  using C = compute_t<T>;
  using Acc = double;
  static constexpr bool kFoldable = false;
  const double* max;
  Acc init() const { return 0; }
  void add(Acc& a, T v, int64_t, int64_t o) const {
    if (std::isfinite(max[o])) a += static_cast<double>(std::exp(load(v) - static_cast<C>(max[o])));
  }
  void merge(Acc& a, Acc b) const { a += b; }
  Acc row(const T* x, int64_t n, int64_t, int64_t o) const {
    if (!std::isfinite(max[o])) return 0;
    const C m = static_cast<C>(max[o]);
    auto term = [m](T v) { return static_cast<double>(std::exp(load(v) - m)); };
    return lanes(x, n, 0.0, term, [](double a, double b) { return a + b; });
  }
  void cols(Acc* acc, const T* r, int64_t w, int64_t pos, int64_t o0) const {
    for (int64_t i = 0; i < w; ++i) add(acc[i], r[i], pos, o0 + i);
  }
};

// ---- drivers ----

// How many slices to cut each of `tasks` reductions of `per_task` elements
// into, so that a few large reductions still fill the threads. It depends
// on the sizes only, never on the thread count, so that results (rounding
// included) do not either.
int64_t slices_for(int64_t tasks, int64_t per_task) {
  constexpr int64_t kUnits = 16, kMinSlice = 16384;
  if (tasks >= kUnits || tasks * per_task < kParallelGrain) return 1;
  return std::max<int64_t>(1, std::min((kUnits + tasks - 1) / tasks, per_task / kMinSlice));
}

// Calls emit(o, acc) once per output o, possibly concurrently for different o.
template <class T, class P, class Emit>
void reduce_rows(const Geo& g, const T* x, const P& p, Emit&& emit) {
  using Acc = typename P::Acc;
  const int64_t outs = g.outputs(), per = g.per_output();
  // The reduction of output (a, c) is B runs of D contiguous elements.
  auto range = [&](int64_t o, int64_t j0, int64_t j1) {
    const int64_t a = o / g.c, c = o % g.c;
    Acc acc = p.init();
    for (int64_t j = j0; j < j1;) {
      const int64_t b = j / g.d, off = j % g.d, n = std::min(g.d - off, j1 - j);
      p.merge(acc, p.row(x + ((a * g.b + b) * g.c + c) * g.d + off, n, j, o));
      j += n;
    }
    return acc;
  };
  const int64_t slices = slices_for(outs, per);
  if (slices == 1) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, per));
    parallel_for(outs, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) emit(o, range(o, 0, per));
    });
    return;
  }
  std::vector<Acc> part(static_cast<size_t>(outs * slices));
  parallel_for(outs * slices, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / slices, s = t % slices;
      part[t] = range(o, per * s / slices, per * (s + 1) / slices);
    }
  });
  for (int64_t o = 0; o < outs; ++o) {
    Acc acc = part[o * slices];
    for (int64_t s = 1; s < slices; ++s) p.merge(acc, part[o * slices + s]);
    emit(o, acc);
  }
}

// D == 1: y[a][c] reduces x[a][b][c] over b. Rows of C are contiguous, so a
// task accumulates a block of up to kColumns columns row by row. Short rows
// (C < kColumns / 2) are folded: `fold` consecutive rows form one run of
// C * fold accumulators, merged column-wise at the end, for policies that
// ignore positions and outputs.
template <class T, class P, class Emit>
void reduce_columns(const Geo& g, const T* x, const P& p, Emit&& emit) {
  using Acc = typename P::Acc;
  const int64_t fold = P::kFoldable && g.c < kColumns / 2 ? kColumns / g.c : 1;
  const int64_t blocks = (g.c + kColumns - 1) / kColumns, tasks = g.a * blocks;
  // Accumulates rows [b0, b1) of task t into acc; returns the columns.
  auto block = [&](int64_t t, int64_t b0, int64_t b1, Acc* acc) {
    const int64_t a = t / blocks, c0 = (t % blocks) * kColumns, w = std::min(kColumns, g.c - c0);
    const int64_t o0 = a * g.c + c0;
    for (int64_t i = 0; i < w * fold; ++i) acc[i] = p.init();
    const T* base = x + a * g.b * g.c + c0;
    int64_t b = b0;
    if (fold > 1)
      for (; b + fold <= b1; b += fold) p.cols(acc, base + b * g.c, w * fold, b, o0);
    for (; b < b1; ++b) p.cols(acc, base + b * g.c, w, b, o0);
    for (int64_t r = 1; r < fold; ++r)
      for (int64_t i = 0; i < w; ++i) p.merge(acc[i], acc[r * w + i]);
    return w;
  };
  const int64_t per_task = g.b * std::min(kColumns, g.c);
  const int64_t slices = slices_for(tasks, per_task);
  if (slices == 1) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, per_task));
    parallel_for(tasks, grain, [&](int64_t t0, int64_t t1) {
      Acc acc[kColumns];
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t w = block(t, 0, g.b, acc), o = (t / blocks) * g.c + (t % blocks) * kColumns;
        for (int64_t i = 0; i < w; ++i) emit(o + i, acc[i]);
      }
    });
    return;
  }
  std::vector<Acc> part(static_cast<size_t>(tasks * slices * kColumns));
  parallel_for(tasks * slices, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t t = u / slices, s = u % slices;
      block(t, g.b * s / slices, g.b * (s + 1) / slices, &part[u * kColumns]);
    }
  });
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t c0 = (t % blocks) * kColumns, w = std::min(kColumns, g.c - c0), o = (t / blocks) * g.c + c0;
    for (int64_t i = 0; i < w; ++i) {
      Acc acc = part[(t * slices) * kColumns + i];
      for (int64_t s = 1; s < slices; ++s) p.merge(acc, part[(t * slices + s) * kColumns + i]);
      emit(o + i, acc);
    }
  }
}

template <class T, class P, class Emit>
void reduce(const Geo& g, const T* x, const P& p, Emit&& emit) {
  if (g.outputs() == 0) return;
  if (g.d == 1 && g.c > 1) reduce_columns(g, x, p, emit);
  else reduce_rows(g, x, p, emit);
}

// ---- ops ----

template <class T>
void run_t(const State& s, const T* x, void* out) {
  const Geo& g = s.g;
  const double count = static_cast<double>(g.per_output());
  T* y = static_cast<T*>(out);
  switch (s.kind) {
    case Kind::kSum: case Kind::kMean: case Kind::kProd:
      if constexpr (!std::is_same_v<T, uint8_t>) {
        const double div = s.kind == Kind::kMean ? count : 1.0;
        auto emit = [&](int64_t o, wide_t<T> acc) {
          if constexpr (is_float_v<T>) acc /= div;  // 1 but for mean
          y[o] = narrow<T>(acc);
        };
        if (s.kind == Kind::kProd) reduce(g, x, SumProd<T, true>(), emit);
        else reduce(g, x, SumProd<T, false>(), emit);
      }
      return;
    case Kind::kMax:
      return reduce(g, x, Extreme<T, true>(), [&](int64_t o, compute_t<T> v) { y[o] = store<T>(v); });
    case Kind::kMin:
      return reduce(g, x, Extreme<T, false>(), [&](int64_t o, compute_t<T> v) { y[o] = store<T>(v); });
    case Kind::kArgMax: case Kind::kArgMin: {
      int64_t* idx = static_cast<int64_t*>(out);
      auto emit = [&](int64_t o, const auto& acc) { idx[o] = acc.pos; };
      if (s.kind == Kind::kArgMax) reduce(g, x, Arg<T, true>(), emit);
      else reduce(g, x, Arg<T, false>(), emit);
      return;
    }
    case Kind::kVar: case Kind::kStd: case Kind::kLogSumExp:
      if constexpr (is_float_v<T>) {
        std::vector<double> center(static_cast<size_t>(g.outputs()));
        if (s.kind == Kind::kLogSumExp) {
          reduce(g, x, Extreme<T, true>(), [&](int64_t o, compute_t<T> m) { center[o] = static_cast<double>(m); });
          reduce(g, x, ShiftedExp<T>{center.data()}, [&](int64_t o, double acc) {
            const double m = center[o];
            y[o] = store<T>(std::isfinite(m) ? m + std::log(acc) : m);
          });
          return;
        }
        reduce(g, x, SumProd<T, false>(), [&](int64_t o, double acc) { center[o] = acc / count; });
        const double denom = static_cast<double>(std::max<int64_t>(g.per_output() - s.correction, 0));
        const bool sd = s.kind == Kind::kStd;
        reduce(g, x, SquaredDeviation<T>{center.data()}, [&](int64_t o, double acc) {
          y[o] = store<T>(sd ? std::sqrt(acc / denom) : acc / denom);
        });
      }
      return;
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  plugin::visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) run_t(p.get<State>(), static_cast<const T*>(in[0]), out[0]);
  });
}

bool dtype_fits(Kind k, int32_t dt) {
  switch (dt) {
    case SPORA_DTYPE_F32: case SPORA_DTYPE_F64: case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return true;
    case SPORA_DTYPE_I32: case SPORA_DTYPE_I64:
      return k != Kind::kMean && k != Kind::kLogSumExp && k != Kind::kVar && k != Kind::kStd;
    case SPORA_DTYPE_U8: return k == Kind::kMax || k == Kind::kMin || k == Kind::kArgMax || k == Kind::kArgMin;
    default: return false;
  }
}

// Checks the operands and fills `st` (kind, regrouped geometry).
spora_plugin_error_t* describe(KernelPlan& p, State* st) {
  if (auto* e = plugin::expect_operands(p, 1, 1)) return e;
  State s{};
  if (!plugin::reduce_kind_of(p.op, &s.kind)) return plugin::unsupported(p, "not a reduction");
  const bool is_arg = s.kind == Kind::kArgMax || s.kind == Kind::kArgMin;
  const int32_t dt = p.in[0].dtype;
  if (!dtype_fits(s.kind, dt)) return plugin::unsupported(p, std::string("no ") + plugin::dtype_name(dt) + " loop");
  if (p.out[0].dtype != (is_arg ? SPORA_DTYPE_I64 : dt)) return plugin::invalid(p, "output dtype does not fit the op");
  const plugin::Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (in.rank != out.rank) return plugin::invalid(p, "output must keep reduced dims as 1");
  bool reduce[SPORA_MAX_RANK] = {};
  std::vector<int64_t> axes;
  // argmax/argmin without an int axis reduce the (flattened) input whole.
  const plugin::Attr* axis = p.attrs.find("axis");
  if (!is_arg) axes = p.attrs.get_ints("axes");
  else if (axis && axis->type == SPORA_ATTR_INT) axes.push_back(axis->i);
  if (axes.empty())
    for (int i = 0; i < in.rank; ++i) axes.push_back(i);
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= in.rank) return plugin::invalid(p, "axis out of range");
    reduce[ax] = true;
  }
  // Runs of reduced / kept dims, size-1 dims left out, then matched from
  // the innermost against [A kept][B reduced][C kept][D reduced].
  int64_t run_size[SPORA_MAX_RANK];
  bool run_reduced[SPORA_MAX_RANK];
  int runs = 0;
  for (int i = 0; i < in.rank; ++i) {
    if (out.dims[i] != (reduce[i] ? 1 : in.dims[i]))
      return plugin::invalid(p, "output shape does not match the reduction");
    if (in.dims[i] == 1) continue;
    if (runs > 0 && run_reduced[runs - 1] == reduce[i]) {
      run_size[runs - 1] *= in.dims[i];
    } else {
      run_size[runs] = in.dims[i];
      run_reduced[runs++] = reduce[i];
    }
  }
  int64_t* slot[4] = {&s.g.d, &s.g.c, &s.g.b, &s.g.a};
  for (int k = 0; k < 4 && runs > 0; ++k)
    if (run_reduced[runs - 1] == (k % 2 == 0)) *slot[k] = run_size[--runs];
  if (runs > 0) return plugin::unsupported(p, "reduced dims in more than two separate runs");
  const bool needs_elements = s.kind != Kind::kSum && s.kind != Kind::kProd && s.kind != Kind::kLogSumExp;
  if (needs_elements && s.g.per_output() == 0 && s.g.outputs() > 0)
    return plugin::invalid(p, "reduction over zero elements");
  s.correction = p.attrs.get_int("correction", 0);
  *st = s;
  return nullptr;
}

spora_plugin_error_t* plan_loops(KernelPlan& p) {
  State s;
  if (auto* e = describe(p, &s)) return e;
  // onednn_reduce.cpp's case, declined whatever order the two are tried in.
  if ((s.kind == Kind::kSum || s.kind == Kind::kMean) && p.in[0].dtype == SPORA_DTYPE_BF16 && s.g.outputs() == 1 &&
      s.g.per_output() >= kParallelGrain)
    return plugin::unsupported(p, "a whole bf16 tensor is summed by oneDNN");
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

// ---- cumsum and topk (contract in core/src/ops/scan.cpp) ----

struct Scan {
  Lines l;
  bool exclusive, reverse;
};

// Scans steps [j0, j1) of the lines of outer index o, columns [c0, c0 + w),
// carrying acc (floats in double, integers wrapping in uint64).
template <class T>
void scan_steps(const Scan& s, const T* x, T* y, int64_t o, int64_t c0, int64_t w, int64_t j0, int64_t j1,
                wide_t<T>* acc) {
  const int64_t n = s.l.n;
  if (s.l.inner == 1) {
    // One contiguous line: local prefix sums of 4, then the carry added to
    // each, so the add chain carried along the line is one per 4 elements.
    const int64_t dir = s.reverse ? -1 : 1, first = o * n + (s.reverse ? n - 1 : 0);
    const T* xl = x + first;
    T* yl = y + first;
    wide_t<T> a = acc[0];
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
      const wide_t<T> p0 = widen(xl[dir * j]), p1 = p0 + widen(xl[dir * (j + 1)]),
                      p2 = p1 + widen(xl[dir * (j + 2)]), p3 = p2 + widen(xl[dir * (j + 3)]);
      yl[dir * j] = narrow<T>(s.exclusive ? a : a + p0);
      yl[dir * (j + 1)] = narrow<T>(a + (s.exclusive ? p0 : p1));
      yl[dir * (j + 2)] = narrow<T>(a + (s.exclusive ? p1 : p2));
      yl[dir * (j + 3)] = narrow<T>(a + (s.exclusive ? p2 : p3));
      a += p3;
    }
    for (; j < j1; ++j) {
      const wide_t<T> v = widen(xl[dir * j]);
      yl[dir * j] = narrow<T>(s.exclusive ? a : a + v);
      a += v;
    }
    acc[0] = a;
    return;
  }
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t row = (o * n + (s.reverse ? n - 1 - j : j)) * s.l.inner + c0;
    if (s.exclusive) {
      for (int64_t i = 0; i < w; ++i) {
        const wide_t<T> v = widen(x[row + i]);
        y[row + i] = narrow<T>(acc[i]);
        acc[i] += v;
      }
    } else {
      for (int64_t i = 0; i < w; ++i) y[row + i] = narrow<T>(acc[i] += widen(x[row + i]));
    }
  }
}

// Tasks are (outer index, block of columns). Few long tasks are cut into
// chunks of steps of a size fixed by the shape alone: chunk totals first,
// then every chunk scans from the sum of the chunks before it.
template <class T>
void cumsum_t(const Scan& s, const T* x, T* y) {
  using A = wide_t<T>;
  const int64_t n = s.l.n, inner = s.l.inner;
  if (s.l.outer * n * inner == 0) return;
  const int64_t blocks = (inner + kColumns - 1) / kColumns, tasks = s.l.outer * blocks;
  const int64_t width = std::min(kColumns, inner);
  auto cols = [&](int64_t t, int64_t* c0) {
    *c0 = (t % blocks) * kColumns;
    return std::min(kColumns, inner - *c0);
  };
  const int64_t chunk = std::max<int64_t>(1, 65536 / width);
  const int64_t chunks = (tasks >= 16 || tasks * n * width < kParallelGrain) ? 1 : (n + chunk - 1) / chunk;
  if (chunks <= 1) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n * width));
    parallel_for(tasks, grain, [&](int64_t t0, int64_t t1) {
      A acc[kColumns];
      for (int64_t t = t0; t < t1; ++t) {
        int64_t c0;
        const int64_t w = cols(t, &c0);
        std::fill(acc, acc + w, A(0));
        scan_steps(s, x, y, t / blocks, c0, w, 0, n, acc);
      }
    });
    return;
  }
  std::vector<A> carry(static_cast<size_t>(tasks * chunks * kColumns), A(0));
  parallel_for(tasks * chunks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t t = u / chunks, k = u % chunks, j1 = std::min(n, (k + 1) * chunk);
      int64_t c0;
      const int64_t w = cols(t, &c0);
      A* tot = &carry[u * kColumns];
      if (inner == 1) {  // a contiguous stretch of one line, in either direction
        const int64_t first = s.reverse ? n - j1 : k * chunk;
        tot[0] = lanes(x + t * n + first, j1 - k * chunk, A(0), widen<T>, [](A a, A b) { return a + b; });
        continue;
      }
      for (int64_t j = k * chunk; j < j1; ++j) {
        const T* r = x + (t / blocks * n + (s.reverse ? n - 1 - j : j)) * inner + c0;
        for (int64_t i = 0; i < w; ++i) tot[i] += widen(r[i]);
      }
    }
  });
  for (int64_t t = 0; t < tasks; ++t) {  // chunk totals -> the sums before each chunk
    A run[kColumns] = {};
    for (int64_t k = 0; k < chunks; ++k) {
      A* c = &carry[(t * chunks + k) * kColumns];
      for (int64_t i = 0; i < width; ++i) std::swap(c[i], run[i]), run[i] += c[i];
    }
  }
  parallel_for(tasks * chunks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t t = u / chunks, k = u % chunks;
      int64_t c0;
      const int64_t w = cols(t, &c0);
      scan_steps(s, x, y, t / blocks, c0, w, k * chunk, std::min(n, (k + 1) * chunk), &carry[u * kColumns]);
    }
  });
}

void run_cumsum(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  plugin::visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, uint8_t>)
      cumsum_t(p.get<Scan>(), static_cast<const T*>(in[0]), static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan_cumsum(KernelPlan& p) {
  if (auto* e = plugin::expect_operands(p, 1, 1)) return e;
  const int32_t dt = p.in[0].dtype;
  if (!dtype_fits(Kind::kSum, dt)) return plugin::unsupported(p, std::string("no ") + plugin::dtype_name(dt) + " loop");
  if (p.out[0].dtype != dt || p.out[0].shape != p.in[0].shape) return plugin::invalid(p, "input and output differ");
  // A scalar is left to the reference kernel.
  if (p.in[0].shape.rank == 0) return plugin::unsupported(p, "scalar");
  Scan s{};
  if (!lines_of(p.in[0].shape, p.attrs.get_int("axis", -1), &s.l)) return plugin::invalid(p, "axis out of range");
  s.exclusive = p.attrs.get_bool("exclusive", false);
  s.reverse = p.attrs.get_bool("reverse", false);
  p.state = std::make_shared<Scan>(s);
  p.run = run_cumsum;
  return nullptr;
}

struct Topk {
  Lines l;
  int64_t k;
  bool largest, sorted;
};

template <class C>
using Item = plugin::TopkItem<C>;
template <class C>
using First = plugin::TopkFirst<C>;

// Lines in parallel; each one gathered, selected and written out.
template <class T>
void topk_t(const Topk& s, const T* x, T* values, int64_t* indices) {
  using C = compute_t<T>;
  const int64_t n = s.l.n, inner = s.l.inner, k = s.k;
  if (k == 0) return;
  const First<C> first{s.largest};
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n));
  parallel_for(s.l.outer * inner, grain, [&](int64_t l0, int64_t l1) {
    std::vector<Item<C>> line(static_cast<size_t>(n));
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t o = l / inner, c = l % inner;
      const T* xs = x + o * n * inner + c;
      for (int64_t j = 0; j < n; ++j) line[j] = {load(xs[j * inner]), j};
      if (k * 8 < n) {  // a heap for small k, introselect and a sort otherwise
        std::partial_sort(line.begin(), line.begin() + k, line.end(), first);
      } else {
        std::nth_element(line.begin(), line.begin() + (k - 1), line.end(), first);
        if (s.sorted) std::sort(line.begin(), line.begin() + k, first);
      }
      if (!s.sorted)
        std::sort(line.begin(), line.begin() + k, [](const Item<C>& a, const Item<C>& b) { return a.i < b.i; });
      for (int64_t j = 0; j < k; ++j) {
        values[(o * k + j) * inner + c] = store<T>(line[j].v);
        indices[(o * k + j) * inner + c] = line[j].i;
      }
    }
  });
}

void run_topk(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  plugin::visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      topk_t(p.get<Topk>(), static_cast<const T*>(in[0]), static_cast<T*>(out[0]), static_cast<int64_t*>(out[1]));
  });
}

spora_plugin_error_t* plan_topk(KernelPlan& p) {
  if (auto* e = plugin::expect_operands(p, 1, 2)) return e;
  const int32_t dt = p.in[0].dtype;
  if (!dtype_fits(Kind::kMax, dt)) return plugin::unsupported(p, std::string("no ") + plugin::dtype_name(dt) + " loop");
  if (p.out[0].dtype != dt || p.out[1].dtype != SPORA_DTYPE_I64) return plugin::invalid(p, "output dtypes do not fit");
  if (p.in[0].shape.rank == 0) return plugin::unsupported(p, "scalar");
  Topk s{};
  const int64_t axis = p.attrs.get_int("axis", -1);
  if (!lines_of(p.in[0].shape, axis, &s.l)) return plugin::invalid(p, "axis out of range");
  s.k = p.attrs.get_int("k", -1);
  if (s.k < 0 || s.k > s.l.n) return plugin::invalid(p, "k out of range");
  plugin::Shape want = p.in[0].shape;
  want.dims[axis] = s.k;
  if (p.out[0].shape != want || p.out[1].shape != want) return plugin::invalid(p, "output shapes do not match k");
  s.largest = p.attrs.get_bool("largest", true);
  s.sorted = p.attrs.get_bool("sorted", true);
  p.state = std::make_shared<Topk>(s);
  p.run = run_topk;
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  for (const auto& k : kReduceKinds) t.add({k.op, "loops", plan_loops});
  t.add({"cumsum", "loops", plan_cumsum});
  t.add({"topk", "loops", plan_topk});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
