// ONNX converters for the layout and indexing ops that reach the graph
// (their import-time cases are folded by onnx_fold.cpp first): Slice,
// Squeeze, Unsqueeze, Gather, Expand, Tile, Where, Cast, Split, Pad,
// ConstantOfShape past the folding limit. Shapes, axes, pads and sizes must
// be known at import time; ops whose form changed between opsets 7 and 21
// read their attributes or inputs as the model's opset defines them.
#include <algorithm>
#include <cstring>
#include <limits>

#include "io/onnx_import.h"

namespace spora::io::onnx {
namespace {

int norm(Ctx& c, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace

ir::Value dynamic_arange(Ctx& c, const DimSource& src, DType dtype) {
  ir::Value v = c.value_named(src.value);
  const int r = c.meta(v).shape.rank;
  if (src.dim >= r) c.error("dimension " + std::to_string(src.dim) + " of '" + src.value + "' does not exist");
  // One line of v along the dimension (index 0 of every other axis), then
  // ones of its length (true whatever the elements, NaN included), summed
  // exclusively: 0, 1, ..., n - 1, and exact in any dtype cumsum takes.
  const ir::Value i0 = c.graph().add_constant(SPORA_DTYPE_I64, Shape{}, std::vector<uint8_t>(8, 0), c.loc());
  for (int d = r - 1; d >= 0; --d) {
    if (d == src.dim) continue;
    Attrs a;
    a.set("axis", AttrValue::of_int(d));
    v = c.op("gather", {v, i0}, a);
  }
  const ir::Value all = c.op("logical_or", {c.op("equal", {v, v}), c.op("not_equal", {v, v})});
  Attrs cast;
  cast.set("dtype", AttrValue::of_string(dtype_name(dtype)));
  Attrs sum;
  sum.set("axis", AttrValue::of_int(0));
  sum.set("exclusive", AttrValue::of_bool(true));
  return c.op("cumsum", {c.op("cast", {all}, cast)}, sum);
}

namespace {

// Slice: opset < 10 has starts/ends/axes attributes; later, inputs (with
// steps). An axis whose size is dynamic can only be taken whole (Spora's
// slice stores absolute bounds). A static axis cut at a dynamic end from
// 0 (a position table up to the sequence length) is a Gather of
// 0 .. end-1 built in the graph.
void slice(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const Shape& s = c.meta(x).shape;
  std::vector<int64_t> starts, ends, axes, steps;
  std::vector<bool> dyn_end;
  if (c.opset() < 10) {
    starts = c.attr_ints("starts", {});
    ends = c.attr_ints("ends", {});
    axes = c.attr_ints("axes", {});
  } else {
    starts = c.static_ints(1, "starts");
    ends = c.static_ints(2, "ends", &dyn_end);
    if (c.has_in(3)) axes = c.static_ints(3, "axes");
    if (c.has_in(4)) steps = c.static_ints(4, "steps");
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.error("starts, ends, axes and steps must have the same length");
  std::vector<int64_t> b(static_cast<size_t>(s.rank), 0), e(s.dims, s.dims + s.rank), st(static_cast<size_t>(s.rank), 1);
  bool strided = false;
  std::vector<std::pair<int, DimSource>> gathers;  // axes cut at a dynamic end
  const std::vector<DimSource> end_src = c.opset() < 10 ? std::vector<DimSource>{} : c.dim_sources(2);
  for (size_t k = 0; k < starts.size(); ++k) {
    const int a = norm(c, axes[k], s.rank);
    const bool whole = steps[k] == 1 && (starts[k] == 0 || starts[k] <= -s[a]) && ends[k] >= s[a];
    if (c.dynamic_dim(0, a) && !whole)
      c.error("slices dimension " + std::to_string(a) + ", which is dynamic (batch or sequence): Spora's slice "
              "has fixed bounds; give the model's inputs fixed sizes to import it");
    if (!dyn_end.empty() && dyn_end[k] && !whole) {
      if (starts[k] != 0 || steps[k] != 1 || k >= end_src.size() || !end_src[k].known() || ends[k] < 0)
        c.error("the end on axis " + std::to_string(a) + " follows a dynamic input dimension; only a slice from 0 "
                "with step 1 to a dimension read by Shape is kept symbolic; give the model's inputs fixed sizes "
                "to import it");
      gathers.emplace_back(a, end_src[k]);
      continue;  // the axis is taken whole here and gathered at the end
    }
    b[static_cast<size_t>(a)] = starts[k];
    e[static_cast<size_t>(a)] = std::min<int64_t>(ends[k], std::numeric_limits<int64_t>::max() / 2);
    st[static_cast<size_t>(a)] = steps[k];
    strided |= steps[k] != 1;
  }
  auto finish = [&](ir::Value y) {
    for (const auto& [axis, src] : gathers) {
      Attrs g;
      g.set("axis", AttrValue::of_int(axis));
      y = c.op("gather", {y, dynamic_arange(c, src, SPORA_DTYPE_I64)}, g);
    }
    c.out(0, y);
  };
  Attrs at;
  if (strided) {
    at.set("begin", AttrValue::of_ints(b));
    at.set("end", AttrValue::of_ints(e));
    at.set("strides", AttrValue::of_ints(st));
    return finish(c.op("strided_slice", {x}, at));
  }
  for (size_t d = 0; d < b.size(); ++d) e[d] = std::min(e[d], s[static_cast<int>(d)]);
  bool dynamic = false;
  for (int d = 0; d < s.rank; ++d) dynamic |= c.dynamic_dim(0, d);
  if (dynamic) {
    // Spora's slice stores bounds for every dimension, which would pin the
    // dynamic ones; split stores only the sliced axis' part sizes.
    ir::Value y = x;
    for (int d = 0; d < s.rank; ++d) {
      int64_t lo = b[static_cast<size_t>(d)], hi = e[static_cast<size_t>(d)];
      if (lo < 0) lo = std::max<int64_t>(0, lo + s[d]);
      if (hi < 0) hi = std::max<int64_t>(0, hi + s[d]);
      lo = std::min(lo, s[d]);
      hi = std::max(lo, std::min(hi, s[d]));
      if (lo == 0 && hi == s[d]) continue;
      if (hi == lo) c.error("an empty slice of a tensor with dynamic dimensions is not supported");
      std::vector<int64_t> sizes;
      size_t pick = 0;
      if (lo > 0) {
        sizes.push_back(lo);
        pick = 1;
      }
      sizes.push_back(hi - lo);
      if (hi < s[d]) sizes.push_back(s[d] - hi);
      Attrs sa;
      sa.set("axis", AttrValue::of_int(d));
      sa.set("sizes", AttrValue::of_ints(sizes));
      y = c.graph().add_op("split", {y}, sa, c.loc()).at(pick);
    }
    return finish(y);
  }
  bool whole = !gathers.empty();
  for (size_t d = 0; d < b.size(); ++d) whole &= b[d] == 0 && e[d] == s[static_cast<int>(d)];
  if (whole) return finish(x);  // only the gathers cut
  at.set("starts", AttrValue::of_ints(b));
  at.set("ends", AttrValue::of_ints(e));
  finish(c.op("slice", {x}, at));
}

void squeeze(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes_input_or_attr(c, 1, 13)));
  c.out(0, c.op("squeeze", {x}, a));
}

void unsqueeze(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  std::vector<int64_t> axes = axes_input_or_attr(c, 1, 13);
  if (axes.empty()) c.error("axes are required");
  const int r = c.meta(x).shape.rank + static_cast<int>(axes.size());
  for (int64_t& ax : axes) ax = norm(c, ax, r);
  std::sort(axes.begin(), axes.end());
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  c.out(0, c.op("expand_dims", {x}, a));
}

// Gather and GatherElements: Spora's op of the same kind on the data and
// indices, with the axis normalised (negative indices wrap in both).
void gather_on_axis(Ctx& c, const char* op) {
  c.max_outputs(1);
  const ir::Value x = c.in(0), idx = c.in(1);
  Attrs a;
  a.set("axis", AttrValue::of_int(norm(c, c.attr_int("axis", 0), c.meta(x).shape.rank)));
  c.out(0, c.op(op, {x, idx}, a));
}

void gather(Ctx& c, const Node&) { gather_on_axis(c, "gather"); }

// Expand broadcasts both ways: the result's shape is the broadcast of the
// input's and the given one.
void expand(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const Shape& s = c.meta(x).shape;
  std::vector<int64_t> want = c.static_ints(1, "the shape input");
  const size_t r = std::max(want.size(), static_cast<size_t>(s.rank));
  std::vector<int64_t> out(r, 1);
  for (size_t d = 0; d < r; ++d) {
    const int64_t a = d + static_cast<size_t>(s.rank) >= r ? s[static_cast<int>(d + s.rank - r)] : 1;
    const int64_t b = d + want.size() >= r ? want[d + want.size() - r] : 1;
    if (a != 1 && b != 1 && a != b) c.error("shape " + s.str() + " does not broadcast to the requested shape");
    out[d] = a == 1 ? b : a;
  }
  Attrs at;
  at.set("shape", AttrValue::of_ints(out));
  c.out(0, c.op("broadcast_to", {x}, at));
}

void tile(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  Attrs a;
  a.set("reps", AttrValue::of_ints(c.static_ints(1, "repeats")));
  c.out(0, c.op("tile", {x}, a));
}

void where(Ctx& c, const Node&) {
  c.max_outputs(1);
  c.out(0, c.op("where", {c.in(0), c.in(1), c.in(2)}));
}

void cast(Ctx& c, const Node&) {
  c.max_outputs(1);
  const int64_t to = c.attr_int("to", 0);
  const DType d = spora_dtype(static_cast<int32_t>(to));
  if (d == SPORA_DTYPE_INVALID)
    c.error(std::string("Cast to ") + data_type_name(static_cast<int32_t>(to)) + ", which Spora does not support");
  const ir::Value x = c.in(0);
  if (c.meta(x).dtype == d) return c.out(0, x);
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(d)));
  c.out(0, c.op("cast", {x}, a));
}

// Split: sizes from the `split` attribute (opset < 13), the input (13+), or
// equal parts (num_outputs at 18+, else one per output).
void split(Ctx& c, const Node& n) {
  const ir::Value x = c.in(0);
  const Shape& s = c.meta(x).shape;
  const int axis = norm(c, c.attr_int("axis", 0), s.rank);
  std::vector<int64_t> sizes;
  if (c.opset() < 13) sizes = c.attr_ints("split", {});
  else if (c.has_in(1)) sizes = c.static_ints(1, "split");
  const size_t outs = n.outputs.size();
  if (sizes.empty()) {
    if (outs == 0) c.error("has no outputs");
    const int64_t part = (s[axis] + static_cast<int64_t>(outs) - 1) / static_cast<int64_t>(outs);
    for (size_t k = 0; k < outs; ++k) sizes.push_back(std::max<int64_t>(0, std::min(part, s[axis] - part * static_cast<int64_t>(k))));
  }
  if (sizes.size() != outs) c.error("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outs) + " outputs");
  Attrs a;
  a.set("axis", AttrValue::of_int(axis));
  a.set("sizes", AttrValue::of_ints(sizes));
  const std::vector<ir::Value> ys = c.graph().add_op("split", {x}, a, c.loc());
  for (size_t k = 0; k < ys.size(); ++k) c.out(k, ys[k]);
}

// Pad: opset < 11 has pads / value attributes; later, inputs (axes at 18+).
// ONNX's pads are all begins, then all ends; Spora's (before, after) per dim.
void pad(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const int r = c.meta(x).shape.rank;
  std::vector<int64_t> p;
  double value = 0;
  if (c.opset() < 11) {
    p = c.attr_ints("pads", {});
    value = c.attr_float("value", 0.f);
  } else {
    p = c.static_ints(1, "pads");
    if (c.has_in(2)) {
      const HostTensor* v = c.host(2);
      if (!v || v->shape.numel() != 1) c.error("constant_value must be a scalar known at import time");
      if (v->dtype == SPORA_DTYPE_F32) {
        float f;
        std::memcpy(&f, v->bytes.data(), 4);
        value = f;
      } else if (v->dtype == SPORA_DTYPE_F64) {
        std::memcpy(&value, v->bytes.data(), 8);
      } else if (v->dtype == SPORA_DTYPE_I64) {
        int64_t i;
        std::memcpy(&i, v->bytes.data(), 8);
        value = static_cast<double>(i);
      }
    }
    if (c.has_in(3)) {
      const std::vector<int64_t> axes = c.static_ints(3, "axes");
      std::vector<int64_t> full(2 * static_cast<size_t>(r), 0);
      if (p.size() != 2 * axes.size()) c.error("pads must have 2 values per axis");
      for (size_t k = 0; k < axes.size(); ++k) {
        const int a = norm(c, axes[k], r);
        full[static_cast<size_t>(a)] = p[k];
        full[static_cast<size_t>(a + r)] = p[k + axes.size()];
      }
      p = full;
    }
  }
  if (p.size() != 2 * static_cast<size_t>(r)) c.error("pads must have " + std::to_string(2 * r) + " values");
  std::vector<int64_t> sp(p.size());
  for (int d = 0; d < r; ++d) {
    sp[static_cast<size_t>(2 * d)] = p[static_cast<size_t>(d)];
    sp[static_cast<size_t>(2 * d + 1)] = p[static_cast<size_t>(d + r)];
  }
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") c.error("mode '" + mode + "' is not supported");
  Attrs a;
  a.set("pads", AttrValue::of_ints(sp));
  a.set("mode", AttrValue::of_string(mode));
  a.set("value", AttrValue::of_float(value));
  c.out(0, c.op("pad", {x}, a));
}

// A ConstantOfShape too big to fold: Spora's full.
void constant_of_shape(Ctx& c, const Node& n) {
  c.max_outputs(1);
  const std::vector<int64_t> shape = c.static_ints(0, "the shape input");
  DType d = SPORA_DTYPE_F32;
  double v = 0;
  if (const Attribute* a = n.attr("value")) {
    if (!a->t) c.error("attribute value holds no tensor");
    const HostTensor t = decode_tensor(*a->t, c.what(), "");
    d = t.dtype;
    if (d == SPORA_DTYPE_F32) {
      float f;
      std::memcpy(&f, t.bytes.data(), 4);
      v = f;
    } else if (d == SPORA_DTYPE_I64) {
      int64_t i;
      std::memcpy(&i, t.bytes.data(), 8);
      v = static_cast<double>(i);
    } else if (d != SPORA_DTYPE_F64 && d != SPORA_DTYPE_I32) {
      c.error(std::string("a large ConstantOfShape of ") + dtype_name(d) + " is not supported");
    }
  }
  Attrs a;
  a.set("shape", AttrValue::of_ints(shape));
  a.set("value", AttrValue::of_float(v));
  a.set("dtype", AttrValue::of_string(dtype_name(d)));
  c.out(0, c.graph().add_op("full", {}, a, c.loc()).at(0));
}

// TopK: K is an input from opset 10 (an attribute before); largest and
// sorted from 11. Indices come out as int64, as ONNX's are.
void topk(Ctx& c, const Node&) {
  c.max_outputs(2);
  const ir::Value x = c.in(0);
  int64_t k = c.attr_int("k", -1);
  if (c.opset() >= 10) {
    const std::vector<int64_t> kv = c.static_ints(1, "K");
    if (kv.size() != 1) c.error("K must hold one value");
    k = kv[0];
  }
  if (k < 0) c.error("K must be >= 0, got " + std::to_string(k));
  Attrs a;
  a.set("k", AttrValue::of_int(k));
  a.set("axis", AttrValue::of_int(norm(c, c.attr_int("axis", -1), c.meta(x).shape.rank)));
  a.set("largest", AttrValue::of_bool(c.attr_int("largest", 1) != 0));
  a.set("sorted", AttrValue::of_bool(c.attr_int("sorted", 1) != 0));
  const std::vector<ir::Value> ys = c.graph().add_op("topk", {x}, a, c.loc());
  c.out(0, ys.at(0));
  c.out(1, ys.at(1));
}

void cumsum(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const std::vector<int64_t> axis = c.static_ints(1, "axis");
  if (axis.size() != 1) c.error("axis must hold one value");
  Attrs a;
  a.set("axis", AttrValue::of_int(norm(c, axis[0], c.meta(x).shape.rank)));
  a.set("exclusive", AttrValue::of_bool(c.attr_int("exclusive", 0) != 0));
  a.set("reverse", AttrValue::of_bool(c.attr_int("reverse", 0) != 0));
  c.out(0, c.op("cumsum", {x}, a));
}

void gather_elements(Ctx& c, const Node&) { gather_on_axis(c, "gather_elements"); }

void gather_nd(Ctx& c, const Node&) {
  c.max_outputs(1);
  if (c.attr_int("batch_dims", 0) != 0) c.error("batch_dims other than 0 is not supported");
  c.out(0, c.op("gather_nd", {c.in(0), c.in(1)}));
}

// OneHot(indices, depth, [off, on]) along the last axis; depth and values
// must be known at import time.
void one_hot(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value idx = c.in(0);
  const int rank = c.meta(idx).shape.rank;
  if (norm(c, c.attr_int("axis", -1), rank + 1) != rank) c.error("only axis -1 (the last) is supported");
  const HostTensor* depth = c.host(1);
  const HostTensor* values = c.host(2);
  if (!depth || depth->shape.numel() != 1) c.error("depth must be one value known at import time");
  if (!values || values->shape.numel() != 2) c.error("values must be [off, on] known at import time");
  auto number = [&](const HostTensor& t, size_t k) {
    double v = 0;
    const uint8_t* p = &t.bytes[k * dtype_size(t.dtype)];
    switch (t.dtype) {
      case SPORA_DTYPE_F32: { float f; std::memcpy(&f, p, 4); v = f; break; }
      case SPORA_DTYPE_F64: std::memcpy(&v, p, 8); break;
      case SPORA_DTYPE_I32: { int32_t i; std::memcpy(&i, p, 4); v = i; break; }
      case SPORA_DTYPE_I64: { int64_t i; std::memcpy(&i, p, 8); v = static_cast<double>(i); break; }
      default: c.error(std::string("depth and values of dtype ") + dtype_name(t.dtype) + " are not supported");
    }
    return v;
  };
  const double d = number(*depth, 0);
  if (!(d >= 1 && d <= 1e9)) c.error("depth must be in [1, 1e9]");
  Attrs a;
  a.set("depth", AttrValue::of_int(static_cast<int64_t>(d)));
  a.set("off_value", AttrValue::of_float(number(*values, 0)));
  a.set("on_value", AttrValue::of_float(number(*values, 1)));
  a.set("dtype", AttrValue::of_string(dtype_name(values->dtype)));
  ir::Value i = idx;
  if (c.meta(idx).dtype != SPORA_DTYPE_I32 && c.meta(idx).dtype != SPORA_DTYPE_I64) {
    Attrs cast;
    cast.set("dtype", AttrValue::of_string("i64"));
    i = c.op("cast", {idx}, cast);
  }
  c.out(0, c.op("one_hot", {i}, a));
}

}  // namespace

void add_shape_converters(std::map<std::string, Converter>& m) {
  m["TopK"] = topk;
  m["CumSum"] = cumsum;
  m["GatherElements"] = gather_elements;
  m["GatherND"] = gather_nd;
  m["OneHot"] = one_hot;
  m["Slice"] = slice;
  m["Squeeze"] = squeeze;
  m["Unsqueeze"] = unsqueeze;
  m["Gather"] = gather;
  m["Expand"] = expand;
  m["Tile"] = tile;
  m["Where"] = where;
  m["Cast"] = cast;
  m["Split"] = split;
  m["Pad"] = pad;
  m["ConstantOfShape"] = constant_of_shape;
}

}  // namespace spora::io::onnx
