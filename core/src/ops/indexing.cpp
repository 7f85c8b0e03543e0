// Indexing ops: gather (numpy take), embedding, index_select, gather_nd,
// gather_elements (torch.gather, MindSpore GatherD), scatter_add, one_hot,
// each registered with its gradient rule. Index inputs are i32 or i64.
//
// Index values live on the device, so inference cannot check them. Kernels
// check every index: an index i in [-n, n) selects i (negative ones wrap
// like numpy); any other index selects nothing, and the output elements it
// would have filled are zero (gather, embedding, index_select, gather_nd),
// its update is dropped (scatter_add), or its row is all off_value
// (one_hot). Kernels never read or write out of bounds.
//
// Contract with kernels (plugins/common/kernels/indexing.cpp):
//   gather, embedding, index_select: the data is seen as (outer, n, inner),
//     the indices flattened to (k,), the output as (outer, k, inner):
//     y[o, j, :] = x[o, idx[j], :]. gather and index_select carry the
//     normalised user axis in attrs.axis (informative).
//   gather_nd: x keeps its shape (rank r), the indices are (m, q) with
//     q <= r, the output is (m, inner) with inner = product of x's dims
//     from q on: y[j, :] = x[idx[j, 0], ..., idx[j, q-1], ...].
//   gather_elements: x and indices share one rank r >= 1 (rank 0 is seen
//     as (1,)), indices.dims[d] <= x.dims[d] for d != axis; the output has
//     indices' shape and attrs.axis is non-negative:
//     y[p] = x[p with p[axis] = idx[p]].
//   scatter_add: x, indices and updates share one rank r >= 1 (rank 0 is
//     seen as (1,)); indices.dims[d] <= updates.dims[d] for every d and
//     <= x.dims[d] for d != axis; attrs.axis is non-negative. y = x, then for
//     every position p of indices, y[p with p[axis] = idx[p]] += updates[p].
//     Updates are applied in row-major order of p; bool adds as "or",
//     integers wrap.
//   one_hot: indices are (m,), the output (m, depth) of dtype attrs.dtype;
//     attrs.on_value and off_value are representable in it.
#include <cmath>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

using rules::cast;
using rules::dims_of;
using rules::GradBuilder;
using rules::product;
using rules::Rules;
using rules::shape_of;
using rules::V;
using rules::Value;
using rules::zeros;

const std::vector<DType> kAll = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                 SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};

void check_index_dtype(const OpDef& op, const TensorMeta& t, int slot) {
  if (t.dtype != SPORA_DTYPE_I32 && t.dtype != SPORA_DTYPE_I64)
    fail(Code::kInvalidArgument, "[{}] input '{}' must be i32 or i64, got {}", op.name,
         op.inputs[static_cast<size_t>(slot)], dtype_name(t.dtype));
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(Code::kInvalidArgument, "[{}] the result has more elements than fit in int64", op);
  return r;
}

int64_t prod(const Shape& s, int from, int to, const std::string& op) {
  int64_t n = 1;
  for (int i = from; i < to; ++i) n = checked_mul(n, s.dims[i], op);
  return n;
}

Shape dims_of(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(v);
  return s;
}

// Shared by gather, embedding and index_select: take along `ax` of x.
void infer_take(const OpDef& op, const Shape& x, int32_t ax, const Shape& idx, DType dtype, OpCall& call) {
  if (x.rank - 1 + idx.rank > kMaxRank)
    fail(Code::kInvalidArgument, "[{}] result rank {} exceeds {}", op.name, x.rank - 1 + idx.rank, kMaxRank);
  Shape out;
  for (int d = 0; d < ax; ++d) out.push_back(x.dims[d]);
  for (int d = 0; d < idx.rank; ++d) out.push_back(idx.dims[d]);
  for (int d = ax + 1; d < x.rank; ++d) out.push_back(x.dims[d]);
  Shape::from(out.dims, out.rank, op.name.c_str());  // element-count overflow
  const int64_t outer = prod(x, 0, ax, op.name), inner = prod(x, ax + 1, x.rank, op.name);
  const int64_t k = idx.numel();
  call.in[0].shape = dims_of({outer, x.dims[ax], inner});
  call.in[1].shape = dims_of({k});
  call.out[0] = {dtype, dims_of({outer, k, inner})};
  call.result[0] = out;
}

void infer_gather(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  if (in[0].shape.rank == 0) fail(Code::kInvalidArgument, "[{}] cannot gather from a rank-0 tensor", op.name);
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), in[0].shape.rank, op.name.c_str());
  call.attrs.set("axis", AttrValue::of_int(ax));
  infer_take(op, in[0].shape, ax, in[1].shape, in[0].dtype, call);
}

void infer_embedding(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  if (in[0].shape.rank != 2)
    fail(Code::kInvalidArgument, "[{}] weight must be 2-D (vocabulary, dim), got shape {}", op.name,
         in[0].shape.str());
  infer_take(op, in[0].shape, 0, in[1].shape, in[0].dtype, call);
}

void infer_index_select(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  if (in[0].shape.rank == 0) fail(Code::kInvalidArgument, "[{}] cannot select from a rank-0 tensor", op.name);
  if (in[1].shape.rank != 1)
    fail(Code::kInvalidArgument, "[{}] index must be 1-D, got shape {}", op.name, in[1].shape.str());
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), in[0].shape.rank, op.name.c_str());
  call.attrs.set("axis", AttrValue::of_int(ax));
  infer_take(op, in[0].shape, ax, in[1].shape, in[0].dtype, call);
}

void infer_gather_nd(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  const Shape &x = in[0].shape, &idx = in[1].shape;
  if (idx.rank == 0)
    fail(Code::kInvalidArgument, "[{}] indices must have rank >= 1 (its last dim indexes x), got a scalar", op.name);
  const int64_t q = idx.dims[idx.rank - 1];
  if (q > x.rank)
    fail(Code::kInvalidArgument, "[{}] indices' last dim is {}, more than x's rank {} (x {}, indices {})", op.name, q,
         x.rank, x.str(), idx.str());
  const int32_t qi = static_cast<int32_t>(q);
  if (idx.rank - 1 + x.rank - qi > kMaxRank)
    fail(Code::kInvalidArgument, "[{}] result rank {} exceeds {}", op.name, idx.rank - 1 + x.rank - qi, kMaxRank);
  Shape out;
  for (int d = 0; d + 1 < idx.rank; ++d) out.push_back(idx.dims[d]);
  for (int d = qi; d < x.rank; ++d) out.push_back(x.dims[d]);
  Shape::from(out.dims, out.rank, op.name.c_str());
  const int64_t m = prod(idx, 0, idx.rank - 1, op.name), inner = prod(x, qi, x.rank, op.name);
  call.in[1].shape = dims_of({m, q});
  call.out[0] = {in[0].dtype, dims_of({m, inner})};
  call.result[0] = out;
}

void infer_gather_elements(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  const Shape &x = in[0].shape, &idx = in[1].shape;
  if (idx.rank != x.rank)
    fail(Code::kInvalidArgument, "[{}] x {} and indices {} must have the same rank", op.name, x.str(), idx.str());
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), x.rank == 0 ? 1 : x.rank, op.name.c_str());
  for (int d = 0; d < x.rank; ++d)
    if (d != ax && idx.dims[d] > x.dims[d])
      fail(Code::kInvalidArgument, "[{}] indices {} is larger than x {} in dim {} (only axis {} may differ)", op.name,
           idx.str(), x.str(), d, ax);
  if (x.rank == 0)
    for (int i = 0; i < 2; ++i) call.in[i].shape = dims_of({1});
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.out[0] = {in[0].dtype, call.in[1].shape};
  call.result[0] = idx;
}

void infer_scatter_add(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_index_dtype(op, in[1], 1);
  const Shape &x = in[0].shape, &idx = in[1].shape, &upd = in[2].shape;
  if (idx.rank != x.rank || upd.rank != x.rank)
    fail(Code::kInvalidArgument, "[{}] x {}, indices {} and updates {} must have the same rank", op.name, x.str(),
         idx.str(), upd.str());
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), x.rank, op.name.c_str());
  for (int d = 0; d < x.rank; ++d) {
    if (idx.dims[d] > upd.dims[d])
      fail(Code::kInvalidArgument, "[{}] indices {} is larger than updates {} in dim {}", op.name, idx.str(),
           upd.str(), d);
    if (d != ax && idx.dims[d] > x.dims[d])
      fail(Code::kInvalidArgument, "[{}] indices {} is larger than x {} in dim {} (only axis {} may differ)", op.name,
           idx.str(), x.str(), d, ax);
  }
  if (x.rank == 0) {
    for (int i = 0; i < 3; ++i) call.in[i].shape = dims_of({1});
  }
  call.attrs.set("axis", AttrValue::of_int(ax));
  call.out[0] = {in[0].dtype, call.in[0].shape};
  call.result[0] = x;
}

DType dtype_from_name(const OpDef& op, const std::string& name) {
  for (DType t : kAll)
    if (name == dtype_name(t)) return t;
  fail(Code::kInvalidArgument, "[{}] dtype \"{}\" is not one of f32, f64, f16, bf16, i32, i64, u8, bool", op.name,
       name);
}

bool representable(double v, DType dtype) {
  switch (dtype) {
    case SPORA_DTYPE_I32: return std::trunc(v) == v && v >= -2147483648.0 && v <= 2147483647.0;
    case SPORA_DTYPE_I64: return std::trunc(v) == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case SPORA_DTYPE_U8: return std::trunc(v) == v && v >= 0 && v <= 255;
    case SPORA_DTYPE_BOOL: return v == 0 || v == 1;
    default: return true;
  }
}

void infer_one_hot(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape& idx = in[0].shape;
  const int64_t depth = call.attrs.get_int("depth");
  if (depth < 0) fail(Code::kInvalidArgument, "[{}] depth must be non-negative, got {}", op.name, depth);
  const AttrValue* name = call.attrs.find("dtype");
  const DType dt = dtype_from_name(op, name ? name->s : "f32");
  for (const char* which : {"on_value", "off_value"}) {
    const double v = call.attrs.get_float(which);
    if (!representable(v, dt))
      fail(Code::kInvalidArgument, "[{}] {} {} is not representable in {}", op.name, which, v, dtype_name(dt));
  }
  if (idx.rank >= kMaxRank)
    fail(Code::kInvalidArgument, "[{}] result rank {} exceeds {}", op.name, idx.rank + 1, kMaxRank);
  Shape out = idx;
  out.push_back(depth);
  Shape::from(out.dims, out.rank, op.name.c_str());
  const int64_t m = idx.numel();
  call.in[0].shape = dims_of({m});
  call.out[0] = {dt, dims_of({m, depth})};
  call.result[0] = out;
}

// ---- gradient rules ------------------------------------------------------------
// Indices are not differentiable. The gathers' adjoint adds dy into zeros
// of x's shape at the gathered positions (scatter_add, which like the
// gathers wraps indices in [-n, n) and drops any other); scatter_add's
// adjoint for the updates gathers dy back from where each update went
// (gather_nd with full coordinates). one_hot is not differentiable (its
// input is integer).

constexpr DType I64 = SPORA_DTYPE_I64;

Value broadcast(GradBuilder& b, Value v, const Shape& to) {
  if (b.meta(v).shape == to) return v;
  Attrs a;
  a.set("shape", AttrValue::of_ints(dims_of(to)));
  return b.op("broadcast_to", {v}, a);
}

Value scatter_add(GradBuilder& b, Value into, Value idx, Value upd, int64_t axis) {
  Attrs a;
  a.set("axis", AttrValue::of_int(axis));
  return b.op("scatter_add", {into, idx, upd}, a);
}

// y = x taken at `idx` (any shape) along `ax`: y has shape
// x[:ax] + idx.shape + x[ax+1:]. The adjoint sees y as x[:ax] + (k,) +
// x[ax+1:] and scatters it with the indices broadcast along the other dims.
Value take_adjoint(GradBuilder& b, Value x, Value idx, Value dy, int64_t ax) {
  const TensorMeta xm = b.meta(x);
  const Shape& s = xm.shape;
  const int64_t k = b.meta(idx).shape.numel();
  Shape upd, line;
  for (int d = 0; d < s.rank; ++d) {
    upd.push_back(d == ax ? k : s.dims[d]);
    line.push_back(d == ax ? k : 1);
  }
  const Value g = b.reshape(dy, upd);
  const Value i = broadcast(b, b.reshape(idx, line), upd);
  return scatter_add(b, zeros(b, xm.dtype, s), i, g, ax);
}

V gather_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {take_adjoint(b, x[0], x[1], dy[0], n.attrs.get_int("axis")), Value{}};
}

V embedding_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  return {take_adjoint(b, x[0], x[1], dy[0], 0), Value{}};
}

// y[j, :] = x[idx[j, 0], ..., idx[j, q-1], :]. x is seen as (P, inner) with
// P the product of its leading q dims; each index row becomes one position
// in [0, P) (P, which scatter_add drops, when a component is out of range).
V gather_nd_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  const Shape& s = xm.shape;
  const Shape is = b.meta(x[1]).shape;
  const int q = static_cast<int>(is.dims[is.rank - 1]);
  const int64_t m = product(is, 0, is.rank - 1), p = product(s, 0, q), inner = product(s, q, s.rank);
  const Shape rows = shape_of({m, inner});
  Value lin;
  if (q == 0) {
    lin = zeros(b, I64, shape_of({m, 1}));
  } else {
    const Value idx = b.reshape(cast(b, x[1], I64), shape_of({m, static_cast<int64_t>(q)}));
    Value valid;
    int64_t stride = p;
    for (int j = 0; j < q; ++j) {
      const int64_t dim = s.dims[j];
      stride = dim ? stride / dim : 0;
      Attrs a;
      a.set("starts", AttrValue::of_ints({0, j}));
      a.set("ends", AttrValue::of_ints({m, j + 1}));
      const Value c = b.op("slice", {idx}, a);
      const Value in_range = b.op("logical_and", {b.op("greater_equal", {c, b.scalar(static_cast<double>(-dim), I64)}),
                                                  b.op("less", {c, b.scalar(static_cast<double>(dim), I64)})});
      const Value neg = b.op("less", {c, b.scalar(0, I64)});
      const Value wrapped = b.op("where", {neg, b.op("add", {c, b.scalar(static_cast<double>(dim), I64)}), c});
      const Value term = b.op("mul", {wrapped, b.scalar(static_cast<double>(stride), I64)});
      lin = lin.valid() ? b.op("add", {lin, term}) : term;
      valid = valid.valid() ? b.op("logical_and", {valid, in_range}) : in_range;
    }
    lin = b.op("where", {valid, lin, b.scalar(static_cast<double>(p), I64)});
  }
  const Value g = b.reshape(dy[0], rows);
  const Value dx = scatter_add(b, zeros(b, xm.dtype, shape_of({p, inner})), broadcast(b, lin, rows), g, 0);
  return {b.reshape(dx, s), Value{}};
}

// y[p] = x[p with p[axis] = idx[p]]: each gathered element goes back where
// it came from, so dx is dy scattered by the same indices along the axis
// (out-of-range indices gathered zeros and scatter nothing).
V gather_elements_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  return {scatter_add(b, zeros(b, xm.dtype, xm.shape), x[1], dy[0], n.attrs.get_int("axis")), Value{}};
}

// y = x with updates[p] added at p[axis] = idx[p] for every p in idx's
// extent: dx = dy; dupdates[p] = dy at that position (0 for dropped
// indices and for updates outside idx's extent).
V scatter_add_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape xs = b.meta(x[0]).shape, is = b.meta(x[1]).shape, us = b.meta(x[2]).shape;
  const int64_t ax = n.attrs.get_int("axis");
  // Rank 0 behaves as (1,).
  Shape xs1 = xs, is1 = is;
  if (xs.rank == 0) {
    xs1.push_back(1);
    is1.push_back(1);
  }
  const int r = xs1.rank;
  const int64_t count = is1.numel();
  Value dupd;
  if (count == 0) {
    dupd = zeros(b, b.meta(x[2]).dtype, us);
  } else {
    V coords;
    for (int d = 0; d < r; ++d) {
      Value c;
      if (d == ax) {
        c = cast(b, x[1], I64);
      } else {
        Attrs a;
        a.set("stop", AttrValue::of_float(static_cast<double>(is1.dims[d])));
        a.set("dtype", AttrValue::of_string("i64"));
        Shape line;
        for (int i = 0; i < r; ++i) line.push_back(i == d ? is1.dims[d] : 1);
        c = broadcast(b, b.reshape(b.op("arange", {}, a), line), is1);
      }
      coords.push_back(b.reshape(c, shape_of({count, 1})));
    }
    Attrs cat;
    cat.set("axis", AttrValue::of_int(1));
    const Value idx = coords.size() == 1 ? coords[0] : b.op("concat", coords, cat);
    Value got = b.reshape(b.op("gather_nd", {b.reshape(dy[0], xs1), idx}), is);
    std::vector<int64_t> pads;
    bool any = false;
    for (int d = 0; d < us.rank; ++d) {
      pads.push_back(0);
      pads.push_back(us.dims[d] - is.dims[d]);
      any = any || us.dims[d] != is.dims[d];
    }
    if (any) {
      Attrs a;
      a.set("pads", AttrValue::of_ints(pads));
      got = b.op("pad", {got}, a);
    }
    dupd = got;
  }
  return {dy[0], Value{}, dupd};
}

// Sharding (ir/sharding.h) of embedding: y[..., :] = weight[ids[...], :].
// The ids' splits carry to y's leading dims and a split of weight's columns
// (the embedding dim) to y's last; the vocabulary dim stays whole (a row
// split would need masked lookups and a partial sum, not done yet).
bool shard_embedding(const ShardQuery& q, ShardPlan& p) {
  const TensorLayout &w = q.in_layouts[0], &ids = q.in_layouts[1];
  const int r = q.in[1].shape.rank;
  TensorLayout want_ids = ids.free ? TensorLayout::replicated(r) : ids;
  want_ids.free = false;
  want_ids.partial = 0;
  uint32_t used = 0;
  for (int d = 0; d < r; ++d) {
    const int a = want_ids.dims[static_cast<size_t>(d)];
    if (a == kReplicated) continue;
    if ((used & (1u << a)) || !shard::divides(q, q.in[1].shape.dims[d], a)) want_ids.dims[static_cast<size_t>(d)] = kReplicated;
    else used |= 1u << a;
  }
  int col = w.free ? kReplicated : w.dims[1];
  if (col != kReplicated && ((used & (1u << col)) || !shard::divides(q, q.in[0].shape.dims[1], col))) col = kReplicated;
  TensorLayout want_w = TensorLayout::replicated(2), out = TensorLayout::replicated(r + 1);
  want_w.dims[1] = col;
  for (int d = 0; d < r; ++d) out.dims[static_cast<size_t>(d)] = want_ids.dims[static_cast<size_t>(d)];
  out.dims[static_cast<size_t>(r)] = col;
  p.in = {want_w, want_ids};
  p.out = {out};
  return true;
}

// one_hot: the indices' splits carry over to the leading dims, the depth
// dim is whole (each index needs every class). Without it the gradient of
// cross_entropy (which one-hots the targets) ran replicated: a (tokens,
// vocabulary) tensor on every device.
bool shard_one_hot(const ShardQuery& q, ShardPlan& p) {
  const int r = q.in[0].shape.rank;
  TensorLayout want = q.in_layouts[0].free ? TensorLayout::replicated(r) : q.in_layouts[0];
  want.free = false;
  want.partial = 0;
  uint32_t used = 0;
  for (int d = 0; d < r; ++d) {
    const int a = want.dims[static_cast<size_t>(d)];
    if (a == kReplicated) continue;
    if ((used & (1u << a)) || !shard::divides(q, q.in[0].shape.dims[d], a)) want.dims[static_cast<size_t>(d)] = kReplicated;
    else used |= 1u << a;
  }
  TensorLayout out = TensorLayout::replicated(r + 1);
  for (int d = 0; d < r; ++d) out.dims[static_cast<size_t>(d)] = want.dims[static_cast<size_t>(d)];
  p.in = {want};
  p.out = {out};
  return true;
}

// ---- sharding of the gathers and scatter_add ---------------------------------
// Indices are never partial sums. The gathers and scatter_add are linear in
// their data inputs, so a data input's partial sums pass through on the
// mesh axes no split uses (the pass resolves the rest).

TensorLayout placed(const ShardQuery& q, size_t i) {
  return q.in_layouts[i].free ? TensorLayout::replicated(q.in[i].shape.rank) : q.in_layouts[i];
}

// Mesh axis `a` may split a dim of `size` that no other dim of this op uses.
bool usable(const ShardQuery& q, int a, int64_t size, uint32_t used) {
  return a != kReplicated && !(used & (1u << a)) && shard::divides(q, size, a);
}

// x's partial sums that survive: on float and integer data (integers wrap,
// so their sums are exact too), on axes no split took.
uint32_t kept_partial(const ShardQuery& q, size_t i, uint32_t used) {
  if (q.in_layouts[i].free || q.in[i].dtype == SPORA_DTYPE_BOOL) return 0;
  return q.in_layouts[i].partial & ~used;
}

// gather, index_select: y = x[:ax] + indices.shape + x[ax+1:]. The indices'
// splits carry to y's middle dims (first: they are usually the batch), x's
// other dims keep theirs; x's `ax` dim stays whole (every index may select
// any entry; a split would need masked lookups and a partial sum).
bool shard_take(const ShardQuery& q, ShardPlan& p) {
  const Shape &xs = q.in[0].shape, &is = q.in[1].shape;
  int64_t ax = q.attrs->get_int("axis");
  if (ax < 0) ax += xs.rank;
  if (ax < 0 || ax >= xs.rank) return false;
  const TensorLayout x = placed(q, 0), idx = placed(q, 1);
  TensorLayout want_x = TensorLayout::replicated(xs.rank), want_i = TensorLayout::replicated(is.rank);
  TensorLayout out = TensorLayout::replicated(xs.rank - 1 + is.rank);
  uint32_t used = 0;
  for (int d = 0; d < is.rank; ++d) {
    const int a = idx.dims[static_cast<size_t>(d)];
    if (!usable(q, a, is.dims[d], used)) continue;
    want_i.dims[static_cast<size_t>(d)] = out.dims[static_cast<size_t>(ax + d)] = a;
    used |= 1u << a;
  }
  for (int d = 0; d < xs.rank; ++d) {
    const int a = x.dims[static_cast<size_t>(d)];
    if (d == ax || !usable(q, a, xs.dims[d], used | x.partial)) continue;
    want_x.dims[static_cast<size_t>(d)] = out.dims[static_cast<size_t>(d < ax ? d : d - 1 + is.rank)] = a;
    used |= 1u << a;
  }
  want_x.partial = out.partial = kept_partial(q, 0, used);
  p.in = {want_x, want_i};
  p.out = {out};
  return true;
}

// gather_nd: y = indices.shape[:-1] + x.shape[q:]. The indices' leading
// splits carry to y's leading dims; x's first q dims (the indexed ones) and
// the indices' last dim stay whole; x's dims from q on keep their splits.
bool shard_gather_nd(const ShardQuery& q, ShardPlan& p) {
  const Shape &xs = q.in[0].shape, &is = q.in[1].shape;
  if (is.rank < 1) return false;
  const int k = static_cast<int>(is.dims[is.rank - 1]), lead = is.rank - 1;
  const TensorLayout x = placed(q, 0), idx = placed(q, 1);
  TensorLayout want_x = TensorLayout::replicated(xs.rank), want_i = TensorLayout::replicated(is.rank);
  TensorLayout out = TensorLayout::replicated(lead + xs.rank - k);
  uint32_t used = 0;
  for (int d = 0; d < lead; ++d) {
    const int a = idx.dims[static_cast<size_t>(d)];
    if (!usable(q, a, is.dims[d], used)) continue;
    want_i.dims[static_cast<size_t>(d)] = out.dims[static_cast<size_t>(d)] = a;
    used |= 1u << a;
  }
  for (int d = k; d < xs.rank; ++d) {
    const int a = x.dims[static_cast<size_t>(d)];
    if (!usable(q, a, xs.dims[d], used | x.partial)) continue;
    want_x.dims[static_cast<size_t>(d)] = out.dims[static_cast<size_t>(lead + d - k)] = a;
    used |= 1u << a;
  }
  want_x.partial = out.partial = kept_partial(q, 0, used);
  p.in = {want_x, want_i};
  p.out = {out};
  return true;
}

// gather_elements: y[p] = x[p with p[axis] = indices[p]], y has indices'
// shape. A dim other than axis splits x, indices and y together when x and
// indices have the same size there (their blocks then line up); along axis
// only the indices (and y) split, x stays whole (any index may select any
// entry).
bool shard_gather_elements(const ShardQuery& q, ShardPlan& p) {
  const Shape &xs = q.in[0].shape, &is = q.in[1].shape;
  const int64_t ax = q.attrs->get_int("axis");
  if (xs.rank == 0 || ax < 0 || ax >= xs.rank) return false;
  const TensorLayout x = placed(q, 0), idx = placed(q, 1);
  TensorLayout want_x = TensorLayout::replicated(xs.rank), want_i = TensorLayout::replicated(is.rank);
  uint32_t used = 0;
  for (int d = 0; d < is.rank; ++d) {
    const size_t u = static_cast<size_t>(d);
    if (d == ax) {
      if (usable(q, idx.dims[u], is.dims[d], used)) {
        want_i.dims[u] = idx.dims[u];
        used |= 1u << idx.dims[u];
      }
      continue;
    }
    if (is.dims[d] != xs.dims[d]) continue;
    for (int a : {idx.dims[u], x.dims[u]})
      if (usable(q, a, is.dims[d], used | x.partial)) {
        want_i.dims[u] = want_x.dims[u] = a;
        used |= 1u << a;
        break;
      }
  }
  TensorLayout out = want_i;
  want_x.partial = out.partial = kept_partial(q, 0, used);
  p.in = {want_x, want_i};
  p.out = {out};
  return true;
}

// scatter_add(x, indices, updates): y = x plus each update added at its
// index along axis. Two splits, both local:
//  - a dim other than axis where x, indices and updates have the same size
//    splits all three and y (each rank scatters into its own block);
//  - indices and updates split along axis (the tokens: the embedding's
//    gradient under data parallelism) make y a partial sum over that mesh
//    axis: each rank scatters its own updates, and the sum over the ranks
//    adds them all. x is then asked as a partial sum too (the pass keeps it
//    on one coordinate and zeros elsewhere), so it is counted once.
// Partial sums of x or updates pass through the same way on free axes.
// Bool data (added as "or") takes no partial sums.
bool shard_scatter_add(const ShardQuery& q, ShardPlan& p) {
  const Shape &xs = q.in[0].shape, &is = q.in[1].shape, &us = q.in[2].shape;
  const int64_t ax = q.attrs->get_int("axis");
  if (xs.rank == 0 || ax < 0 || ax >= xs.rank) return false;
  const TensorLayout x = placed(q, 0), idx = placed(q, 1), upd = placed(q, 2);
  const bool sums = q.in[0].dtype != SPORA_DTYPE_BOOL;
  TensorLayout want_x = TensorLayout::replicated(xs.rank), want_i = TensorLayout::replicated(is.rank);
  uint32_t used = 0;
  const uint32_t had = sums ? (x.partial | upd.partial) : 0;
  for (int d = 0; d < xs.rank; ++d) {
    const size_t u = static_cast<size_t>(d);
    if (d == ax || is.dims[d] != xs.dims[d] || us.dims[d] != xs.dims[d]) continue;
    for (int a : {x.dims[u], upd.dims[u], idx.dims[u]})
      if (usable(q, a, xs.dims[d], used | had)) {
        want_x.dims[u] = want_i.dims[u] = a;
        used |= 1u << a;
        break;
      }
  }
  uint32_t tokens = 0;
  const size_t axu = static_cast<size_t>(ax);
  if (sums && is.dims[ax] == us.dims[ax])
    for (int a : {upd.dims[axu], idx.dims[axu]})
      if (usable(q, a, is.dims[ax], used | had)) {
        want_i.dims[axu] = a;
        tokens = 1u << a;
        used |= tokens;
        break;
      }
  const uint32_t keep = had & ~used;
  TensorLayout want_u = want_i;
  want_u.partial = keep;
  want_x.partial = keep | tokens;
  TensorLayout out = want_x;
  p.in = {want_x, want_i, want_u};
  p.out = {out};
  return true;
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  const AttrSpec axis{"axis", AttrType::kInt, false, AttrValue::of_int(0)};
  // Only the data inputs (typed) follow the dtype list; infer checks indices.
  auto def = [](const char* name, std::vector<std::string> inputs, std::vector<AttrSpec> attrs, InferFn infer,
                const char* doc, std::vector<int> typed, const Rules& rules) {
    OpDef d;
    d.name = name;
    d.inputs = std::move(inputs);
    d.outputs = {"y"};
    d.attrs = std::move(attrs);
    d.dtypes = kAll;
    d.infer = infer;
    d.doc = doc;
    d.typed_inputs = std::move(typed);
    rules.apply(d);
    return d;
  };
  r.add(def("gather", {"x", "indices"}, {axis}, infer_gather,
            "numpy take: y = x[..., indices, ...] with indices of any shape replacing dim axis", {0},
            {gather_bp, nullptr, true, shard_take}));
  r.add(def("embedding", {"weight", "ids"}, {}, infer_embedding,
            "rows of weight (vocabulary, dim) for ids of any shape: y has shape ids.shape + (dim,)", {0},
            {embedding_bp, nullptr, true, shard_embedding}));
  r.add(def("index_select", {"x", "index"}, {axis}, infer_index_select, "the entries of x at a 1-D index along axis",
            {0}, {gather_bp, nullptr, true, shard_take}));
  r.add(def("gather_nd", {"x", "indices"}, {}, infer_gather_nd,
            "y[i...] = x[indices[i..., :]] (TF GatherNd): the last dim of indices indexes x's leading dims", {0},
            {gather_nd_bp, nullptr, true, shard_gather_nd}));
  r.add(def("gather_elements", {"x", "indices"}, {axis}, infer_gather_elements,
            "y[p] = x[p with p[axis] = indices[p]] (torch.gather, MindSpore GatherD): indices has x's rank, is no "
            "larger than x outside axis, and gives y its shape; out-of-range indices select zeros",
            {0}, {gather_elements_bp, nullptr, true, shard_gather_elements}));
  r.add(def("scatter_add", {"x", "indices", "updates"}, {axis}, infer_scatter_add,
            "a copy of x with updates added at indices along axis (torch scatter_add; out-of-range indices are "
            "skipped)",
            {0, 2}, {scatter_add_bp, nullptr, true, shard_scatter_add}));
  OpDef one_hot = def("one_hot", {"indices"},
                      {{"depth", AttrType::kInt, true, {}},
                       {"on_value", AttrType::kFloat, false, AttrValue::of_float(1)},
                       {"off_value", AttrType::kFloat, false, AttrValue::of_float(0)},
                       {"dtype", AttrType::kString, false, AttrValue::of_string("f32")}},
                      infer_one_hot,
                      "y[..., j] = on_value if indices[...] == j else off_value; shape indices.shape + (depth,); "
                      "dtype names the output's",
                      {}, rules::kNoGradient);
  one_hot.dtypes = {SPORA_DTYPE_I32, SPORA_DTYPE_I64};
  one_hot.sharding = shard_one_hot;
  r.add(std::move(one_hot));
}

SPORA_OP_FAMILY(register_indexing_ops);

}  // namespace spora
