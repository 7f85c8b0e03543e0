// Reference classification losses: cross_entropy (from logits) and nll_loss
// (from log-probabilities), scores (N, C, S) and class-index targets (N, S)
// as core/src/ops/loss.cpp flattens them.
//
// Targets are data on the device, so they are checked here, per sample,
// before they index anything: one that is neither ignore_index nor in
// [0, C) makes its sample's loss NaN. Each sample (n, s) reads the C scores
// of column s of slice n; slices are processed column-parallel with
// per-column accumulators so the class dim is read sequentially for any S.
// Everything accumulates in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

enum class Reduction { kMean, kSum, kNone };

struct State {
  bool from_logits;  // cross_entropy: log_softmax over the class dim first
  Reduction reduction;
  double smoothing;
  int64_t ignore;
  int64_t n, c, s;
};

template <class T, class I>
void loss_t(const State& st, const T* x, const I* target, T* out) {
  const int64_t C = st.c, S = st.s;
  std::vector<double> lse(static_cast<size_t>(S)), xsum(static_cast<size_t>(S));
  double acc = 0, counted = 0;
  for (int64_t n = 0; n < st.n; ++n) {
    const T* xs = x + n * C * S;
    std::fill(lse.begin(), lse.end(), 0.0);
    if (st.from_logits) {
      std::vector<double>& mx = xsum;  // reused as scratch before the smoothing sums
      std::fill(mx.begin(), mx.end(), -INFINITY);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) mx[s] = std::max(mx[s], static_cast<double>(load(xs[c * S + s])));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) lse[s] += std::exp(static_cast<double>(load(xs[c * S + s])) - mx[s]);
      for (int64_t s = 0; s < S; ++s) lse[s] = mx[s] + std::log(lse[s]);
    }
    if (st.smoothing > 0) {
      std::fill(xsum.begin(), xsum.end(), 0.0);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) xsum[s] += static_cast<double>(load(xs[c * S + s]));
    }
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = static_cast<int64_t>(target[n * S + s]);
      double l = 0;
      if (t != st.ignore) {
        ++counted;
        if (t < 0 || t >= C) {
          l = std::numeric_limits<double>::quiet_NaN();
        } else {
          l = (1 - st.smoothing) * (lse[s] - static_cast<double>(load(xs[t * S + s])));
          if (st.smoothing > 0) l += st.smoothing * (lse[s] - xsum[s] / static_cast<double>(C));
        }
      }
      if (st.reduction == Reduction::kNone)
        out[n * S + s] = store<T>(l);
      else
        acc += l;
    }
  }
  if (st.reduction == Reduction::kSum) out[0] = store<T>(acc);
  if (st.reduction == Reduction::kMean) out[0] = store<T>(acc / counted);  // 0/0 = NaN when nothing counts
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& st = p.get<State>();
  visit_dtype(p.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      if (p.in[1].dtype == SPORA_DTYPE_I32)
        loss_t(st, static_cast<const T*>(in[0]), static_cast<const int32_t*>(in[1]), static_cast<T*>(out[0]));
      else
        loss_t(st, static_cast<const T*>(in[0]), static_cast<const int64_t*>(in[1]), static_cast<T*>(out[0]));
    }
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 2, 1)) return e;
  const int32_t dt = p.in[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.in[1].dtype != SPORA_DTYPE_I32 && p.in[1].dtype != SPORA_DTYPE_I64)
    return invalid(p, "target must be i32 or i64");
  const Shape &x = p.in[0].shape, &t = p.in[1].shape, &y = p.out[0].shape;
  if (x.rank != 3 || t.rank != 2 || t.dims[0] != x.dims[0] || t.dims[1] != x.dims[2])
    return invalid(p, "scores must be (N, C, S) and target (N, S), got " + x.str() + " and " + t.str());
  int64_t cs;
  if (__builtin_mul_overflow(x.dims[1], x.dims[2], &cs)) return invalid(p, "shape too large");
  State st{};
  st.from_logits = p.op == "cross_entropy";
  const std::string r = p.attrs.get_string("reduction", "mean");
  st.reduction = r == "mean" ? Reduction::kMean : r == "sum" ? Reduction::kSum : Reduction::kNone;
  if (r != "mean" && r != "sum" && r != "none") return invalid(p, "unknown reduction '" + r + "'");
  if (p.out[0].dtype != dt || (st.reduction == Reduction::kNone ? y != t : y.rank != 0))
    return invalid(p, "output must be " + std::string(dtype_name(dt)) + (st.reduction == Reduction::kNone ? t.str() : "()"));
  st.smoothing = p.attrs.get_float("label_smoothing", 0);
  if (!(st.smoothing >= 0 && st.smoothing <= 1)) return invalid(p, "label_smoothing must be in [0, 1]");
  st.ignore = p.attrs.get_int("ignore_index", -100);
  st.n = x.dims[0], st.c = x.dims[1], st.s = x.dims[2];
  if (t.numel() == 0) st.n = st.s = 0;  // no samples: don't size buffers by S
  p.state = std::make_shared<State>(st);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"cross_entropy", "ref", plan});
  t.add({"nll_loss", "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
