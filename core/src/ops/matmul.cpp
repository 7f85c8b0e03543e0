// matmul with numpy semantics (1-D promotion, broadcast batch dims) and
// optional transposes of the last two dims of either operand; linear
// (x @ weight^T + bias). Each registered with its gradient rule (matmuls of
// the adjoint), linear with its decomposition.
#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_matmul(const OpDef& op, const TensorMeta* in, OpCall& call) {
  Shape a = in[0].shape, b = in[1].shape;
  const char* name = op.name.c_str();
  if (a.rank == 0 || b.rank == 0)
    fail(Code::kInvalidArgument, "[{}] operands must have rank >= 1, got shapes {} and {}", name, a.str(), b.str());
  const bool ta = call.attrs.get_bool("transpose_a") && a.rank >= 2;
  const bool tb = call.attrs.get_bool("transpose_b") && b.rank >= 2;
  // A 1-D operand becomes a row (a) or a column (b), removed from the result.
  const bool a_vec = a.rank == 1, b_vec = b.rank == 1;
  if (a_vec) a = pad_to_rank(a, 2);
  if (b_vec) {
    b.push_back(1);
  }
  const int64_t m = ta ? a[a.rank - 1] : a[a.rank - 2];
  const int64_t ka = ta ? a[a.rank - 2] : a[a.rank - 1];
  const int64_t kb = tb ? b[b.rank - 1] : b[b.rank - 2];
  const int64_t n = tb ? b[b.rank - 2] : b[b.rank - 1];
  if (ka != kb) {
    fail(Code::kInvalidArgument, "[{}] shapes {}{} and {}{} do not contract ({} vs {})", name, in[0].shape.str(),
         ta ? "^T" : "", in[1].shape.str(), tb ? "^T" : "", ka, kb);
  }
  // Batch dims broadcast like numpy.
  Shape ba, bb;
  ba.rank = a.rank - 2;
  bb.rank = b.rank - 2;
  for (int i = 0; i < ba.rank; ++i) ba.dims[i] = a[i];
  for (int i = 0; i < bb.rank; ++i) bb.dims[i] = b[i];
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb, name);
  } catch (const Error&) {
    fail(Code::kInvalidArgument, "[{}] batch dimensions of {} and {} do not broadcast", name, in[0].shape.str(),
         in[1].shape.str());
  }
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  call.in[0].shape = pad_to_rank(a, out.rank);
  call.in[1].shape = pad_to_rank(b, out.rank);
  call.out[0] = {in[0].dtype, out};
  call.attrs.set("transpose_a", AttrValue::of_bool(ta));
  call.attrs.set("transpose_b", AttrValue::of_bool(tb));
  // The user-visible result drops the promoted vector dims.
  Shape res = batch;
  if (!a_vec) res.push_back(m);
  if (!b_vec) res.push_back(n);
  call.result[0] = res;
}

Cost matmul_cost(const OpCall& c) {
  const Shape& y = c.out[0].shape;
  const Shape& a = c.in[0].shape;
  const bool ta = c.attrs.get_bool("transpose_a");
  const int64_t k = ta ? a[a.rank - 2] : a[a.rank - 1];
  Cost cost;
  cost.flops = 2.0 * static_cast<double>(y.numel()) * static_cast<double>(k);
  const double es = static_cast<double>(dtype_size(c.out[0].dtype));
  cost.bytes = es * static_cast<double>(c.in[0].shape.numel() + c.in[1].shape.numel() + y.numel());
  return cost;
}

// linear(x [..., in], w [out, in], b [out]) = x @ w^T + b. Kernels see x
// flattened to [M, in] and y as [M, out]; the user gets [..., out].
void infer_linear(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape &x = in[0].shape, &w = in[1].shape, &b = in[2].shape;
  const char* name = op.name.c_str();
  if (x.rank < 1) fail(Code::kInvalidArgument, "[{}] input must have rank >= 1, got shape {}", name, x.str());
  if (w.rank != 2) fail(Code::kInvalidArgument, "[{}] weight must be [out, in], got shape {}", name, w.str());
  if (x[x.rank - 1] != w[1])
    fail(Code::kInvalidArgument, "[{}] input features {} do not match weight shape {} (expected [out, {}])", name,
         x[x.rank - 1], w.str(), x[x.rank - 1]);
  if (b.rank != 1 || b[0] != w[0])
    fail(Code::kInvalidArgument, "[{}] bias shape {} does not match {} output features", name, b.str(), w[0]);
  int64_t m = 1;
  for (int i = 0; i + 1 < x.rank; ++i) m *= x[i];
  Shape flat;
  flat.push_back(m);
  flat.push_back(x[x.rank - 1]);
  Shape out2;
  out2.push_back(flat[0]);
  out2.push_back(w[0]);
  Shape res = x;
  res.dims[res.rank - 1] = w[0];
  call.in[0].shape = flat;
  call.out[0] = {in[0].dtype, out2};
  call.result[0] = res;
}

Cost linear_cost(const OpCall& c) {
  Cost cost;
  const double m = static_cast<double>(c.in[0].shape[0]), k = static_cast<double>(c.in[0].shape[1]),
               n = static_cast<double>(c.in[1].shape[0]);
  cost.flops = 2 * m * n * k + m * n;
  cost.bytes = static_cast<double>(dtype_size(c.out[0].dtype)) * (m * k + n * k + n + m * n);
  return cost;
}

// ---- gradient rules and decomposition ------------------------------------------

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

// A matmul with the given transposes.
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

// x @ w^T + b
V linear_decompose(GradBuilder& b, const V& x, const Attrs&) {
  Attrs t;
  t.set("transpose_b", AttrValue::of_bool(true));
  return {b.op("add", {b.op("matmul", {x[0], x[1]}, t), x[2]})};
}

// Sharding (ir/sharding.h). For a [.., m, k] x [k, n] product: batch and m
// follow a, n follows b, and a split contraction dim k leaves every device
// a partial sum over k's mesh axis (Megatron's row-parallel layer). k is
// split where both inputs agree, or where one is split and the other is
// whole or unplaced (that one is sliced locally, no communication); split
// differently on both, it is gathered. Each mesh axis serves one dim.
// `with_bias` (linear): the bias is added on every device, so k stays whole
// and nothing may be partial.
bool shard_product(const ShardQuery& q, ShardPlan& p, bool ta, bool tb, bool with_bias) {
  const int ra = q.in[0].shape.rank, rb = q.in[1].shape.rank;
  if (ra < 2 || rb < 2 || (rb != 2 && rb != ra)) return false;
  if (rb == ra)
    for (int d = 0; d < ra - 2; ++d)
      if (q.in[0].shape.dims[d] != q.in[1].shape.dims[d]) return false;  // broadcast batch dims: replicate
  const TensorLayout &la = q.in_layouts[0], &lb = q.in_layouts[1];
  const int am = ta ? ra - 1 : ra - 2, ak = ta ? ra - 2 : ra - 1;
  const int bk = tb ? rb - 1 : rb - 2, bn = tb ? rb - 2 : rb - 1;
  auto axis_of = [](const TensorLayout& l, int d) { return l.free ? kReplicated : l.dims[static_cast<size_t>(d)]; };
  const int64_t ksize = q.in[0].shape.dims[ak];
  uint32_t used = 0;
  auto take = [&](int a, int64_t size) {
    if (a == kReplicated || (used & (1u << a)) || !shard::divides(q, size, a)) return kReplicated;
    used |= 1u << a;
    return a;
  };
  int k = kReplicated;
  if (!with_bias) {
    const int ka = axis_of(la, ak), kb = axis_of(lb, bk);
    if (ka == kb || kb == kReplicated) k = ka;
    else if (ka == kReplicated) k = kb;
    k = take(k, ksize);
  }
  // At most one operand's partial sum survives (the product is bilinear).
  uint32_t keep = 0;
  const uint32_t pa = la.free ? 0 : la.partial, pb = lb.free ? 0 : lb.partial;
  if (!with_bias && (pa == 0) != (pb == 0) && ((pa | pb) & used) == 0) keep = pa | pb;
  used |= keep;
  const int ro = ra;
  TensorLayout out = TensorLayout::replicated(ro);
  TensorLayout wa = TensorLayout::replicated(ra), wb = TensorLayout::replicated(rb);
  for (int d = 0; d < ra - 2; ++d) {
    int a = axis_of(la, d);
    if (a == kReplicated && rb == ra) a = axis_of(lb, d);
    a = take(a, q.in[0].shape.dims[d]);
    out.dims[static_cast<size_t>(d)] = wa.dims[static_cast<size_t>(d)] = a;
    if (rb == ra) wb.dims[static_cast<size_t>(d)] = a;
  }
  const int m = take(axis_of(la, am), q.in[0].shape.dims[am]);
  const int n = take(axis_of(lb, bn), q.in[1].shape.dims[bn]);
  wa.dims[static_cast<size_t>(am)] = m;
  wa.dims[static_cast<size_t>(ak)] = k;
  wb.dims[static_cast<size_t>(bk)] = k;
  wb.dims[static_cast<size_t>(bn)] = n;
  wa.partial = pa & keep;
  wb.partial = pb & keep;
  out.dims[static_cast<size_t>(ro - 2)] = m;
  out.dims[static_cast<size_t>(ro - 1)] = n;
  out.partial = keep | (k == kReplicated ? 0u : 1u << k);
  p.in = {wa, wb};
  if (with_bias) {
    TensorLayout wbias = TensorLayout::replicated(1);
    wbias.dims[0] = n;
    p.in.push_back(wbias);
  }
  p.out = {out};
  return true;
}

bool shard_matmul(const ShardQuery& q, ShardPlan& p) {
  return shard_product(q, p, q.attrs->get_bool("transpose_a"), q.attrs->get_bool("transpose_b"), false);
}

// linear(x, weight [out, in], bias) = x @ weight^T + bias.
bool shard_linear(const ShardQuery& q, ShardPlan& p) {
  if (q.in[1].shape.rank != 2 || q.in[2].shape.rank != 1) return false;
  return shard_product(q, p, false, true, true);
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  OpDef mm{"matmul",
            {"a", "b"},
            {"y"},
            {{"transpose_a", AttrType::kBool, false, AttrValue::of_bool(false)},
             {"transpose_b", AttrType::kBool, false, AttrValue::of_bool(false)}},
            {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
            infer_matmul,
            "matrix product over the last two dims; batch dims broadcast",
            {},
            false,
            false,
            matmul_cost};
  mm.bprop = matmul_bp;
  mm.sharding = shard_matmul;
  r.add(std::move(mm));
  OpDef lin{"linear",
            {"x", "weight", "bias"},
            {"y"},
            {},
            {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
            infer_linear,
            "x @ weight^T + bias with weight [out, in] (a Dense layer); leading dims of x are kept",
            {},
            false,
            false,
            linear_cost};
  lin.bprop = linear_bp;
  lin.decompose = linear_decompose;
  lin.sharding = shard_linear;
  r.add(std::move(lin));
}

SPORA_OP_FAMILY(register_matmul_ops);

}  // namespace spora
