// Layout ops that join, cut or grow tensors: concat, stack, split, slice,
// strided_slice, pad.
//
// Contract with kernels (plugins/common/kernels/{concat,layout,pad}.cpp).
// Kernels only move elements: every dtype works and implementations may
// dispatch on the element size alone.
//   concat, stack: each input is seen as 2-D (outer, w_i) and the output as
//     (outer, sum w_i); the output row is the inputs' rows one after the
//     other. (outer = product of the dims before the axis; w_i = the input's
//     elements from the axis on.) attrs.axis is the normalised user axis,
//     for information only.
//   split: the input is (outer, W), output j is (outer, w_j) with sum w_j =
//     W; attrs.sizes lists the parts along the user's axis and
//     attrs.sections is 0.
//   slice: attrs.starts/ends have one entry per dim with
//     0 <= start <= end <= dim, attrs.axes = 0..rank-1;
//     out.dims[d] = end[d] - start[d].
//   strided_slice: attrs.begin/strides have one entry per dim; strides are
//     non-zero; when out.dims[d] > 0, begin[d] and
//     begin[d] + (out.dims[d] - 1) * strides[d] lie in [0, in.dims[d]);
//     attrs.end holds Python's normalised stop (informative).
//   pad: attrs.pads = (before, after) per dim, non-negative, 2 * rank
//     entries; attrs.mode is "constant", "reflect" or "edge"; for reflect
//     and edge every padded dim is non-empty; attrs.value (constant mode) is
//     representable in the dtype.
//
// Gradient rules: each adjoint routes every output element's gradient back
// to the input element it was copied from, summing where one input element
// feeds several outputs (pad's reflect/edge modes). Every rule is built from
// ops that have rules themselves (reshape, pad, slice, split, concat, flip,
// scatter_add), so gradients of gradients work too.
#include <cmath>
#include <cstring>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

const std::vector<DType> kAll = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                 SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};

int64_t checked_mul(int64_t a, int64_t b, const std::string& op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(Code::kInvalidArgument, "[{}] the result has more elements than fit in int64", op);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(Code::kInvalidArgument, "[{}] a dimension of the result overflows int64", op);
  return r;
}

int64_t prod(const Shape& s, int from, int to, const std::string& op) {
  int64_t n = 1;
  for (int i = from; i < to; ++i) n = checked_mul(n, s.dims[i], op);
  return n;
}

Shape shape2(int64_t a, int64_t b) {
  Shape s;
  s.rank = 2;
  s.dims[0] = a;
  s.dims[1] = b;
  return s;
}

void check_count(const Shape& s, const std::string& op) {
  Shape::from(s.dims, s.rank, op.c_str());  // fails on element-count overflow
}

void infer_concat(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const int n = call.num_inputs;
  const Shape& s0 = in[0].shape;
  if (s0.rank == 0)
    fail(Code::kInvalidArgument, "[{}] cannot concatenate rank-0 tensors; use stack or expand_dims first", op.name);
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), s0.rank, op.name.c_str());
  Shape out = s0;
  out.dims[ax] = 0;
  for (int i = 0; i < n; ++i) {
    const Shape& s = in[i].shape;
    if (s.rank != s0.rank)
      fail(Code::kInvalidArgument, "[{}] input {} has rank {} but input 0 has rank {}", op.name, i, s.rank, s0.rank);
    for (int d = 0; d < s.rank; ++d)
      if (d != ax && s.dims[d] != s0.dims[d])
        fail(Code::kInvalidArgument, "[{}] input {} has shape {}, which differs from input 0's {} outside axis {}",
             op.name, i, s.str(), s0.str(), ax);
    out.dims[ax] = checked_add(out.dims[ax], s.dims[ax], op.name);
  }
  check_count(out, op.name);
  const int64_t outer = prod(out, 0, ax, op.name), inner = prod(out, ax + 1, out.rank, op.name);
  for (int i = 0; i < n; ++i) call.in[i].shape = shape2(outer, checked_mul(in[i].shape.dims[ax], inner, op.name));
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.out[0] = {in[0].dtype, shape2(outer, checked_mul(out.dims[ax], inner, op.name))};
  call.result[0] = out;
}

void infer_stack(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const int n = call.num_inputs;
  const Shape& s0 = in[0].shape;
  if (s0.rank >= kMaxRank)
    fail(Code::kInvalidArgument, "[{}] stacking rank-{} tensors would exceed rank {}", op.name, s0.rank, kMaxRank);
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), s0.rank + 1, op.name.c_str());
  for (int i = 1; i < n; ++i)
    if (in[i].shape != s0)
      fail(Code::kInvalidArgument, "[{}] input {} has shape {} but input 0 has {}; stacked tensors must match",
           op.name, i, in[i].shape.str(), s0.str());
  Shape out;
  for (int d = 0; d < ax; ++d) out.push_back(s0.dims[d]);
  out.push_back(n);
  for (int d = ax; d < s0.rank; ++d) out.push_back(s0.dims[d]);
  check_count(out, op.name);
  const int64_t outer = prod(s0, 0, ax, op.name), inner = prod(s0, ax, s0.rank, op.name);
  for (int i = 0; i < n; ++i) call.in[i].shape = shape2(outer, inner);
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.out[0] = {in[0].dtype, shape2(outer, checked_mul(n, inner, op.name))};
  call.result[0] = out;
}

void infer_split(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  if (s.rank == 0) fail(Code::kInvalidArgument, "[{}] cannot split a rank-0 tensor", op.name);
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), s.rank, op.name.c_str());
  const int64_t sections = call.attrs.get_int("sections");
  std::vector<int64_t> sizes = call.attrs.get_ints("sizes");
  const int64_t dim = s.dims[ax];
  if (sections != 0 && !sizes.empty())
    fail(Code::kInvalidArgument, "[{}] give either sections or sizes, not both", op.name);
  if (sections == 0 && sizes.empty())
    fail(Code::kInvalidArgument, "[{}] give sections (a number of equal parts) or sizes (the part sizes)", op.name);
  if (sections < 0) fail(Code::kInvalidArgument, "[{}] sections must be positive, got {}", op.name, sections);
  if (sections > kMaxOpOutputs || sizes.size() > static_cast<size_t>(kMaxOpOutputs))
    fail(Code::kInvalidArgument, "[{}] would produce {} outputs; at most {} are supported", op.name,
         sections ? static_cast<size_t>(sections) : sizes.size(), kMaxOpOutputs);
  if (sections > 0) {
    if (dim % sections != 0)
      fail(Code::kInvalidArgument, "[{}] axis {} of size {} does not divide into {} equal sections", op.name, ax, dim,
           sections);
    sizes.assign(static_cast<size_t>(sections), dim / sections);
  } else {
    int64_t total = 0;
    for (size_t j = 0; j < sizes.size(); ++j) {
      if (sizes[j] < 0) fail(Code::kInvalidArgument, "[{}] sizes[{}] is negative ({})", op.name, j, sizes[j]);
      total = checked_add(total, sizes[j], op.name);
    }
    if (total != dim)
      fail(Code::kInvalidArgument, "[{}] sizes {} add up to {}, but axis {} has size {}", op.name,
           AttrValue::of_ints(sizes).str(), total, ax, dim);
  }
  const int64_t outer = prod(s, 0, ax, op.name), inner = prod(s, ax + 1, s.rank, op.name);
  call.in[0].shape = shape2(outer, checked_mul(dim, inner, op.name));
  call.num_outputs = static_cast<int>(sizes.size());
  for (size_t j = 0; j < sizes.size(); ++j) {
    Shape r = s;
    r.dims[ax] = sizes[j];
    call.result[j] = r;
    call.out[j] = {in[0].dtype, shape2(outer, checked_mul(sizes[j], inner, op.name))};
  }
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.attrs.set("sections", AttrValue::of_int(0));
  call.attrs.set("sizes", AttrValue::of_ints(sizes));
}

// Python's slice.indices(dim) for one axis: the first index and the count.
void python_slice(int64_t begin, int64_t end, int64_t step, int64_t dim, int64_t* first, int64_t* stop,
                  int64_t* count) {
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? dim : dim - 1;
  auto norm = [&](int64_t v) {
    if (v < 0) {
      v += dim;  // v >= INT64_MIN and dim >= 0: no overflow
      return v < lower ? lower : v;
    }
    return v > upper ? upper : v;
  };
  const int64_t b = norm(begin), e = norm(end);
  int64_t n = 0;
  if (step > 0 && e > b) n = (e - b - 1) / step + 1;
  if (step < 0 && b > e) n = static_cast<int64_t>(static_cast<uint64_t>(b - e - 1) / (0 - static_cast<uint64_t>(step)) + 1);
  *first = b;
  *stop = e;
  *count = n;
}

void infer_slice(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& starts = call.attrs.get_ints("starts");
  const auto& ends = call.attrs.get_ints("ends");
  std::vector<int64_t> axes = call.attrs.get_ints("axes");
  if (starts.size() != ends.size())
    fail(Code::kInvalidArgument, "[{}] starts has {} entries but ends has {}", op.name, starts.size(), ends.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (axes.size() != starts.size())
    fail(Code::kInvalidArgument, "[{}] axes has {} entries but starts has {}", op.name, axes.size(), starts.size());
  if (starts.size() > static_cast<size_t>(s.rank))
    fail(Code::kInvalidArgument, "[{}] {} axes given for a rank-{} tensor", op.name, starts.size(), s.rank);
  std::vector<int64_t> b(static_cast<size_t>(s.rank), 0), e(s.dims, s.dims + s.rank), all;
  bool seen[kMaxRank] = {};
  for (size_t k = 0; k < axes.size(); ++k) {
    const int32_t ax = normalize_axis(axes[k], s.rank, op.name.c_str());
    if (seen[ax]) fail(Code::kInvalidArgument, "[{}] axis {} appears twice in axes", op.name, axes[k]);
    seen[ax] = true;
    int64_t first, stop, count;
    python_slice(starts[k], ends[k], 1, s.dims[ax], &first, &stop, &count);
    b[ax] = first;
    e[ax] = first + count;
  }
  Shape out = s;
  for (int d = 0; d < s.rank; ++d) {
    out.dims[d] = e[d] - b[d];
    all.push_back(d);
  }
  call.attrs.set("starts", AttrValue::of_ints(b));
  call.attrs.set("ends", AttrValue::of_ints(e));
  call.attrs.set("axes", AttrValue::of_ints(all));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

void infer_strided_slice(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& begin = call.attrs.get_ints("begin");
  const auto& end = call.attrs.get_ints("end");
  const auto& strides = call.attrs.get_ints("strides");
  if (begin.size() != end.size())
    fail(Code::kInvalidArgument, "[{}] begin has {} entries but end has {}", op.name, begin.size(), end.size());
  if (!strides.empty() && strides.size() != begin.size())
    fail(Code::kInvalidArgument, "[{}] strides has {} entries but begin has {}", op.name, strides.size(), begin.size());
  if (begin.size() > static_cast<size_t>(s.rank))
    fail(Code::kInvalidArgument, "[{}] {} dims sliced for a rank-{} tensor", op.name, begin.size(), s.rank);
  std::vector<int64_t> b, e, st;
  Shape out;
  for (int d = 0; d < s.rank; ++d) {
    const size_t k = static_cast<size_t>(d);
    if (k >= begin.size()) {
      b.push_back(0);
      e.push_back(s.dims[d]);
      st.push_back(1);
      out.push_back(s.dims[d]);
      continue;
    }
    const int64_t step = strides.empty() ? 1 : strides[k];
    if (step == 0) fail(Code::kInvalidArgument, "[{}] strides[{}] is 0; strides must be non-zero", op.name, d);
    int64_t first, stop, count;
    python_slice(begin[k], end[k], step, s.dims[d], &first, &stop, &count);
    b.push_back(count > 0 ? first : 0);
    // A negative stride running through index 0 stops at -1, which would
    // read back as dim-1: store it as -(dim+1) so re-inference (the verifier,
    // JSON loading) gives the same slice.
    e.push_back(count > 0 ? (stop < 0 ? -(s.dims[d] + 1) : stop) : 0);
    st.push_back(step);
    out.push_back(count);
  }
  call.attrs.set("begin", AttrValue::of_ints(b));
  call.attrs.set("end", AttrValue::of_ints(e));
  call.attrs.set("strides", AttrValue::of_ints(st));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

// Whether `v` converts to `dtype` exactly enough: integers must be whole
// and in range (a cast would otherwise be undefined), bools 0 or 1.
bool representable(double v, DType dtype) {
  switch (dtype) {
    case SPORA_DTYPE_I32: return std::trunc(v) == v && v >= -2147483648.0 && v <= 2147483647.0;
    case SPORA_DTYPE_I64: return std::trunc(v) == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case SPORA_DTYPE_U8: return std::trunc(v) == v && v >= 0 && v <= 255;
    case SPORA_DTYPE_BOOL: return v == 0 || v == 1;
    default: return true;
  }
}

void infer_pad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& pads = call.attrs.get_ints("pads");
  const AttrValue* mode_attr = call.attrs.find("mode");
  const std::string mode = mode_attr ? mode_attr->s : "constant";
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    fail(Code::kInvalidArgument, "[{}] mode must be \"constant\", \"reflect\" or \"edge\", got \"{}\"", op.name, mode);
  if (pads.size() != static_cast<size_t>(2 * s.rank))
    fail(Code::kInvalidArgument, "[{}] pads has {} entries; a rank-{} tensor needs {} (before, after per dim)",
         op.name, pads.size(), s.rank, 2 * s.rank);
  const double value = call.attrs.get_float("value");
  if (mode == "constant" && !representable(value, in[0].dtype))
    fail(Code::kInvalidArgument, "[{}] value {} is not representable in {}", op.name, value, dtype_name(in[0].dtype));
  Shape out = s;
  for (int d = 0; d < s.rank; ++d) {
    const int64_t before = pads[2 * d], after = pads[2 * d + 1];
    if (before < 0 || after < 0)
      fail(Code::kInvalidArgument, "[{}] pads for dim {} are ({}, {}); pads must be non-negative", op.name, d, before,
           after);
    if (mode != "constant" && s.dims[d] == 0 && before + after > 0)
      fail(Code::kInvalidArgument, "[{}] {} mode cannot pad dim {}, which is empty", op.name, mode, d);
    out.dims[d] = checked_add(checked_add(s.dims[d], before, op.name), after, op.name);
  }
  check_count(out, op.name);
  call.attrs.set("mode", AttrValue::of_string(mode));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

// ---- gradient rules ------------------------------------------------------------

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
// Sharding (ir/sharding.h) of slice: a dim taken whole keeps its split
// (local `ends` = the block size); a dim cut by the slice is gathered (its
// blocks would not line up with the output's). Partial sums pass through
// (a slice is linear). Without it gather_nd's gradient gathered its
// (tokens, 1) coordinates on every device.
bool shard_slice(const ShardQuery& q, ShardPlan& p) {
  const TensorLayout& l = q.in_layouts[0];
  if (l.free) return false;
  const Shape& s = q.in[0].shape;
  const std::vector<int64_t>& starts = q.attrs->get_ints("starts");
  std::vector<int64_t> ends = q.attrs->get_ints("ends");
  if (static_cast<int>(starts.size()) != s.rank || static_cast<int>(ends.size()) != s.rank) return false;
  TensorLayout want = l;
  for (int d = 0; d < s.rank; ++d) {
    const size_t u = static_cast<size_t>(d);
    const int a = want.dims[u];
    if (a == kReplicated) continue;
    if (starts[u] == 0 && ends[u] == s.dims[d] && shard::divides(q, s.dims[d], a))
      ends[u] = s.dims[d] / q.mesh[static_cast<size_t>(a)];
    else
      want.dims[u] = kReplicated;
  }
  p.in = {want};
  p.out = {want};
  p.local_attrs = *q.attrs;
  p.local_attrs.set("ends", AttrValue::of_ints(ends));
  p.attrs_changed = true;
  return true;
}

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

}  // namespace

void register_shape_ops(OpRegistry& r) {
  const AttrValue none = AttrValue::of_ints({});
  const AttrSpec axis{"axis", AttrType::kInt, false, AttrValue::of_int(0)};
  auto def = [](const char* name, std::vector<AttrSpec> attrs, InferFn infer, const char* doc, const Rules& rules) {
    OpDef d;
    d.name = name;
    d.inputs = {"x"};
    d.outputs = {"y"};
    d.attrs = std::move(attrs);
    d.dtypes = kAll;
    d.infer = infer;
    d.doc = doc;
    rules.apply(d);
    return d;
  };
  OpDef concat = def("concat", {axis}, infer_concat, "joins tensors along an existing axis", {concat_bp});
  concat.variadic = true;
  r.add(std::move(concat));
  OpDef stack = def("stack", {axis}, infer_stack, "joins same-shaped tensors along a new axis", {stack_bp});
  stack.variadic = true;
  r.add(std::move(stack));
  OpDef split = def("split",
                    {axis, {"sections", AttrType::kInt, false, AttrValue::of_int(0)},
                     {"sizes", AttrType::kInts, false, none}},
                    infer_split, "cuts x along axis into `sections` equal parts or parts of `sizes`",
                    {split_bp});
  split.dynamic_outputs = true;
  r.add(std::move(split));
  r.add(def("slice",
            {{"starts", AttrType::kInts, true, {}},
             {"ends", AttrType::kInts, true, {}},
             {"axes", AttrType::kInts, false, none}},
            infer_slice,
            "x[starts:ends] along axes (the leading ones when empty); negative indices count from the end and "
            "out-of-range ones clamp, as in numpy",
            {slice_bp, nullptr, true, shard_slice}));
  r.add(def("strided_slice",
            {{"begin", AttrType::kInts, true, {}},
             {"end", AttrType::kInts, true, {}},
             {"strides", AttrType::kInts, false, none}},
            infer_strided_slice,
            "x[b0:e0:s0, b1:e1:s1, ...] over the leading dims with numpy semantics (negative strides walk "
            "backwards; an end below -dim runs through index 0)",
            {strided_slice_bp}));
  r.add(def("pad",
            {{"pads", AttrType::kInts, true, {}},
             {"mode", AttrType::kString, false, AttrValue::of_string("constant")},
             {"value", AttrType::kFloat, false, AttrValue::of_float(0)}},
            infer_pad,
            "pads (before, after) per dim with a constant value, a reflection (numpy 'reflect') or the edge "
            "value",
            {pad_bp}));
}

SPORA_OP_FAMILY(register_shape_ops);

}  // namespace spora
