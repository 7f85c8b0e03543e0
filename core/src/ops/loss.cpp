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
#include <cmath>
#include <limits>

#include "ir/op.h"
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

void add(OpRegistry& r, const char* name, const char* scores, const char* doc) {
  r.add(OpDef{name,
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
              loss_cost});
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  add(r, "cross_entropy", "logits",
      "softmax cross-entropy of logits (N, C, ...) against class indices (N, ...), with label smoothing, "
      "ignore_index and mean|sum|none reduction; out-of-range targets give NaN");
  add(r, "nll_loss", "log_probs",
      "negative log-likelihood of log-probabilities (N, C, ...) against class indices (N, ...); attributes as "
      "cross_entropy");
}

SPORA_OP_FAMILY(register_loss_ops);

}  // namespace spora
