// Gradient rules of the ops that join, cut, grow or repeat tensors:
// expand_dims, squeeze, concat, stack, split, slice, strided_slice, pad,
// tile, flip. Each adjoint routes every output element's gradient back to
// the input element it was copied from, summing where one input element
// feeds several outputs (tile, pad's reflect/edge modes).
//
// Every rule is built from ops that have rules themselves (reshape, pad,
// slice, split, concat, flip, sum, scatter_add), so gradients of gradients
// work too.
#include <cstring>

#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"
#include "support/error.h"

namespace spora::autodiff {
namespace {

// Zero padding: pads holds (before, after) per dim.
Value pad_zeros(GradBuilder& b, Value v, const std::vector<int64_t>& pads) {
  bool any = false;
  for (int64_t p : pads) any = any || p != 0;
  if (!any) return v;
  Attrs a;
  a.set("pads", AttrValue::of_ints(pads));
  return b.op("pad", {v}, a);
}

Value slice(GradBuilder& b, Value v, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends) {
  Attrs a;
  a.set("starts", AttrValue::of_ints(starts));
  a.set("ends", AttrValue::of_ints(ends));
  return b.op("slice", {v}, a);
}

V reshape_back_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.reshape(dy[0], b.meta(x[0]).shape)};
}

V concat_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  if (x.size() == 1) return {dy[0]};
  const int64_t ax = n.attrs.get_int("axis");
  std::vector<int64_t> sizes;
  for (const Value& v : x) sizes.push_back(b.meta(v).shape.dims[ax]);
  Attrs a;
  a.set("axis", AttrValue::of_int(ax));
  a.set("sizes", AttrValue::of_ints(sizes));
  return b.ops("split", {dy[0]}, a);
}

V stack_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape s = b.meta(x[0]).shape;
  if (x.size() == 1) return {b.reshape(dy[0], s)};
  Attrs a;
  a.set("axis", AttrValue::of_int(n.attrs.get_int("axis")));
  a.set("sizes", AttrValue::of_ints(std::vector<int64_t>(x.size(), 1)));
  V parts = b.ops("split", {dy[0]}, a);
  for (Value& p : parts) p = b.reshape(p, s);
  return parts;
}

V split_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  V parts;
  for (size_t j = 0; j < y.size(); ++j) {
    const TensorMeta& m = b.meta(y[j]);
    parts.push_back(dy[j].valid() ? dy[j] : zeros(b, m.dtype, m.shape));
  }
  if (parts.size() == 1) return {b.reshape(parts[0], b.meta(x[0]).shape)};
  Attrs a;
  a.set("axis", AttrValue::of_int(n.attrs.get_int("axis")));
  return {b.op("concat", parts, a)};
}

// The node's starts/ends are per dim and clamped: pad the adjoint back.
V slice_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape s = b.meta(x[0]).shape;
  const auto& starts = n.attrs.get_ints("starts");
  const auto& ends = n.attrs.get_ints("ends");
  std::vector<int64_t> pads;
  for (int d = 0; d < s.rank; ++d) {
    pads.push_back(starts[static_cast<size_t>(d)]);
    pads.push_back(s.dims[d] - ends[static_cast<size_t>(d)]);
  }
  return {pad_zeros(b, dy[0], pads)};
}

// Per dim: element i of the output came from begin + i * stride. A negative
// stride is a flip followed by a positive one; stride s > 1 spreads the
// elements s apart (pad a new size-1 axis to s, merge it, cut the tail);
// then zero padding puts the run at its place.
V strided_slice_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  const Shape out = b.meta(dy[0]).shape;
  if (out.numel() == 0) return {zeros(b, xm.dtype, xm.shape)};
  const auto& begin = n.attrs.get_ints("begin");
  const auto& strides = n.attrs.get_ints("strides");
  Value g = dy[0];
  Shape cur = out;
  for (int d = 0; d < xm.shape.rank; ++d) {
    const int64_t dim = xm.shape.dims[d], count = out.dims[d];
    int64_t first = begin[static_cast<size_t>(d)], step = strides[static_cast<size_t>(d)];
    if (step == 1 && first == 0 && count == dim) continue;
    if (step < 0) {
      Attrs f;
      f.set("axes", AttrValue::of_ints({d}));
      if (count > 1) g = b.op("flip", {g}, f);
      first += (count - 1) * step;
      step = -step;
    }
    const int64_t outer = product(cur, 0, d), inner = product(cur, d + 1, cur.rank);
    int64_t run = count;
    if (step > 1 && count > 1) {
      g = b.reshape(g, shape_of({outer, count, 1, inner}));
      g = pad_zeros(b, g, {0, 0, 0, 0, 0, step - 1, 0, 0});
      g = b.reshape(g, shape_of({outer, count * step, inner}));
      run = (count - 1) * step + 1;
      g = slice(b, g, {0, 0, 0}, {outer, run, inner});
    } else {
      g = b.reshape(g, shape_of({outer, count, inner}));
    }
    g = pad_zeros(b, g, {0, 0, first, dim - first - run, 0, 0});
    cur.dims[d] = dim;
    g = b.reshape(g, cur);
  }
  return {b.reshape(g, xm.shape)};
}

// Source index along one dim for output index o, as the pad kernel reads.
int64_t pad_source(const std::string& mode, int64_t o, int64_t before, int64_t n) {
  const int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const int64_t m = 2 * (n - 1);  // numpy "reflect" is periodic in 2(n-1)
  int64_t t = i % m;
  if (t < 0) t += m;
  return t < n ? t : m - t;
}

// constant: the adjoint is the interior. reflect/edge: every output element
// adds its gradient to its source, one dim at a time (scatter_add along the
// dim with the static source indices).
V pad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  const Shape& s = xm.shape;
  const auto& pads = n.attrs.get_ints("pads");
  const std::string mode = n.attrs.find("mode")->s;
  if (mode == "constant") {
    std::vector<int64_t> starts, ends;
    for (int d = 0; d < s.rank; ++d) {
      starts.push_back(pads[2 * static_cast<size_t>(d)]);
      ends.push_back(pads[2 * static_cast<size_t>(d)] + s.dims[d]);
    }
    if (s.rank == 0) return {dy[0]};
    return {slice(b, dy[0], starts, ends)};
  }
  if (mode != "reflect" && mode != "edge")
    fail(Code::kInternal, "[pad] mode '{}' reached the gradient rule; inference accepts only constant, reflect, edge",
         mode);
  Value g = dy[0];
  Shape cur = b.meta(g).shape;
  for (int d = 0; d < s.rank; ++d) {
    const int64_t before = pads[2 * static_cast<size_t>(d)], after = pads[2 * static_cast<size_t>(d) + 1];
    if (before == 0 && after == 0) continue;
    const int64_t len = cur.dims[d];
    std::vector<int64_t> src(static_cast<size_t>(len));
    for (int64_t o = 0; o < len; ++o) src[static_cast<size_t>(o)] = pad_source(mode, o, before, s.dims[d]);
    std::vector<uint8_t> bytes(src.size() * sizeof(int64_t));
    if (!src.empty()) std::memcpy(bytes.data(), src.data(), bytes.size());
    Shape line;
    for (int i = 0; i < cur.rank; ++i) line.push_back(i == d ? len : 1);
    Value idx = b.graph().add_constant(SPORA_DTYPE_I64, line, std::move(bytes), n.loc);
    Attrs bc;
    bc.set("shape", AttrValue::of_ints(dims_of(cur)));
    if (line != cur) idx = b.op("broadcast_to", {idx}, bc);
    Shape next = cur;
    next.dims[d] = s.dims[d];
    Attrs a;
    a.set("axis", AttrValue::of_int(d));
    g = b.op("scatter_add", {zeros(b, xm.dtype, next), idx, g}, a);
    cur = next;
  }
  return {g};
}

// y = tile(x, reps) over x padded with leading 1s: along each repeated dim
// the adjoint is (outer, reps, dim, inner) summed over the repetitions.
V tile_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape s = b.meta(x[0]).shape;
  const auto& reps = n.attrs.get_ints("reps");
  const int rank = static_cast<int>(reps.size());
  const Shape padded = pad_to_rank(s, rank);
  Value g = dy[0];
  Shape cur = b.meta(g).shape;
  for (int d = 0; d < rank; ++d) {
    const int64_t r = reps[static_cast<size_t>(d)];
    if (r == 1) continue;
    const int64_t outer = product(cur, 0, d), inner = product(cur, d + 1, cur.rank);
    g = b.reshape(g, shape_of({outer, r, padded.dims[d], inner}));
    Attrs a;
    a.set("axes", AttrValue::of_ints({1}));
    g = b.op("sum", {g}, a);
    cur.dims[d] = padded.dims[d];
    g = b.reshape(g, cur);
  }
  return {b.reshape(g, s)};
}

V flip_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  // Empty normalised axes means nothing was flipped (the user's "all" is
  // already expanded).
  if (n.attrs.get_ints("axes").empty()) return {dy[0]};
  Attrs a;
  a.set("axes", AttrValue::of_ints(n.attrs.get_ints("axes")));
  return {b.op("flip", {dy[0]}, a)};
}

void register_rules() {
  register_bprop("expand_dims", reshape_back_bp);
  register_bprop("squeeze", reshape_back_bp);
  register_bprop("concat", concat_bp);
  register_bprop("stack", stack_bp);
  register_bprop("split", split_bp);
  register_bprop("slice", slice_bp);
  register_bprop("strided_slice", strided_slice_bp);
  register_bprop("pad", pad_bp);
  register_bprop("tile", tile_bp);
  register_bprop("flip", flip_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
