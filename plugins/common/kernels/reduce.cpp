// Reference reductions: sum, mean, max, min, prod, logsumexp, var, std over
// any set of axes, argmax/argmin along one. The host's contract is in
// core/src/ops/reduce.cpp; plans re-check the shapes memory safety depends
// on.
//
// Passes in memory order over the input, accumulating into one slot per
// output, keep reads sequential whatever the axes. Floats accumulate in
// double, integers in uint64 (wrapping, like the op's integer semantics).
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernel_plan.h"
#include "reduce_ops.h"

namespace spora::plugin {
namespace {

using Kind = ReduceKind;

struct State {
  Kind kind;
  bool reduce[SPORA_MAX_RANK];
  int64_t count;       // input elements per output
  int64_t correction;  // var, std
};

// Folds every input element into its output's accumulator, in memory order:
// add(acc, v, pos, o), pos being the element's row-major position among the
// reduced dims and o its output's offset. Rows along the innermost dim run
// as a tight loop: a reduced one into a local accumulator (no store per
// element), a kept one across consecutive outputs.
template <class T, class Acc, class Add>
void fold(const Shape& s, const bool* reduce, const T* x, std::vector<Acc>& acc, Add&& add) {
  const int64_t n = s.numel();
  if (n == 0) return;
  const int r = s.rank;
  const int64_t len = r > 0 ? s.dims[r - 1] : 1;
  const bool inner_reduced = r > 0 && reduce[r - 1];
  int64_t step_o[SPORA_MAX_RANK] = {}, step_r[SPORA_MAX_RANK] = {};
  int64_t ko = 1, kr = 1;
  for (int d = r - 1; d >= 0; --d) {
    if (reduce[d]) {
      step_r[d] = kr;
      kr *= s.dims[d];
    } else {
      step_o[d] = ko;
      ko *= s.dims[d];
    }
  }
  int64_t idx[SPORA_MAX_RANK] = {};
  int64_t o = 0, pos = 0;
  for (int64_t i0 = 0; i0 < n; i0 += len) {
    if (inner_reduced) {
      Acc a = acc[o];
      for (int64_t k = 0; k < len; ++k) add(a, x[i0 + k], pos + k, o);
      acc[o] = a;
    } else {
      for (int64_t k = 0; k < len; ++k) add(acc[o + k], x[i0 + k], pos, o + k);
    }
    for (int d = r - 2; d >= 0; --d) {
      o += step_o[d];
      pos += step_r[d];
      if (++idx[d] < s.dims[d]) break;
      o -= step_o[d] * s.dims[d];
      pos -= step_r[d] * s.dims[d];
      idx[d] = 0;
    }
  }
}

template <class T>
void sum_prod(const KernelPlan& p, const T* x, T* y, size_t m) {
  const State& s = p.get<State>();
  const bool prod = s.kind == Kind::kProd;
  const Shape& sh = p.in[0].shape;
  if constexpr (is_float_v<T>) {
    std::vector<double> acc(m, prod ? 1.0 : 0.0);
    if (prod) fold(sh, s.reduce, x, acc, [](double& a, T v, int64_t, int64_t) { a *= load(v); });
    else fold(sh, s.reduce, x, acc, [](double& a, T v, int64_t, int64_t) { a += load(v); });
    const double div = s.kind == Kind::kMean ? static_cast<double>(s.count) : 1.0;
    for (size_t o = 0; o < m; ++o) y[o] = store<T>(acc[o] / div);
  } else {
    // Unsigned arithmetic wraps without undefined behaviour; the low bits
    // are those of the signed result.
    std::vector<uint64_t> acc(m, prod ? 1 : 0);
    if (prod) fold(sh, s.reduce, x, acc, [](uint64_t& a, T v, int64_t, int64_t) { a *= static_cast<uint64_t>(v); });
    else fold(sh, s.reduce, x, acc, [](uint64_t& a, T v, int64_t, int64_t) { a += static_cast<uint64_t>(v); });
    for (size_t o = 0; o < m; ++o) y[o] = static_cast<T>(acc[o]);
  }
}

template <class T>
void max_min(const KernelPlan& p, const T* x, T* y, size_t m) {
  using C = compute_t<T>;
  using L = std::numeric_limits<C>;
  const State& s = p.get<State>();
  const bool mx = s.kind == Kind::kMax;
  const C init = mx ? (L::has_infinity ? -L::infinity() : L::lowest()) : (L::has_infinity ? L::infinity() : L::max());
  std::vector<C> acc(m, init);
  // A NaN replaces the accumulator and then sticks: nothing compares above it.
  if (mx)
    fold(p.in[0].shape, s.reduce, x, acc, [](C& a, T v, int64_t, int64_t) {
      const C c = load(v);
      if (c > a || is_nan(c)) a = c;
    });
  else
    fold(p.in[0].shape, s.reduce, x, acc, [](C& a, T v, int64_t, int64_t) {
      const C c = load(v);
      if (c < a || is_nan(c)) a = c;
    });
  for (size_t o = 0; o < m; ++o) y[o] = store<T>(acc[o]);
}

template <class T>
void arg(const KernelPlan& p, const T* x, int64_t* y, size_t m) {
  using C = compute_t<T>;
  struct Best {
    C v;
    int64_t pos;  // -1: none yet
  };
  const bool mx = p.get<State>().kind == Kind::kArgMax;
  std::vector<Best> acc(m, Best{C(0), -1});
  // Positions arrive in increasing order per output, so a strict comparison
  // keeps the first of equal values.
  fold(p.in[0].shape, p.get<State>().reduce, x, acc, [mx](Best& b, T v, int64_t pos, int64_t) {
    const C c = load(v);
    if (b.pos < 0 || (mx ? c > b.v : c < b.v) || (is_nan(c) && !is_nan(b.v))) b = {c, pos};
  });
  for (size_t o = 0; o < m; ++o) y[o] = acc[o].pos;
}

template <class T>
void two_pass(const KernelPlan& p, const T* x, T* y, size_t m) {
  const State& s = p.get<State>();
  const Shape& sh = p.in[0].shape;
  auto wide = [](T v) { return static_cast<double>(load(v)); };
  std::vector<double> center(m), acc(m, 0.0);
  if (s.kind == Kind::kLogSumExp) {
    // exp(x - max) never overflows; an infinite or NaN max is the answer.
    for (auto& c : center) c = -INFINITY;
    fold(sh, s.reduce, x, center, [&](double& c, T v, int64_t, int64_t) {
      if (wide(v) > c || wide(v) != wide(v)) c = wide(v);
    });
    fold(sh, s.reduce, x, acc, [&](double& a, T v, int64_t, int64_t o) {
      if (std::isfinite(center[o])) a += std::exp(wide(v) - center[o]);
    });
    for (size_t o = 0; o < m; ++o)
      y[o] = store<T>(std::isfinite(center[o]) ? center[o] + std::log(acc[o]) : center[o]);
    return;
  }
  // var/std: the mean first, then squared deviations from it (two passes
  // lose nothing to cancellation, unlike sum of squares minus square of sum).
  fold(sh, s.reduce, x, center, [&](double& c, T v, int64_t, int64_t) { c += wide(v); });
  for (auto& c : center) c /= static_cast<double>(s.count);
  fold(sh, s.reduce, x, acc, [&](double& a, T v, int64_t, int64_t o) {
    const double d = wide(v) - center[o];
    a += d * d;
  });
  const double denom = static_cast<double>(s.count > s.correction ? s.count - s.correction : 0);
  for (size_t o = 0; o < m; ++o) {
    const double v = acc[o] / denom;
    y[o] = store<T>(s.kind == Kind::kStd ? std::sqrt(v) : v);
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Kind kind = p.get<State>().kind;
  const size_t m = static_cast<size_t>(p.out[0].shape.numel());
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* x = static_cast<const T*>(in[0]);
      switch (kind) {
        case Kind::kSum: case Kind::kMean: case Kind::kProd:
          return sum_prod(p, x, static_cast<T*>(out[0]), m);
        case Kind::kMax: case Kind::kMin:
          return max_min(p, x, static_cast<T*>(out[0]), m);
        case Kind::kArgMax: case Kind::kArgMin:
          return arg(p, x, static_cast<int64_t*>(out[0]), m);
        case Kind::kLogSumExp: case Kind::kVar: case Kind::kStd:
          if constexpr (is_float_v<T>) two_pass(p, x, static_cast<T*>(out[0]), m);
          return;
      }
    }
  });
}

bool dtype_fits(Kind k, int32_t dt) {
  switch (dt) {
    case SPORA_DTYPE_F32: case SPORA_DTYPE_F64: case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return true;
    case SPORA_DTYPE_I32: case SPORA_DTYPE_I64:
      return k == Kind::kSum || k == Kind::kProd || k == Kind::kMax || k == Kind::kMin || k == Kind::kArgMax ||
             k == Kind::kArgMin;
    case SPORA_DTYPE_U8: return k == Kind::kMax || k == Kind::kMin || k == Kind::kArgMax || k == Kind::kArgMin;
    default: return false;
  }
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  State s{};
  if (!reduce_kind_of(p.op, &s.kind)) return unsupported(p, "not a reduction");
  const bool is_arg = s.kind == Kind::kArgMax || s.kind == Kind::kArgMin;
  const int32_t dt = p.in[0].dtype;
  if (!dtype_fits(s.kind, dt)) return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.out[0].dtype != (is_arg ? SPORA_DTYPE_I64 : dt))
    return invalid(p, std::string("output dtype ") + dtype_name(p.out[0].dtype) + " does not fit the op");
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (in.rank != out.rank) return invalid(p, "output must keep reduced dims as 1");
  std::vector<int64_t> axes;
  // argmax/argmin without an int axis reduce the (flattened) input whole.
  const Attr* axis = p.attrs.find("axis");
  if (!is_arg) axes = p.attrs.get_ints("axes");
  else if (axis && axis->type == SPORA_ATTR_INT) axes.push_back(axis->i);
  if (axes.empty())
    for (int i = 0; i < in.rank; ++i) axes.push_back(i);
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= in.rank) return invalid(p, "axis out of range");
    s.reduce[ax] = true;
  }
  s.count = 1;
  for (int i = 0; i < in.rank; ++i) {
    if (out.dims[i] != (s.reduce[i] ? 1 : in.dims[i])) return invalid(p, "output shape does not match the reduction");
    if (s.reduce[i]) s.count *= in.dims[i];
  }
  const bool needs_elements = s.kind != Kind::kSum && s.kind != Kind::kProd && s.kind != Kind::kLogSumExp;
  if (needs_elements && s.count == 0 && out.numel() > 0) return invalid(p, "reduction over zero elements");
  s.correction = p.attrs.get_int("correction", 0);
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const auto& k : kReduceKinds) t.add({k.op, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
