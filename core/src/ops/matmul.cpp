// matmul with numpy semantics (1-D promotion, broadcast batch dims) and
// optional transposes of the last two dims of either operand.
#include "ir/op.h"
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

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add(OpDef{"matmul",
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
              matmul_cost});
  r.add(OpDef{"linear",
              {"x", "weight", "bias"},
              {"y"},
              {},
              {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
              infer_linear,
              "x @ weight^T + bias with weight [out, in] (a Dense layer); leading dims of x are kept",
              {},
              false,
              false,
              linear_cost});
}

SPORA_OP_FAMILY(register_matmul_ops);

}  // namespace spora
