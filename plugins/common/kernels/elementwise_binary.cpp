// Reference binary kernels with numpy broadcasting: arithmetic, comparisons
// (-> bool) and logical ops. Functors are templates on the compute type C;
// one loop per (op, dtype), with the inner loop specialised for the stride
// pattern (both contiguous, or one side broadcast along the row) so the
// common cases vectorise.
#include <cmath>

#include "elementwise.h"

namespace spora::plugin::ew {
namespace {

template <class C>
constexpr bool kNumeric = kIsFloat<C> || kIsInt<C>;

template <class C>
inline bool is_nan(C v) {
  if constexpr (kIsFloat<C>) return v != v;
  else return false;
}

#define SPORA_EW_BINARY(Name, Ok, Result, Body)  \
  template <class C>                             \
  struct Name {                                  \
    static constexpr bool ok = Ok;               \
    using R = Result;                            \
    R operator()(C a, C b) const { Body }        \
  };

SPORA_EW_BINARY(Add, kNumeric<C>, C, { return wrap_add(a, b); })
SPORA_EW_BINARY(Sub, kNumeric<C>, C, { return wrap_sub(a, b); })
SPORA_EW_BINARY(Mul, kNumeric<C>, C, { return wrap_mul(a, b); })
SPORA_EW_BINARY(Div, kIsFloat<C>, C, { return a / b; })
SPORA_EW_BINARY(Pow, kIsFloat<C>, C, { return std::pow(a, b); })
// NaN propagates (numpy's maximum/minimum): a NaN `a` is kept, and a NaN
// `b` fails the comparison and is taken. `|`, not `||`: both compares run,
// so the loop has no branch and vectorises.
SPORA_EW_BINARY(Maximum, kNumeric<C>, C, { return (a > b) | is_nan(a) ? a : b; })
SPORA_EW_BINARY(Minimum, kNumeric<C>, C, { return (a < b) | is_nan(a) ? a : b; })
SPORA_EW_BINARY(Equal, kNumeric<C> || kIsBool<C>, bool, { return a == b; })
SPORA_EW_BINARY(NotEqual, kNumeric<C> || kIsBool<C>, bool, { return a != b; })
SPORA_EW_BINARY(Less, kNumeric<C>, bool, { return a < b; })
SPORA_EW_BINARY(LessEqual, kNumeric<C>, bool, { return a <= b; })
SPORA_EW_BINARY(Greater, kNumeric<C>, bool, { return a > b; })
SPORA_EW_BINARY(GreaterEqual, kNumeric<C>, bool, { return a >= b; })
SPORA_EW_BINARY(LogicalAnd, kIsBool<C>, bool, { return a && b; })
SPORA_EW_BINARY(LogicalOr, kIsBool<C>, bool, { return a || b; })
SPORA_EW_BINARY(LogicalXor, kIsBool<C>, bool, { return a != b; })
#undef SPORA_EW_BINARY

template <class T, template <class> class F>
void binary_range(const State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  using C = compute_t<T>;
  using Fn = F<C>;
  using TO = std::conditional_t<std::is_same_v<typename Fn::R, bool>, bool, T>;
  const Fn f{};
  const auto* x = static_cast<const stor_t<T>*>(in[0]);
  const auto* y = static_cast<const stor_t<T>*>(in[1]);
  auto* z = static_cast<stor_t<TO>*>(out[0]);
  const int64_t sx = s.bc.inner(0), sy = s.bc.inner(1);
  for_each_run<2>(s.bc, begin, end, [&](const int64_t* off, int64_t pos, int64_t len) {
    const stor_t<T>* px = x + off[0];
    const stor_t<T>* py = y + off[1];
    stor_t<TO>* pz = z + pos;
    if (sx == 1 && sy == 1) {
      for (int64_t j = 0; j < len; ++j) pz[j] = st<TO>(f(ld<T>(px[j]), ld<T>(py[j])));
    } else if (sx == 1) {
      const C b = ld<T>(py[0]);
      for (int64_t j = 0; j < len; ++j) pz[j] = st<TO>(f(ld<T>(px[j]), b));
    } else if (sy == 1) {
      const C a = ld<T>(px[0]);
      for (int64_t j = 0; j < len; ++j) pz[j] = st<TO>(f(a, ld<T>(py[j])));
    } else {
      const stor_t<TO> v = st<TO>(f(ld<T>(px[0]), ld<T>(py[0])));
      for (int64_t j = 0; j < len; ++j) pz[j] = v;
    }
  });
}

template <template <class> class F>
RangeFn pick(int32_t dtype) {
  RangeFn r = nullptr;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (F<compute_t<T>>::ok) r = &binary_range<T, F>;
  });
  return r;
}

}  // namespace

RangeFn pick_binary(Op op, int32_t dtype) {
  switch (op) {
    case Op::kAdd: return pick<Add>(dtype);
    case Op::kSub: return pick<Sub>(dtype);
    case Op::kMul: return pick<Mul>(dtype);
    case Op::kDiv: return pick<Div>(dtype);
    case Op::kPow: return pick<Pow>(dtype);
    case Op::kMaximum: return pick<Maximum>(dtype);
    case Op::kMinimum: return pick<Minimum>(dtype);
    case Op::kEqual: return pick<Equal>(dtype);
    case Op::kNotEqual: return pick<NotEqual>(dtype);
    case Op::kLess: return pick<Less>(dtype);
    case Op::kLessEqual: return pick<LessEqual>(dtype);
    case Op::kGreater: return pick<Greater>(dtype);
    case Op::kGreaterEqual: return pick<GreaterEqual>(dtype);
    case Op::kLogicalAnd: return pick<LogicalAnd>(dtype);
    case Op::kLogicalOr: return pick<LogicalOr>(dtype);
    case Op::kLogicalXor: return pick<LogicalXor>(dtype);
    default: return nullptr;
  }
}

}  // namespace spora::plugin::ew
