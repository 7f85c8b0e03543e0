// Gradient rules of log_softmax, the softmax grads, the normalisations and
// their grads, and the classification losses.
//
// - log_softmax uses log_softmax_grad; softmax_grad and log_softmax_grad
//   have closed-form rules built from basic ops (so third order works).
// - batch_norm, layer_norm, group_norm use their *_grad ops for y's adjoint.
//   Every other float output is differentiable too and gets its exact
//   adjoint: the saved mean and invstd (functions of x in training), and
//   batch_norm's new running statistics ((1 - momentum) * running +
//   momentum * batch statistic, the variance unbiased), which also carry
//   gradient to the running-statistics inputs. In inference batch_norm is
//   an affine map of x with the running statistics, differentiated as such.
// - batch_norm_grad, layer_norm_grad, group_norm_grad (mean and invstd
//   being independent inputs, as the ops define them): their formula is
//   rebuilt from basic ops in a scratch graph, differentiated there by the
//   same transform, and the gradient nodes copied in (vjp_of).
// - cross_entropy and nll_loss: per sample the loss is
//   (1 - eps) * -lp[target] - eps * mean_c(lp[c]) for kept samples, 0 for
//   ignored ones; "mean" divides by the number of kept samples. Targets get
//   no gradient. A target outside [0, C) that is not ignored makes the loss
//   NaN; such a sample contributes only its label-smoothing term here.
#include <cstring>
#include <functional>

#include "autodiff/bprop.h"
#include "autodiff/bprop_decomposed.h"
#include "autodiff/rule_helpers.h"
#include "autodiff/grad.h"
#include "support/error.h"

namespace spora::autodiff {
namespace {

Value cast(GradBuilder& b, Value v, DType to) {
  if (!v.valid() || dt(b, v) == to) return v;
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(to)));
  return b.op("cast", {v}, a);
}

// The dtype statistics are computed in (f32 for f16/bf16).
DType stats_dtype(DType x) { return x == SPORA_DTYPE_F16 || x == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : x; }

Value sum(GradBuilder& b, Value v, const std::vector<int64_t>& axes, bool keepdims) {
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  a.set("keepdims", AttrValue::of_bool(keepdims));
  return b.op("sum", {v}, a);
}

// sum over one axis, kept; a scalar is its own sum.
Value sum_axis(GradBuilder& b, Value v, int64_t axis) {
  if (b.meta(v).shape.rank == 0) return v;
  return sum(b, v, {axis}, true);
}

Attrs axis_attr(int64_t axis) {
  Attrs a;
  a.set("axis", AttrValue::of_int(axis));
  return a;
}


// ---- softmax family ---------------------------------------------------------

V log_softmax_bp(GradBuilder& b, const ir::Node& n, const V&, const V& y, const V& dy) {
  return {b.op("log_softmax_grad", {y[0], dy[0]}, axis_attr(n.attrs.get_int("axis")))};
}

// dx = y * (dy - S), S = sum(dy * y). With cotangent g and T = sum(g * y):
// d/d(dy) = y * (g - T) = softmax_grad(y, g); d/dy = g * (dy - S) - dy * T.
V softmax_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const int64_t axis = n.attrs.get_int("axis");
  const Value y = x[0], d = x[1], g = dy[0];
  const Value s = sum_axis(b, mul(b, d, y), axis);
  const Value t = sum_axis(b, mul(b, g, y), axis);
  const Value dyv = sub(b, mul(b, g, sub(b, d, s)), mul(b, d, t));
  return {dyv, b.op("softmax_grad", {y, g}, axis_attr(axis))};
}

// dx = dy - exp(y) * sum(dy). With cotangent g: d/d(dy) = g - sum(g * e^y);
// d/dy = -g * e^y * sum(dy).
V log_softmax_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const int64_t axis = n.attrs.get_int("axis");
  const Value y = x[0], d = x[1], g = dy[0];
  const Value e = b.op("exp", {y});
  const Value ge = mul(b, g, e);
  const Value dd = sub(b, g, sum_axis(b, ge, axis));
  const Value dyv = b.op("neg", {mul(b, ge, sum_axis(b, d, axis))});
  return {dyv, dd};
}

// ---- normalisation ----------------------------------------------------------

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
  const Value a = div(b, sum(b, ga, v.axes, true), n);
  const Value c = div(b, sum(b, mul(b, ga, xh), v.axes, true), n);
  const Value dx = mul(b, invstd, sub(b, sub(b, ga, a), mul(b, xh, c)));
  const Value dgamma = sum(b, mul(b, d, xh), v.param_axes, false);
  const Value dbeta = sum(b, d, v.param_axes, false);
  return {b.reshape(cast(b, dx, xm.dtype), xm.shape), b.reshape(cast(b, dgamma, xm.dtype), gamma_shape),
          b.reshape(cast(b, dbeta, xm.dtype), gamma_shape)};
}

V batch_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = batch_view(b.meta(x[0]).shape);
  return vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
}

V layer_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = layer_view(b.meta(x[0]).shape, n.attrs.get_int("normalized_ndim"));
  return vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
}

V group_norm_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const NormView v = group_view(b.meta(x[0]).shape, n.attrs.get_int("groups"));
  return vjp_of(b, n, x, {}, dy, [&](GradBuilder& sb, const V& in) { return norm_grad_formula(sb, in, v); });
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

V layer_norm_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const int64_t nd = n.attrs.get_int("normalized_ndim");
  const NormView v = layer_view(b.meta(x[0]).shape, nd);
  Value dx, dgamma, dbeta;
  if (dy[0].valid()) {
    Attrs a;
    a.set("normalized_ndim", AttrValue::of_int(nd));
    const V g = b.ops("layer_norm_grad", {x[0], dy[0], x[1], y[1], y[2]}, a);
    dx = g[0];
    dgamma = g[1];
    dbeta = g[2];
  }
  const DType cd = stats_dtype(b.meta(x[0]).dtype);
  const Value dmean = dy[1].valid() ? b.reshape(cast(b, dy[1], cd), v.stats) : Value{};
  const Value dvar = dvar_of_dinvstd(b, dy[2].valid() ? b.reshape(cast(b, dy[2], cd), v.stats) : Value{},
                                     b.reshape(y[2], v.stats));
  dx = add_opt(b, dx, through_stats(b, x[0], y[1], dmean, dvar, v));
  return {dx, dgamma, dbeta};
}

V group_norm_bp(GradBuilder& b, const ir::Node& n, const V& x, const V& y, const V& dy) {
  const int64_t groups = n.attrs.get_int("groups");
  const Shape xs = b.meta(x[0]).shape;
  Value dx, dgamma, dbeta;
  if (dy[0].valid()) {
    Attrs a;
    a.set("groups", AttrValue::of_int(groups));
    const V g = b.ops("group_norm_grad", {x[0], dy[0], x[1], y[1], y[2]}, a);
    dx = g[0];
    dgamma = g[1];
    dbeta = g[2];
  }
  // Statistics per (n, g) over C/G channels and the spatial dims.
  NormView v;
  const int64_t d = product(xs, 1, xs.rank) / (groups ? groups : 1);
  v.view = shape_of({xs.dims[0], groups, d});
  v.stats = shape_of({xs.dims[0], groups, 1});
  v.count = static_cast<double>(v.view.dims[2]);
  const DType cd = stats_dtype(b.meta(x[0]).dtype);
  const Value dmean = dy[1].valid() ? b.reshape(cast(b, dy[1], cd), v.stats) : Value{};
  const Value dvar = dvar_of_dinvstd(b, dy[2].valid() ? b.reshape(cast(b, dy[2], cd), v.stats) : Value{},
                                     b.reshape(y[2], v.stats));
  dx = add_opt(b, dx, through_stats(b, x[0], y[1], dmean, dvar, v));
  return {dx, dgamma, dbeta};
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
    dgamma = channel(sum(b, mul(b, d, mul(b, centered, invstd)), v.axes, false), xd);
    dbeta = channel(sum(b, d, v.axes, false), xd);
    drm = b.op("neg", {sum(b, dxv, v.axes, true)});
    dinvstd = add_opt(b, dinvstd, sum(b, mul(b, dg, centered), v.axes, true));
  }
  drm = add_opt(b, add_opt(b, drm, stat(dy[1])), stat(dy[3]));
  drv = add_opt(b, dvar_of_dinvstd(b, dinvstd, invstd), stat(dy[4]));
  return {dx, dgamma, dbeta, channel(drm, b.meta(x[3]).dtype), channel(drv, b.meta(x[4]).dtype)};
}

// ---- losses -----------------------------------------------------------------

Value i64_scalar(GradBuilder& b, int64_t v, const ir::SourceLoc& loc) {
  std::vector<uint8_t> bytes(sizeof(int64_t));
  std::memcpy(bytes.data(), &v, sizeof v);
  return b.graph().add_constant(SPORA_DTYPE_I64, Shape(), std::move(bytes), loc);
}

// The adjoint of the per-class scores lp (log-probabilities) of nll_loss.
Value nll_adjoint(GradBuilder& b, const ir::Node& n, Value scores, Value target, Value dloss) {
  const TensorMeta sm = b.meta(scores);
  const DType d = sm.dtype;
  const Shape ts = b.meta(target).shape;
  const int class_dim = sm.shape.rank == 1 ? 0 : 1;
  const int64_t classes = sm.shape.dims[class_dim];
  const double eps = n.attrs.get_float("label_smoothing");
  const std::string reduction = n.attrs.find("reduction")->s;
  const Value t = cast(b, target, SPORA_DTYPE_I64);
  const Value keep = b.op("not_equal", {t, i64_scalar(b, n.attrs.get_int("ignore_index"), n.loc)});
  // Each sample's weight: dloss (none), the broadcast dloss (sum), or dloss
  // over the number of kept samples (mean); 0 for ignored samples.
  Value w = dloss;
  if (reduction == "mean") w = div(b, dloss, sum(b, cast(b, keep, d), {}, false));
  w = b.op("where", {keep, w, k(b, 0, dloss)});
  // -(1 - eps) at the target (none for targets outside [0, C), which the
  // kernel makes NaN), -eps / C everywhere.
  const Value valid = b.op("logical_and", {b.op("greater_equal", {t, i64_scalar(b, 0, n.loc)}),
                                           b.op("less", {t, i64_scalar(b, classes, n.loc)})});
  Attrs oh;
  oh.set("depth", AttrValue::of_int(classes));
  oh.set("dtype", AttrValue::of_string(dtype_name(d)));
  oh.set("on_value", AttrValue::of_float(-(1 - eps)));
  oh.set("off_value", AttrValue::of_float(0));
  Value pick = b.op("one_hot", {b.op("where", {valid, t, i64_scalar(b, classes, n.loc)})}, oh);
  if (sm.shape.rank > 2) {  // (N, S..., C) -> (N, C, S...)
    std::vector<int64_t> perm = {0, sm.shape.rank - 1};
    for (int i = 1; i + 1 < sm.shape.rank; ++i) perm.push_back(i);
    Attrs p;
    p.set("perm", AttrValue::of_ints(perm));
    pick = b.op("transpose", {pick}, p);
  }
  if (eps != 0 && classes > 0) pick = sub(b, pick, b.scalar(eps / static_cast<double>(classes), d));
  // The weight with the class dim inserted, against (N, C, S...).
  Shape ws;
  for (int i = 0; i < ts.rank; ++i) {
    if (i == class_dim) ws.push_back(1);
    ws.push_back(ts.dims[i]);
  }
  if (ts.rank == class_dim) ws.push_back(1);
  w = b.reshape(w, ws);
  Value g = mul(b, pick, w);
  if (b.meta(g).shape != sm.shape) {
    Attrs bc;
    bc.set("shape", AttrValue::of_ints(dims_of(sm.shape)));
    g = b.op("broadcast_to", {g}, bc);
  }
  return g;
}

V nll_loss_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {nll_adjoint(b, n, x[0], x[1], dy[0]), Value{}};
}

V cross_entropy_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const int64_t class_dim = b.meta(x[0]).shape.rank == 1 ? 0 : 1;
  const Value lp = b.op("log_softmax", {x[0]}, axis_attr(class_dim));
  const Value dlp = nll_adjoint(b, n, lp, x[1], dy[0]);
  return {b.op("log_softmax_grad", {lp, dlp}, axis_attr(class_dim)), Value{}};
}

void register_rules() {
  register_bprop("log_softmax", log_softmax_bp);
  register_bprop("softmax_grad", softmax_grad_bp);
  register_bprop("log_softmax_grad", log_softmax_grad_bp);
  register_bprop("batch_norm", batch_norm_bp);
  register_bprop("layer_norm", layer_norm_bp);
  register_bprop("group_norm", group_norm_bp);
  register_bprop("batch_norm_grad", batch_norm_grad_bp);
  register_bprop("layer_norm_grad", layer_norm_grad_bp);
  register_bprop("group_norm_grad", group_norm_grad_bp);
  register_bprop("cross_entropy", cross_entropy_bp);
  register_bprop("nll_loss", nll_loss_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
