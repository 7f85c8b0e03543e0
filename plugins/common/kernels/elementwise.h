// Elementwise kernels shared by the reference implementation and the cpu
// plugin: a plan (op, dtypes, attributes, a coalesced broadcast iteration
// space) and a range function that computes any slice [begin, end) of the
// flat output. The reference kernel runs the whole range on the calling
// thread; the cpu plugin splits it across threads. The function is chosen at
// plan time for the (op, dtypes) pair, so a launch does no dispatch.
//
// Inference (core/src/ops/elementwise.cpp) guarantees: unary ops have equal
// input and output shapes; broadcasting ops have inputs padded to the
// output's rank with every dim equal to the output's or 1. Plans re-check
// what memory safety depends on.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <spora/ops_elementwise.h>

#include "kernel_plan.h"

namespace spora::plugin::ew {

// Op codes in the order of the table (spora/ops_elementwise.def), so ranges
// of one kind are contiguous: unary, logical_not, cast, binary, comparisons
// and logical ops, where.
enum class Op : uint8_t {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) k##Id,
#include <spora/ops_elementwise.def>
};

struct OpInfo {
  const char* name;
  Op op;
  int32_t inputs;
  // Rough cost of one element relative to an add, for the parallel grain.
  int32_t cost;
  int32_t flags;  // SPORA_EW_F_* (spora/ops_elementwise.h)
};
extern const OpInfo kOps[];
extern const int kNumOps;

// Attributes, parsed once at plan time.
struct Params {
  double alpha = 0;      // leaky_relu
  double beta = 1;       // softplus
  double threshold = 0;  // softplus
  double lo = 0, hi = 0; // clip
  bool gelu_tanh = false;
};

constexpr int kMaxIn = 3;

// The output's iteration space with adjacent dims merged where every input
// agrees on broadcasting them, and size-1 output dims dropped: same-shape
// and scalar-broadcast operands become rank 1, a row broadcast rank 2.
struct Bcast {
  int32_t rank = 1;  // >= 1
  int64_t dims[SPORA_MAX_RANK] = {1};
  int64_t strides[kMaxIn][SPORA_MAX_RANK] = {};  // in elements, 0 where broadcast
  // Strides along the innermost dim (0 or 1): the inner loop's pattern.
  int64_t inner(int k) const { return strides[k][rank - 1]; }
};

// `in` are `n` shapes padded to `out`'s rank, each dim equal to out's or 1.
Bcast make_bcast(const Shape& out, const Shape* in, int n);

// Calls fn(off, pos, len) for each run of consecutive output elements
// along the innermost dim that [begin, end) covers: the run writes output
// elements [pos, pos + len) and reads input k from off[k] with stride
// b.inner(k).
template <int N, class Fn>
inline void for_each_run(const Bcast& b, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int r = b.rank;
  if (r == 1) {  // same shapes or scalars: one run, no index arithmetic
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = begin * b.strides[k][0];
    fn(static_cast<const int64_t*>(off), begin, end - begin);
    return;
  }
  const int64_t inner = b.dims[r - 1];
  int64_t idx[SPORA_MAX_RANK] = {};
  int64_t off[N] = {};
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % b.dims[d];
    rem /= b.dims[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * b.strides[k][d];
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(inner - idx[r - 1], end - pos);
    fn(static_cast<const int64_t*>(off), pos, len);
    pos += len;
    idx[r - 1] += len;
    for (int k = 0; k < N; ++k) off[k] += len * b.strides[k][r - 1];
    if (idx[r - 1] < inner) continue;
    // Carry into the outer dims like an odometer.
    for (int k = 0; k < N; ++k) off[k] -= inner * b.strides[k][r - 1];
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      for (int k = 0; k < N; ++k) off[k] += b.strides[k][d];
      if (++idx[d] < b.dims[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= b.strides[k][d] * b.dims[d];
      idx[d] = 0;
    }
  }
}

struct State;
// Computes output elements [begin, end) (flat, row-major).
using RangeFn = void (*)(const State& s, const void* const* in, void* const* out, int64_t begin, int64_t end);

struct State {
  const OpInfo* info = nullptr;
  Params prm;
  Bcast bc;
  int64_t numel = 0;
  RangeFn range = nullptr;
};

// Plans any op of kOps for the reference kernel: p.state is a State, p.run
// runs the whole range on the calling thread.
spora_plugin_error_t* plan(KernelPlan& p);

// Range functions by op and dtypes; NULL when the pair has no kernel.
RangeFn pick_unary(Op op, int32_t dtype);
RangeFn pick_binary(Op op, int32_t dtype);
RangeFn pick_where(int32_t dtype);
RangeFn pick_cast(int32_t from, int32_t to);

// f16 <-> float without branches or loops, so that loops over f16 data
// vectorise (dtypes.h's exact conversions are 5-10 ns each); bit-identical
// to them, NaN aside (any NaN stays a NaN). Both are correct under FTZ/DAZ:
// the only float arithmetic involves normal numbers. Cases are merged with
// integer masks, not ?:, because GCC (with its default -ftrapping-math)
// will not vectorise a float operation that only one arm of a ?: needs.
inline uint32_t mask_if(bool c) { return 0u - static_cast<uint32_t>(c); }
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa, float-aligned
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23) + (mask_if(exp == 0x0f800000u) & (112u << 23));  // inf/NaN: exp 255
  // A zero or subnormal half: the FPU renormalises it.
  const uint32_t sub = float_bits(bits_float(em + (113u << 23)) - bits_float(113u << 23));
  const uint32_t m = mask_if(exp == 0);
  return bits_float((sub & m) | (normal & ~m) | static_cast<uint32_t>(h & 0x8000u) << 16);
}

inline uint16_t float_to_half(float v) {
  const uint32_t x = float_bits(v);
  const uint32_t ax = x & 0x7fffffffu;
  // Below 2^-14 the half is subnormal: adding 0.5 lets the FPU round the
  // mantissa (to nearest even) into the low bits.
  const uint32_t sub = float_bits(bits_float(ax) + 0.5f) - (126u << 23);
  // Normal: rebias and round to nearest even by hand.
  const uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
  const uint32_t special = ax > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN, or overflow to inf
  const uint32_t ms = mask_if(ax < 0x38800000u), mb = mask_if(ax >= 0x47800000u);
  const uint32_t r = (sub & ms) | (special & mb) | (normal & ~(ms | mb));
  return static_cast<uint16_t>(r | ((x >> 16) & 0x8000u));
}

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// Rounds to nearest even like dtypes.h's bf16, as a select for NaN.
inline uint16_t float_to_bf16(float v) {
  const uint32_t x = float_bits(v);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Storage and arithmetic helpers. 16-bit floats are handled as their bits
// (loops over structs do not vectorise); bool is read through its byte, so a
// stored value other than 0/1 (never produced here) is still true, not UB.
template <class T>
using stor_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, std::conditional_t<is_half_v<T>, uint16_t, T>>;

template <class T>
inline compute_t<T> ld(stor_t<T> v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (std::is_same_v<T, f16>) return half_to_float(v);
  else if constexpr (std::is_same_v<T, bf16>) return bf16_to_float(v);
  else return v;
}
template <class T, class V>
inline stor_t<T> st(V v) {
  if constexpr (std::is_same_v<T, bool>) return static_cast<uint8_t>(v != V(0));
  else if constexpr (std::is_same_v<T, f16>) return float_to_half(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bf16>) return float_to_bf16(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <class C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;
template <class C>
constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;
template <class C>
constexpr bool kIsSignedInt = kIsInt<C> && std::is_signed_v<C>;
template <class C>
constexpr bool kIsBool = std::is_same_v<C, bool>;

// Wrapping integer arithmetic (signed overflow is UB in C++; numpy wraps).
template <class C>
inline C wrap_add(C a, C b) {
  if constexpr (kIsSignedInt<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) + static_cast<std::make_unsigned_t<C>>(b));
  else return static_cast<C>(a + b);
}
template <class C>
inline C wrap_sub(C a, C b) {
  if constexpr (kIsSignedInt<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) - static_cast<std::make_unsigned_t<C>>(b));
  else return static_cast<C>(a - b);
}
template <class C>
inline C wrap_mul(C a, C b) {
  if constexpr (kIsSignedInt<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) * static_cast<std::make_unsigned_t<C>>(b));
  else return static_cast<C>(a * b);
}

}  // namespace spora::plugin::ew
