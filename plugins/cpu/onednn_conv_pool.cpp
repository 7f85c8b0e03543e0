// conv2d_act_pool on the cpu (core/src/ops/conv_pool.cpp), f32 and bf16: the
// convolution (bias and activation as post-ops, layouts oneDNN picks) writes
// the activation into the kernel's workspace in its own layout -- NHWC or
// nChw16c on AVX-512, nChw8c on AVX2 -- and the max pooling reads it there
// in that layout, so the only reorders are at the op's edges: the input and
// weights into the convolution's layouts, the pooled result (and, with
// keep_activation, the activation) back to NCHW. Unfused, the activation
// went to NCHW between the two (a jit:uni reorder of the whole activation,
// 1.8-5.5 ms for the main job's LeNet b64 first layer here) and the pooling
// ran on NCHW (2-5 ms there; simple_nchw on AVX2).
//
// When oneDNN has only a reference or simple_* pooling for the
// convolution's layout, or no fast convolution, the plan is UNIMPLEMENTED
// and the host runs the decomposition (conv2d_act, max_pool2d), whose
// kernels choose for themselves. Primitives are made once at plan time;
// scratchpads and the intermediate live in the workspace, so concurrent
// launches of one plan share no memory.
//
// blocked_outputs / blocked_inputs (the blocked_handoff pass): output 1,
// the kept activation, is written in onednn_kept_activation.h's layout for
// conv2d_act_pool_grad's kernel alone instead of NCHW -- no reorder where
// the convolution wrote that layout; x (input 0) and y (output 0) pass
// between layers in it. The plan then fails rather than decline.
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_state.h"
#include "onednn_conv_desc.h"
#include "onednn_kept_activation.h"
#include "onednn_operand.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::KernelPlan;
using plugin::Shape;
using tag = memory::format_tag;

struct State {
  dnnl::convolution_forward conv;
  dnnl::pooling_v2_forward pool;
  std::vector<ReorderedOperand> inputs;  // x, w, b
  ReorderedOperand pooled;               // output 0
  bool keep = false;
  ReorderedOperand act;   // output 1 when kept
  WorkspaceSlot act_tmp;  // the activation when it is not an output
  WorkspaceSlot conv_scratch, pool_scratch;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream& strm = onednn_stream();
  std::unordered_map<int, memory> args;
  for (const ReorderedOperand& o : s.inputs)
    args.emplace(o.arg, bind_operand(o, strm, const_cast<void*>(in[o.index]), workspace).prim);
  BoundOperand act;
  if (s.keep) act = bind_operand(s.act, strm, out[1], workspace);
  else act.prim = s.act_tmp.memory(eng, workspace);
  args.emplace(DNNL_ARG_DST, act.prim);
  s.conv_scratch.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
  s.conv.execute(strm, args);
  BoundOperand y = bind_operand(s.pooled, strm, out[0], workspace);
  std::unordered_map<int, memory> pargs{{DNNL_ARG_SRC, act.prim}, {DNNL_ARG_DST, y.prim}};
  s.pool_scratch.bind(pargs, DNNL_ARG_SCRATCHPAD, eng, workspace);
  s.pool.execute(strm, pargs);
  finish_operand(s.pooled, strm, y);
  if (s.keep) finish_operand(s.act, strm, act);
  strm.wait();
}

// The activation's shape [N, O, OH, OW] from the canonical conv attributes.
bool activation_shape(const KernelPlan& p, const Shape& x, const Shape& w, Shape* a) {
  const auto stride = p.attrs.get_ints("stride"), dil = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  if (x.rank != 4 || w.rank != 4 || stride.size() != 2 || dil.size() != 2 || pad.size() != 4) return false;
  *a = x;
  a->dims[1] = w.dims[0];
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1 || dil[i] < 1) return false;
    const int64_t span = x.dims[2 + i] + pad[2 * i] + pad[2 * i + 1] - (dil[i] * (w.dims[2 + i] - 1) + 1);
    if (span < 0) return false;
    a->dims[2 + i] = span / stride[i] + 1;
  }
  return true;
}

spora_plugin_error_t* plan_kernel(KernelPlan& p, bool blocked) {
  const bool keep = p.attrs.get_bool("keep_activation", false);
  if (blocked && !keep) return plugin::invalid(p, "blocked_outputs names output 1 but keep_activation is off");
  if (p.num_inputs != 3 || p.num_outputs != (keep ? 2 : 1)) return plugin::invalid(p, "wrong operand count");
  const int32_t dtype = p.out[0].dtype;
  memory::data_type dt;
  if (!blocked_flags(p).empty() && dtype != SPORA_DTYPE_F32)
    return plugin::invalid(p, "blocked operands are for f32 only");
  if ((dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16) || !onednn_dtype(dtype, &dt))
    return plugin::unsupported(p, std::string("no oneDNN kernel for ") + plugin::dtype_name(dtype));
  for (int i = 0; i < p.num_inputs; ++i) {
    if (p.in[i].dtype != dtype) return plugin::invalid(p, "operands differ in dtype");
    if (p.in[i].shape.numel() == 0) return plugin::unsupported(p, "empty operand");
  }
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &y = p.out[0].shape;
  if (y.numel() == 0) return plugin::unsupported(p, "empty output");
  Shape a;
  if (!activation_shape(p, x, w, &a)) return plugin::invalid(p, "expects canonical conv attributes and NCHW operands");
  if (keep && p.out[1].shape != a) return plugin::invalid(p, "output 1 must have the activation's shape " + a.str());
  ConvDesc d;
  if (auto* e = conv_desc(p, x, w, a, dt, &d)) return e;
  // blocked_handoff: x arrives, y leaves in the plugin's blocked layout.
  memory::desc y_user(memory::dims(y.dims, y.dims + 4), dt, tag::nchw);
  if (blocked_port(p, "blocked_inputs", 0))
    if (auto* e = blocked_operand(p, "x", d.x_user.dims(), dt, &d.x_user)) return e;
  if (blocked_port(p, "blocked_outputs", 0))
    if (auto* e = blocked_operand(p, "y", y_user.dims(), dt, &y_user)) return e;
  if (p.in[2].shape.numel() != d.out_channels) return plugin::invalid(p, "bias must have one value per output channel");
  // The pooling window (max_pool2d's canonical attributes, prefixed).
  const auto k = p.attrs.get_ints("pool_kernel_size"), st = p.attrs.get_ints("pool_stride"),
             pad = p.attrs.get_ints("pool_padding"), dil = p.attrs.get_ints("pool_dilation");
  if (k.size() != 2 || st.size() != 2 || pad.size() != 4 || dil.size() != 2 || y.rank != 4 || y.dims[0] != a.dims[0] ||
      y.dims[1] != a.dims[1])
    return plugin::invalid(p, "expects canonical pool_* attributes and a pooled output of the activation's N and C");
  memory::dims pk{k[0], k[1]}, ps{st[0], st[1]}, pdil{dil[0] - 1, dil[1] - 1}, pl{pad[0], pad[2]}, pr{pad[1], pad[3]};
  for (int i = 0; i < 2; ++i) {
    // ceil_mode: the last window reaching past the padding is more trailing
    // padding to oneDNN (as in onednn_pool.cpp).
    const int64_t ext = dil[i] * (k[i] - 1) + 1, span = a.dims[2 + i] - ext + pad[2 * i] + pad[2 * i + 1];
    if (span >= 0 && span / st[i] + 1 == y.dims[2 + i]) continue;
    pr[i] = (y.dims[2 + i] - 1) * st[i] + ext - a.dims[2 + i] - pad[2 * i];
  }
  const std::string act = p.attrs.get_string("activation", "none");

  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto& eng = onednn_engine();
    dnnl::post_ops po;
    using alg = dnnl::algorithm;
    if (act == "relu") po.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f);
    else if (act == "gelu") po.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f);
    else if (act == "gelu_tanh") po.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f);
    else if (act == "sigmoid") po.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f);
    else if (act == "tanh") po.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f);
    else if (act != "none") return plugin::invalid(p, "unknown activation");
    auto conv_pd = [&](const memory::desc& a_md) {
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg::convolution_direct, d.x_any,
                                          d.w_any, d.b_user, a_md, d.strides, d.dilates, d.pad_l, d.pad_r),
          user_scratchpad_attr(po), eng);
    };
    // The activation's layout: oneDNN's channel-blocked ones first (nChw16c
    // where the AVX-512 jit kernels run, then nChw8c for AVX2), whose
    // reorder to NCHW is cheap (jit:blk); left to oneDNN (format any) its
    // AVX-512 brgconv picks NHWC, whose reorder to NCHW (jit:uni) took
    // 5.5 ms for the main job's LeNet b64 first activation here, more than
    // the convolution. A layout whose convolution is a reference or gemm
    // kernel is passed over.
    const memory::dims ad(a.dims, a.dims + 4);
    std::string skipped;
    dnnl::convolution_forward::primitive_desc cpd;
    bool found = false;
    for (tag t : {tag::nChw16c, tag::nChw8c}) {
      try {
        // Only oneDNN's first choice is looked at: stepping to the next
        // implementation of a convolution forced to nChw16c under
        // ONEDNN_MAX_CPU_ISA=AVX2 crashed inside oneDNN 2.6.3
        // (dnnl_primitive_desc_iterator_next, now and then).
        auto cand = conv_pd(memory::desc(ad, dt, t));
        const std::string impl = cand.impl_info_str();
        if (slow_impl(impl) || impl.find("gemm") != std::string::npos) {
          skipped += std::string(layout_name(t)) + ": " + impl + "; ";
          continue;
        }
        // Training on AVX2 (the activation kept): the unfused path's
        // convolution writes nChw8c too, and its pooling is the own NCHW
        // loops, as fast as oneDNN's jit one on nChw8c; with channels
        // padded to the block the blocked pooling reads more and loses
        // (LeNet-5 b64's first layer, 6 channels: step 3.5% slower fused).
        if (keep && t == tag::nChw8c && d.out_channels % 8 != 0)
          return plugin::unsupported(p, "activation kept and channels padded to nChw8c: the unfused ops are faster");
        cpd = cand;
        found = true;
        break;
      } catch (const dnnl::error&) {
        // no implementation for this layout: the next one
      }
    }
    if (!found) {
      cpd = conv_pd(d.y_any);
      if (auto* e = reject_ref(p, cpd)) return e;
    }
    const memory::desc a_prim = cpd.dst_desc();
    const memory::desc y_any(memory::dims(y.dims, y.dims + 4), dt, tag::any);
    dnnl::pooling_v2_forward::primitive_desc ppd(
        dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, alg::pooling_max, a_prim, y_any, ps, pk,
                                       pdil, pl, pr),
        user_scratchpad_attr(), eng);
    std::string seen;
    if (!skip_slow(ppd, &seen))
      return plugin::unsupported(p, "oneDNN offers only " + seen + " for pooling the convolution's layout");
    auto s = std::make_shared<State>();
    s->keep = keep;
    size_t ws = 0;
    s->inputs.push_back(make_operand(ws, DNNL_ARG_SRC, 0, false, d.x_user, cpd.src_desc()));
    s->inputs.push_back(make_operand(ws, DNNL_ARG_WEIGHTS, 1, false, d.w_user, cpd.weights_desc()));
    s->inputs.push_back(make_operand(ws, DNNL_ARG_BIAS, 2, false, d.b_user, cpd.bias_desc()));
    // A blocked output 1 leaves in the layout the backward
    // kernel reads (onednn_kept_activation.h), straight from the
    // convolution when it wrote that layout.
    const memory::desc a_user = blocked ? kept_activation_desc(ad, dt) : d.y_user;
    if (a_user.get_size() != d.y_user.get_size())
      return plugin::invalid(p, "a blocked activation needs channels filling whole blocks, got " + a.str());
    if (keep) s->act = make_operand(ws, DNNL_ARG_DST, 1, true, a_user, a_prim);
    else s->act_tmp.place(ws, a_prim);
    s->pooled = make_operand(ws, DNNL_ARG_DST, 0, true, y_user, ppd.dst_desc());
    s->conv_scratch.place(ws, cpd.scratchpad_desc());
    s->pool_scratch.place(ws, ppd.scratchpad_desc());
    s->conv = dnnl::convolution_forward(cpd);
    s->pool = dnnl::pooling_v2_forward(ppd);
    log(SPORA_LOG_DEBUG, p.op + " " + x.str() + ": " + cpd.impl_info_str() + " then " + ppd.impl_info_str() +
                             (a_prim == d.y_user ? " on nchw" : " on the convolution's layout") +
                             (blocked ? std::string(", activation kept in ") +
                                            (kept_activation_block() == 16 ? "nChw16c" : "nChw8c")
                                      : std::string()) +
                             (blocked_port(p, "blocked_inputs", 0) ? ", x handed in blocked" : "") +
                             (blocked_port(p, "blocked_outputs", 0) ? ", y handed on blocked" : "") +
                             (skipped.empty() ? "" : " (passed over: " + skipped + ")"));
    p.workspace = ws;
    p.state = s;
    p.run = run;
    return nullptr;
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  return refuse_decomposition(p, plan_kernel(p, blocked_port(p, "blocked_outputs", 1)));
}

void register_kernels(plugin::KernelTable& t) { t.add({"conv2d_act_pool", "onednn", plan}); }
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
