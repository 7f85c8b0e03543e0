// Plans ops onto the kernels of kernels/*.cl (see ze_recipe.h): f32, f16
// and bf16 for elementwise, reductions, matmul and softmax, f32 for the
// optimizer family. Other dtypes are left to the host (decomposition or the
// cpu fallback).
#include "ze_recipe.h"

#include <algorithm>
#include <cmath>

#include "error.h"
#include "kernels/elementwise.h"  // plugins/common; includes spora/ops_elementwise.h
#include "kernels/optim.h"

namespace spora::ze {
namespace {

using spora::plugin::KernelPlan;
using spora::plugin::Shape;

// A long8 kernel argument.
struct Long8 {
  int64_t v[8] = {};
};

constexpr uint32_t kGroup1d = 256;

spora_plugin_error_t* no_kernel(const KernelPlan& p, const std::string& why) {
  return spora::plugin::make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[ze] " + p.op + ": " + why);
}
spora_plugin_error_t* bad(const KernelPlan& p, const std::string& why) {
  return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[ze] " + p.op + ": " + why);
}

uint32_t groups_for(int64_t n, uint32_t group) { return static_cast<uint32_t>((n + group - 1) / group); }

Launch launch_1d(const std::string& kernel, int64_t n) {
  Launch l;
  l.kernel = kernel;
  l.groups[0] = groups_for(n, kGroup1d);
  l.group_size[0] = kGroup1d;
  return l;
}

// The kernel-name suffix of the float storage type every operand shares
// ("f32", "f16", "bf16"), or NULL.
const char* float_suffix(const KernelPlan& p) {
  if (p.num_inputs < 1) return nullptr;
  const int32_t dt = p.in[0].dtype;
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dt) return nullptr;
  for (int i = 0; i < p.num_outputs; ++i)
    if (p.out[i].dtype != dt) return nullptr;
  switch (dt) {
    case SPORA_DTYPE_F32: return "f32";
    case SPORA_DTYPE_F16: return "f16";
    case SPORA_DTYPE_BF16: return "bf16";
    default: return nullptr;
  }
}

// Group counts are 32-bit in both Level Zero and this plan.
spora_plugin_error_t* check_grid(const KernelPlan& p, int64_t n, uint32_t group) {
  if (n < 0 || (n + group - 1) / group > 0xffffffffLL) return no_kernel(p, "too many elements for one launch");
  return nullptr;
}

// The elementwise rows (spora/ops_elementwise.def) that kernels/
// elementwise.cl implements: every UNARY row (ew_unary) and every BINARY row
// (ew_binary); a row's op code is its SPORA_EW_* code, the .cl switches' case
// labels. Comparisons, logical ops, cast and where run on the host.
struct EwRow {
  const char* name;
  int code;
};
#define ZE_IF_UNARY_UNARY(Id, name) {name, SPORA_EW_##Id},
#define ZE_IF_UNARY_NOT(Id, name)
#define ZE_IF_UNARY_CAST(Id, name)
#define ZE_IF_UNARY_BINARY(Id, name)
#define ZE_IF_UNARY_COMPARE(Id, name)
#define ZE_IF_UNARY_WHERE(Id, name)
const EwRow kUnary[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) ZE_IF_UNARY_##kind(Id, name)
#include <spora/ops_elementwise.def>
};
#define ZE_IF_BINARY_UNARY(Id, name)
#define ZE_IF_BINARY_NOT(Id, name)
#define ZE_IF_BINARY_CAST(Id, name)
#define ZE_IF_BINARY_BINARY(Id, name) {name, SPORA_EW_##Id},
#define ZE_IF_BINARY_COMPARE(Id, name)
#define ZE_IF_BINARY_WHERE(Id, name)
const EwRow kBinary[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) ZE_IF_BINARY_##kind(Id, name)
#include <spora/ops_elementwise.def>
};

template <size_t N>
int code_of(const EwRow (&rows)[N], const std::string& op) {
  for (const EwRow& r : rows)
    if (op == r.name) return r.code;
  return -1;
}
const char* const kReduce[] = {"sum", "max", "min", "mean"};  // op codes 0 sum, 1 max, 2 min; mean = scaled sum

template <size_t N>
int index_of(const char* const (&names)[N], const std::string& op) {
  for (size_t i = 0; i < N; ++i)
    if (op == names[i]) return static_cast<int>(i);
  return -1;
}

spora_plugin_error_t* unary(const KernelPlan& p, int code, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 1 || p.num_outputs != 1) return bad(p, "expects 1 input and 1 output");
  if (p.in[0].shape != p.out[0].shape) return bad(p, "input and output shapes differ");
  const int64_t n = p.out[0].shape.numel();
  if (auto* e = check_grid(p, n, kGroup1d)) return e;
  if (n == 0) return nullptr;
  // Attributes with the reference's defaults (plugins/common/kernels/elementwise.cpp).
  float p0 = 0, p1 = 0;
  const std::string& op = p.op;
  if (op == "leaky_relu") {
    p0 = static_cast<float>(p.attrs.get_float("alpha", 0.01));
  } else if (op == "gelu") {
    p0 = p.attrs.get_string("approximate", "none") == "tanh" ? 1.0f : 0.0f;
  } else if (op == "softplus") {
    p0 = static_cast<float>(p.attrs.get_float("beta", 1.0));
    p1 = static_cast<float>(p.attrs.get_float("threshold", 20.0));
  } else if (op == "clip") {
    p0 = static_cast<float>(p.attrs.get_float("min", -HUGE_VAL));
    p1 = static_cast<float>(p.attrs.get_float("max", HUGE_VAL));
  }
  Launch l = launch_1d("ew_unary_" + sfx, n);
  l.args = {buffer_arg(0), buffer_arg(1), value_arg<int64_t>(n), value_arg<int32_t>(code), value_arg(p0),
            value_arg(p1)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

spora_plugin_error_t* binary(const KernelPlan& p, int code, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 2 || p.num_outputs != 1) return bad(p, "expects 2 inputs and 1 output");
  const Shape& o = p.out[0].shape;
  const Shape in[2] = {p.in[0].shape, p.in[1].shape};
  for (const Shape& s : in)
    if (!spora::plugin::broadcastable(s, o)) return bad(p, "input " + s.str() + " does not broadcast to " + o.str());
  const int64_t n = o.numel();
  if (auto* e = check_grid(p, n, kGroup1d)) return e;
  if (n == 0) return nullptr;
  const spora::plugin::ew::Bcast b = spora::plugin::ew::make_bcast(o, in, 2);
  Long8 dims, sa, sb;
  for (int d = 0; d < b.rank; ++d) {
    dims.v[d] = b.dims[d];
    sa.v[d] = b.strides[0][d];
    sb.v[d] = b.strides[1][d];
  }
  Launch l = launch_1d("ew_binary_" + sfx, n);
  l.args = {buffer_arg(0), buffer_arg(1), buffer_arg(2), value_arg<int64_t>(n), value_arg<int32_t>(code),
            value_arg<int32_t>(b.rank), value_arg(dims), value_arg(sa), value_arg(sb)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

spora_plugin_error_t* reduce(const KernelPlan& p, int which, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 1 || p.num_outputs != 1) return bad(p, "expects 1 input and 1 output");
  const Shape &in = p.in[0].shape, &o = p.out[0].shape;
  if (in.rank != o.rank) return bad(p, "output must keep reduced dims as 1");
  bool red[SPORA_MAX_RANK] = {};
  std::vector<int64_t> axes = p.attrs.get_ints("axes");
  if (axes.empty())
    for (int i = 0; i < in.rank; ++i) axes.push_back(i);
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= in.rank) return bad(p, "axis out of range");
    red[ax] = true;
  }
  Long8 kdims, kstr, rdims, rstr;
  int krank = 0, rrank = 0;
  int64_t stride = 1, count = 1;
  for (int d = in.rank - 1; d >= 0; --d) {
    if (o.dims[d] != (red[d] ? 1 : in.dims[d])) return bad(p, "output shape does not match the reduction");
    (void)d;
  }
  // Strides of the input, then the kept and reduced dims in order.
  int64_t strides[SPORA_MAX_RANK] = {};
  for (int d = in.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= in.dims[d];
  }
  for (int d = 0; d < in.rank; ++d) {
    if (red[d]) {
      rdims.v[rrank] = in.dims[d];
      rstr.v[rrank++] = strides[d];
      count *= in.dims[d];
    } else {
      kdims.v[krank] = in.dims[d];
      kstr.v[krank++] = strides[d];
    }
  }
  const int64_t outputs = o.numel();
  if (outputs == 0) return nullptr;
  if (count == 0 && (which == 1 || which == 2)) return bad(p, "reduction over zero elements");
  if (outputs > 0xffffffffLL) return no_kernel(p, "too many outputs for one launch");
  const int32_t code = which == 3 ? 0 : which;
  const float scale = which == 3 ? 1.0f / static_cast<float>(count) : 1.0f;
  Launch l;
  l.kernel = "reduce_" + sfx;
  l.groups[0] = static_cast<uint32_t>(outputs);
  l.group_size[0] = 64;  // RED_GROUP in reduce.cl
  l.args = {buffer_arg(0), buffer_arg(1), value_arg<int32_t>(code), value_arg<int64_t>(count), value_arg(scale),
            value_arg<int32_t>(krank), value_arg(kdims), value_arg(kstr), value_arg<int32_t>(rrank), value_arg(rdims),
            value_arg(rstr)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

spora_plugin_error_t* matmul(const KernelPlan& p, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 2 || p.num_outputs != 1) return bad(p, "expects 2 inputs and 1 output");
  const Shape &a = p.in[0].shape, &b = p.in[1].shape, &y = p.out[0].shape;
  const bool ta = p.attrs.get_bool("transpose_a", false), tb = p.attrs.get_bool("transpose_b", false);
  const int r = y.rank;
  if (r < 2 || a.rank != r || b.rank != r) return bad(p, "operands must have the output's rank (>= 2)");
  const int64_t m = ta ? a.dims[r - 1] : a.dims[r - 2];
  const int64_t ka = ta ? a.dims[r - 2] : a.dims[r - 1];
  const int64_t kb = tb ? b.dims[r - 1] : b.dims[r - 2];
  const int64_t n = tb ? b.dims[r - 2] : b.dims[r - 1];
  if (ka != kb || y.dims[r - 2] != m || y.dims[r - 1] != n) return bad(p, "shapes do not contract");
  Long8 bdims, bsa, bsb;
  int64_t batch = 1, st_a = a.dims[r - 2] * a.dims[r - 1], st_b = b.dims[r - 2] * b.dims[r - 1];
  for (int d = r - 3; d >= 0; --d) {
    if ((a.dims[d] != y.dims[d] && a.dims[d] != 1) || (b.dims[d] != y.dims[d] && b.dims[d] != 1))
      return bad(p, "batch dims do not broadcast");
    bdims.v[d] = y.dims[d];
    bsa.v[d] = a.dims[d] == 1 ? 0 : st_a;
    bsb.v[d] = b.dims[d] == 1 ? 0 : st_b;
    st_a *= a.dims[d];
    st_b *= b.dims[d];
    batch *= y.dims[d];
  }
  if (y.numel() == 0) return nullptr;
  if (batch > 0xffffffffLL || (n + 15) / 16 > 0xffffffffLL || (m + 15) / 16 > 0xffffffffLL)
    return no_kernel(p, "too large for one launch");
  Launch l;
  l.kernel = "matmul_" + sfx;
  l.group_size[0] = l.group_size[1] = 16;  // TILE in matmul.cl
  l.groups[0] = groups_for(n, 16);
  l.groups[1] = groups_for(m, 16);
  l.groups[2] = static_cast<uint32_t>(batch);
  l.args = {buffer_arg(0), buffer_arg(1), buffer_arg(2), value_arg<int64_t>(m), value_arg<int64_t>(n),
            value_arg<int64_t>(ka), value_arg<int32_t>(ta), value_arg<int32_t>(tb), value_arg<int32_t>(r - 2),
            value_arg(bdims), value_arg(bsa), value_arg(bsb)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

spora_plugin_error_t* softmax(const KernelPlan& p, bool log_out, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 1 || p.num_outputs != 1) return bad(p, "expects 1 input and 1 output");
  const Shape& s = p.in[0].shape;
  if (s != p.out[0].shape) return bad(p, "input and output shapes differ");
  const int64_t axis = p.attrs.get_int("axis", s.rank - 1);
  if (s.rank > 0 && (axis < 0 || axis >= s.rank)) return bad(p, "axis out of range");
  int64_t outer = 1, len = 1, inner = 1;
  for (int d = 0; d < s.rank; ++d) {
    if (d < axis) outer *= s.dims[d];
    else if (d == axis) len = s.dims[d];
    else inner *= s.dims[d];
  }
  const int64_t lines = outer * inner;
  if (auto* e = check_grid(p, lines, 64)) return e;
  if (lines == 0 || len == 0) return nullptr;
  Launch l;
  l.kernel = "softmax_" + sfx;
  l.groups[0] = groups_for(lines, 64);
  l.group_size[0] = 64;
  l.args = {buffer_arg(0), buffer_arg(1), value_arg<int64_t>(outer), value_arg<int64_t>(len),
            value_arg<int64_t>(inner), value_arg<int32_t>(log_out ? 1 : 0)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

spora_plugin_error_t* softmax_grad(const KernelPlan& p, bool log_out, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 2 || p.num_outputs != 1) return bad(p, "expects y, dy and one output");
  const Shape& s = p.in[0].shape;
  if (s != p.in[1].shape || s != p.out[0].shape) return bad(p, "y, dy and dx shapes differ");
  const int64_t axis = p.attrs.get_int("axis", s.rank - 1);
  if (s.rank > 0 && (axis < 0 || axis >= s.rank)) return bad(p, "axis out of range");
  int64_t outer = 1, len = 1, inner = 1;
  for (int d = 0; d < s.rank; ++d) {
    if (d < axis) outer *= s.dims[d];
    else if (d == axis) len = s.dims[d];
    else inner *= s.dims[d];
  }
  const int64_t lines = outer * inner;
  if (auto* e = check_grid(p, lines, 64)) return e;
  if (lines == 0 || len == 0) return nullptr;
  Launch l;
  l.kernel = "softmax_grad_" + sfx;
  l.groups[0] = groups_for(lines, 64);
  l.group_size[0] = 64;
  l.args = {buffer_arg(0), buffer_arg(1), buffer_arg(2), value_arg<int64_t>(outer), value_arg<int64_t>(len),
            value_arg<int64_t>(inner), value_arg<int32_t>(log_out ? 1 : 0)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

// transpose and broadcast_to: one strided copy, for any dtype (by width).
spora_plugin_error_t* strided_copy(const KernelPlan& p, Recipe* out) {
  if (p.num_inputs != 1 || p.num_outputs != 1) return bad(p, "expects 1 input and 1 output");
  if (p.in[0].dtype != p.out[0].dtype) return bad(p, "input and output dtypes differ");
  const Shape &in = p.in[0].shape, &o = p.out[0].shape;
  if (in.rank != o.rank) return bad(p, "input and output ranks differ (the host pads broadcast_to's input)");
  int64_t st[SPORA_MAX_RANK] = {}, stride = 1;
  for (int d = in.rank - 1; d >= 0; --d) {
    st[d] = stride;
    stride *= in.dims[d];
  }
  Long8 dims, strides;
  if (p.op == "transpose") {
    const std::vector<int64_t> perm = p.attrs.get_ints("perm");
    if (perm.size() != static_cast<size_t>(in.rank)) return bad(p, "perm must list every axis");
    bool seen[SPORA_MAX_RANK] = {};
    for (int i = 0; i < in.rank; ++i) {
      const int64_t ax = perm[static_cast<size_t>(i)];
      if (ax < 0 || ax >= in.rank || seen[ax]) return bad(p, "perm is not a permutation");
      seen[ax] = true;
      if (o.dims[i] != in.dims[ax]) return bad(p, "output shape does not match perm");
      dims.v[i] = o.dims[i];
      strides.v[i] = st[ax];
    }
  } else {
    if (!spora::plugin::broadcastable(in, o)) return bad(p, "input does not broadcast to the output");
    for (int d = 0; d < o.rank; ++d) {
      dims.v[d] = o.dims[d];
      strides.v[d] = in.dims[d] == 1 ? 0 : st[d];
    }
  }
  const int64_t n = o.numel();
  if (auto* e = check_grid(p, n, kGroup1d)) return e;
  if (n == 0) return nullptr;
  const size_t width = spora::plugin::dtype_size(p.out[0].dtype);
  if (width != 1 && width != 2 && width != 4 && width != 8) return no_kernel(p, "no copy kernel for this dtype");
  Launch l = launch_1d("copy_" + std::to_string(width), n);
  l.args = {buffer_arg(0), buffer_arg(1), value_arg<int64_t>(n), value_arg<int32_t>(o.rank), value_arg(dims),
            value_arg(strides)};
  out->launches.push_back(std::move(l));
  return nullptr;
}

// linear: y = x @ w^T (matmul with transpose_b), then y += b in place
// (a broadcasting add reading and writing y element by element).
spora_plugin_error_t* linear(const KernelPlan& p, const std::string& sfx, Recipe* out) {
  if (p.num_inputs != 3 || p.num_outputs != 1) return bad(p, "expects x, weight, bias and one output");
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &b = p.in[2].shape, &y = p.out[0].shape;
  if (x.rank != 2 || w.rank != 2 || b.rank != 1 || y.rank != 2 || x.dims[1] != w.dims[1] || b.dims[0] != w.dims[0] ||
      y.dims[0] != x.dims[0] || y.dims[1] != w.dims[0])
    return bad(p, "expected x [M, K], weight [N, K], bias [N], y [M, N]");
  const int64_t m = x.dims[0], n = w.dims[0], k = x.dims[1];
  if (y.numel() == 0) return nullptr;
  if ((n + 15) / 16 > 0xffffffffLL || (m + 15) / 16 > 0xffffffffLL) return no_kernel(p, "too large for one launch");
  if (auto* e = check_grid(p, y.numel(), kGroup1d)) return e;
  const Long8 zero;
  Launch mm;
  mm.kernel = "matmul_" + sfx;
  mm.group_size[0] = mm.group_size[1] = 16;
  mm.groups[0] = groups_for(n, 16);
  mm.groups[1] = groups_for(m, 16);
  mm.args = {buffer_arg(0), buffer_arg(1), buffer_arg(3), value_arg<int64_t>(m), value_arg<int64_t>(n),
             value_arg<int64_t>(k), value_arg<int32_t>(0), value_arg<int32_t>(1), value_arg<int32_t>(0),
             value_arg(zero), value_arg(zero), value_arg(zero)};
  out->launches.push_back(std::move(mm));
  Shape row;
  row.rank = 2;
  row.dims[0] = 1;
  row.dims[1] = n;
  const Shape shapes[2] = {y, row};
  const spora::plugin::ew::Bcast bc = spora::plugin::ew::make_bcast(y, shapes, 2);
  Long8 dims, sa, sb;
  for (int d = 0; d < bc.rank; ++d) {
    dims.v[d] = bc.dims[d];
    sa.v[d] = bc.strides[0][d];
    sb.v[d] = bc.strides[1][d];
  }
  Launch add = launch_1d("ew_binary_" + sfx, y.numel());
  add.args = {buffer_arg(3), buffer_arg(2), buffer_arg(3), value_arg<int64_t>(y.numel()),
              value_arg<int32_t>(SPORA_EW_Add), value_arg<int32_t>(bc.rank), value_arg(dims), value_arg(sa),
              value_arg(sb)};
  out->launches.push_back(std::move(add));
  return nullptr;
}

spora_plugin_error_t* optimizer(const KernelPlan& p, Recipe* out) {
  namespace optim = spora::plugin::optim;
  optim::Plan u;
  if (auto* e = optim::describe(p, &u)) return e;
  if (u.dtype != SPORA_DTYPE_F32) return no_kernel(p, "only f32 parameters have a kernel");
  for (int i = 0; i < u.scalars; ++i)
    if (u.scalar_dtype[i] == SPORA_DTYPE_F64) return no_kernel(p, "f64 scalars have no kernel (no fp64 on the device)");
  const int32_t ni = p.num_inputs, n = u.n;
  for (int32_t k = 0; k < n; ++k) {
    const int64_t count = u.offset[static_cast<size_t>(k) + 1] - u.offset[static_cast<size_t>(k)];
    if (auto* e = check_grid(p, count, kGroup1d)) return e;
    if (count == 0) continue;
    const int32_t param = u.scalars + k, grad = u.scalars + n + k;
    if (u.kind == optim::Kind::kSgd) {
      const int32_t buf = u.momentum_bufs ? u.scalars + 2 * n + k : param;
      const int32_t p_out = ni + k, b_out = u.momentum_bufs ? ni + n + k : p_out;
      Launch l = launch_1d("sgd_update_f32", count);
      l.args = {buffer_arg(p_out), buffer_arg(b_out), buffer_arg(param), buffer_arg(grad), buffer_arg(buf),
                buffer_arg(0), value_arg<int32_t>(u.scalar_dtype[0]), buffer_arg(1),
                value_arg<int32_t>(u.scalar_dtype[1]), value_arg<int64_t>(count),
                value_arg(static_cast<float>(u.momentum)), value_arg(static_cast<float>(1.0 - u.dampening)),
                value_arg(static_cast<float>(u.weight_decay)), value_arg<int32_t>(u.momentum_bufs),
                value_arg<int32_t>(u.nesterov)};
      out->launches.push_back(std::move(l));
    } else {
      const int32_t m = u.scalars + 2 * n + k, v = u.scalars + 3 * n + k;
      const int32_t vmax = u.amsgrad ? u.scalars + 4 * n + k : v;
      const int32_t p_out = ni + k, m_out = ni + n + k, v_out = ni + 2 * n + k;
      const int32_t vmax_out = u.amsgrad ? ni + 3 * n + k : v_out;
      Launch l = launch_1d("adam_update_f32", count);
      l.args = {buffer_arg(p_out), buffer_arg(m_out), buffer_arg(v_out), buffer_arg(vmax_out), buffer_arg(param),
                buffer_arg(grad), buffer_arg(m), buffer_arg(v), buffer_arg(vmax), buffer_arg(0),
                value_arg<int32_t>(u.scalar_dtype[0]), buffer_arg(1), value_arg<int32_t>(u.scalar_dtype[1]),
                buffer_arg(2), value_arg<int32_t>(u.scalar_dtype[2]), value_arg<int64_t>(count),
                value_arg(static_cast<float>(u.beta1)), value_arg(static_cast<float>(u.beta2)),
                value_arg(static_cast<float>(u.eps)), value_arg(static_cast<float>(u.weight_decay)),
                value_arg<int32_t>(u.decoupled), value_arg<int32_t>(u.amsgrad)};
      out->launches.push_back(std::move(l));
    }
  }
  return nullptr;
}

// global_norm / clip_by_global_norm (kernels/optim.cl): partial sums per
// block, one finishing group, then the scaling.
spora_plugin_error_t* norm(const KernelPlan& p, Recipe* out) {
  namespace optim = spora::plugin::optim;
  optim::Plan u;
  if (auto* e = optim::describe(p, &u)) return e;
  if (u.dtype != SPORA_DTYPE_F32) return no_kernel(p, "only f32 tensors have a kernel");
  constexpr int64_t kBlock = 256 * 16;  // NORM_BLOCK in optim.cl
  const bool clip = u.kind == optim::Kind::kClip;
  int64_t parts = 0;
  for (int32_t k = 0; k < u.n; ++k) {
    const int64_t count = u.offset[static_cast<size_t>(k) + 1] - u.offset[static_cast<size_t>(k)];
    if (auto* e = check_grid(p, count, kBlock)) return e;
    if (count == 0) continue;
    Launch l;
    l.kernel = "sumsq_f32";
    l.groups[0] = groups_for(count, kBlock);
    l.group_size[0] = 256;
    l.args = {buffer_arg(k), value_arg<int64_t>(count), buffer_arg(kWorkspace), value_arg<int64_t>(parts)};
    parts += l.groups[0];
    out->launches.push_back(std::move(l));
  }
  Launch fin;
  fin.kernel = "norm_finish_f32";
  fin.group_size[0] = 256;
  fin.args = {buffer_arg(kWorkspace), value_arg<int64_t>(parts), buffer_arg(p.num_inputs + p.num_outputs - 1),
              value_arg(static_cast<float>(u.max_norm))};
  out->launches.push_back(std::move(fin));
  if (clip)
    for (int32_t k = 0; k < u.n; ++k) {
      const int64_t count = u.offset[static_cast<size_t>(k) + 1] - u.offset[static_cast<size_t>(k)];
      if (count == 0) continue;
      Launch l = launch_1d("scale_f32", count);
      l.args = {buffer_arg(k), buffer_arg(p.num_inputs + k), value_arg<int64_t>(count), buffer_arg(kWorkspace),
                value_arg<int64_t>(parts)};
      out->launches.push_back(std::move(l));
    }
  out->workspace = static_cast<size_t>(parts + 1) * sizeof(float);
  return nullptr;
}

}  // namespace

const char* const* recipe_ops() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const EwRow& r : kUnary) v.push_back(r.name);
    for (const EwRow& r : kBinary) v.push_back(r.name);
    for (const char* n : kReduce) v.push_back(n);
    for (const char* n : {"matmul", "linear", "softmax", "log_softmax", "softmax_grad", "log_softmax_grad",
                          "transpose", "broadcast_to", "sgd_update", "adam_update", "global_norm",
                          "clip_by_global_norm"})
      v.push_back(n);
    v.push_back(nullptr);
    return v;
  }();
  return names.data();
}

spora_plugin_error_t* make_recipe(const KernelPlan& p, Recipe* out) {
  const bool norm_op = p.op == "global_norm" || p.op == "clip_by_global_norm";
  const bool optim_op = p.op == "sgd_update" || p.op == "adam_update" || norm_op;
  // Layout copies move any dtype.
  if (p.op == "transpose" || p.op == "broadcast_to") return strided_copy(p, out);
  // Optimizer scalars may be integers (step); describe() checks those.
  const char* sfx = float_suffix(p);
  if (!optim_op && !sfx) return no_kernel(p, "only f32, f16 and bf16 (all operands alike) have kernels on this device");
  if (int c = code_of(kUnary, p.op); c >= 0) return unary(p, c, sfx, out);
  if (int c = code_of(kBinary, p.op); c >= 0) return binary(p, c, sfx, out);
  if (int i = index_of(kReduce, p.op); i >= 0) return reduce(p, i, sfx, out);
  if (p.op == "matmul") return matmul(p, sfx, out);
  if (p.op == "softmax" || p.op == "log_softmax") return softmax(p, p.op == "log_softmax", sfx, out);
  if (p.op == "softmax_grad" || p.op == "log_softmax_grad")
    return softmax_grad(p, p.op == "log_softmax_grad", sfx, out);
  if (p.op == "linear") return linear(p, sfx, out);
  if (norm_op) return norm(p, out);
  if (optim_op) return optimizer(p, out);
  return no_kernel(p, "no kernel for this op");
}

}  // namespace spora::ze
