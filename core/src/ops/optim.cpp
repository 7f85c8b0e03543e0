// Optimizer ops: sgd_update and adam_update (one fused update of a whole
// parameter group per call), global_norm and clip_by_global_norm. The
// semantics, the list layout and the limits are in docs/ops-optim.md.
//
// Each takes its tensors as one variadic list grouped by role (params...,
// grads..., states...), after scalar tensor inputs for the hyper-parameters
// that change during training: an LR schedule feeds a new lr value and
// reuses the planned kernel. Fixed hyper-parameters are attributes.
//
// Inference checks everything a kernel relies on (equal shapes per tensor,
// dtypes per role, attribute ranges), so kernels only re-check what memory
// safety needs.
//
// Each op carries its decomposition (below); none is differentiable.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

constexpr DType F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                I32 = SPORA_DTYPE_I32, I64 = SPORA_DTYPE_I64;
const std::vector<DType> kFloats = {F32, F64, F16, BF16};

bool is_float(DType t) { return t == F32 || t == F64 || t == F16 || t == BF16; }

// Optimizer state is kept in f32 for 16-bit params: their few mantissa bits
// would swallow (1 - beta2) * g^2 and the like.
DType state_dtype(DType t) { return t == F16 || t == BF16 ? F32 : t; }

void check_scalar(const OpDef& op, const TensorMeta& m, const std::string& name, const std::vector<DType>& ok) {
  std::vector<std::string> names;
  for (DType d : ok) names.push_back(dtype_name(d));
  if (m.shape.rank != 0 || std::find(ok.begin(), ok.end(), m.dtype) == ok.end())
    fail(Code::kInvalidArgument, "[{}] {} must be a scalar tensor (shape ()) of {}, got {} {}", op.name, name,
         fmt::join(names, ", "), dtype_name(m.dtype), m.shape.str());
}

void check_range(const OpDef& op, const char* name, double v, double lo, double hi, bool hi_open) {
  const bool ok = v >= lo && (hi_open ? v < hi : v <= hi);
  if (!ok)
    fail(Code::kInvalidArgument, "[{}] {} must be in [{}, {}{}, got {}", op.name, name, lo,
         std::isinf(hi) ? std::string("inf") : fmt::format("{}", hi), hi_open ? ")" : "]", v);
}

// Checks a role-grouped list in[first..num_inputs) with roles[0] = params,
// roles[1] = grads (params' dtype) and the rest optimizer state (f32 for
// 16-bit params), and makes the outputs: every role but the grads, in order.
// Returns N, the tensors per role.
int infer_group(const OpDef& op, const TensorMeta* in, int first, const std::vector<std::string>& roles,
                const std::string& hint, OpCall& call) {
  const int count = call.num_inputs - first;
  const int r = static_cast<int>(roles.size());
  if (count < r || count % r != 0) {
    std::string list;
    for (size_t i = 0; i < roles.size(); ++i) list += (i ? ", " : "") + roles[i] + "s";
    fail(Code::kInvalidArgument, "[{}] takes {}: {} lists of N tensors after its {} scalar input(s), got {} tensor(s){}",
         op.name, list, r, first, count, hint);
  }
  const int n = count / r;
  if (n * (r - 1) > kMaxOpOutputs)
    fail(Code::kInvalidArgument, "[{}] updates at most {} tensors per call, got {}; split the group", op.name,
         kMaxOpOutputs / (r - 1), n);
  const DType T = in[first].dtype;
  if (!is_float(T))
    fail(Code::kInvalidArgument, "[{}] {} 0 has dtype {}; params are f32, f64, f16 or bf16", op.name, roles[0],
         dtype_name(T));
  const DType S = state_dtype(T);
  for (int role = 0; role < r; ++role)
    for (int k = 0; k < n; ++k) {
      const TensorMeta& m = in[first + role * n + k];
      const TensorMeta& p = in[first + k];
      const DType want = role < 2 ? T : S;
      if (m.dtype != want)
        fail(Code::kInvalidArgument, "[{}] {} {} has dtype {}, expected {}{}", op.name, roles[role], k,
             dtype_name(m.dtype), dtype_name(want),
             role < 2 ? std::string(" (the params' dtype)") : fmt::format(" (state for {} params)", dtype_name(T)));
      if (m.shape != p.shape)
        fail(Code::kInvalidArgument, "[{}] {} {} has shape {}, but {} {} has {}", op.name, roles[role], k,
             m.shape.str(), roles[0], k, p.shape.str());
    }
  call.num_outputs = 0;
  for (int role = 0; role < r; ++role) {
    if (role == 1) continue;
    for (int k = 0; k < n; ++k) {
      const TensorMeta& m = in[first + role * n + k];
      call.out[call.num_outputs] = m;
      call.result[call.num_outputs] = m.shape;
      ++call.num_outputs;
    }
  }
  return n;
}

void infer_sgd(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const double momentum = call.attrs.get_float("momentum"), dampening = call.attrs.get_float("dampening"),
               wd = call.attrs.get_float("weight_decay");
  const bool nesterov = call.attrs.get_bool("nesterov");
  check_range(op, "momentum", momentum, 0, HUGE_VAL, true);
  check_range(op, "dampening", dampening, 0, 1, false);
  check_range(op, "weight_decay", wd, 0, HUGE_VAL, true);
  if (nesterov && (momentum <= 0 || dampening != 0))
    fail(Code::kInvalidArgument, "[{}] nesterov needs momentum > 0 and dampening = 0 (got momentum {}, dampening {})",
         op.name, momentum, dampening);
  check_scalar(op, in[0], "lr", {F32, F64});
  check_scalar(op, in[1], "grad_scale", {F32, F64});
  const bool with_bufs = momentum > 0;
  const int count = call.num_inputs - 2;
  std::string hint;
  if (with_bufs && count % 2 == 0 && count % 3 != 0) hint = " (momentum > 0 needs a momentum buffer per param)";
  if (!with_bufs && count % 3 == 0 && count % 2 != 0) hint = " (momentum buffers are passed only when momentum > 0)";
  if (with_bufs)
    infer_group(op, in, 2, {"param", "grad", "buf"}, hint, call);
  else
    infer_group(op, in, 2, {"param", "grad"}, hint, call);
}

void infer_adam(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_range(op, "beta1", call.attrs.get_float("beta1"), 0, 1, true);
  check_range(op, "beta2", call.attrs.get_float("beta2"), 0, 1, true);
  check_range(op, "eps", call.attrs.get_float("eps"), 0, HUGE_VAL, true);
  check_range(op, "weight_decay", call.attrs.get_float("weight_decay"), 0, HUGE_VAL, true);
  check_scalar(op, in[0], "lr", {F32, F64});
  check_scalar(op, in[1], "step", {F32, F64, I32, I64});
  check_scalar(op, in[2], "grad_scale", {F32, F64});
  if (call.attrs.get_bool("amsgrad"))
    infer_group(op, in, 3, {"param", "grad", "m", "v", "vmax"}, "", call);
  else
    infer_group(op, in, 3, {"param", "grad", "m", "v"}, "", call);
}

// The tensors of a norm: one float dtype; the norm is f64 for f64, else f32.
DType check_norm_inputs(const OpDef& op, const TensorMeta* in, int n) {
  const DType T = in[0].dtype;
  if (!is_float(T))
    fail(Code::kInvalidArgument, "[{}] tensor 0 has dtype {}; tensors are f32, f64, f16 or bf16", op.name,
         dtype_name(T));
  for (int k = 1; k < n; ++k)
    if (in[k].dtype != T)
      fail(Code::kInvalidArgument, "[{}] tensor {} has dtype {}, tensor 0 has {}; cast first", op.name, k,
           dtype_name(in[k].dtype), dtype_name(T));
  return T == F64 ? F64 : F32;
}

void infer_global_norm(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const DType out = check_norm_inputs(op, in, call.num_inputs);
  call.num_outputs = 1;
  call.out[0] = {out, Shape()};
  call.result[0] = Shape();
}

void infer_clip(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const double max_norm = call.attrs.get_float("max_norm");
  if (!(max_norm > 0) || std::isinf(max_norm))
    fail(Code::kInvalidArgument, "[{}] max_norm must be positive and finite, got {}", op.name, max_norm);
  const int n = call.num_inputs;
  if (n + 1 > kMaxOpOutputs)
    fail(Code::kInvalidArgument, "[{}] clips at most {} tensors per call, got {}; split the list", op.name,
         kMaxOpOutputs - 1, n);
  const DType out = check_norm_inputs(op, in, n);
  for (int k = 0; k < n; ++k) {
    call.out[k] = in[k];
    call.result[k] = in[k].shape;
  }
  call.out[n] = {out, Shape()};
  call.result[n] = Shape();
  call.num_outputs = n + 1;
}

// Output o of an update replaces input `scalars + role * N + k` (grads,
// role 1, have no output).
template <int kScalars>
int update_in_place(const OpCall& call, int o) {
  const int n = call.num_inputs - kScalars - call.num_outputs;
  if (n <= 0 || o < 0 || o >= call.num_outputs) return -1;
  const int role = o / n;
  return kScalars + (role == 0 ? 0 : role + 1) * n + o % n;
}

int clip_in_place(const OpCall& call, int o) { return o < call.num_inputs ? o : -1; }

Cost bytes_and(const OpCall& call, double flops_per_element) {
  Cost c;
  double elements = 0;
  for (int i = 0; i < call.num_inputs; ++i) {
    const double n = static_cast<double>(call.in[i].shape.numel());
    elements += n;
    c.bytes += n * static_cast<double>(dtype_size(call.in[i].dtype));
  }
  for (int i = 0; i < call.num_outputs; ++i)
    c.bytes += static_cast<double>(call.out[i].shape.numel()) * static_cast<double>(dtype_size(call.out[i].dtype));
  c.flops = elements * flops_per_element;
  return c;
}

// Flops per element of all inputs (params, grads and states together).
Cost sgd_cost(const OpCall& call) { return bytes_and(call, 2); }
Cost adam_cost(const OpCall& call) { return bytes_and(call, 4); }
Cost norm_cost(const OpCall& call) { return bytes_and(call, 2); }

AttrSpec float_attr(const char* name, double v) { return {name, AttrType::kFloat, false, AttrValue::of_float(v)}; }
AttrSpec bool_attr(const char* name, bool v) { return {name, AttrType::kBool, false, AttrValue::of_bool(v)}; }
// shard_axis: the mesh axis optimizer state is split over (shard_update); -1 none.
AttrSpec int_attr(const char* name, int64_t v) { return {name, AttrType::kInt, false, AttrValue::of_int(v)}; }

// ---- decompositions -------------------------------------------------------------
// Into elementwise ops, casts and sums, for a device whose plugin has no
// fused kernel for them: a vendor plugin with a partial op set still trains.
// The arithmetic follows docs/ops-optim.md step by step, in the state dtype
// (f32 for f16/bf16 params), so results match the fused kernels to rounding.

using namespace rules;  // the rule vocabulary (ops/rule_helpers.h)

V decompose_sgd(ir::Builder& b, const V& x, const Attrs& a) {
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

V decompose_adam(ir::Builder& b, const V& x, const Attrs& a) {
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

V decompose_global_norm(ir::Builder& b, const V& x, const Attrs&) { return {norm_of(b, x)}; }

V decompose_clip(ir::Builder& b, const V& x, const Attrs& a) {
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

// Sharding (ir/sharding.h): an update is elementwise per parameter, so the
// grad and state of parameter j take parameter j's layout (a parameter not
// placed yet takes its gradient's), and so do the outputs for it; the
// scalar inputs are replicated. Partial gradients are summed first.
// Attribute shard_axis = a >= 0 (optimizer-state sharding under
// semi_auto_parallel, MindSpore's enable_parallel_optimizer): a parameter
// whose layout leaves dim 0 whole and mesh axis a unused, dim 0 divisible by
// it, is updated on its rows split over a -- its state is stored that way,
// its gradient is reduce-scattered (a partial sum) or sliced into it, and the
// new value all-gathered back into the parameter's layout (ZeRO-2).
bool shard_update(const ShardQuery& q, ShardPlan& p) {
  const bool adam = q.op->name == "adam_update";
  const size_t scalars = adam ? 3 : 2;
  const size_t groups = adam ? (q.attrs->get_bool("amsgrad") ? 5 : 4) : (q.attrs->get_float("momentum") > 0 ? 3 : 2);
  if (q.in.size() <= scalars || (q.in.size() - scalars) % groups != 0) return false;
  const size_t n = (q.in.size() - scalars) / groups;
  std::vector<TensorLayout> of(n);
  for (size_t j = 0; j < n; ++j) {
    const TensorLayout &w = q.in_layouts[scalars + j], &g = q.in_layouts[scalars + n + j];
    of[j] = !w.free ? w : !g.free ? g : TensorLayout::replicated(q.in[scalars + j].shape.rank);
    of[j].free = false;
    of[j].partial = 0;
    const int64_t a = q.attrs->get_int("shard_axis");
    const Shape& shape = q.in[scalars + j].shape;
    if (a >= 0 && a < static_cast<int64_t>(q.mesh.size()) && q.mesh[static_cast<size_t>(a)] > 1 && shape.rank >= 1 &&
        of[j].dims[0] == kReplicated && shape.dims[0] % q.mesh[static_cast<size_t>(a)] == 0 &&
        std::find(of[j].dims.begin(), of[j].dims.end(), static_cast<int>(a)) == of[j].dims.end())
      of[j].dims[0] = static_cast<int>(a);
  }
  p.in.clear();
  for (size_t i = 0; i < q.in.size(); ++i)
    p.in.push_back(i < scalars ? TensorLayout::replicated(q.in[i].shape.rank) : of[(i - scalars) % n]);
  p.out.clear();
  for (size_t o = 0; o < q.out.size(); ++o) p.out.push_back(of[o % n]);
  return true;
}

OpDef def(const char* name, std::vector<std::string> inputs, std::vector<std::string> outputs,
          std::vector<AttrSpec> attrs, InferFn infer, CostFn cost, DecomposeFn decompose, std::string doc) {
  OpDef d;
  d.name = name;
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.attrs = std::move(attrs);
  d.dtypes = kFloats;
  d.infer = infer;
  d.doc = std::move(doc);
  // Inference checks every input's dtype itself (the list mixes params with
  // f32 state and scalars of their own dtypes): an index no input has.
  d.typed_inputs = {static_cast<int>(d.inputs.size())};
  d.variadic = true;
  d.dynamic_outputs = true;
  d.cost = cost;
  // Not differentiable: they run after the gradients are taken, on values
  // no loss depends on.
  Rules{nullptr, decompose, false}.apply(d);
  return d;
}

void register_optim_ops(OpRegistry& r) {
  OpDef sgd = def("sgd_update", {"lr", "grad_scale", "tensors"}, {"updated"},
                  {float_attr("momentum", 0), float_attr("dampening", 0), float_attr("weight_decay", 0),
                   bool_attr("nesterov", false), int_attr("shard_axis", -1)},
                  infer_sgd, sgd_cost, decompose_sgd,
                  "one SGD step of a parameter group (PyTorch SGD semantics): tensors = params, grads[, momentum "
                  "buffers when momentum > 0], N of each; outputs the new params[ and buffers]. lr and grad_scale "
                  "are f32/f64 scalars; g = grad_scale*g + weight_decay*p; b = momentum*b + (1-dampening)*g; "
                  "p -= lr * (nesterov ? g + momentum*b : b). Buffers are f32 for f16/bf16 params. "
                  "See docs/ops-optim.md");
  sgd.in_place = true;
  sgd.in_place_input = update_in_place<2>;
  sgd.sharding = shard_update;
  r.add(std::move(sgd));

  OpDef adam = def("adam_update", {"lr", "step", "grad_scale", "tensors"}, {"updated"},
                   {float_attr("beta1", 0.9), float_attr("beta2", 0.999), float_attr("eps", 1e-8),
                    float_attr("weight_decay", 0), bool_attr("decoupled", false), bool_attr("amsgrad", false),
                    int_attr("shard_axis", -1)},
                   infer_adam, adam_cost, decompose_adam,
                   "one Adam (decoupled=false) or AdamW (decoupled=true) step of a parameter group (PyTorch "
                   "semantics): tensors = params, grads, m, v[, vmax when amsgrad], N of each; outputs the new "
                   "params, m, v[, vmax]. lr and grad_scale are f32/f64 scalars, step (counting from 1) an "
                   "f32/f64/i32/i64 scalar; step < 1 gives NaN. State is f32 for f16/bf16 params. See "
                   "docs/ops-optim.md");
  adam.in_place = true;
  adam.in_place_input = update_in_place<3>;
  adam.sharding = shard_update;
  r.add(std::move(adam));

  r.add(def("global_norm", {"tensors"}, {"norm"}, {}, infer_global_norm, norm_cost, decompose_global_norm,
            "sqrt of the sum of squares of every element of every tensor (one float dtype), summed in double; "
            "an f64 scalar for f64 tensors, else f32"));

  OpDef clip = def("clip_by_global_norm", {"tensors"}, {"clipped"}, {{"max_norm", AttrType::kFloat, true, {}}},
                   infer_clip, norm_cost, decompose_clip,
                   "every tensor times min(1, max_norm / (global_norm + 1e-6)) (PyTorch's clip_grad_norm_); "
                   "outputs the scaled tensors, then the norm (as global_norm)");
  clip.in_place = true;
  clip.in_place_input = clip_in_place;
  r.add(std::move(clip));
}

}  // namespace

SPORA_OP_FAMILY(register_optim_ops);

}  // namespace spora
