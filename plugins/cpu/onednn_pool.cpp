// oneDNN pooling for the cpu plugin (f32, bf16): max_pool2d, avg_pool2d,
// adaptive_avg_pool2d when its bins are uniform (the input a multiple of the
// output), and their gradients. Primitives work on plain NCHW directly
// (oneDNN's pooling has fast nchw implementations), made once at plan time.
//
// max_pool2d_grad gets x, not saved indices (see core/src/ops/pool.cpp), so
// a run first executes the training forward pass into the kernel's
// workspace to get oneDNN's argmax workspace, then the backward pass. Both
// oneDNN and the reference route the gradient to the first maximum.
#include <string>
#include <unordered_map>

#include "cpu_kernels.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::KernelPlan;
using plugin::Shape;
using tag = memory::format_tag;

enum class Kind { kForward, kMaxGrad, kAvgGrad };

struct State {
  Kind kind;
  dnnl::primitive fwd, bwd;  // fwd only for kForward and kMaxGrad; bwd for the gradients
  memory::desc x, y;
  // In the workspace: the primitives' scratchpads; for kMaxGrad the
  // forward pass's argmax workspace and its (unused) output.
  WorkspaceSlot fwd_scratch, bwd_scratch, argmax, y_tmp;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  if (s.kind == Kind::kForward) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(s.x, eng, const_cast<void*>(in[0]))},
                                         {DNNL_ARG_DST, memory(s.y, eng, out[0])}};
    s.fwd_scratch.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
    s.fwd.execute(strm, args);
  } else {
    // The gradient ops' last input is dy.
    const void* dy = in[p.num_inputs - 1];
    std::unordered_map<int, memory> bwd{{DNNL_ARG_DIFF_DST, memory(s.y, eng, const_cast<void*>(dy))},
                                        {DNNL_ARG_DIFF_SRC, memory(s.x, eng, out[0])}};
    if (s.kind == Kind::kMaxGrad) {
      const memory argmax = s.argmax.memory(eng, workspace);
      std::unordered_map<int, memory> fwd{{DNNL_ARG_SRC, memory(s.x, eng, const_cast<void*>(in[0]))},
                                          {DNNL_ARG_DST, s.y_tmp.memory(eng, workspace)},
                                          {DNNL_ARG_WORKSPACE, argmax}};
      s.fwd_scratch.bind(fwd, DNNL_ARG_SCRATCHPAD, eng, workspace);
      s.fwd.execute(strm, fwd);
      bwd.emplace(DNNL_ARG_WORKSPACE, argmax);
    }
    s.bwd_scratch.bind(bwd, DNNL_ARG_SCRATCHPAD, eng, workspace);
    s.bwd.execute(strm, bwd);
  }
  strm.wait();
}

struct Window {
  memory::dims kernel, stride, dilation, pad_l, pad_r;
  dnnl::algorithm alg;
};

// Window of the op from canonical attributes and the operand shapes;
// returns an error (UNIMPLEMENTED for cases oneDNN computes differently).
spora_plugin_error_t* window(const KernelPlan& p, const Shape& x, const Shape& y, Window* w) {
  const bool adaptive = p.op.rfind("adaptive_", 0) == 0;
  const bool max = p.op.rfind("max_", 0) == 0;
  if (adaptive) {
    for (int i = 2; i < 4; ++i)
      if (x.dims[i] % y.dims[i] != 0) return plugin::unsupported(p, "non-uniform adaptive bins");
    const int64_t kh = x.dims[2] / y.dims[2], kw = x.dims[3] / y.dims[3];
    *w = {{kh, kw}, {kh, kw}, {0, 0}, {0, 0}, {0, 0}, dnnl::algorithm::pooling_avg_exclude_padding};
    return nullptr;
  }
  const auto k = p.attrs.get_ints("kernel_size"), s = p.attrs.get_ints("stride"), pad = p.attrs.get_ints("padding");
  auto d = p.attrs.get_ints("dilation");
  if (d.empty()) d = {1, 1};
  if (k.size() != 2 || s.size() != 2 || pad.size() != 4 || d.size() != 2)
    return plugin::invalid(p, "expects canonical kernel_size, stride, dilation and padding attributes");
  constexpr int64_t kMax = int64_t{1} << 31;  // inference's bounds; keep the sizes below exact
  for (int64_t v : {k[0], k[1], s[0], s[1], d[0], d[1]})
    if (v < 1 || v > kMax) return plugin::invalid(p, "kernel_size, stride and dilation must be in 1..2^31");
  for (int64_t v : pad)
    if (v < 0 || v > kMax) return plugin::invalid(p, "padding must be in 0..2^31");
  const bool include = p.attrs.get_bool("count_include_pad", true);
  w->kernel = {k[0], k[1]};
  w->stride = {s[0], s[1]};
  w->dilation = {d[0] - 1, d[1] - 1};
  w->pad_l = {pad[0], pad[2]};
  w->pad_r = {pad[1], pad[3]};
  w->alg = max       ? dnnl::algorithm::pooling_max
           : include ? dnnl::algorithm::pooling_avg_include_padding
                     : dnnl::algorithm::pooling_avg_exclude_padding;
  for (int i = 0; i < 2; ++i) {
    // ceil_mode: the last window reaches past the padding; oneDNN expresses
    // that as more trailing padding, which changes an include-pad divisor.
    const int64_t ext = d[i] * (k[i] - 1) + 1, in = x.dims[2 + i], out = y.dims[2 + i];
    const int64_t span = in - ext + pad[2 * i] + pad[2 * i + 1];
    if (span >= 0 && span / s[i] + 1 == out) continue;
    if (!max && include) return plugin::unsupported(p, "ceil_mode windows past the padding with count_include_pad");
    w->pad_r[i] = (out - 1) * s[i] + ext - in - pad[2 * i];
  }
  return nullptr;
}

spora_plugin_error_t* plan(KernelPlan& p) {
  const Kind kind = p.op == "max_pool2d_grad"                                         ? Kind::kMaxGrad
                    : p.op == "avg_pool2d_grad" || p.op == "adaptive_avg_pool2d_grad" ? Kind::kAvgGrad
                                                                                      : Kind::kForward;
  if (p.num_inputs != (kind == Kind::kMaxGrad ? 2 : 1) || p.num_outputs != 1)
    return plugin::invalid(p, "wrong operand count");
  const int32_t dtype = p.out[0].dtype;
  memory::data_type dt;
  if ((dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16) || !onednn_dtype(dtype, &dt))
    return plugin::unsupported(p, std::string("no oneDNN pooling for ") + plugin::dtype_name(dtype));
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dtype) return plugin::invalid(p, "operands differ in dtype");
  const Shape& x = kind == Kind::kForward ? p.in[0].shape : p.out[0].shape;
  const Shape& y = kind == Kind::kForward ? p.out[0].shape : p.in[p.num_inputs - 1].shape;
  if (x.rank != 4 || y.rank != 4 || x.dims[0] != y.dims[0] || x.dims[1] != y.dims[1])
    return plugin::invalid(p, "operands must be NCHW with equal N and C");
  if (x.numel() == 0 || y.numel() == 0) return plugin::unsupported(p, "empty operand");
  Window w;
  if (auto* e = window(p, x, y, &w)) return e;
  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto& eng = onednn_engine();
    const dnnl::primitive_attr attr = user_scratchpad_attr();
    auto s = std::make_shared<State>();
    s->kind = kind;
    s->x = memory::desc(memory::dims(x.dims, x.dims + 4), dt, tag::nchw);
    s->y = memory::desc(memory::dims(y.dims, y.dims + 4), dt, tag::nchw);
    const auto prop = kind == Kind::kForward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
    dnnl::pooling_v2_forward::primitive_desc fwd(
        dnnl::pooling_v2_forward::desc(prop, w.alg, s->x, s->y, w.stride, w.kernel, w.dilation, w.pad_l, w.pad_r), attr,
        eng);
    size_t ws = 0;
    if (kind != Kind::kAvgGrad) {
      if (auto* e = reject_ref(p, fwd)) return e;
      s->fwd = dnnl::pooling_v2_forward(fwd);
      s->fwd_scratch.place(ws, fwd.scratchpad_desc());
    }
    if (kind != Kind::kForward) {
      dnnl::pooling_v2_backward::primitive_desc bwd(
          dnnl::pooling_v2_backward::desc(w.alg, s->x, s->y, w.stride, w.kernel, w.dilation, w.pad_l, w.pad_r), attr,
          eng, fwd);
      if (auto* e = reject_ref(p, bwd)) return e;
      s->bwd = dnnl::pooling_v2_backward(bwd);
      s->bwd_scratch.place(ws, bwd.scratchpad_desc());
    }
    if (kind == Kind::kMaxGrad) {
      s->argmax.place(ws, fwd.workspace_desc());
      s->y_tmp.place(ws, s->y);
    }
    p.workspace = ws;
    p.state = s;
    p.run = run;
    return nullptr;
  });
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_grad", "avg_pool2d_grad",
                         "adaptive_avg_pool2d_grad"})
    t.add({op, "onednn", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
