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
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_kernels.h"
#include "onednn_operand.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::KernelPlan;
using plugin::Shape;
using tag = memory::format_tag;


// One operand of the primitive: its plain layout, the primitive's layout and,
// when they differ, the reorder between them and its place in the workspace.
using Operand = ReorderedOperand;

struct State {
  dnnl::primitive prim;
  std::vector<Operand> operands;
  memory::desc scratchpad;
  size_t scratch_offset = 0;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  char* ws = static_cast<char*>(workspace);
  std::unordered_map<int, memory> args;
  std::vector<memory> users(s.operands.size());
  for (size_t i = 0; i < s.operands.size(); ++i) {
    const Operand& o = s.operands[i];
    users[i] = memory(o.user, eng, o.output ? out[o.index] : const_cast<void*>(in[o.index]));
    if (!o.reordered) {
      args.emplace(o.arg, users[i]);
      continue;
    }
    memory prim(o.prim, eng, ws + o.offset);
    if (!o.output) o.convert.execute(strm, users[i], prim);
    args.emplace(o.arg, prim);
  }
  if (s.scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(s.scratchpad, eng, ws + s.scratch_offset));
  s.prim.execute(strm, args);
  for (size_t i = 0; i < s.operands.size(); ++i) {
    const Operand& o = s.operands[i];
    if (o.output && o.reordered) o.convert.execute(strm, args.at(o.arg), users[i]);
  }
  strm.wait();
}

// Moves past implementations named "ref"; false when only those remain.
template <class PD>
bool skip_ref(PD& pd, std::string* seen) {
  for (;;) {
    const std::string name = pd.impl_info_str();
    if (name.find("ref") == std::string::npos) return true;
    *seen += (seen->empty() ? "" : ", ") + name;
    if (!pd.next_impl()) return false;
  }
}

void add_operand(State& s, size_t& ws, int arg, int index, bool output, const memory::desc& user,
                 const memory::desc& prim) {
  s.operands.push_back(make_operand(ws, arg, index, output, user, prim));
}

enum class Kind { kForward, kData, kWeight };

// oneDNN requires (in - extent + pad_l + pad_r) / stride + 1 == out. The
// canonical bottom/right padding satisfies it except for the backward-data
// ops, whose big side comes from input_shape or output_padding: there the
// right padding is derived from the sizes (it may be negative, which oneDNN
// accepts down to 1 - stride).
int64_t right_pad(int64_t in, int64_t out, int64_t ext, int64_t stride, int64_t pad_l, int64_t pad_r) {
  const int64_t span = in - ext + pad_l + pad_r;
  if (span >= 0 && span / stride + 1 == out) return pad_r;
  return (out - 1) * stride + ext - in - pad_l;
}

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
  if (x.rank != 4 || w.rank != 4 || y.rank != 4) return plugin::invalid(p, "operands must be rank 4");
  const auto stride = p.attrs.get_ints("stride"), dil = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  const int64_t groups = p.attrs.get_int("groups", 1);
  if (stride.size() != 2 || dil.size() != 2 || pad.size() != 4 || groups < 1 || stride[0] < 1 || stride[1] < 1 ||
      dil[0] < 1 || dil[1] < 1 || *std::min_element(pad.begin(), pad.end()) < 0)
    return plugin::invalid(p, "expects canonical stride, dilation, padding and groups attributes");
  constexpr int64_t kMax = int64_t{1} << 31;  // inference's bound; keeps the sizes below exact
  for (int64_t v : {stride[0], stride[1], dil[0], dil[1], pad[0], pad[1], pad[2], pad[3], groups, w.dims[2], w.dims[3]})
    if (v > kMax) return plugin::unsupported(p, "parameters beyond 2^31");
  const int64_t o_all = w.dims[0], cg = w.dims[1];
  if (x.dims[0] != y.dims[0] || y.dims[1] != o_all || o_all % groups != 0 || x.dims[1] % groups != 0 ||
      x.dims[1] / groups != cg)
    return plugin::invalid(p, "shapes " + x.str() + ", " + w.str() + ", " + y.str() + " do not fit groups");

  memory::dims strides{stride[0], stride[1]}, dilates{dil[0] - 1, dil[1] - 1}, pad_l{pad[0], pad[2]}, pad_r(2);
  for (int i = 0; i < 2; ++i) {
    const int64_t ext = dil[i] * (w.dims[2 + i] - 1) + 1;
    pad_r[i] = right_pad(x.dims[2 + i], y.dims[2 + i], ext, stride[i], pad[2 * i], pad[2 * i + 1]);
  }
  const memory::dims xd(x.dims, x.dims + 4), yd(y.dims, y.dims + 4);
  const memory::dims wd =
      groups > 1 ? memory::dims{groups, o_all / groups, cg, w.dims[2], w.dims[3]} : memory::dims(w.dims, w.dims + 4);
  const memory::desc x_user(xd, dt, tag::nchw), y_user(yd, dt, tag::nchw);
  const memory::desc w_user(wd, dt, groups > 1 ? tag::goihw : tag::oihw);
  const memory::desc x_any(xd, dt, tag::any), y_any(yd, dt, tag::any), w_any(wd, dt, tag::any);
  const memory::desc b_user = bias ? memory::desc({o_all}, dt, tag::x) : memory::desc();

  try {
    auto& eng = onednn_engine();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto s = std::make_shared<State>();
    std::string refs;
    size_t ws = 0;
    const auto prop = kind == Kind::kForward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
    dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, x_any, w_any, b_user, y_any, strides,
                                        dilates, pad_l, pad_r),
        attr, eng);
    if (kind == Kind::kForward) {
      if (!skip_ref(fwd, &refs)) return plugin::unsupported(p, "oneDNN offers only " + refs);
      add_operand(*s, ws, DNNL_ARG_SRC, 0, false, x_user, fwd.src_desc());
      add_operand(*s, ws, DNNL_ARG_WEIGHTS, 1, false, w_user, fwd.weights_desc());
      if (bias) add_operand(*s, ws, DNNL_ARG_BIAS, 2, false, b_user, fwd.bias_desc());
      add_operand(*s, ws, DNNL_ARG_DST, 0, true, y_user, fwd.dst_desc());
      s->scratchpad = fwd.scratchpad_desc();
      s->prim = dnnl::convolution_forward(fwd);
    } else if (kind == Kind::kData) {
      dnnl::convolution_backward_data::primitive_desc bwd(
          dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_any, strides,
                                                dilates, pad_l, pad_r),
          attr, eng, fwd);
      if (!skip_ref(bwd, &refs)) return plugin::unsupported(p, "oneDNN offers only " + refs);
      add_operand(*s, ws, DNNL_ARG_DIFF_DST, 0, false, y_user, bwd.diff_dst_desc());
      add_operand(*s, ws, DNNL_ARG_WEIGHTS, 1, false, w_user, bwd.weights_desc());
      add_operand(*s, ws, DNNL_ARG_DIFF_SRC, 0, true, x_user, bwd.diff_src_desc());
      s->scratchpad = bwd.scratchpad_desc();
      s->prim = dnnl::convolution_backward_data(bwd);
    } else {
      dnnl::convolution_backward_weights::primitive_desc bwd(
          dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_any, strides,
                                                   dilates, pad_l, pad_r),
          attr, eng, fwd);
      if (!skip_ref(bwd, &refs)) return plugin::unsupported(p, "oneDNN offers only " + refs);
      add_operand(*s, ws, DNNL_ARG_SRC, 0, false, x_user, bwd.src_desc());
      add_operand(*s, ws, DNNL_ARG_DIFF_DST, 1, false, y_user, bwd.diff_dst_desc());
      add_operand(*s, ws, DNNL_ARG_DIFF_WEIGHTS, 0, true, w_user, bwd.diff_weights_desc());
      s->scratchpad = bwd.scratchpad_desc();
      s->prim = dnnl::convolution_backward_weights(bwd);
    }
    s->scratch_offset = ws;
    ws += align_up(s->scratchpad.get_size());
    p.workspace = ws;
    p.state = s;
    p.run = run;
    return nullptr;
  } catch (const dnnl::error& e) {
    return plugin::unsupported(p, std::string("oneDNN rejected it: ") + e.what());
  }
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"conv2d", "conv2d_bias", "conv2d_grad_input", "conv2d_transpose", "conv2d_grad_weight"})
    t.add({op, "onednn", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
