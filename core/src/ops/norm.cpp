// Normalisation: batch_norm, layer_norm, group_norm and their gradients.
//
// Contract with kernels (what inference hands them):
//  - Every op normalises groups of elements by their mean and
//    invstd = 1 / sqrt(biased variance + eps), then applies gamma and beta.
//    Inputs arrive flattened so kernels see few, fixed ranks:
//      batch_norm:  x (N, C, S), gamma/beta/running_mean/running_var (C,);
//                   one group per channel over N and S
//      layer_norm:  x (R, D), gamma/beta (D,); one group per row
//      group_norm:  x (N, C, S), gamma/beta (C,), attr groups G dividing C;
//                   one group per (n, g) over C/G channels and S
//    where S is the product of the dims after C (1 when there are none), R
//    the product of the leading dims and D of the last normalized_ndim ones.
//    The user-visible result keeps x's shape.
//  - Saved statistics (mean, invstd) are kernel outputs of shape (C,) for
//    batch_norm, (R,) for layer_norm (user-visible: x's leading dims) and
//    (N, G) for group_norm. Their dtype is the "stats dtype": f32 for f16 and
//    bf16 inputs (precision the backward pass needs), else x's dtype. Every
//    other output has x's dtype; f16/bf16 compute in f32.
//  - batch_norm outputs y, batch_mean, batch_invstd, new_running_mean,
//    new_running_var (new tensors, never in place), PyTorch semantics: in
//    training the batch statistics normalise and the running ones move by
//    momentum, the variance unbiased (times M/(M-1), M = N*S); an empty batch
//    (M = 0) leaves the running statistics unchanged and its batch statistics
//    are NaN. In inference batch_mean/batch_invstd come from the running
//    statistics, which pass through unchanged. Attrs training (bool),
//    momentum in [0, 1] and eps >= 0 are checked here.
//  - *_grad(x, dy, gamma, mean, invstd) -> dx, dgamma, dbeta use the
//    training-mode formula (statistics depend on x); mean and invstd are the
//    forward op's saved outputs, in the stats dtype, with the kernel shapes
//    above (group_norm_grad: (N, G), layer_norm_grad: (R,)).
#include <cmath>
#include <limits>

#include "ir/op.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

DType stats_dtype(DType x) { return x == SPORA_DTYPE_F16 || x == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : x; }

// Product of dims [from, to); dims whose total is 0 can still overflow here.
int64_t dims_product(const OpDef& op, const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) {
    if (s.dims[i] != 0 && p > std::numeric_limits<int64_t>::max() / s.dims[i])
      fail(Code::kInvalidArgument, "[{}] dims {}..{} of shape {} have more elements than fit in int64", op.name, from,
           to - 1, s.str());
    p *= s.dims[i];
  }
  return p;
}

Shape shape_of(std::initializer_list<int64_t> dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(d);
  return s;
}

void expect_shape(const OpDef& op, int input, const TensorMeta* in, const Shape& want) {
  if (in[input].shape != want)
    fail(Code::kInvalidArgument, "[{}] {} must have shape {} for input shape {}, got {}", op.name, op.inputs[input],
         want.str(), in[0].shape.str(), in[input].shape.str());
}

void expect_stats(const OpDef& op, int input, const TensorMeta* in, const Shape& want) {
  const DType st = stats_dtype(in[0].dtype);
  if (in[input].dtype != st)
    fail(Code::kInvalidArgument, "[{}] {} must be {} for {} input (the dtype the forward op saves), got {}", op.name,
         op.inputs[input], dtype_name(st), dtype_name(in[0].dtype), dtype_name(in[input].dtype));
  expect_shape(op, input, in, want);
}

void check_eps(const OpDef& op, const OpCall& call) {
  const double eps = call.attrs.get_float("eps");
  if (!std::isfinite(eps) || eps < 0)
    fail(Code::kInvalidArgument, "[{}] eps must be a finite number >= 0, got {}", op.name, eps);
}

// x as (N, C, S) for the channel-major ops.
Shape ncs(const OpDef& op, const Shape& x) {
  if (x.rank < 2)
    fail(Code::kInvalidArgument, "[{}] input must have shape (N, C, ...) with rank >= 2, got {}", op.name, x.str());
  dims_product(op, x, 1, x.rank);  // kernels' offsets use C * S, which a zero N lets overflow
  return shape_of({x[0], x[1], dims_product(op, x, 2, x.rank)});
}

void infer_batch_norm(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape k = ncs(op, in[0].shape);
  const Shape c = shape_of({k[1]});
  for (int i = 1; i < 5; ++i) expect_shape(op, i, in, c);
  check_eps(op, call);
  const double momentum = call.attrs.get_float("momentum");
  if (!(momentum >= 0 && momentum <= 1))
    fail(Code::kInvalidArgument, "[{}] momentum must be in [0, 1], got {}", op.name, momentum);
  if (call.attrs.get_bool("training") && k[1] > 0 && k[0] * k[2] == 1)
    fail(Code::kInvalidArgument,
         "[{}] training needs more than one value per channel, got input shape {} (use training=false, or a "
         "larger batch)",
         op.name, in[0].shape.str());
  const DType dt = in[0].dtype;
  call.in[0].shape = k;
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  for (int i = 1; i < 5; ++i) {
    call.out[i] = {i < 3 ? stats_dtype(dt) : dt, c};
    call.result[i] = c;
  }
}

void infer_batch_norm_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape k = ncs(op, in[0].shape);
  const Shape c = shape_of({k[1]});
  expect_shape(op, 1, in, in[0].shape);
  expect_shape(op, 2, in, c);
  expect_stats(op, 3, in, c);
  expect_stats(op, 4, in, c);
  const DType dt = in[0].dtype;
  call.in[0].shape = call.in[1].shape = k;
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  call.out[1] = call.out[2] = {dt, c};
  call.result[1] = call.result[2] = c;
}

// Splits x at its last normalized_ndim dims: (R, D) and the leading shape.
Shape layer_split(const OpDef& op, const TensorMeta* in, const OpCall& call, Shape* lead, Shape* tail) {
  const Shape& x = in[0].shape;
  const int64_t k = call.attrs.get_int("normalized_ndim");
  if (k < 1 || k > x.rank)
    fail(Code::kInvalidArgument, "[{}] normalized_ndim must be in 1..{} (the input's rank) for input shape {}, got {}",
         op.name, x.rank, x.str(), k);
  const int split = x.rank - static_cast<int>(k);
  for (int i = 0; i < x.rank; ++i) (i < split ? lead : tail)->push_back(x[i]);
  return shape_of({dims_product(op, x, 0, split), dims_product(op, x, split, x.rank)});
}

void infer_layer_norm(const OpDef& op, const TensorMeta* in, OpCall& call) {
  Shape lead, tail;
  const Shape k = layer_split(op, in, call, &lead, &tail);
  expect_shape(op, 1, in, tail);
  expect_shape(op, 2, in, tail);
  check_eps(op, call);
  const DType dt = in[0].dtype;
  call.in[0].shape = k;
  call.in[1].shape = call.in[2].shape = shape_of({k[1]});
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  call.out[1] = call.out[2] = {stats_dtype(dt), shape_of({k[0]})};
  call.result[1] = call.result[2] = lead;
}

void infer_layer_norm_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  Shape lead, tail;
  const Shape k = layer_split(op, in, call, &lead, &tail);
  expect_shape(op, 1, in, in[0].shape);
  expect_shape(op, 2, in, tail);
  expect_stats(op, 3, in, lead);
  expect_stats(op, 4, in, lead);
  const DType dt = in[0].dtype;
  call.in[0].shape = call.in[1].shape = k;
  call.in[2].shape = shape_of({k[1]});
  call.in[3].shape = call.in[4].shape = shape_of({k[0]});
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  call.out[1] = call.out[2] = {dt, shape_of({k[1]})};
  call.result[1] = call.result[2] = tail;
}

int64_t groups_of(const OpDef& op, const OpCall& call, int64_t channels) {
  const int64_t g = call.attrs.get_int("groups");
  if (g < 1) fail(Code::kInvalidArgument, "[{}] groups must be positive, got {}", op.name, g);
  if (channels % g != 0)
    fail(Code::kInvalidArgument, "[{}] groups ({}) must divide the number of channels ({})", op.name, g, channels);
  return g;
}

void infer_group_norm(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape k = ncs(op, in[0].shape);
  const int64_t g = groups_of(op, call, k[1]);
  expect_shape(op, 1, in, shape_of({k[1]}));
  expect_shape(op, 2, in, shape_of({k[1]}));
  check_eps(op, call);
  const DType dt = in[0].dtype;
  call.in[0].shape = k;
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  call.out[1] = call.out[2] = {stats_dtype(dt), shape_of({k[0], g})};
  call.result[1] = call.result[2] = call.out[1].shape;
}

void infer_group_norm_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape k = ncs(op, in[0].shape);
  const int64_t g = groups_of(op, call, k[1]);
  expect_shape(op, 1, in, in[0].shape);
  expect_shape(op, 2, in, shape_of({k[1]}));
  expect_stats(op, 3, in, shape_of({k[0], g}));
  expect_stats(op, 4, in, shape_of({k[0], g}));
  const DType dt = in[0].dtype;
  call.in[0].shape = call.in[1].shape = k;
  call.out[0] = {dt, k};
  call.result[0] = in[0].shape;
  call.out[1] = call.out[2] = {dt, shape_of({k[1]})};
  call.result[1] = call.result[2] = call.out[1].shape;
}

double operand_bytes(const OpCall& c) {
  double b = 0;
  for (int i = 0; i < c.num_inputs; ++i)
    b += static_cast<double>(c.in[i].shape.numel()) * static_cast<double>(dtype_size(c.in[i].dtype));
  for (int i = 0; i < c.num_outputs; ++i)
    b += static_cast<double>(c.out[i].shape.numel()) * static_cast<double>(dtype_size(c.out[i].dtype));
  return b;
}

// Two passes for the statistics, one to normalise: ~8 flops per element;
// the backward pass reads x and dy twice: ~12.
Cost forward_cost(const OpCall& c) { return Cost{8.0 * static_cast<double>(c.in[0].shape.numel()), operand_bytes(c)}; }
Cost backward_cost(const OpCall& c) {
  return Cost{12.0 * static_cast<double>(c.in[0].shape.numel()), operand_bytes(c)};
}

AttrSpec eps_attr() { return {"eps", AttrType::kFloat, false, AttrValue::of_float(1e-5)}; }

void add(OpRegistry& r, const char* name, std::vector<std::string> inputs, std::vector<std::string> outputs,
         std::vector<AttrSpec> attrs, InferFn infer, const char* doc, std::vector<int> typed, CostFn cost) {
  r.add(OpDef{name, std::move(inputs), std::move(outputs), std::move(attrs), kFloat, infer, doc, std::move(typed),
              false, false, cost});
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  const std::vector<std::string> grad_in = {"x", "dy", "gamma", "mean", "invstd"};
  const std::vector<std::string> grad_out = {"dx", "dgamma", "dbeta"};
  const std::vector<int> grad_typed = {0, 1, 2};  // mean and invstd are in the stats dtype
  add(r, "batch_norm", {"x", "gamma", "beta", "running_mean", "running_var"},
      {"y", "batch_mean", "batch_invstd", "new_running_mean", "new_running_var"},
      {{"training", AttrType::kBool, true, {}},
       {"momentum", AttrType::kFloat, false, AttrValue::of_float(0.1)},
       eps_attr()},
      infer_batch_norm,
      "per-channel normalisation of x (N, C, ...) with batch (training) or running statistics; saved "
      "mean/invstd are f32 for f16/bf16 x",
      {}, forward_cost);
  add(r, "batch_norm_grad", {"x", "dy", "gamma", "batch_mean", "batch_invstd"}, grad_out, {},
      infer_batch_norm_grad, "gradient of training-mode batch_norm from its saved batch_mean/batch_invstd", grad_typed,
      backward_cost);
  add(r, "layer_norm", {"x", "gamma", "beta"}, {"y", "mean", "invstd"},
      {{"normalized_ndim", AttrType::kInt, false, AttrValue::of_int(1)}, eps_attr()}, infer_layer_norm,
      "normalisation over the last normalized_ndim dims; mean/invstd have x's leading dims (f32 for f16/bf16 x)",
      {}, forward_cost);
  add(r, "layer_norm_grad", grad_in, grad_out, {{"normalized_ndim", AttrType::kInt, false, AttrValue::of_int(1)}},
      infer_layer_norm_grad, "gradient of layer_norm from its saved mean/invstd", grad_typed, backward_cost);
  add(r, "group_norm", {"x", "gamma", "beta"}, {"y", "mean", "invstd"},
      {{"groups", AttrType::kInt, true, {}}, eps_attr()}, infer_group_norm,
      "normalisation of x (N, C, ...) over groups of C/groups channels; mean/invstd are (N, groups)", {},
      forward_cost);
  add(r, "group_norm_grad", grad_in, grad_out, {{"groups", AttrType::kInt, true, {}}}, infer_group_norm_grad,
      "gradient of group_norm from its saved mean/invstd", grad_typed, backward_cost);
}

SPORA_OP_FAMILY(register_norm_ops);

}  // namespace spora
