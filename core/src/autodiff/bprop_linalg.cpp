// Gradient rules of matmul and linear.
#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

Value matmul(GradBuilder& b, Value x, Value y, bool ta, bool tb) {
  Attrs a;
  a.set("transpose_a", AttrValue::of_bool(ta));
  a.set("transpose_b", AttrValue::of_bool(tb));
  return b.op("matmul", {x, y}, a);
}

// C = A' B' with A' = ta ? A^T : A, B' = tb ? B^T : B (over the last two
// dims, batch dims broadcasting). 1-D operands are promoted as in the
// forward op and the results reshaped back.
V matmul_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape sa = b.meta(x[0]).shape, sb = b.meta(x[1]).shape;
  const bool ta = n.attrs.get_bool("transpose_a") && sa.rank >= 2;
  const bool tb = n.attrs.get_bool("transpose_b") && sb.rank >= 2;
  Value a = x[0], bb = x[1], g = dy[0];
  Shape a2 = sa, b2 = sb, g2 = b.meta(g).shape;
  if (sa.rank == 1) {
    a2 = pad_to_rank(sa, 2);
    a = b.reshape(a, a2);
    Shape gs;  // insert the row dim removed from the result
    for (int i = 0; i < g2.rank - (sb.rank == 1 ? 0 : 1); ++i) gs.push_back(g2.dims[i]);
    gs.push_back(1);
    for (int i = g2.rank - (sb.rank == 1 ? 0 : 1); i < g2.rank; ++i) gs.push_back(g2.dims[i]);
    g2 = gs;
  }
  if (sb.rank == 1) {
    b2 = sb;
    b2.push_back(1);
    bb = b.reshape(bb, b2);
    g2.push_back(1);
  }
  g = b.reshape(g, g2);
  const Value da = ta ? matmul(b, bb, g, tb, true) : matmul(b, g, bb, false, !tb);
  const Value db = tb ? matmul(b, g, a, true, ta) : matmul(b, a, g, !ta, false);
  return {b.reshape(b.sum_to(da, a2), sa), b.reshape(b.sum_to(db, b2), sb)};
}

// y = x W^T + b with x [..., K], W [N, K].
V linear_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Shape sx = b.meta(x[0]).shape, sw = b.meta(x[1]).shape;
  const int64_t k = sw.dims[1], nout = sw.dims[0];
  Shape flat_x, flat_y;
  flat_x.push_back(sx.numel() / (k ? k : 1));
  if (k == 0) {
    int64_t m = 1;
    for (int i = 0; i + 1 < sx.rank; ++i) m *= sx.dims[i];
    flat_x.dims[0] = m;
  }
  flat_x.push_back(k);
  flat_y.push_back(flat_x.dims[0]);
  flat_y.push_back(nout);
  const Value g = b.reshape(dy[0], flat_y), x2 = b.reshape(x[0], flat_x);
  const Value dx = b.reshape(matmul(b, g, x[1], false, false), sx);
  const Value dw = matmul(b, g, x2, true, false);
  Attrs s;
  s.set("axes", AttrValue::of_ints({0}));
  const Value db = b.op("sum", {g}, s);
  return {dx, dw, db};
}

void register_rules() {
  register_bprop("matmul", matmul_bp);
  register_bprop("linear", linear_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
