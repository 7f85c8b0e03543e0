// Layout ops that rearrange one tensor: reshape, expand_dims, squeeze (views,
// no copy), transpose, broadcast_to, tile, flip.
//
// Contract with kernels (plugins/common/kernels/layout.cpp). Kernels only
// move elements, so every dtype works and implementations may dispatch on
// the element size alone.
//   reshape, expand_dims, squeeze: views (call.view); no kernel runs.
//   transpose: attrs.perm lists every axis once, non-negative;
//     out.dims[i] = in.dims[perm[i]].
//   broadcast_to: in[0] is padded with leading 1s to the output's rank; each
//     input dim is 1 or equals the output dim. attrs.shape = output shape.
//   tile: in[0] is padded to the output's rank; attrs.reps has one
//     non-negative entry per output dim; out.dims[d] = in.dims[d] * reps[d].
//   flip: attrs.axes are non-negative, sorted and unique (empty: none flip;
//     the user's "empty = all" is expanded here).
//
// Gradient rules: the adjoint undoes the data movement (tile sums over the
// repetitions). Each is built from ops that have rules themselves, so
// gradients of gradients work too.
#include <algorithm>
#include <limits>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

// Shape from dims, failing (naming the op) on rank or element-count overflow.
Shape make_shape(const std::vector<int64_t>& dims, const std::string& op) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    fail(Code::kInvalidArgument, "[{}] result rank {} exceeds {}", op, dims.size(), kMaxRank);
  return Shape::from(dims.data(), static_cast<int32_t>(dims.size()), op.c_str());
}

void infer_reshape(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const auto& want = call.attrs.get_ints("shape");
  if (want.size() > static_cast<size_t>(kMaxRank))
    fail(Code::kInvalidArgument, "[{}] target rank {} exceeds {}", op.name, want.size(), kMaxRank);
  Shape out;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1) {
      if (infer_at >= 0) fail(Code::kInvalidArgument, "[{}] only one dimension may be -1", op.name);
      infer_at = static_cast<int>(i);
      out.push_back(1);
    } else if (want[i] < 0) {
      fail(Code::kInvalidArgument, "[{}] dimension {} is negative ({})", op.name, i, want[i]);
    } else {
      out.push_back(want[i]);
      if (want[i] != 0 && known > std::numeric_limits<int64_t>::max() / want[i])
        fail(Code::kInvalidArgument, "[{}] shape {} has more elements than fit in int64", op.name,
             AttrValue::of_ints(want).str());
      known *= want[i];
    }
  }
  const int64_t n = in[0].shape.numel();
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      fail(Code::kInvalidArgument, "[{}] cannot reshape {} into {}", op.name, in[0].shape.str(),
           AttrValue::of_ints(want).str());
    out.dims[infer_at] = n / known;
  } else if (known != n) {
    fail(Code::kInvalidArgument, "[{}] cannot reshape {} ({} elements) into {} ({} elements)", op.name,
         in[0].shape.str(), n, out.str(), known);
  }
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
  call.view = true;
}

void infer_expand_dims(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& axes = call.attrs.get_ints("axes");
  const int64_t rank = s.rank + static_cast<int64_t>(axes.size());
  if (rank > kMaxRank) fail(Code::kInvalidArgument, "[{}] result rank {} exceeds {}", op.name, rank, kMaxRank);
  bool is_new[kMaxRank] = {};
  std::vector<int64_t> norm;
  for (int64_t a : axes) {
    const int32_t ax = normalize_axis(a, static_cast<int32_t>(rank), op.name.c_str());
    if (is_new[ax]) fail(Code::kInvalidArgument, "[{}] axis {} appears twice in axes", op.name, a);
    is_new[ax] = true;
    norm.push_back(ax);
  }
  std::sort(norm.begin(), norm.end());
  Shape out;
  for (int i = 0, k = 0; i < rank; ++i) out.push_back(is_new[i] ? 1 : s.dims[k++]);
  call.attrs.set("axes", AttrValue::of_ints(norm));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
  call.view = true;
}

void infer_squeeze(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& axes = call.attrs.get_ints("axes");
  bool drop[kMaxRank] = {};
  if (axes.empty()) {
    for (int i = 0; i < s.rank; ++i) drop[i] = s.dims[i] == 1;
  }
  for (int64_t a : axes) {
    if (s.rank == 0) fail(Code::kInvalidArgument, "[{}] axis {} is out of range for rank 0", op.name, a);
    const int32_t ax = normalize_axis(a, s.rank, op.name.c_str());
    if (drop[ax]) fail(Code::kInvalidArgument, "[{}] axis {} appears twice in axes", op.name, a);
    if (s.dims[ax] != 1)
      fail(Code::kInvalidArgument, "[{}] cannot squeeze axis {} of size {} in shape {}", op.name, a, s.dims[ax],
           s.str());
    drop[ax] = true;
  }
  std::vector<int64_t> norm;
  Shape out;
  for (int i = 0; i < s.rank; ++i) {
    if (drop[i]) norm.push_back(i);
    else out.push_back(s.dims[i]);
  }
  call.attrs.set("axes", AttrValue::of_ints(norm));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
  call.view = true;
}

void infer_transpose(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  std::vector<int64_t> perm = call.attrs.get_ints("perm");
  if (perm.empty())
    for (int i = s.rank - 1; i >= 0; --i) perm.push_back(i);
  if (perm.size() != static_cast<size_t>(s.rank))
    fail(Code::kInvalidArgument, "[{}] perm {} has {} entries for rank {}", op.name, AttrValue::of_ints(perm).str(),
         perm.size(), s.rank);
  bool seen[kMaxRank] = {};
  Shape out;
  for (auto& p : perm) {
    p = normalize_axis(p, s.rank, op.name.c_str());
    if (seen[p]) fail(Code::kInvalidArgument, "[{}] perm lists axis {} twice", op.name, p);
    seen[p] = true;
    out.push_back(s.dims[p]);
  }
  call.attrs.set("perm", AttrValue::of_ints(perm));
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

void infer_broadcast_to(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& want = call.attrs.get_ints("shape");
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] < 0) fail(Code::kInvalidArgument, "[{}] dimension {} of shape is negative ({})", op.name, i, want[i]);
  const Shape out = make_shape(want, op.name);
  if (s.rank > out.rank)
    fail(Code::kInvalidArgument, "[{}] cannot broadcast {} to {}: the target has fewer dims", op.name, s.str(),
         out.str());
  const Shape padded = pad_to_rank(s, out.rank);
  for (int i = 0; i < out.rank; ++i)
    if (padded.dims[i] != 1 && padded.dims[i] != out.dims[i])
      fail(Code::kInvalidArgument, "[{}] cannot broadcast {} to {} (dim {}: {} vs {})", op.name, s.str(), out.str(),
           i - (out.rank - s.rank), padded.dims[i], out.dims[i]);
  call.in[0].shape = padded;
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

void infer_tile(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  std::vector<int64_t> reps = call.attrs.get_ints("reps");
  for (size_t i = 0; i < reps.size(); ++i)
    if (reps[i] < 0) fail(Code::kInvalidArgument, "[{}] reps[{}] is negative ({})", op.name, i, reps[i]);
  if (reps.size() > static_cast<size_t>(kMaxRank))
    fail(Code::kInvalidArgument, "[{}] reps has {} entries; at most {} dims are supported", op.name, reps.size(),
         kMaxRank);
  // numpy: the shorter of reps and the shape is padded with leading 1s.
  const int32_t rank = std::max(s.rank, static_cast<int32_t>(reps.size()));
  reps.insert(reps.begin(), static_cast<size_t>(rank) - reps.size(), 1);
  const Shape padded = pad_to_rank(s, rank);
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    if (__builtin_mul_overflow(padded.dims[i], reps[i], &dims[i]))
      fail(Code::kInvalidArgument, "[{}] tiling {} by {} overflows int64", op.name, s.str(),
           AttrValue::of_ints(reps).str());
  }
  const Shape out = make_shape(dims, op.name);
  call.attrs.set("reps", AttrValue::of_ints(reps));
  call.in[0].shape = padded;
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

void infer_flip(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& s = in[0].shape;
  const auto& axes = call.attrs.get_ints("axes");
  bool flip[kMaxRank] = {};
  if (axes.empty())
    for (int i = 0; i < s.rank; ++i) flip[i] = true;
  for (int64_t a : axes) {
    if (s.rank == 0) fail(Code::kInvalidArgument, "[{}] axis {} is out of range for rank 0", op.name, a);
    const int32_t ax = normalize_axis(a, s.rank, op.name.c_str());
    if (flip[ax]) fail(Code::kInvalidArgument, "[{}] axis {} appears twice in axes", op.name, a);
    flip[ax] = true;
  }
  std::vector<int64_t> norm;
  for (int i = 0; i < s.rank; ++i)
    if (flip[i]) norm.push_back(i);
  call.attrs.set("axes", AttrValue::of_ints(norm));
  call.out[0] = in[0];
  call.result[0] = s;
}


// ---- gradient rules ------------------------------------------------------------

// reshape, expand_dims, squeeze: the adjoint takes x's shape back.
V reshape_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.reshape(dy[0], b.meta(x[0]).shape)};
}

V transpose_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  const auto& perm = n.attrs.get_ints("perm");
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  Attrs a;
  a.set("perm", AttrValue::of_ints(inv));
  return {b.op("transpose", {dy[0]}, a)};
}

V broadcast_to_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {b.sum_to(dy[0], b.meta(x[0]).shape)};
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

// Sharding (ir/sharding.h). The rules keep a split where the dims map
// cleanly and ask for the input whole elsewhere; all are linear, so partial
// sums pass through.
std::vector<int64_t> local_dims(const ShardQuery& q, const Shape& s, const TensorLayout& l) {
  std::vector<int64_t> d(s.dims, s.dims + s.rank);
  for (size_t i = 0; i < d.size(); ++i)
    if (l.dims[i] != kReplicated) d[i] /= q.mesh[static_cast<size_t>(l.dims[i])];
  return d;
}

// reshape / expand_dims / squeeze: the shapes fall into groups of dims with
// equal products; a split dim keeps its split when it is the outermost
// non-1 dim of its group on both sides (its blocks are then the output
// dim's blocks, in row-major order).
bool shard_reshape(const ShardQuery& q, ShardPlan& p) {
  const Shape &s = q.in[0].shape, &t = q.out[0].shape;
  const TensorLayout& l = q.in_layouts[0];
  if (l.free || s.numel() == 0) return false;
  TensorLayout want = l, out = TensorLayout::replicated(t.rank);
  out.partial = l.partial;
  int i = 0, j = 0;
  while (i < s.rank || j < t.rank) {
    const int gi = i, gj = j;
    int64_t pi = i < s.rank ? s.dims[i++] : 1, pj = j < t.rank ? t.dims[j++] : 1;
    while (pi != pj) {
      if (pi < pj) {
        if (i >= s.rank) return false;
        pi *= s.dims[i++];
      } else {
        if (j >= t.rank) return false;
        pj *= t.dims[j++];
      }
    }
    int first_in = -1, first_out = -1;
    for (int d = gi; d < i && first_in < 0; ++d)
      if (s.dims[d] != 1) first_in = d;
    for (int d = gj; d < j && first_out < 0; ++d)
      if (t.dims[d] != 1) first_out = d;
    for (int d = gi; d < i; ++d) {
      const int a = l.dims[static_cast<size_t>(d)];
      if (a == kReplicated) continue;
      if (d == first_in && first_out >= 0 && shard::divides(q, t.dims[first_out], a))
        out.dims[static_cast<size_t>(first_out)] = a;
      else
        want.dims[static_cast<size_t>(d)] = kReplicated;
    }
  }
  p.in = {want};
  p.out = {out};
  p.local_attrs = *q.attrs;
  if (q.op->name == "reshape") {
    p.local_attrs.set("shape", AttrValue::of_ints(local_dims(q, t, out)));
    p.attrs_changed = true;
  }
  return true;
}

bool shard_transpose(const ShardQuery& q, ShardPlan& p) {
  const TensorLayout& l = q.in_layouts[0];
  if (l.free) return false;
  const std::vector<int64_t>& perm = q.attrs->get_ints("perm");
  TensorLayout out = TensorLayout::replicated(static_cast<int>(perm.size()));
  out.partial = l.partial;
  for (size_t d = 0; d < perm.size(); ++d) out.dims[d] = l.dims[static_cast<size_t>(perm[d])];
  p.in = {l};
  p.out = {out};
  return true;
}

// broadcast_to: elementwise from the input's dims; the local target shape.
bool shard_broadcast_to(const ShardQuery& q, ShardPlan& p) {
  if (!shard::elementwise(q, p, shard::Partial::kNone)) return false;
  p.local_attrs = *q.attrs;
  p.local_attrs.set("shape", AttrValue::of_ints(local_dims(q, q.out[0].shape, p.out[0])));
  p.attrs_changed = true;
  return true;
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  const std::vector<DType> all = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                  SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};
  const AttrValue none = AttrValue::of_ints({});
  auto add = [&](const char* name, AttrSpec attr, InferFn infer, const char* doc, const Rules& rules) {
    OpDef d;
    d.name = name;
    d.inputs = {"x"};
    d.outputs = {"y"};
    d.attrs = {std::move(attr)};
    d.dtypes = all;
    d.infer = infer;
    d.doc = doc;
    rules.apply(d);
    r.add(std::move(d));
  };
  add("reshape", {"shape", AttrType::kInts, true, {}}, infer_reshape,
      "same data, new shape (one dim may be -1); returns a view", {reshape_bp, nullptr, true, shard_reshape});
  add("expand_dims", {"axes", AttrType::kInts, true, {}}, infer_expand_dims,
      "inserts size-1 dims at axes (an int or ints, positions in the result); returns a view",
      {reshape_bp, nullptr, true, shard_reshape});
  add("squeeze", {"axes", AttrType::kInts, false, none}, infer_squeeze,
      "removes size-1 dims (every one when axes is empty); returns a view",
      {reshape_bp, nullptr, true, shard_reshape});
  add("transpose", {"perm", AttrType::kInts, false, none}, infer_transpose,
      "permutes dims (reverses them when perm is empty)", {transpose_bp, nullptr, true, shard_transpose});
  add("broadcast_to", {"shape", AttrType::kInts, true, {}}, infer_broadcast_to,
      "repeats x along size-1 and missing leading dims to reach shape (numpy rules)",
      {broadcast_to_bp, nullptr, true, shard_broadcast_to});
  add("tile", {"reps", AttrType::kInts, true, {}}, infer_tile, "repeats x reps[d] times along each dim (numpy.tile)", {tile_bp});
  add("flip", {"axes", AttrType::kInts, false, none}, infer_flip,
      "reverses the order of elements along axes (all when empty)", {flip_bp});
}

SPORA_OP_FAMILY(register_layout_ops);

}  // namespace spora
