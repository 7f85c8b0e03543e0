// What conv2d_act_pool (conv_pool.cpp) and its backward op
// conv2d_act_pool_grad (conv_pool_grad.cpp) share: their attributes --
// conv2d's, the activation, and max_pool2d's prefixed "pool_" -- and the
// split of those attributes into the parts' own, through which both ops
// infer and decompose.
#pragma once
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "ir/op.h"
#include "support/error.h"

namespace spora::conv_pool {

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};
  return kFloat;
}

// A part's registered op; `op` (the fused op) names the error.
inline const OpDef& registered(const char* op, const char* name) {
  const OpDef* d = OpRegistry::get().find(name);
  if (!d) fail(Code::kInternal, "[{}] {} is not registered", op, name);
  return *d;
}

// The convolution's attributes as conv2d takes them, with `activation`
// too for conv2d_act.
inline Attrs conv_part(const Attrs& a, bool with_activation) {
  Attrs out;
  for (const char* n : {"stride", "padding", "pad_mode", "dilation", "groups", "activation"}) {
    if (!with_activation && std::string(n) == "activation") continue;
    if (const AttrValue* v = a.find(n)) out.set(n, *v);
  }
  return out;
}

// The pooling's attributes ("pool_" dropped) as max_pool2d and
// max_pool2d_grad take them.
inline Attrs pool_part(const Attrs& a) {
  Attrs out;
  for (const char* n : {"kernel_size", "stride", "padding", "dilation", "ceil_mode"})
    if (const AttrValue* v = a.find(std::string("pool_") + n)) out.set(n, *v);
  return out;
}

// blocked_inputs / blocked_outputs (both ops): the operands, by index,
// whose bytes are the device kernel's private channel-blocked layout
// (logical shape and dtype unchanged; docs/cpu-layouts.md). Only the
// blocked_handoff pass sets them, on a value whose producer and every
// reader are such ops on one device and agree (ir::verify checks that):
// the kept activation (conv2d_act_pool output 1 -> conv2d_act_pool_grad
// input 2) and the values between layers. The decompositions ignore them.
// `allowed`: the indices the op may name; inference keeps the lists
// (absent when empty) and refuses any other index.
inline std::vector<int64_t> blocked_ports(const Attrs& a, const char* name) {
  const AttrValue* v = a.find(name);
  return v ? v->ints : std::vector<int64_t>{};
}
inline void keep_blocked_ports(const char* op, const Attrs& in, Attrs& out, const char* name,
                               const std::vector<int64_t>& allowed) {
  std::vector<int64_t> ports = blocked_ports(in, name);
  if (ports.empty()) return;
  for (size_t i = 0; i < ports.size(); ++i) {
    bool ok = false;
    for (int64_t p : allowed) ok = ok || p == ports[i];
    for (size_t j = 0; j < i; ++j) ok = ok && ports[j] != ports[i];
    if (!ok) fail(Code::kInvalidArgument, "[{}] {} may name each of {} once, got {}", op, name, fmt::join(allowed, ", "),
                  fmt::join(ports, ", "));
  }
  out.set(name, AttrValue::of_ints(ports));
}
// Any operand in a private blocked layout: the decomposition would read or
// write it as NCHW, so the op cannot be differentiated.
inline bool any_blocked(const Attrs& a) {
  return !blocked_ports(a, "blocked_inputs").empty() || !blocked_ports(a, "blocked_outputs").empty();
}

// The attributes both ops declare, the activation defaulting to
// `activation`; each op appends its own flag.
inline std::vector<AttrSpec> attr_specs(const char* activation) {
  return {{"stride", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
          {"pad_mode", AttrType::kString, false, AttrValue::of_string("explicit")},
          {"dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"groups", AttrType::kInt, false, AttrValue::of_int(1)},
          {"activation", AttrType::kString, false, AttrValue::of_string(activation)},
          {"pool_kernel_size", AttrType::kInts, true, {}},
          {"pool_stride", AttrType::kInts, false, AttrValue::of_ints({})},
          {"pool_padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
          {"pool_dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"pool_ceil_mode", AttrType::kBool, false, AttrValue::of_bool(false)},
          {"blocked_inputs", AttrType::kInts, false, AttrValue::of_ints({})},
          {"blocked_outputs", AttrType::kInts, false, AttrValue::of_ints({})}};
}

}  // namespace spora::conv_pool
