// Reference cumsum and topk along one axis, seen as (outer, n, inner): the
// axis's length n, with the dims before and after it merged. The host's
// contract is in core/src/ops/scan.cpp.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernel_plan.h"
#include "reduce_ops.h"

namespace spora::plugin {
namespace {

bool is_float_dtype(int32_t dt) {
  return dt == SPORA_DTYPE_F32 || dt == SPORA_DTYPE_F64 || dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16;
}

// ---- cumsum ----

struct ScanState {
  Lines l;
  bool exclusive, reverse;
};

template <class T>
void cumsum_t(const ScanState& s, const T* x, T* y) {
  // Floats sum in double, integers in uint64 (wrapping, no undefined
  // behaviour on overflow).
  using A = std::conditional_t<is_float_v<T>, double, uint64_t>;
  const int64_t n = s.l.n, inner = s.l.inner;
  auto widen = [](T v) {
    if constexpr (is_float_v<T>) return static_cast<double>(load(v));
    else return static_cast<A>(v);
  };
  if (inner == 1) {  // contiguous lines
    for (int64_t o = 0; o < s.l.outer; ++o) {
      const int64_t dir = s.reverse ? -1 : 1, first = o * n + (s.reverse ? n - 1 : 0);
      A acc = 0;
      for (int64_t j = 0; j < n; ++j) {
        const A v = widen(x[first + dir * j]);
        y[first + dir * j] = store<T>(s.exclusive ? acc : acc + v);
        acc += v;
      }
    }
    return;
  }
  std::vector<A> acc(static_cast<size_t>(inner));
  // Whole rows of `inner` elements at a time keep reads sequential.
  for (int64_t o = 0; o < s.l.outer; ++o) {
    std::fill(acc.begin(), acc.end(), A(0));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t row = (o * n + (s.reverse ? n - 1 - j : j)) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const A v = widen(x[row + i]);
        if (s.exclusive) {
          y[row + i] = store<T>(acc[i]);
          acc[i] += v;
        } else {
          acc[i] += v;
          y[row + i] = store<T>(acc[i]);
        }
      }
    }
  }
}

void run_cumsum(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, uint8_t>)
      cumsum_t(p.get<ScanState>(), static_cast<const T*>(in[0]), static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan_cumsum(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  const int32_t dt = p.in[0].dtype;
  if (!is_float_dtype(dt) && dt != SPORA_DTYPE_I32 && dt != SPORA_DTYPE_I64)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.out[0].dtype != dt || p.out[0].shape != p.in[0].shape) return invalid(p, "input and output differ");
  ScanState s{};
  const int64_t axis = p.attrs.get_int("axis", p.in[0].shape.rank - 1);
  if (!lines_of(p.in[0].shape, axis, &s.l)) return invalid(p, "axis out of range");
  s.exclusive = p.attrs.get_bool("exclusive", false);
  s.reverse = p.attrs.get_bool("reverse", false);
  p.state = std::make_shared<ScanState>(s);
  p.run = run_cumsum;
  return nullptr;
}

// ---- topk ----

struct TopkState {
  Lines l;
  int64_t k;
  bool largest, sorted;
};

template <class C>
using Item = TopkItem<C>;
template <class C>
using First = TopkFirst<C>;

template <class T>
void topk_t(const TopkState& s, const T* x, T* values, int64_t* indices) {
  using C = compute_t<T>;
  const int64_t n = s.l.n, inner = s.l.inner, k = s.k;
  if (k == 0) return;
  std::vector<Item<C>> line(static_cast<size_t>(n));
  const First<C> first{s.largest};
  for (int64_t o = 0; o < s.l.outer; ++o) {
    for (int64_t c = 0; c < inner; ++c) {
      const T* xs = x + o * n * inner + c;
      for (int64_t j = 0; j < n; ++j) line[j] = {load(xs[j * inner]), j};
      // A heap wins for small k, introselect plus a sort of the k otherwise.
      if (k * 8 < n) {
        std::partial_sort(line.begin(), line.begin() + k, line.end(), first);
      } else {
        std::nth_element(line.begin(), line.begin() + (k - 1), line.end(), first);
        if (s.sorted) std::sort(line.begin(), line.begin() + k, first);
      }
      if (!s.sorted)
        std::sort(line.begin(), line.begin() + k, [](const Item<C>& a, const Item<C>& b) { return a.i < b.i; });
      T* vs = values + o * k * inner + c;
      int64_t* is = indices + o * k * inner + c;
      for (int64_t j = 0; j < k; ++j) {
        vs[j * inner] = store<T>(line[j].v);
        is[j * inner] = line[j].i;
      }
    }
  }
}

void run_topk(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      topk_t(p.get<TopkState>(), static_cast<const T*>(in[0]), static_cast<T*>(out[0]),
             static_cast<int64_t*>(out[1]));
  });
}

spora_plugin_error_t* plan_topk(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 2)) return e;
  const int32_t dt = p.in[0].dtype;
  if (!is_float_dtype(dt) && dt != SPORA_DTYPE_I32 && dt != SPORA_DTYPE_I64 && dt != SPORA_DTYPE_U8)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.out[0].dtype != dt || p.out[1].dtype != SPORA_DTYPE_I64) return invalid(p, "output dtypes do not fit");
  TopkState s{};
  const Shape &in = p.in[0].shape, &v = p.out[0].shape;
  const int64_t axis = p.attrs.get_int("axis", p.in[0].shape.rank - 1);
  if (!lines_of(in, axis, &s.l)) return invalid(p, "axis out of range");
  s.k = p.attrs.get_int("k", -1);
  if (s.k < 0 || s.k > s.l.n) return invalid(p, "k out of range");
  Shape want = in;
  if (in.rank > 0) want.dims[axis] = s.k;
  else if (s.k != 1) return invalid(p, "k must be 1 for a scalar");
  if (v != want || p.out[1].shape != want) return invalid(p, "output shapes do not match k");
  s.largest = p.attrs.get_bool("largest", true);
  s.sorted = p.attrs.get_bool("sorted", true);
  p.state = std::make_shared<TopkState>(s);
  p.run = run_topk;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"cumsum", "ref", plan_cumsum});
  t.add({"topk", "ref", plan_topk});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
