// Reference optimizer kernels (sgd_update, adam_update, global_norm,
// clip_by_global_norm): the plan checks of kernels/optim.h and its range
// functions run over the whole group on the calling thread.
#include "optim.h"

#include <cstring>
#include <string>

namespace spora::plugin::optim {
namespace {

constexpr int32_t F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                  I32 = SPORA_DTYPE_I32, I64 = SPORA_DTYPE_I64;

bool is_float(int32_t t) { return t == F32 || t == F64 || t == F16 || t == BF16; }
int32_t state_dtype(int32_t t) { return t == F16 || t == BF16 ? F32 : t; }
int32_t norm_dtype(int32_t t) { return t == F64 ? F64 : F32; }

double read_scalar(const void* p, int32_t dtype) {
  switch (dtype) {
    case F32: { float v; std::memcpy(&v, p, 4); return v; }
    case F64: { double v; std::memcpy(&v, p, 8); return v; }
    case I32: { int32_t v; std::memcpy(&v, p, 4); return static_cast<double>(v); }
    case I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    default: return NAN;  // refused at plan time
  }
}

}  // namespace

spora_plugin_error_t* describe(const KernelPlan& p, Plan* out) {
  Plan u;
  if (p.op == "sgd_update") {
    u.kind = Kind::kSgd;
    u.scalars = 2;
    u.momentum = p.attrs.get_float("momentum", 0);
    u.dampening = p.attrs.get_float("dampening", 0);
    u.nesterov = p.attrs.get_bool("nesterov", false);
    u.momentum_bufs = u.momentum > 0;
    u.roles = u.momentum_bufs ? 3 : 2;
  } else if (p.op == "adam_update") {
    u.kind = Kind::kAdam;
    u.scalars = 3;
    u.beta1 = p.attrs.get_float("beta1", 0.9);
    u.beta2 = p.attrs.get_float("beta2", 0.999);
    u.eps = p.attrs.get_float("eps", 1e-8);
    u.decoupled = p.attrs.get_bool("decoupled", false);
    u.amsgrad = p.attrs.get_bool("amsgrad", false);
    u.roles = u.amsgrad ? 5 : 4;
  } else {
    u.kind = p.op == "global_norm" ? Kind::kNorm : Kind::kClip;
    u.roles = 1;
    u.max_norm = p.attrs.get_float("max_norm", 1);
  }
  u.weight_decay = p.attrs.get_float("weight_decay", 0);
  const int32_t count = p.num_inputs - u.scalars;
  if (count < u.roles || count % u.roles != 0)
    return invalid(p, "takes " + std::to_string(u.scalars) + " scalars and " + std::to_string(u.roles) +
                          " lists of equal length, got " + std::to_string(p.num_inputs) + " inputs");
  u.n = count / u.roles;
  static const int32_t kLr[] = {F32, F64}, kStep[] = {F32, F64, I32, I64};
  for (int32_t i = 0; i < u.scalars; ++i) {
    const TensorInfo& s = p.in[i];
    const bool step = u.kind == Kind::kAdam && i == 1;
    const int32_t* ok = step ? kStep : kLr;
    const int nok = step ? 4 : 2;
    if (s.shape.numel() != 1 || std::find(ok, ok + nok, s.dtype) == ok + nok)
      return invalid(p, "scalar input " + std::to_string(i) + " must be one element of a supported dtype");
    u.scalar_dtype[i] = s.dtype;
  }
  const int32_t T = p.in[u.scalars].dtype;
  if (!is_float(T)) return unsupported(p, std::string("dtype ") + dtype_name(T) + " has no kernel");
  u.dtype = T;
  u.offset.assign(static_cast<size_t>(u.n) + 1, 0);
  for (int32_t role = 0; role < u.roles; ++role)
    for (int32_t k = 0; k < u.n; ++k) {
      const TensorInfo& t = p.in[u.scalars + role * u.n + k];
      const int32_t want = role < 2 ? T : state_dtype(T);
      if (t.dtype != want || t.shape.numel() != p.in[u.scalars + k].shape.numel())
        return invalid(p, "list tensor " + std::to_string(role * u.n + k) + " must be " + dtype_name(want) +
                              " with param " + std::to_string(k) + "'s element count");
    }
  for (int32_t k = 0; k < u.n; ++k) {
    int64_t next;
    if (__builtin_add_overflow(u.offset[static_cast<size_t>(k)], p.in[u.scalars + k].shape.numel(), &next))
      return invalid(p, "tensors too large");
    u.offset[static_cast<size_t>(k) + 1] = next;
  }
  // Outputs: the update's non-grad roles, or the clipped tensors, then the norm.
  const bool update = u.kind == Kind::kSgd || u.kind == Kind::kAdam;
  const int32_t lists = update ? u.roles - 1 : (u.kind == Kind::kClip ? 1 : 0);
  const int32_t want_outputs = lists * u.n + (update ? 0 : 1);
  if (p.num_outputs != want_outputs) return invalid(p, "must have " + std::to_string(want_outputs) + " outputs");
  for (int32_t slot = 0; slot < lists; ++slot)
    for (int32_t k = 0; k < u.n; ++k) {
      const TensorInfo& o = p.out[slot * u.n + k];
      const int32_t want = slot == 0 ? T : state_dtype(T);
      if (o.dtype != want || o.shape.numel() != p.in[u.scalars + k].shape.numel())
        return invalid(p, "output " + std::to_string(slot * u.n + k) + " must be " + dtype_name(want) +
                              " with its input's element count");
    }
  if (!update) {
    const TensorInfo& o = p.out[want_outputs - 1];
    if (o.dtype != norm_dtype(T) || o.shape.numel() != 1)
      return invalid(p, std::string("the norm must be a ") + dtype_name(norm_dtype(T)) + " scalar");
  }
  *out = std::move(u);
  return nullptr;
}

Coeffs coeffs(const Plan& u, const void* const* in) {
  Coeffs c;
  c.lr = read_scalar(in[0], u.scalar_dtype[0]);
  if (u.kind == Kind::kSgd) {
    c.grad_scale = read_scalar(in[1], u.scalar_dtype[1]);
    return c;
  }
  const double step = read_scalar(in[1], u.scalar_dtype[1]);
  c.grad_scale = read_scalar(in[2], u.scalar_dtype[2]);
  if (step >= 1) {
    c.step_size = c.lr / (1 - std::pow(u.beta1, step));
    c.bc2_sqrt = std::sqrt(1 - std::pow(u.beta2, step));
  } else {
    // Bias correction divides by zero at step 0: make that visible.
    c.step_size = c.bc2_sqrt = NAN;
  }
  c.decay = u.decoupled ? 1 - c.lr * u.weight_decay : 1;
  c.l2 = u.decoupled ? 0 : u.weight_decay;
  return c;
}

double finish_norm(const Plan& u, const double* partials) {
  double s = 0;
  for (int64_t b = 0; b < norm_blocks(u); ++b) s += partials[b];
  return std::sqrt(s);
}

double clip_factor(const Plan& u, double norm) {
  const double f = u.max_norm / (norm + 1e-6);
  return f < 1 || f != f ? f : 1.0;  // NaN stays NaN, as torch.clamp
}

void store_norm(const Plan& u, double norm, void* out) {
  if (u.dtype == F64) {
    std::memcpy(out, &norm, 8);
  } else {
    const float f = static_cast<float>(norm);
    std::memcpy(out, &f, 4);
  }
}

namespace {

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const Plan& u = p.get<Plan>();
  if (u.kind == Kind::kSgd || u.kind == Kind::kAdam) {
    const Coeffs c = coeffs(u, in);
    update_range(u, c, in, out, 0, u.total());
    return;
  }
  auto* partials = static_cast<double*>(workspace);
  norm_blocks_range(u, in, partials, 0, norm_blocks(u));
  const double norm = finish_norm(u, partials);
  if (u.kind == Kind::kClip) scale_range(u, clip_factor(u, norm), in, out, 0, u.total());
  store_norm(u, norm, out[p.num_outputs - 1]);
}

spora_plugin_error_t* plan(KernelPlan& p) {
  Plan u;
  if (auto* e = describe(p, &u)) return e;
  if (u.kind == Kind::kNorm || u.kind == Kind::kClip) p.workspace = norm_workspace(u);
  p.state = std::make_shared<Plan>(std::move(u));
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const char* op : {"sgd_update", "adam_update", "global_norm", "clip_by_global_norm"}) t.add({op, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin::optim
