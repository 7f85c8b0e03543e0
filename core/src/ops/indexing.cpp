// Indexing ops: gather (numpy take), embedding, index_select, gather_nd,
// scatter_add, one_hot. Index inputs are i32 or i64.
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
//   scatter_add: x, indices and updates share one rank r >= 1 (rank 0 is
//     seen as (1,)); indices.dims[d] <= updates.dims[d] for every d and
//     <= x.dims[d] for d != axis; attrs.axis is non-negative. y = x, then for
//     every position p of indices, y[p with p[axis] = idx[p]] += updates[p].
//     Updates are applied in row-major order of p; bool adds as "or",
//     integers wrap.
//   one_hot: indices are (m,), the output (m, depth) of dtype attrs.dtype;
//     attrs.on_value and off_value are representable in it.
#include <cmath>

#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

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

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  const AttrSpec axis{"axis", AttrType::kInt, false, AttrValue::of_int(0)};
  // Only the data inputs (typed) follow the dtype list; infer checks indices.
  auto def = [](const char* name, std::vector<std::string> inputs, std::vector<AttrSpec> attrs, InferFn infer,
                const char* doc, std::vector<int> typed) {
    OpDef d;
    d.name = name;
    d.inputs = std::move(inputs);
    d.outputs = {"y"};
    d.attrs = std::move(attrs);
    d.dtypes = kAll;
    d.infer = infer;
    d.doc = doc;
    d.typed_inputs = std::move(typed);
    return d;
  };
  r.add(def("gather", {"x", "indices"}, {axis}, infer_gather,
            "numpy take: y = x[..., indices, ...] with indices of any shape replacing dim axis", {0}));
  r.add(def("embedding", {"weight", "ids"}, {}, infer_embedding,
            "rows of weight (vocabulary, dim) for ids of any shape: y has shape ids.shape + (dim,)", {0}));
  r.add(def("index_select", {"x", "index"}, {axis}, infer_index_select, "the entries of x at a 1-D index along axis",
            {0}));
  r.add(def("gather_nd", {"x", "indices"}, {}, infer_gather_nd,
            "y[i...] = x[indices[i..., :]] (TF GatherNd): the last dim of indices indexes x's leading dims", {0}));
  r.add(def("scatter_add", {"x", "indices", "updates"}, {axis}, infer_scatter_add,
            "a copy of x with updates added at indices along axis (torch scatter_add; out-of-range indices are "
            "skipped)",
            {0, 2}));
  OpDef one_hot = def("one_hot", {"indices"},
                      {{"depth", AttrType::kInt, true, {}},
                       {"on_value", AttrType::kFloat, false, AttrValue::of_float(1)},
                       {"off_value", AttrType::kFloat, false, AttrValue::of_float(0)},
                       {"dtype", AttrType::kString, false, AttrValue::of_string("f32")}},
                      infer_one_hot,
                      "y[..., j] = on_value if indices[...] == j else off_value; shape indices.shape + (depth,); "
                      "dtype names the output's",
                      {});
  one_hot.dtypes = {SPORA_DTYPE_I32, SPORA_DTYPE_I64};
  r.add(std::move(one_hot));
}

SPORA_OP_FAMILY(register_indexing_ops);

}  // namespace spora
