// oneDNN convolutions for the cpu plugin (f32, bf16): conv2d and conv2d_bias
// (convolution_forward), conv2d_grad_input and conv2d_transpose
// (convolution_backward_data: a transposed convolution is the data gradient
// of the convolution whose weight it shares, see core/src/ops/conv.cpp),
// conv2d_grad_weight (convolution_backward_weights).
//
// Primitives are made once at plan time with the layouts oneDNN picks
// (format_tag::any). Spora tensors are plain NCHW, so when oneDNN prefers
// another layout (on this Zen4, brgconv wants NHWC activations and blocked
// weights), a run reorders the inputs into the kernel's workspace and the
// output back. On the 3x3 64->64 56x56 N32 f32 case that still beats
// oneDNN's plain-NCHW implementation (x64:gemm:jit), ~135 vs ~157 ms median
// on the shared 2-core machine, though the reorders take ~25%. Scratchpads are
// user-managed in the same workspace, so concurrent launches of one plan
// never share memory. Implementations named "ref" are rejected: the plan
// falls back to the shared reference kernel (the reason is logged).
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

// One operand of the primitive: its plain layout, the primitive's layout and,
// when they differ, the reorder between them and its place in the workspace.
using Operand = ReorderedOperand;

struct State {
  dnnl::primitive prim;
  std::vector<Operand> operands;
  WorkspaceSlot scratchpad;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  std::unordered_map<int, memory> args;
  std::vector<BoundOperand> bound;
  bound.reserve(s.operands.size());
  for (const Operand& o : s.operands) {
    bound.push_back(bind_operand(o, strm, o.output ? out[o.index] : const_cast<void*>(in[o.index]), workspace));
    args.emplace(o.arg, bound.back().prim);
  }
  s.scratchpad.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
  s.prim.execute(strm, args);
  for (size_t i = 0; i < s.operands.size(); ++i) finish_operand(s.operands[i], strm, bound[i]);
  strm.wait();
}

enum class Kind { kForward, kData, kWeight };

spora_plugin_error_t* plan(KernelPlan& p) {
  const Kind kind = p.op == "conv2d_grad_weight"                                ? Kind::kWeight
                    : p.op == "conv2d_grad_input" || p.op == "conv2d_transpose" ? Kind::kData
                                                                                : Kind::kForward;
  const bool bias = p.op == "conv2d_bias";
  if (p.num_inputs != (bias ? 3 : 2) || p.num_outputs != 1) return plugin::invalid(p, "wrong operand count");
  const int32_t dtype = p.out[0].dtype;
  memory::data_type dt;
  if ((dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16) || !onednn_dtype(dtype, &dt))
    return plugin::unsupported(p, std::string("no oneDNN convolution for ") + plugin::dtype_name(dtype));
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dtype) return plugin::invalid(p, "operands differ in dtype");
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].shape.numel() == 0) return plugin::unsupported(p, "empty operand");
  if (p.out[0].shape.numel() == 0) return plugin::unsupported(p, "empty output");
  // Operands as (x, w, y) of the forward convolution.
  const Shape& x = kind == Kind::kData ? p.out[0].shape : p.in[0].shape;
  const Shape& w = kind == Kind::kWeight ? p.out[0].shape : p.in[1].shape;
  const Shape& y = kind == Kind::kForward ? p.out[0].shape : kind == Kind::kData ? p.in[0].shape : p.in[1].shape;
  ConvDesc d;
  if (auto* e = conv_desc(p, x, w, y, dt, &d)) return e;
  const memory::desc b_user = bias ? d.b_user : memory::desc();

  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto& eng = onednn_engine();
    const dnnl::primitive_attr attr = user_scratchpad_attr();
    auto s = std::make_shared<State>();
    size_t ws = 0;
    auto add = [&](int arg, int index, bool output, const memory::desc& user, const memory::desc& prim) {
      s->operands.push_back(make_operand(ws, arg, index, output, user, prim));
    };
    const auto prop = kind == Kind::kForward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
    dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, d.x_any, d.w_any, b_user, d.y_any,
                                        d.strides, d.dilates, d.pad_l, d.pad_r),
        attr, eng);
    memory::desc scratchpad;
    if (kind == Kind::kForward) {
      if (auto* e = reject_ref(p, fwd)) return e;
      add(DNNL_ARG_SRC, 0, false, d.x_user, fwd.src_desc());
      add(DNNL_ARG_WEIGHTS, 1, false, d.w_user, fwd.weights_desc());
      if (bias) add(DNNL_ARG_BIAS, 2, false, b_user, fwd.bias_desc());
      add(DNNL_ARG_DST, 0, true, d.y_user, fwd.dst_desc());
      scratchpad = fwd.scratchpad_desc();
      s->prim = dnnl::convolution_forward(fwd);
    } else if (kind == Kind::kData) {
      dnnl::convolution_backward_data::primitive_desc bwd(
          dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.y_any,
                                                d.strides, d.dilates, d.pad_l, d.pad_r),
          attr, eng, fwd);
      if (auto* e = reject_ref(p, bwd)) return e;
      add(DNNL_ARG_DIFF_DST, 0, false, d.y_user, bwd.diff_dst_desc());
      add(DNNL_ARG_WEIGHTS, 1, false, d.w_user, bwd.weights_desc());
      add(DNNL_ARG_DIFF_SRC, 0, true, d.x_user, bwd.diff_src_desc());
      scratchpad = bwd.scratchpad_desc();
      s->prim = dnnl::convolution_backward_data(bwd);
    } else {
      dnnl::convolution_backward_weights::primitive_desc bwd(
          dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.y_any,
                                                   d.strides, d.dilates, d.pad_l, d.pad_r),
          attr, eng, fwd);
      if (auto* e = reject_ref(p, bwd)) return e;
      add(DNNL_ARG_SRC, 0, false, d.x_user, bwd.src_desc());
      add(DNNL_ARG_DIFF_DST, 1, false, d.y_user, bwd.diff_dst_desc());
      add(DNNL_ARG_DIFF_WEIGHTS, 0, true, d.w_user, bwd.diff_weights_desc());
      scratchpad = bwd.scratchpad_desc();
      s->prim = dnnl::convolution_backward_weights(bwd);
    }
    s->scratchpad.place(ws, scratchpad);
    p.workspace = ws;
    p.state = s;
    p.run = run;
    return nullptr;
  });
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"conv2d", "conv2d_bias", "conv2d_grad_input", "conv2d_transpose", "conv2d_grad_weight"})
    t.add({op, "onednn", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
