// Reference elementwise kernels: the op table, attribute parsing and the
// broadcast iteration space. The math is in elementwise_unary.cpp,
// elementwise_binary.cpp and elementwise_where_cast.cpp.
#include "elementwise.h"

#include <cmath>
#include <cstring>

namespace spora::plugin::ew {

// From the op table; cost: ~1 for loads/stores and compares, more for libm
// calls.
const OpInfo kOps[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) {name, Op::k##Id, arity, cost, flags},
#include <spora/ops_elementwise.def>
};
const int kNumOps = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));

Bcast make_bcast(const Shape& out, const Shape* in, int n) {
  Bcast b;
  b.rank = 0;
  bool flags[SPORA_MAX_RANK][kMaxIn] = {};  // per merged dim: input k broadcasts it
  for (int d = 0; d < out.rank; ++d) {
    if (out.dims[d] == 1) continue;  // contributes nothing to any offset
    bool bc[kMaxIn] = {};
    for (int k = 0; k < n; ++k) bc[k] = in[k].dims[d] == 1;
    const bool merge = b.rank > 0 && std::memcmp(bc, flags[b.rank - 1], sizeof bc) == 0;
    if (merge) {
      b.dims[b.rank - 1] *= out.dims[d];
    } else {
      b.dims[b.rank] = out.dims[d];
      std::memcpy(flags[b.rank], bc, sizeof bc);
      ++b.rank;
    }
  }
  if (b.rank == 0) {  // every dim is 1: one element
    b.rank = 1;
    b.dims[0] = 1;
    return b;
  }
  for (int k = 0; k < n; ++k) {
    int64_t run = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      b.strides[k][d] = flags[d][k] ? 0 : run;
      if (!flags[d][k]) run *= b.dims[d];
    }
  }
  return b;
}

namespace {

bool is_float(int32_t d) {
  return d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
}

bool to_bool(Op op) {
  return op >= Op::kEqual && op <= Op::kLogicalXor;
}

void run_all(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  s.range(s, in, out, 0, s.numel);
}

Params parse(const KernelPlan& p) {
  Params prm;
  prm.alpha = p.attrs.get_float("alpha", 0.01);
  prm.beta = p.attrs.get_float("beta", 1.0);
  prm.threshold = p.attrs.get_float("threshold", 20.0);
  prm.lo = p.attrs.get_float("min", -HUGE_VAL);
  prm.hi = p.attrs.get_float("max", HUGE_VAL);
  prm.gelu_tanh = p.attrs.get_string("approximate", "none") == "tanh";
  return prm;
}

}  // namespace

spora_plugin_error_t* plan(KernelPlan& p) {
  const OpInfo* info = nullptr;
  for (int i = 0; i < kNumOps; ++i)
    if (p.op == kOps[i].name) info = &kOps[i];
  if (!info) return unsupported(p, "not an elementwise op");
  if (auto* e = expect_operands(p, info->inputs, 1)) return e;
  auto s = std::make_shared<State>();
  s->info = info;
  s->prm = parse(p);
  const TensorInfo& y = p.out[0];
  s->numel = y.shape.numel();
  const int32_t dt = p.in[info->inputs == 3 ? 1 : 0].dtype;
  if (info->inputs == 1) {
    if (p.in[0].shape.numel() != s->numel) return invalid(p, "input and output sizes differ");
    if (info->op == Op::kCast) {
      s->range = pick_cast(dt, y.dtype);
    } else {
      if (y.dtype != dt) return invalid(p, "output dtype differs from the input's");
      s->range = pick_unary(info->op, dt);
    }
  } else {
    Shape shapes[kMaxIn];
    for (int i = 0; i < info->inputs; ++i) {
      if (!broadcastable(p.in[i].shape, y.shape))
        return invalid(p, "inputs do not broadcast to the output (pad inputs to the output rank)");
      shapes[i] = p.in[i].shape;
    }
    s->bc = make_bcast(y.shape, shapes, info->inputs);
    if (info->op == Op::kWhere) {
      if (p.in[0].dtype != SPORA_DTYPE_BOOL) return invalid(p, "cond must be bool");
      if (p.in[2].dtype != dt || y.dtype != dt) return invalid(p, "x, y and the output differ in dtype");
      s->range = pick_where(dt);
    } else {
      if (p.in[1].dtype != dt) return invalid(p, "inputs differ in dtype");
      if (y.dtype != (to_bool(info->op) ? SPORA_DTYPE_BOOL : dt)) return invalid(p, "wrong output dtype");
      if (info->op == Op::kDiv && !is_float(dt)) return unsupported(p, "integer division: cast to a float first");
      s->range = pick_binary(info->op, dt);
    }
  }
  if (!s->range)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) +
                              (info->op == Op::kCast ? std::string(" -> ") + dtype_name(y.dtype) : "") + " has no kernel");
  p.state = s;
  p.run = run_all;
  return nullptr;
}

namespace {
void register_kernels(KernelTable& t) {
  for (int i = 0; i < kNumOps; ++i) t.add({kOps[i].name, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);
}  // namespace

}  // namespace spora::plugin::ew
