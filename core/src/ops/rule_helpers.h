// Helpers for the rules an op family registers with its ops (gradient
// rules, decompositions): arithmetic on graph values, constants shaped like
// a value, shape utilities. They live in ops/ so that family files can
// write rules without including autodiff/ (autodiff sits above ops).
#pragma once
#include <functional>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "support/error.h"

namespace spora::rules {

using ir::Value;
using V = std::vector<Value>;
using GradBuilder = ir::Builder;

// How an op takes part in the transforms, given to a family's registration
// helper: rules.apply(def) before registry.add(def). `shard` is the op's
// sharding rule for the SPMD pass (ir/sharding.h, ops/shard_rules.h); an op
// without one runs on replicated inputs.
struct Rules {
  BpropFn bprop = nullptr;
  DecomposeFn decompose = nullptr;
  bool differentiable = true;
  ShardingFn shard = nullptr;
  void apply(OpDef& d) const {
    d.bprop = bprop;
    d.decompose = decompose;
    d.differentiable = differentiable;
    if (shard) d.sharding = shard;
  }
};
// Piecewise constant or boolean ops: no gradient flows through them.
inline constexpr Rules kNoGradient{nullptr, nullptr, false};

inline DType dt(GradBuilder& b, Value v) { return b.meta(v).dtype; }
// A scalar constant of `like`'s dtype.
inline Value k(GradBuilder& b, double v, Value like) { return b.scalar(v, dt(b, like)); }
inline Value add(GradBuilder& b, Value x, Value y) { return b.op("add", {x, y}); }
inline Value sub(GradBuilder& b, Value x, Value y) { return b.op("sub", {x, y}); }
inline Value mul(GradBuilder& b, Value x, Value y) { return b.op("mul", {x, y}); }
inline Value div(GradBuilder& b, Value x, Value y) { return b.op("div", {x, y}); }
inline Value neg(GradBuilder& b, Value x) { return b.op("neg", {x}); }
// x + y where either may be missing.
inline Value add_opt(GradBuilder& b, Value x, Value y) {
  if (!x.valid()) return y;
  if (!y.valid()) return x;
  return add(b, x, y);
}

inline std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.dims, s.dims + s.rank); }

inline Shape shape_of(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(v);
  return s;
}

inline int64_t product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s.dims[i];
  return p;
}

inline Value zeros(GradBuilder& b, DType dtype, const Shape& shape) {
  Attrs a;
  a.set("shape", AttrValue::of_ints(dims_of(shape)));
  a.set("dtype", AttrValue::of_string(dtype_name(dtype)));
  return b.op("zeros", {}, a);
}

inline Value cast(GradBuilder& b, Value v, DType to) {
  if (b.meta(v).dtype == to) return v;
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(to)));
  return b.op("cast", {v}, a);
}

// sum over `axes` ([]: all), keepdims as given (both attributes set).
inline Value sum_axes(GradBuilder& b, Value v, const std::vector<int64_t>& axes, bool keepdims) {
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  a.set("keepdims", AttrValue::of_bool(keepdims));
  return b.op("sum", {v}, a);
}

// {axis: axis}, the attributes of the ops along one axis (softmax family).
inline Attrs axis_attr(int64_t axis) {
  Attrs a;
  a.set("axis", AttrValue::of_int(axis));
  return a;
}

// A node's attributes without `drop`, plus `extra` (name, value) pairs: a
// forward op's attributes handed on to its gradient ops (conv, pooling).
inline Attrs attrs_from(const Attrs& from, std::initializer_list<const char*> drop,
                        std::initializer_list<std::pair<const char*, AttrValue>> extra = {}) {
  Attrs a;
  for (const auto& [name, value] : from.items()) {
    bool skip = false;
    for (const char* d : drop) skip = skip || name == d;
    if (!skip) a.set(name, value);
  }
  for (const auto& [name, value] : extra) a.set(name, value);
  return a;
}

// v's shape as an ints attribute (input_shape, weight_shape).
inline AttrValue shape_attr(GradBuilder& b, Value v) { return AttrValue::of_ints(dims_of(b.meta(v).shape)); }

// The vector-Jacobian product of a formula: `build` makes an op's outputs
// from its inputs with basic ops; the result is one gradient per input of
// x for the output cotangents dy (invalid: that output has none), built in
// b's graph from ops with rules of their own (higher order works). `y`,
// when given, are the outputs already in b's graph. Differentiating is
// autodiff's (above ops), which provides it: set_vjp, done once at load
// (autodiff/vjp.cpp); rules run only under autodiff, so it is there.
using BuildFn = std::function<V(GradBuilder& b, const V& x)>;
using VjpFn = V (*)(GradBuilder& b, const ir::Node& node, const V& x, const V& y, const V& dy, const BuildFn& build);
inline VjpFn& vjp_slot() {
  static VjpFn fn = nullptr;
  return fn;
}
inline int set_vjp(VjpFn fn) {
  vjp_slot() = fn;
  return 0;
}
inline V vjp_of(GradBuilder& b, const ir::Node& node, const V& x, const V& y, const V& dy, const BuildFn& build) {
  if (!vjp_slot()) fail(Code::kInternal, "[{}] no vjp: autodiff is not loaded", node.op ? node.op->name : "op");
  return vjp_slot()(b, node, x, y, dy, build);
}

}  // namespace spora::rules
