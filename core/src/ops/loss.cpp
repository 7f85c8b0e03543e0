// Classification losses: cross_entropy (from logits) and nll_loss (from
// log-probabilities), PyTorch semantics with class-index targets.
//
// Per sample, with lp = log_softmax(logits) for cross_entropy and
// lp = log_probs for nll_loss, C classes and eps = label_smoothing:
//   loss = (1 - eps) * -lp[target] + eps * mean_c(-lp[c])
// (nll_loss takes label_smoothing too, so cross_entropy(x) equals
// nll_loss(log_softmax(x)) for every attribute). A sample whose target equals
// ignore_index contributes 0 and is left out of the mean's denominator;
// "mean" over no counted sample is NaN (0/0), as in PyTorch.
//
// Contract with kernels (what inference hands them):
//  - in[0] (scores) as (N, C, S) and in[1] (target, i32 or i64) as (N, S),
//    S being the product of the dims after C (1 when none); an unbatched
//    (C,) input with a scalar target is N = S = 1;
//  - out[0] is (N, S) for reduction "none" (user-visible: the target's
//    shape) and rank 0 for "mean" and "sum"; its dtype is the scores';
//  - attrs: reduction is exactly "mean", "sum" or "none", label_smoothing is
//    in [0, 1], ignore_index any int.
//  - Targets live on the device, so inference cannot range-check them. A
//    target outside [0, C) that is not ignore_index makes that sample's loss
//    NaN (and so a reduced loss NaN); kernels check every index before using
//    it and never read outside the scores.
//
// Gradient rules (cross_entropy and nll_loss): per sample the loss is
// (1 - eps) * -lp[target] - eps * mean_c(lp[c]) for kept samples, 0 for
// ignored ones; "mean" divides by the number of kept samples. Targets get
// no gradient. A target outside [0, C) that is not ignored makes the loss
// NaN; such a sample contributes only its label-smoothing term here.
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_loss(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape &x = in[0].shape, &t = in[1].shape;
  if (in[1].dtype != SPORA_DTYPE_I32 && in[1].dtype != SPORA_DTYPE_I64)
    fail(Code::kInvalidArgument, "[{}] target must hold class indices as i32 or i64, got {}", op.name,
         dtype_name(in[1].dtype));
  if (x.rank < 1)
    fail(Code::kInvalidArgument, "[{}] {} must have shape (N, C, ...) or (C,), got a scalar", op.name, op.inputs[0]);
  // The target has x's shape without the class dim (dim 1, or dim 0 unbatched).
  const int class_dim = x.rank == 1 ? 0 : 1;
  Shape want;
  for (int i = 0; i < x.rank; ++i)
    if (i != class_dim) want.push_back(x[i]);
  if (t != want)
    fail(Code::kInvalidArgument, "[{}] target must have shape {} for {} of shape {} (class dim {} removed), got {}",
         op.name, want.str(), op.inputs[0], x.str(), class_dim, t.str());
  const std::string reduction = call.attrs.find("reduction")->s;
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    fail(Code::kInvalidArgument, "[{}] reduction must be \"mean\", \"sum\" or \"none\", got \"{}\"", op.name,
         reduction);
  const double eps = call.attrs.get_float("label_smoothing");
  if (!(eps >= 0 && eps <= 1))
    fail(Code::kInvalidArgument, "[{}] label_smoothing must be in [0, 1], got {}", op.name, eps);

  int64_t n = 1, c = x[class_dim], s = 1, c_s = 1;
  if (x.rank > 1) n = x[0];
  // Kernels' offsets use C * S, which can overflow after a zero N even though
  // the element count is 0.
  for (int i = 1; i < x.rank; ++i) {
    if (x[i] != 0 && c_s > std::numeric_limits<int64_t>::max() / x[i])
      fail(Code::kInvalidArgument, "[{}] shape {} has more elements than fit in int64", op.name, x.str());
    c_s *= x[i];
    if (i >= 2) s *= x[i];
  }
  Shape k, kt;
  for (int64_t d : {n, c, s}) k.push_back(d);
  for (int64_t d : {n, s}) kt.push_back(d);
  call.in[0].shape = k;
  call.in[1].shape = kt;
  if (reduction == "none") {
    call.out[0] = {in[0].dtype, kt};
    call.result[0] = t;
  } else {
    call.out[0] = {in[0].dtype, Shape()};
    call.result[0] = Shape();
  }
}

// cross_entropy: a max, exp and sum per score; nll_loss reads each score once
// only with label smoothing, but the estimate need not be that fine.
Cost loss_cost(const OpCall& c) {
  const double n = static_cast<double>(c.in[0].shape.numel());
  const double es = static_cast<double>(dtype_size(c.in[0].dtype));
  return Cost{4 * n, es * n + 8.0 * static_cast<double>(c.in[1].shape.numel())};
}

// ---- gradient rules ------------------------------------------------------------

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

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
  if (reduction == "mean") w = div(b, dloss, rules::sum_axes(b, cast(b, keep, d), {}, false));
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

// Sharding (ir/sharding.h): the class dim (1, or 0 for one sample) stays
// whole; the batch and spatial dims may be split when the loss is per
// sample ("none": the output keeps the split) or summed ("sum": a partial
// sum over those axes). "mean" divides by a count over the whole batch, so
// it runs replicated.
bool shard_loss(const ShardQuery& q, ShardPlan& p) {
  const std::string& red = q.attrs->find("reduction")->s;
  const TensorLayout& l = q.in_layouts[0];
  const Shape& s = q.in[0].shape;
  if (red == "mean" || l.free || s.rank < 2) return false;
  TensorLayout scores = l, target = TensorLayout::replicated(q.in[1].shape.rank), out;
  scores.partial = 0;
  scores.dims[1] = kReplicated;
  uint32_t split = 0;
  for (int d = 0, t = 0; d < s.rank; ++d) {
    if (d == 1) continue;
    target.dims[static_cast<size_t>(t++)] = scores.dims[static_cast<size_t>(d)];
    if (scores.dims[static_cast<size_t>(d)] != kReplicated) split |= 1u << scores.dims[static_cast<size_t>(d)];
  }
  if (red == "sum") {
    out = TensorLayout::replicated(0);
    out.partial = split;
  } else {
    out = target;
  }
  p.in = {scores, target};
  p.out = {out};
  return true;
}

void add(OpRegistry& r, const char* name, const char* scores, const char* doc, const Rules& rules) {
  OpDef d{name,
          {scores, "target"},
          {"loss"},
          {{"label_smoothing", AttrType::kFloat, false, AttrValue::of_float(0)},
           {"reduction", AttrType::kString, false, AttrValue::of_string("mean")},
           {"ignore_index", AttrType::kInt, false, AttrValue::of_int(-100)}},
          {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16},
          infer_loss,
          doc,
          {0},
          false,
          false,
          loss_cost};
  rules.apply(d);
  d.sharding = shard_loss;
  r.add(std::move(d));
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  add(r, "cross_entropy", "logits",
      "softmax cross-entropy of logits (N, C, ...) against class indices (N, ...), with label smoothing, "
      "ignore_index and mean|sum|none reduction; out-of-range targets give NaN",
      {cross_entropy_bp});
  add(r, "nll_loss", "log_probs",
      "negative log-likelihood of log-probabilities (N, C, ...) against class indices (N, ...); attributes as "
      "cross_entropy",
      {nll_loss_bp});
}

SPORA_OP_FAMILY(register_loss_ops);

}  // namespace spora
