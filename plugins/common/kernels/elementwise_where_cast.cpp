// Reference where (a select that broadcasts all three operands) and cast
// (every dtype to every dtype).
#include <cstring>
#include <limits>
#include <type_traits>

#include "elementwise.h"

namespace spora::plugin::ew {
namespace {

// A select through a mask, not a branch: conditions are data, often random,
// and a mispredicted branch per element costs ~10x the copy. Strides are
// template parameters so each broadcast pattern gets its own loop.
template <class U, int SC, int SX, int SY>
void select(const uint8_t* c, const U* x, const U* y, U* z, int64_t len) {
  for (int64_t j = 0; j < len; ++j) {
    const U m = static_cast<U>(U(0) - U(c[j * SC] != 0));
    z[j] = static_cast<U>((x[j * SX] & m) | (y[j * SY] & static_cast<U>(~m)));
  }
}

// where moves bits, so one loop per element size serves every dtype.
template <class U>
void where_range(const State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  using Loop = void (*)(const uint8_t*, const U*, const U*, U*, int64_t);
  static constexpr Loop kLoops[8] = {select<U, 0, 0, 0>, select<U, 0, 0, 1>, select<U, 0, 1, 0>, select<U, 0, 1, 1>,
                                     select<U, 1, 0, 0>, select<U, 1, 0, 1>, select<U, 1, 1, 0>, select<U, 1, 1, 1>};
  const Loop loop = kLoops[s.bc.inner(0) * 4 + s.bc.inner(1) * 2 + s.bc.inner(2)];
  const auto* c = static_cast<const uint8_t*>(in[0]);
  const auto* x = static_cast<const U*>(in[1]);
  const auto* y = static_cast<const U*>(in[2]);
  auto* z = static_cast<U*>(out[0]);
  for_each_run<3>(s.bc, begin, end, [&](const int64_t* off, int64_t pos, int64_t len) {
    loop(c + off[0], x + off[1], y + off[2], z + pos, len);
  });
}

// Float -> integer truncates toward zero; out-of-range values saturate and
// NaN becomes 0 instead of the UB of a plain conversion. Written as
// selects around an in-range conversion so that the loop vectorises.
template <class TO, class V>
inline TO float_to_int(V v) {
  using L = std::numeric_limits<TO>;
  constexpr int bits = L::digits;  // 2^bits is one past the largest value
  constexpr int mant = std::numeric_limits<V>::digits;
  constexpr V top = static_cast<V>(static_cast<double>(uint64_t{1} << (bits - 1)) * 2.0);
  // The largest V below 2^bits: its ulp there is 2^(bits - mant), or 1.
  constexpr V below_top = bits > mant ? top - static_cast<V>(uint64_t{1} << (bits - mant)) : top - V(1);
  constexpr V bottom = static_cast<V>(L::min());  // 0 or -2^bits, exact
  const V c = v < bottom ? bottom : (v > below_top ? below_top : v);
  const TO r = static_cast<TO>(c != c ? V(0) : c);
  // A mask, not ?: (which GCC turns into a branch around the conversion).
  using U = std::make_unsigned_t<TO>;
  const U m = static_cast<U>(U(0) - static_cast<U>(v >= top));
  return static_cast<TO>((static_cast<U>(r) & static_cast<U>(~m)) | (static_cast<U>(L::max()) & m));
}

template <class TI, class TO>
inline stor_t<TO> convert(stor_t<TI> x) {
  if constexpr (std::is_same_v<TI, TO>) {
    return x;
  } else if constexpr (kIsBool<TO>) {
    return static_cast<uint8_t>(ld<TI>(x) != compute_t<TI>(0));
  } else if constexpr (is_float_v<TO>) {
    // Through float for 16-bit targets (their only conversion); exact or
    // one rounding for every other pair.
    using Via = std::conditional_t<is_half_v<TO>, float, TO>;
    return st<TO>(static_cast<Via>(ld<TI>(x)));
  } else if constexpr (is_float_v<TI>) {
    return float_to_int<TO>(ld<TI>(x));
  } else {
    return static_cast<TO>(ld<TI>(x));  // integers wrap like numpy's astype
  }
}

template <class TI, class TO>
void cast_range(const State&, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  const auto* x = static_cast<const stor_t<TI>*>(in[0]);
  auto* y = static_cast<stor_t<TO>*>(out[0]);
  for (int64_t i = begin; i < end; ++i) y[i] = convert<TI, TO>(x[i]);
}

}  // namespace

RangeFn pick_where(int32_t dtype) {
  switch (dtype_size(dtype)) {
    case 1: return &where_range<uint8_t>;
    case 2: return &where_range<uint16_t>;
    case 4: return &where_range<uint32_t>;
    case 8: return &where_range<uint64_t>;
    default: return nullptr;
  }
}

RangeFn pick_cast(int32_t from, int32_t to) {
  RangeFn r = nullptr;
  visit_dtype(from, [&](auto ti) {
    visit_dtype(to, [&](auto to_tag) { r = &cast_range<decltype(ti), decltype(to_tag)>; });
  });
  return r;
}

}  // namespace spora::plugin::ew
