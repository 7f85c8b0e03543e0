// Gradient rules of the indexing ops. Indices are not differentiable. The
// gathers' adjoint adds dy into zeros of x's shape at the gathered
// positions (scatter_add, which like the gathers wraps indices in [-n, n)
// and drops any other); scatter_add's adjoint for the updates gathers dy
// back from where each update went (gather_nd with full coordinates).
// one_hot is not differentiable (its input is integer).
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

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

void register_rules() {
  register_bprop("gather", gather_bp);
  register_bprop("index_select", gather_bp);
  register_bprop("embedding", embedding_bp);
  register_bprop("gather_nd", gather_nd_bp);
  register_bprop("scatter_add", scatter_add_bp);
  register_not_differentiable("one_hot");
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
