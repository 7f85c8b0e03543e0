// Decompositions of the optimizer ops (core/src/ops/optim.cpp) into
// elementwise ops, casts and sums, for a device whose plugin has no fused
// kernel for them: a vendor plugin with a partial op set still trains. The
// arithmetic follows docs/ops-optim.md step by step, in the state dtype (f32
// for f16/bf16 params), so results match the fused kernels to rounding.
#include <cmath>

#include "ops/decompose.h"

namespace spora {
namespace {

using ir::Value;
using V = std::vector<Value>;

DType dt(ir::Builder& b, Value v) { return b.meta(v).dtype; }

Value cast(ir::Builder& b, Value v, DType to) {
  if (dt(b, v) == to) return v;
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(to)));
  return b.op("cast", {v}, a);
}

Value add(ir::Builder& b, Value x, Value y) { return b.op("add", {x, y}); }
Value mul(ir::Builder& b, Value x, Value y) { return b.op("mul", {x, y}); }
Value sub(ir::Builder& b, Value x, Value y) { return b.op("sub", {x, y}); }
Value div(ir::Builder& b, Value x, Value y) { return b.op("div", {x, y}); }

DType state_dtype(DType t) { return t == SPORA_DTYPE_F16 || t == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : t; }

V sgd(ir::Builder& b, const V& x, const Attrs& a) {
  const double momentum = a.get_float("momentum"), dampening = a.get_float("dampening"),
               wd = a.get_float("weight_decay");
  const bool nesterov = a.get_bool("nesterov"), bufs = momentum > 0;
  const size_t n = (x.size() - 2) / (bufs ? 3 : 2);
  const DType T = dt(b, x[2]), S = state_dtype(T);
  const Value lr = cast(b, x[0], S), gs = cast(b, x[1], S);
  V new_p, new_b;
  for (size_t k = 0; k < n; ++k) {
    const Value p = cast(b, x[2 + k], S);
    Value d = add(b, mul(b, gs, cast(b, x[2 + n + k], S)), mul(b, b.scalar(wd, S), p));
    if (bufs) {
      const Value buf = add(b, mul(b, b.scalar(momentum, S), x[2 + 2 * n + k]), mul(b, b.scalar(1 - dampening, S), d));
      new_b.push_back(buf);
      d = nesterov ? add(b, d, mul(b, b.scalar(momentum, S), buf)) : buf;
    }
    new_p.push_back(cast(b, sub(b, p, mul(b, lr, d)), T));
  }
  new_p.insert(new_p.end(), new_b.begin(), new_b.end());
  return new_p;
}

V adam(ir::Builder& b, const V& x, const Attrs& a) {
  const double b1 = a.get_float("beta1"), b2 = a.get_float("beta2"), eps = a.get_float("eps"),
               wd = a.get_float("weight_decay");
  const bool decoupled = a.get_bool("decoupled"), amsgrad = a.get_bool("amsgrad");
  const size_t n = (x.size() - 3) / (amsgrad ? 5 : 4);
  const DType T = dt(b, x[3]), S = state_dtype(T);
  const Value lr = cast(b, x[0], S), step = cast(b, x[1], S), gs = cast(b, x[2], S);
  // Bias corrections; step < 1 makes the step size NaN (docs/ops-optim.md).
  const Value one = b.scalar(1, S);
  const Value bc1 = sub(b, one, b.op("pow", {b.scalar(b1, S), step}));
  const Value bc2_sqrt = b.op("sqrt", {sub(b, one, b.op("pow", {b.scalar(b2, S), step}))});
  const Value valid = b.op("greater_equal", {step, one});
  const Value step_size = b.op("where", {valid, div(b, lr, bc1), b.scalar(NAN, S)});
  const Value decay = decoupled ? sub(b, one, mul(b, lr, b.scalar(wd, S))) : Value{};
  V out[4];
  for (size_t k = 0; k < n; ++k) {
    Value p = cast(b, x[3 + k], S);
    Value g = mul(b, gs, cast(b, x[3 + n + k], S));
    if (decoupled) p = mul(b, p, decay);
    else if (wd != 0) g = add(b, g, mul(b, b.scalar(wd, S), cast(b, x[3 + k], S)));
    const Value m = add(b, mul(b, b.scalar(b1, S), x[3 + 2 * n + k]), mul(b, b.scalar(1 - b1, S), g));
    const Value v = add(b, mul(b, b.scalar(b2, S), x[3 + 3 * n + k]), mul(b, b.scalar(1 - b2, S), mul(b, g, g)));
    Value vm = v;
    if (amsgrad) {
      vm = b.op("maximum", {x[3 + 4 * n + k], v});
      out[3].push_back(vm);
    }
    const Value denom = add(b, div(b, b.op("sqrt", {vm}), bc2_sqrt), b.scalar(eps, S));
    out[0].push_back(cast(b, sub(b, p, mul(b, step_size, div(b, m, denom))), T));
    out[1].push_back(m);
    out[2].push_back(v);
  }
  V all;
  for (const V& o : out) all.insert(all.end(), o.begin(), o.end());
  return all;
}

// sqrt(sum of squares) in the norm's dtype (f64 for f64 tensors, else f32).
Value norm_of(ir::Builder& b, const V& x) {
  const DType N = dt(b, x[0]) == SPORA_DTYPE_F64 ? SPORA_DTYPE_F64 : SPORA_DTYPE_F32;
  Value total;
  for (const Value& t : x) {
    const Value c = cast(b, t, N);
    const Value s = b.op("sum", {mul(b, c, c)});
    total = total.valid() ? add(b, total, s) : s;
  }
  return b.op("sqrt", {total});
}

V global_norm(ir::Builder& b, const V& x, const Attrs&) { return {norm_of(b, x)}; }

V clip(ir::Builder& b, const V& x, const Attrs& a) {
  const Value norm = norm_of(b, x);
  const DType N = dt(b, norm);
  // minimum propagates NaN, as torch.clamp does.
  const Value f = b.op("minimum", {b.scalar(1, N), div(b, b.scalar(a.get_float("max_norm"), N),
                                                       add(b, norm, b.scalar(1e-6, N)))});
  V out;
  for (const Value& t : x) {
    const DType T = dt(b, t), S = state_dtype(T);
    out.push_back(cast(b, mul(b, cast(b, t, S), cast(b, f, S)), T));
  }
  out.push_back(norm);
  return out;
}

void register_all() {
  register_decomposition("sgd_update", sgd);
  register_decomposition("adam_update", adam);
  register_decomposition("global_norm", global_norm);
  register_decomposition("clip_by_global_norm", clip);
}
SPORA_DECOMPOSITIONS(register_all);

}  // namespace
}  // namespace spora
