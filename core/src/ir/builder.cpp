#include "ir/builder.h"

#include <cstring>

#include "support/error.h"

namespace spora::ir {
namespace {

template <class T>
std::vector<uint8_t> fill_bytes(double v, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * sizeof(T));
  const T t = static_cast<T>(v);
  for (int64_t i = 0; i < n; ++i) std::memcpy(out.data() + i * sizeof(T), &t, sizeof(T));
  return out;
}

// IEEE half / bfloat16 encodings of a double (round to nearest even).
uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
uint16_t to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return sign;
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = (ax >> 13) - (112u << 10);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return sign | static_cast<uint16_t>(r);
}

std::vector<uint8_t> bytes_of(double v, DType dt, int64_t n) {
  switch (dt) {
    case SPORA_DTYPE_F32: return fill_bytes<float>(v, n);
    case SPORA_DTYPE_F64: return fill_bytes<double>(v, n);
    case SPORA_DTYPE_I32: return fill_bytes<int32_t>(v, n);
    case SPORA_DTYPE_I64: return fill_bytes<int64_t>(v, n);
    case SPORA_DTYPE_U8: return fill_bytes<uint8_t>(v, n);
    case SPORA_DTYPE_BOOL: return fill_bytes<uint8_t>(v != 0 ? 1 : 0, n);
    case SPORA_DTYPE_F16: return fill_bytes<uint16_t>(to_f16(static_cast<float>(v)), n);
    case SPORA_DTYPE_BF16: return fill_bytes<uint16_t>(to_bf16(static_cast<float>(v)), n);
    default: fail(Code::kInternal, "[grad] constant of invalid dtype");
  }
}

}  // namespace

std::vector<Value> Builder::ops(const char* name, std::vector<Value> inputs, const Attrs& attrs) {
  // A user's sharding strategy belongs to the node it was written on, not
  // to the ops rules derive from it (a gradient rule handing its forward
  // node's attributes on): those get layouts from their own rules. So does
  // a recompute mark: backward ops are never recomputed.
  if (attrs.find(kStrategyAttr) || attrs.find(kRecomputeAttr)) {
    Attrs plain;
    for (const auto& [k, v] : attrs.items())
      if (k != kStrategyAttr && k != kRecomputeAttr) plain.set(k, v);
    return g_.add_op(name, inputs, plain, loc_);
  }
  return g_.add_op(name, inputs, attrs, loc_);
}

Value Builder::op(const char* name, std::vector<Value> inputs, const Attrs& attrs) {
  return ops(name, std::move(inputs), attrs).at(0);
}

Value Builder::scalar(double v, DType dtype) { return g_.add_constant(dtype, Shape(), bytes_of(v, dtype, 1), loc_); }

Value Builder::full(double v, DType dtype, const Shape& shape) {
  return g_.add_constant(dtype, shape, bytes_of(v, dtype, shape.numel()), loc_);
}

Value Builder::reshape(Value v, const Shape& shape) {
  if (meta(v).shape == shape) return v;
  Attrs a;
  a.set("shape", AttrValue::of_ints(std::vector<int64_t>(shape.dims, shape.dims + shape.rank)));
  return op("reshape", {v}, a);
}

Value Builder::sum_to(Value grad, const Shape& target) {
  const Shape& s = meta(grad).shape;
  if (s == target) return grad;
  // Leading dims that broadcasting added, and dims where the target is 1.
  std::vector<int64_t> axes;
  const int lead = s.rank - target.rank;
  for (int i = 0; i < s.rank; ++i)
    if (i < lead || (target.dims[i - lead] == 1 && s.dims[i] != 1)) axes.push_back(i);
  Value r = grad;
  if (!axes.empty()) {
    Attrs a;
    a.set("axes", AttrValue::of_ints(axes));
    a.set("keepdims", AttrValue::of_bool(true));
    r = op("sum", {grad}, a);
  }
  return reshape(r, target);
}

}  // namespace spora::ir
