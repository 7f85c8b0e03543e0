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
//
// Gradient rules:
//  - batch_norm, layer_norm, group_norm use their *_grad ops for y's adjoint.
//    Every other float output is differentiable too and gets its exact
//    adjoint: the saved mean and invstd (functions of x in training), and
//    batch_norm's new running statistics ((1 - momentum) * running +
//    momentum * batch statistic, the variance unbiased), which also carry
//    gradient to the running-statistics inputs. In inference batch_norm is
//    an affine map of x with the running statistics, differentiated as such.
//  - batch_norm_grad, layer_norm_grad, group_norm_grad (mean and invstd
//    being independent inputs, as the ops define them): their formula is
//    rebuilt from basic ops in a scratch graph, differentiated there by the
//    same transform, and the gradient nodes copied in (rules::vjp_of).
#include <cmath>
#include <limits>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
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

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

// ---- gradient rules ------------------------------------------------------------

// How a normalisation groups x: x and dy are seen as `view`, statistics as
// `stats` (broadcasting against view), gamma as `param` (likewise); groups
// reduce over `axes` (`count` elements), gamma's gradient sums over
// `param_axes`.
struct NormView {
  Shape view, stats, param;
  std::vector<int64_t> axes, param_axes;
  double count = 1;
};

NormView batch_view(const Shape& x) {
  NormView v;
  const int64_t n = x.dims[0], c = x.dims[1], s = product(x, 2, x.rank);
  v.view = shape_of({n, c, s});
  v.stats = v.param = shape_of({1, c, 1});
  v.axes = v.param_axes = {0, 2};
  v.count = static_cast<double>(n) * static_cast<double>(s);
  return v;
}

NormView layer_view(const Shape& x, int64_t normalized_ndim) {
  NormView v;
  const int split = x.rank - static_cast<int>(normalized_ndim);
  const int64_t r = product(x, 0, split), d = product(x, split, x.rank);
  v.view = shape_of({r, d});
  v.stats = shape_of({r, 1});
  v.param = shape_of({1, d});
  v.axes = {1};
  v.param_axes = {0};
  v.count = static_cast<double>(d);
  return v;
}

NormView group_view(const Shape& x, int64_t groups) {
  NormView v;
  const int64_t n = x.dims[0], c = x.dims[1], s = product(x, 2, x.rank);
  v.view = shape_of({n, groups, c / groups, s});
  v.stats = shape_of({n, groups, 1, 1});
  v.param = shape_of({1, groups, c / groups, 1});
  v.axes = {2, 3};
  v.param_axes = {0, 3};
  v.count = static_cast<double>(c / groups) * static_cast<double>(s);
  return v;
}

// The *_grad formula: xh = (x - mean) * invstd, ga = dy * gamma,
// dx = invstd * (ga - mean(ga) - xh * mean(ga * xh)) over each group,
// dgamma = sum(dy * xh), dbeta = sum(dy) over the non-channel dims; in the
// statistics dtype, results in x's.
V norm_grad_formula(GradBuilder& b, const V& in, const NormView& v) {
  const TensorMeta xm = b.meta(in[0]);
  const Shape gamma_shape = b.meta(in[2]).shape;
  const DType cd = stats_dtype(xm.dtype);
  const Value x = cast(b, b.reshape(in[0], v.view), cd);
  const Value d = cast(b, b.reshape(in[1], v.view), cd);
  const Value gamma = cast(b, b.reshape(in[2], v.param), cd);
  const Value mean = cast(b, b.reshape(in[3], v.stats), cd);
  const Value invstd = cast(b, b.reshape(in[4], v.stats), cd);
  const Value xh = mul(b, sub(b, x, mean), invstd);
  const Value ga = mul(b, d, gamma);
  const Value n = k(b, v.count, x);
  const Value a = div(b, sum_axes(b, ga, v.axes, true), n);
  const Value c = div(b, sum_axes(b, mul(b, ga, xh), v.axes, true), n);
  const Value dx = mul(b, invstd, sub(b, sub(b, ga, a), mul(b, xh, c)));
  const Value dgamma = sum_axes(b, mul(b, d, xh), v.param_axes, false);
  const Value dbeta = sum_axes(b, d, v.param_axes, false);
  return {b.reshape(cast(b, dx, xm.dtype), xm.shape), b.reshape(cast(b, dgamma, xm.dtype), gamma_shape),
          b.reshape(cast(b, dbeta, xm.dtype), gamma_shape)};
}

V batch_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = batch_view(b.meta(x[0]).shape);
  return rules::vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
}

V layer_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = layer_view(b.meta(x[0]).shape, n.attrs.get_int("normalized_ndim"));
  return rules::vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
}

V group_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = group_view(b.meta(x[0]).shape, n.attrs.get_int("groups"));
  return rules::vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
}

// The adjoint of x through the statistics alone: mean = sum(x) / n and
// invstd = (sum((x - mean)^2) / n + eps)^-1/2. dmean and dvar (adjoint of
// the biased variance) are in the stats view; either may be missing.
// Returns dx in x's dtype and shape, or an invalid value.
Value through_stats(GradBuilder& b, Value x_in, Value mean, Value dmean, Value dvar, const NormView& v) {
  if (!dmean.valid() && !dvar.valid()) return Value{};
  const TensorMeta xm = b.meta(x_in);
  const DType cd = stats_dtype(xm.dtype);
  const Value n = b.scalar(v.count, cd);
  Value g;
  if (dmean.valid()) g = div(b, dmean, n);
  if (dvar.valid()) {
    const Value x = cast(b, b.reshape(x_in, v.view), cd);
    const Value centered = sub(b, x, b.reshape(mean, v.stats));
    g = add_opt(b, g, mul(b, centered, div(b, mul(b, dvar, b.scalar(2, cd)), n)));
  }
  if (b.meta(g).shape != v.view) {
    Attrs bc;
    bc.set("shape", AttrValue::of_ints(dims_of(v.view)));
    g = b.op("broadcast_to", {g}, bc);
  }
  return b.reshape(cast(b, g, xm.dtype), xm.shape);
}

// d invstd / d var = -1/2 invstd^3.
Value dvar_of_dinvstd(GradBuilder& b, Value dinvstd, Value invstd) {
  if (!dinvstd.valid()) return Value{};
  const Value cube = mul(b, invstd, mul(b, invstd, invstd));
  return mul(b, dinvstd, mul(b, cube, k(b, -0.5, invstd)));
}

// Layer and group norm: x's adjoint `dx` (from the *_grad op) plus what
// flows back through the mean and invstd outputs (y[1], y[2]) when they
// have adjoints.
Value with_stats_adjoints(GradBuilder& b, const V& x, const V& y, const V& dy, Value dx, const NormView& v) {
  const DType cd = stats_dtype(b.meta(x[0]).dtype);
  const Value dmean = dy[1].valid() ? b.reshape(cast(b, dy[1], cd), v.stats) : Value{};
  const Value dvar = dvar_of_dinvstd(b, dy[2].valid() ? b.reshape(cast(b, dy[2], cd), v.stats) : Value{},
                                     b.reshape(y[2], v.stats));
  return add_opt(b, dx, through_stats(b, x[0], y[1], dmean, dvar, v));
}

// Layer and group norm: y through their *_grad op (attribute `attr` =
// `value`), then what flows back through the mean and invstd outputs.
V per_sample_norm_bp(GradBuilder& b, const char* grad_op, const char* attr, int64_t value, const V& x, const V& y,
                     const V& dy, const NormView& v) {
  Value dx, dgamma, dbeta;
  if (dy[0].valid()) {
    Attrs a;
    a.set(attr, AttrValue::of_int(value));
    const V g = b.ops(grad_op, {x[0], dy[0], x[1], y[1], y[2]}, a);
    dx = g[0];
    dgamma = g[1];
    dbeta = g[2];
  }
  return {with_stats_adjoints(b, x, y, dy, dx, v), dgamma, dbeta};
}

V layer_norm_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const int64_t nd = n.attrs.get_int("normalized_ndim");
  return per_sample_norm_bp(b, "layer_norm_grad", "normalized_ndim", nd, x, y, dy,
                            layer_view(b.meta(x[0]).shape, nd));
}

V group_norm_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const int64_t groups = n.attrs.get_int("groups");
  const Shape xs = b.meta(x[0]).shape;
  // Statistics per (n, g) over C/G channels and the spatial dims.
  NormView v;
  const int64_t d = product(xs, 1, xs.rank) / (groups ? groups : 1);
  v.view = shape_of({xs.dims[0], groups, d});
  v.stats = shape_of({xs.dims[0], groups, 1});
  v.count = static_cast<double>(v.view.dims[2]);
  return per_sample_norm_bp(b, "group_norm_grad", "groups", groups, x, y, dy, v);
}

// Training: y through batch_norm_grad; batch_mean, batch_invstd and the new
// running statistics through the batch statistics. Inference: y = (x - rm)
// * invstd * gamma + beta with invstd = (rv + eps)^-1/2, batch_mean = rm,
// batch_invstd = invstd, and the running statistics pass through.
V batch_norm_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  const DType xd = xm.dtype, cd = stats_dtype(xd);
  const NormView v = batch_view(xm.shape);
  const Shape c = b.meta(x[1]).shape;
  const double momentum = n.attrs.get_float("momentum");
  auto stat = [&](Value d) { return d.valid() ? b.reshape(cast(b, d, cd), v.stats) : Value{}; };
  auto channel = [&](Value d, DType to) { return d.valid() ? b.reshape(cast(b, d, to), c) : Value{}; };
  auto scaled = [&](Value d, double s) { return d.valid() ? mul(b, d, b.scalar(s, b.meta(d).dtype)) : Value{}; };

  if (n.attrs.get_bool("training")) {
    Value dx, dgamma, dbeta, drm, drv;
    if (dy[0].valid()) {
      const V g = b.ops("batch_norm_grad", {x[0], dy[0], x[1], y[1], y[2]});
      dx = g[0];
      dgamma = g[1];
      dbeta = g[2];
    }
    if (v.count == 0) {  // an empty batch leaves the running statistics as they were
      return {dx, dgamma, dbeta, dy[3], dy[4]};
    }
    drm = scaled(dy[3], 1 - momentum);
    drv = scaled(dy[4], 1 - momentum);
    const double unbias = v.count > 1 ? v.count / (v.count - 1) : 0;
    const Value dmean = add_opt(b, stat(dy[1]), scaled(stat(dy[3]), momentum));
    const Value dvar = add_opt(b, dvar_of_dinvstd(b, stat(dy[2]), b.reshape(y[2], v.stats)),
                               scaled(stat(dy[4]), momentum * unbias));
    dx = add_opt(b, dx, through_stats(b, x[0], y[1], dmean, dvar, v));
    return {dx, dgamma, dbeta, drm, drv};
  }

  const Value xv = cast(b, b.reshape(x[0], v.view), cd);
  const Value mean = cast(b, b.reshape(x[3], v.stats), cd);
  const Value invstd = b.reshape(y[2], v.stats);
  const Value gamma = cast(b, b.reshape(x[1], v.stats), cd);
  const Value centered = sub(b, xv, mean);
  Value dx, dgamma, dbeta, drm, drv;
  Value dinvstd = stat(dy[2]);
  if (dy[0].valid()) {
    const Value d = cast(b, b.reshape(dy[0], v.view), cd);
    const Value dg = mul(b, d, gamma);
    const Value dxv = mul(b, dg, invstd);
    dx = b.reshape(cast(b, dxv, xd), xm.shape);
    dgamma = channel(sum_axes(b, mul(b, d, mul(b, centered, invstd)), v.axes, false), xd);
    dbeta = channel(sum_axes(b, d, v.axes, false), xd);
    drm = b.op("neg", {sum_axes(b, dxv, v.axes, true)});
    dinvstd = add_opt(b, dinvstd, sum_axes(b, mul(b, dg, centered), v.axes, true));
  }
  drm = add_opt(b, add_opt(b, drm, stat(dy[1])), stat(dy[3]));
  drv = add_opt(b, dvar_of_dinvstd(b, dinvstd, invstd), stat(dy[4]));
  return {dx, dgamma, dbeta, channel(drm, b.meta(x[3]).dtype), channel(drv, b.meta(x[4]).dtype)};
}

// Sharding (ir/sharding.h) of layer_norm and its gradient: the leading
// (per-sample) dims keep their splits, the normalised dims and gamma/beta
// are whole. dgamma/dbeta sum over the leading dims: partial sums over the
// axes those are split over.
bool shard_layer_norm(const ShardQuery& q, ShardPlan& p) {
  const bool grad = q.op->name == "layer_norm_grad";
  const Shape& x = q.in[0].shape;
  const int lead = x.rank - static_cast<int>(q.attrs->get_int("normalized_ndim"));
  if (lead < 0) return false;
  TensorLayout l = TensorLayout::replicated(x.rank);
  uint32_t used = 0;
  for (size_t i = 0; i < (grad ? 2u : 1u); ++i) {  // x (and dy): the first placed split per dim
    const TensorLayout& in = q.in_layouts[i];
    if (in.free) continue;
    for (int d = 0; d < lead; ++d) {
      const int a = in.dims[static_cast<size_t>(d)];
      if (a == kReplicated || l.dims[static_cast<size_t>(d)] != kReplicated || (used & (1u << a)) ||
          !shard::divides(q, x.dims[d], a))
        continue;
      l.dims[static_cast<size_t>(d)] = a;
      used |= 1u << a;
    }
  }
  TensorLayout stats = TensorLayout::replicated(lead), tail = TensorLayout::replicated(x.rank - lead);
  for (int d = 0; d < lead; ++d) stats.dims[static_cast<size_t>(d)] = l.dims[static_cast<size_t>(d)];
  if (!grad) {
    p.in = {l, tail, tail};
    p.out = {l, stats, stats};
    return true;
  }
  TensorLayout sums = tail;
  sums.partial = used;
  p.in = {l, l, tail, stats, stats};
  p.out = {l, sums, sums};
  return true;
}

// The first of `cands` that may split a dim of `size` (not yet used, and
// dividing it; `multiple_of`, when given, must split evenly too).
int first_usable(const ShardQuery& q, std::initializer_list<int> cands, int64_t size, uint32_t used,
                 int64_t multiple_of = 0) {
  for (int a : cands)
    if (a != kReplicated && !(used & (1u << a)) && shard::divides(q, size, a) &&
        (multiple_of == 0 || shard::divides(q, multiple_of, a)))
      return a;
  return kReplicated;
}

int dim_of(const ShardQuery& q, size_t input, int d) {
  const TensorLayout& l = q.in_layouts[input];
  return l.free || d >= l.rank() ? kReplicated : l.dims[static_cast<size_t>(d)];
}

// batch_norm and batch_norm_grad: one group of statistics per channel, over
// the batch and spatial dims. A channel split is free (gamma, beta, the
// statistics and the running ones split with it). In training a batch or
// spatial split would give each device statistics of its own samples only
// (per-device BN, which changes the result); to compute exactly what one
// process computes, the rule moves such a split onto the channel dim (the
// pass turns that into one all_to_all) when the channels divide, and gathers
// it otherwise. Synchronised statistics (partial sums all-reduced inside
// the op, SyncBatchNorm) would move less data but need the op split in two,
// which a rule cannot do. In inference (running statistics) the op is an
// affine map per channel: every split passes through.
bool shard_batch_norm(const ShardQuery& q, ShardPlan& p) {
  const bool grad = q.op->name == "batch_norm_grad";
  const bool training = grad || q.attrs->get_bool("training");
  const Shape& x = q.in[0].shape;
  if (x.rank < 2) return false;
  const size_t data = grad ? 2 : 1;  // x (and dy) first, then the per-channel inputs
  const int64_t channels = x.dims[1];
  int ch = first_usable(q, {dim_of(q, 0, 1), grad ? dim_of(q, 1, 1) : kReplicated}, channels, 0);
  for (size_t i = data; i < q.in.size() && ch == kReplicated; ++i) ch = first_usable(q, {dim_of(q, i, 0)}, channels, 0);
  TensorLayout l = TensorLayout::replicated(x.rank);
  l.dims[1] = ch;
  uint32_t used = ch == kReplicated ? 0 : 1u << ch;
  for (int d = 0; d < x.rank; ++d) {
    if (d == 1) continue;
    const int a = first_usable(q, {dim_of(q, 0, d), grad ? dim_of(q, 1, d) : kReplicated}, training ? channels : x.dims[d],
                               used);
    if (a == kReplicated) continue;
    if (!training) {
      l.dims[static_cast<size_t>(d)] = a;
      used |= 1u << a;
    } else if (l.dims[1] == kReplicated) {  // moved to the channels (all_to_all)
      l.dims[1] = a;
      used |= 1u << a;
    }
  }
  TensorLayout c = TensorLayout::replicated(1);
  c.dims[0] = l.dims[1];
  p.in.assign(q.in.size(), c);
  p.in[0] = l;
  if (grad) p.in[1] = l;
  p.out.assign(q.out.size(), c);
  p.out[0] = l;
  return true;
}

// group_norm and group_norm_grad: statistics per (sample, group of C/G
// channels) over the spatial dims. The batch split is free (the (N, G)
// statistics split by rows; dgamma/dbeta, sums over the batch, are partial
// over its axis); a channel split over k devices when k divides G (each
// device then holds G/k whole groups: local attribute groups = G/k; the
// statistics split by columns); the spatial dims stay whole.
bool shard_group_norm(const ShardQuery& q, ShardPlan& p) {
  const bool grad = q.op->name == "group_norm_grad";
  const Shape& x = q.in[0].shape;
  const int64_t groups = q.attrs->get_int("groups");
  if (x.rank < 2 || groups < 1) return false;
  const int nb = first_usable(q, {dim_of(q, 0, 0), grad ? dim_of(q, 1, 0) : kReplicated}, x.dims[0], 0);
  const uint32_t used = nb == kReplicated ? 0 : 1u << nb;
  int ch = first_usable(q, {dim_of(q, 0, 1), grad ? dim_of(q, 1, 1) : kReplicated}, x.dims[1], used, groups);
  if (ch == kReplicated) ch = first_usable(q, {dim_of(q, grad ? 2 : 1, 0)}, x.dims[1], used, groups);
  TensorLayout l = TensorLayout::replicated(x.rank), c = TensorLayout::replicated(1),
               stats = TensorLayout::replicated(2);
  l.dims[0] = stats.dims[0] = nb;
  l.dims[1] = c.dims[0] = stats.dims[1] = ch;
  p.local_attrs = *q.attrs;
  if (ch != kReplicated) {
    p.local_attrs.set("groups", AttrValue::of_int(groups / q.mesh[static_cast<size_t>(ch)]));
    p.attrs_changed = true;
  }
  if (!grad) {
    p.in = {l, c, c};
    p.out = {l, stats, stats};
    return true;
  }
  TensorLayout sums = c;
  sums.partial = used;
  p.in = {l, l, c, stats, stats};
  p.out = {l, sums, sums};
  return true;
}

void add(OpRegistry& r, const char* name, std::vector<std::string> inputs, std::vector<std::string> outputs,
         std::vector<AttrSpec> attrs, InferFn infer, const char* doc, std::vector<int> typed, CostFn cost,
         const Rules& rules) {
  OpDef d{name, std::move(inputs), std::move(outputs), std::move(attrs), kFloat, infer, doc, std::move(typed),
          false, false, cost};
  rules.apply(d);
  r.add(std::move(d));
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
      {}, forward_cost, {batch_norm_bp, nullptr, true, shard_batch_norm});
  add(r, "batch_norm_grad", {"x", "dy", "gamma", "batch_mean", "batch_invstd"}, grad_out, {},
      infer_batch_norm_grad, "gradient of training-mode batch_norm from its saved batch_mean/batch_invstd", grad_typed,
      backward_cost, {batch_norm_grad_bp, nullptr, true, shard_batch_norm});
  add(r, "layer_norm", {"x", "gamma", "beta"}, {"y", "mean", "invstd"},
      {{"normalized_ndim", AttrType::kInt, false, AttrValue::of_int(1)}, eps_attr()}, infer_layer_norm,
      "normalisation over the last normalized_ndim dims; mean/invstd have x's leading dims (f32 for f16/bf16 x)",
      {}, forward_cost, {layer_norm_bp, nullptr, true, shard_layer_norm});
  add(r, "layer_norm_grad", grad_in, grad_out, {{"normalized_ndim", AttrType::kInt, false, AttrValue::of_int(1)}},
      infer_layer_norm_grad, "gradient of layer_norm from its saved mean/invstd", grad_typed, backward_cost,
      {layer_norm_grad_bp, nullptr, true, shard_layer_norm});
  add(r, "group_norm", {"x", "gamma", "beta"}, {"y", "mean", "invstd"},
      {{"groups", AttrType::kInt, true, {}}, eps_attr()}, infer_group_norm,
      "normalisation of x (N, C, ...) over groups of C/groups channels; mean/invstd are (N, groups)", {},
      forward_cost, {group_norm_bp, nullptr, true, shard_group_norm});
  add(r, "group_norm_grad", grad_in, grad_out, {{"groups", AttrType::kInt, true, {}}}, infer_group_norm_grad,
      "gradient of group_norm from its saved mean/invstd", grad_typed, backward_cost,
      {group_norm_grad_bp, nullptr, true, shard_group_norm});
}

SPORA_OP_FAMILY(register_norm_ops);

}  // namespace spora
