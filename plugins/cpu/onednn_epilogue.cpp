// oneDNN kernels of the epilogue-fused ops (core/src/ops/epilogue.cpp) for
// the cpu plugin, f32 and bf16: the activation and the residual add run as
// primitive post-ops, applied to the accumulator before the output is
// written, so the output is written once and never read back.
//
//   linear_act, linear_add_act: a matmul with bias (the weight [N, K] read
//     transposed in place, as onednn_matmul.cpp's linear does), post-ops
//     [binary_add(residual)], [eltwise(act)]. The residual is read in place.
//   conv2d_act, conv2d_add_act: convolution_forward with bias and the
//     layouts oneDNN picks (format any; reorders through the workspace as in
//     onednn_conv.cpp) and post-op [eltwise(act)]. The residual is added
//     where it is cheapest:
//     - when the primitive writes plain NCHW itself: post-ops
//       [binary_add(residual), eltwise(act)], the residual read in place;
//     - when it writes another layout (this machine's brgconv wants NHWC),
//       a binary post-op would need the residual in that layout, and
//       oneDNN's NCHW <-> NHWC reorder is slow (0.5 ms for 16x64x28x28
//       f32, 3x a plain add); a binary-add-with-NCHW-residual post-op makes
//       oneDNN drop to its gemm convolution (69 vs 8 ms). So the convolution
//       runs without post-ops, its output is reordered to NCHW as usual,
//       and one oneDNN binary primitive computes act(y + residual) in place
//       on plain memory: one pass instead of the unfused add and activation.
//
// Primitives are made once at plan time; scratchpads are user-managed in the
// workspace, so concurrent launches of one plan share no memory. oneDNN
// implementations named "ref" are rejected (oneDNN 2.6.3's reference kernels
// are orders of magnitude slower): the plan then falls back to the shared
// reference kernel, which is composed of the unfused ones.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_kernels.h"
#include "onednn_conv_desc.h"
#include "onednn_operand.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::KernelPlan;
using plugin::Shape;
using tag = memory::format_tag;

// Appends the eltwise post-op of `act` ("none" appends nothing).
bool append_activation(dnnl::post_ops& po, const std::string& act) {
  using alg = dnnl::algorithm;
  if (act == "none") return true;
  if (act == "relu") po.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f);
  else if (act == "gelu") po.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f);
  else if (act == "gelu_tanh") po.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f);
  else if (act == "sigmoid") po.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f);
  else if (act == "tanh") po.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f);
  else return false;
  return true;
}

spora_plugin_error_t* check_common(KernelPlan& p, bool residual, memory::data_type* dt) {
  if (p.num_inputs != (residual ? 4 : 3) || p.num_outputs != 1) return plugin::invalid(p, "wrong operand count");
  const int32_t dtype = p.out[0].dtype;
  if ((dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16) || !onednn_dtype(dtype, dt))
    return plugin::unsupported(p, std::string("no oneDNN kernel for ") + plugin::dtype_name(dtype));
  for (int i = 0; i < p.num_inputs; ++i) {
    if (p.in[i].dtype != dtype) return plugin::invalid(p, "operands differ in dtype");
    if (p.in[i].shape.numel() == 0) return plugin::unsupported(p, "empty operand");
  }
  if (p.out[0].shape.numel() == 0) return plugin::unsupported(p, "empty output");
  if (residual && p.in[3].shape != p.out[0].shape) return plugin::invalid(p, "residual must have the output's shape");
  return nullptr;
}

// ---- linear ---------------------------------------------------------------

struct LinearState {
  memory::desc x, w, b, y, r;
  WorkspaceSlot scratchpad;
  dnnl::matmul prim;
  bool residual = false;
};

void run_linear(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const LinearState& s = p.get<LinearState>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(s.x, eng, const_cast<void*>(in[0]))},
      {DNNL_ARG_WEIGHTS, memory(s.w, eng, const_cast<void*>(in[1]))},
      {DNNL_ARG_BIAS, memory(s.b, eng, const_cast<void*>(in[2]))},
      {DNNL_ARG_DST, memory(s.y, eng, out[0])}};
  if (s.residual)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, memory(s.r, eng, const_cast<void*>(in[3])));
  s.scratchpad.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
  s.prim.execute(strm, args);
  strm.wait();
}

spora_plugin_error_t* plan_linear(KernelPlan& p) {
  const bool residual = p.op == "linear_add_act";
  memory::data_type dt;
  if (auto* e = check_common(p, residual, &dt)) return e;
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &y = p.out[0].shape;
  if (x.rank != 2 || w.rank != 2 || y.rank != 2 || x.dims[1] != w.dims[1] || y.dims[0] != x.dims[0] ||
      y.dims[1] != w.dims[0] || p.in[2].shape.numel() != w.dims[0])
    return plugin::invalid(p, "expected x [M, K], weight [N, K], bias [N], y [M, N]");
  const int64_t m = x.dims[0], k = x.dims[1], n = w.dims[0];
  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto s = std::make_shared<LinearState>();
    s->residual = residual;
    s->x = memory::desc({m, k}, dt, tag::ab);
    s->w = memory::desc({k, n}, dt, tag::ba);
    s->b = memory::desc({1, n}, dt, tag::ab);
    s->y = memory::desc({m, n}, dt, tag::ab);
    s->r = s->y;
    dnnl::post_ops po;
    if (residual) po.append_binary(dnnl::algorithm::binary_add, s->r);
    if (!append_activation(po, p.attrs.get_string("activation", "none")))
      return plugin::invalid(p, "unknown activation");
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s->x, s->w, s->b, s->y), user_scratchpad_attr(po),
                                    onednn_engine());
    if (auto* e = reject_ref(p, pd)) return e;
    size_t ws = 0;
    s->scratchpad.place(ws, pd.scratchpad_desc());
    s->prim = dnnl::matmul(pd);
    p.workspace = ws;
    p.state = s;
    p.run = run_linear;
    return nullptr;
  });
}

// ---- conv2d ---------------------------------------------------------------

// One operand: its plain layout, the primitive's, and the reorder between
// them with its place in the workspace when they differ.
using Operand = ReorderedOperand;

struct ConvState {
  dnnl::convolution_forward prim;
  std::vector<Operand> inputs;  // x, w, b
  Operand dst;
  // The residual: a binary post-op argument (in place), or the epilogue
  // primitive act(y + residual) run on the plain output after the reorder.
  bool residual_post_op = false;
  bool has_epilogue = false;
  memory::desc y_user;
  dnnl::binary epilogue;
  WorkspaceSlot scratchpad;
};


void run_conv(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const ConvState& s = p.get<ConvState>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  std::unordered_map<int, memory> args;
  for (const Operand& o : s.inputs) args.emplace(o.arg, bind_operand(o, strm, const_cast<void*>(in[o.index]), workspace).prim);
  BoundOperand y = bind_operand(s.dst, strm, out[0], workspace);
  args.emplace(DNNL_ARG_DST, y.prim);
  if (s.residual_post_op)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, memory(s.y_user, eng, const_cast<void*>(in[3])));
  s.scratchpad.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
  s.prim.execute(strm, args);
  finish_operand(s.dst, strm, y);
  if (s.has_epilogue) {
    memory r(s.y_user, eng, const_cast<void*>(in[3]));
    s.epilogue.execute(strm, {{DNNL_ARG_SRC_0, y.user}, {DNNL_ARG_SRC_1, r}, {DNNL_ARG_DST, y.user}});
  }
  strm.wait();
}

spora_plugin_error_t* plan_conv(KernelPlan& p) {
  const bool residual = p.op == "conv2d_add_act";
  memory::data_type dt;
  if (auto* e = check_common(p, residual, &dt)) return e;
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &y = p.out[0].shape;
  ConvDesc d;
  if (auto* e = conv_desc(p, x, w, y, dt, &d)) return e;
  if (p.in[2].shape.numel() != d.out_channels) return plugin::invalid(p, "bias must have one value per output channel");
  const std::string act = p.attrs.get_string("activation", "none");
  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto& eng = onednn_engine();
    auto conv_pd = [&](const dnnl::post_ops& po, const memory::desc& y_md) {
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          d.x_any, d.w_any, d.b_user, y_md, d.strides, d.dilates, d.pad_l, d.pad_r),
          user_scratchpad_attr(po), eng);
    };
    dnnl::post_ops act_only;
    if (!append_activation(act_only, act)) return plugin::invalid(p, "unknown activation");
    dnnl::convolution_forward::primitive_desc pd = conv_pd(act_only, d.y_any);
    if (auto* e = reject_ref(p, pd)) return e;
    auto s = std::make_shared<ConvState>();
    s->y_user = d.y_user;
    if (residual) {
      bool fused = false;
      if (pd.dst_desc() == d.y_user) {
        // Plain output: the residual is a binary post-op read in place.
        dnnl::post_ops po;
        po.append_binary(dnnl::algorithm::binary_add, d.y_user);
        append_activation(po, act);
        try {
          auto with_residual = conv_pd(po, d.y_user);
          std::string seen;
          if (skip_ref(with_residual, &seen)) {
            pd = with_residual;
            fused = true;
          }
        } catch (const dnnl::error&) {
          // not offered with this post-op: the epilogue primitive below
        }
      }
      if (fused) {
        s->residual_post_op = true;
      } else {
        pd = conv_pd(dnnl::post_ops(), d.y_any);
        if (auto* e = reject_ref(p, pd)) return e;
        dnnl::post_ops po;
        append_activation(po, act);
        dnnl::primitive_attr attr;
        attr.set_post_ops(po);
        dnnl::binary::primitive_desc bpd(
            dnnl::binary::desc(dnnl::algorithm::binary_add, d.y_user, d.y_user, d.y_user), attr, eng);
        if (auto* e = reject_ref(p, bpd, " for the epilogue")) return e;
        s->epilogue = dnnl::binary(bpd);
        s->has_epilogue = true;
      }
    }
    size_t ws = 0;
    s->inputs.push_back(make_operand(ws, DNNL_ARG_SRC, 0, false, d.x_user, pd.src_desc()));
    s->inputs.push_back(make_operand(ws, DNNL_ARG_WEIGHTS, 1, false, d.w_user, pd.weights_desc()));
    s->inputs.push_back(make_operand(ws, DNNL_ARG_BIAS, 2, false, d.b_user, pd.bias_desc()));
    s->dst = make_operand(ws, DNNL_ARG_DST, 0, true, d.y_user, pd.dst_desc());
    s->scratchpad.place(ws, pd.scratchpad_desc());
    s->prim = dnnl::convolution_forward(pd);
    p.workspace = ws;
    p.state = s;
    p.run = run_conv;
    return nullptr;
  });
}

void register_kernels(plugin::KernelTable& t) {
  t.add({"linear_act", "onednn", plan_linear});
  t.add({"linear_add_act", "onednn", plan_linear});
  t.add({"conv2d_act", "onednn", plan_conv});
  t.add({"conv2d_add_act", "onednn", plan_conv});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
