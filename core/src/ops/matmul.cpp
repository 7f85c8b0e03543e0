// matmul with numpy semantics (1-D promotion, broadcast batch dims) and
// optional transposes of the last two dims of either operand; linear
// (x @ weight^T + bias). Each registered with its gradient rule (matmuls of
// the adjoint), linear with its decomposition.
#include "ir/op.h"
#include "ops/rule_helpers.h"
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
  r.add(std::move(lin));
}

SPORA_OP_FAMILY(register_matmul_ops);

}  // namespace spora
