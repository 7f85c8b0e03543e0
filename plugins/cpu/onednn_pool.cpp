// oneDNN pooling for the cpu plugin (f32, bf16): max_pool2d, avg_pool2d,
// adaptive_avg_pool2d when its bins are uniform (the input a multiple of the
// output), and their gradients, made once at plan time.
//
// Spora tensors are NCHW. oneDNN's pooling has jit kernels for NCHW on
// AVX-512 but on AVX2 only a plain loop (simple_nchw, 2.2 ms for a LeNet b64
// max pooling where jit:avx2 takes 0.7 ms); its jit kernels run on the
// blocked layouts. So when NCHW gets a "simple_*" implementation the plan
// also makes the first blocked layout with a jit one (activation_layouts),
// whose run reorders the operands into that layout in the kernel's
// workspace and the result back, times both here and keeps the faster
// (onednn_choose.h: jit is not always it). "ref" implementations are never
// taken. The choice is logged at debug level.
//
// max_pool2d_grad gets x, not saved indices (see core/src/ops/pool.cpp), so
// a run first executes the training forward pass into the kernel's
// workspace to get oneDNN's argmax workspace, then the backward pass. Both
// oneDNN and the reference route the gradient to the first maximum.
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "cpu_state.h"
#include "onednn_choose.h"
#include "onednn_operand.h"
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
  // Forward: x in, y out. Gradients: dy in, dx out, and for kMaxGrad x in.
  std::vector<ReorderedOperand> operands;
  int x_operand = -1;  // kMaxGrad: which of `operands` is x
  // In the workspace: the primitives' scratchpads; for kMaxGrad the
  // forward pass's argmax workspace and its (unused) output.
  WorkspaceSlot fwd_scratch, bwd_scratch, argmax, y_tmp;
  size_t workspace = 0;
  std::string impl;  // oneDNN's implementation names, for logs
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream& strm = onednn_stream();
  BoundOperand bound[3];
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < s.operands.size(); ++i) {
    const ReorderedOperand& o = s.operands[i];
    bound[i] = bind_operand(o, strm, o.output ? out[o.index] : const_cast<void*>(in[o.index]), workspace);
    if (static_cast<int>(i) != s.x_operand) args.emplace(o.arg, bound[i].prim);
  }
  if (s.kind == Kind::kForward) {
    s.fwd_scratch.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
    s.fwd.execute(strm, args);
  } else {
    if (s.kind == Kind::kMaxGrad) {
      const memory argmax = s.argmax.memory(eng, workspace);
      std::unordered_map<int, memory> fwd{{DNNL_ARG_SRC, bound[s.x_operand].prim},
                                          {DNNL_ARG_DST, s.y_tmp.memory(eng, workspace)},
                                          {DNNL_ARG_WORKSPACE, argmax}};
      s.fwd_scratch.bind(fwd, DNNL_ARG_SCRATCHPAD, eng, workspace);
      s.fwd.execute(strm, fwd);
      args.emplace(DNNL_ARG_WORKSPACE, argmax);
    }
    s.bwd_scratch.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
    s.bwd.execute(strm, args);
  }
  for (size_t i = 0; i < s.operands.size(); ++i) finish_operand(s.operands[i], strm, bound[i]);
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
  const memory::dims xd(x.dims, x.dims + 4), yd(y.dims, y.dims + 4);
  const memory::desc x_user(xd, dt, tag::nchw), y_user(yd, dt, tag::nchw);
  const auto prop = kind == Kind::kForward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  const dnnl::primitive_attr attr = user_scratchpad_attr();
  auto& eng = onednn_engine();
  // Plans the primitives on layout `t`; null (with the reason added to `why`)
  // when oneDNN has nothing for it or, unless `allow_simple`, only slow
  // implementations.
  auto try_layout = [&](tag t, bool allow_simple, std::string* why) -> std::shared_ptr<State> {
    const memory::desc xp(xd, dt, t), yp(yd, dt, t);
    std::string seen;
    auto fast = [&](auto& pd) { return allow_simple ? skip_ref(pd, &seen) : skip_slow(pd, &seen); };
    try {
      auto s = std::make_shared<State>();
      s->kind = kind;
      dnnl::pooling_v2_forward::primitive_desc fwd(
          dnnl::pooling_v2_forward::desc(prop, w.alg, xp, yp, w.stride, w.kernel, w.dilation, w.pad_l, w.pad_r), attr,
          eng);
      size_t ws = 0;
      if (kind != Kind::kAvgGrad) {
        if (!fast(fwd)) {
          *why += std::string(layout_name(t)) + ": " + seen + "; ";
          return nullptr;
        }
        s->fwd = dnnl::pooling_v2_forward(fwd);
        s->impl = fwd.impl_info_str();
      }
      if (kind == Kind::kForward) {
        s->operands.push_back(make_operand(ws, DNNL_ARG_SRC, 0, false, x_user, fwd.src_desc()));
        s->operands.push_back(make_operand(ws, DNNL_ARG_DST, 0, true, y_user, fwd.dst_desc()));
        s->fwd_scratch.place(ws, fwd.scratchpad_desc());
      } else {
        dnnl::pooling_v2_backward::primitive_desc bwd(
            dnnl::pooling_v2_backward::desc(w.alg, xp, yp, w.stride, w.kernel, w.dilation, w.pad_l, w.pad_r), attr,
            eng, fwd);
        if (!fast(bwd)) {
          *why += std::string(layout_name(t)) + " (backward): " + seen + "; ";
          return nullptr;
        }
        s->bwd = dnnl::pooling_v2_backward(bwd);
        s->impl += (s->impl.empty() ? "" : " + ") + std::string(bwd.impl_info_str());
        // The gradient ops' last input is dy.
        s->operands.push_back(make_operand(ws, DNNL_ARG_DIFF_DST, p.num_inputs - 1, false, y_user, bwd.diff_dst_desc()));
        s->operands.push_back(make_operand(ws, DNNL_ARG_DIFF_SRC, 0, true, x_user, bwd.diff_src_desc()));
        s->bwd_scratch.place(ws, bwd.scratchpad_desc());
        if (kind == Kind::kMaxGrad) {
          s->x_operand = static_cast<int>(s->operands.size());
          s->operands.push_back(make_operand(ws, DNNL_ARG_SRC, 0, false, x_user, fwd.src_desc()));
          s->fwd_scratch.place(ws, fwd.scratchpad_desc());
          s->argmax.place(ws, fwd.workspace_desc());
          s->y_tmp.place(ws, fwd.dst_desc());
        }
      }
      s->workspace = ws;
      return s;
    } catch (const dnnl::error& e) {
      *why += std::string(layout_name(t)) + ": oneDNN rejected it (" + e.what() + "); ";
      return nullptr;
    }
  };
  // NCHW needs no reorders. When oneDNN has only a slow kernel for it, the
  // first blocked layout with a jit one is tried too, and the faster of the
  // two when run here wins (see onednn_choose.h for why jit is not always it).
  std::string why;
  auto with = [&](const std::shared_ptr<State>& s) {
    KernelPlan q = p;
    q.state = s;
    q.run = run;
    q.workspace = s->workspace;
    return q;
  };
  std::shared_ptr<State> s = try_layout(tag::nchw, true, &why);
  tag chosen = tag::nchw;
  if (!s || slow_impl(s->impl)) {
    std::string skipped = s ? "nchw: " + s->impl + "; " : "";
    size_t n_layouts = 0;
    const tag* layouts = activation_layouts(&n_layouts);
    for (size_t i = 1; i < n_layouts; ++i) {
      std::shared_ptr<State> jit = try_layout(layouts[i], false, &skipped);
      if (!jit) continue;
      if (!s || first_is_faster(with(jit), with(s))) {
        s = jit;
        chosen = layouts[i];
      } else {
        skipped += std::string(layout_name(layouts[i])) + ": " + jit->impl + " (slower here); ";
      }
      break;
    }
    why += skipped;
  }
  if (!s) return plugin::unsupported(p, "oneDNN offers only " + why);
  if (!why.empty())
    log(SPORA_LOG_DEBUG, p.op + " " + x.str() + ": tried " + why + "using " + s->impl + " on " +
                             layout_name(chosen) + (chosen == tag::nchw ? "" : " with reorders at the op's edges"));
  // A forward max pooling with disjoint windows runs as the own loops
  // (cpu_pool.cpp) where oneDNN has no jit kernel for NCHW: LeNet b64's
  // first one took 0.53 ms there on AVX2, ~1 ms as jit on nChw8c with the
  // reorders, 3.4 ms as simple_nchw. Where it has one (AVX-512: 0.23 ms vs
  // 0.50 own) oneDNN stays. Decided by the implementation, not by timing:
  // the two treat NaN inputs differently, and results must not depend on
  // a timing.
  if (kind == Kind::kForward && w.alg == dnnl::algorithm::pooling_max && (chosen != tag::nchw || slow_impl(s->impl))) {
    KernelPlan own = p;
    if (plan_max_pool_tiles(own) == nullptr) {
      log(SPORA_LOG_DEBUG, p.op + " " + x.str() + ": own loops instead of " + s->impl + " on " + layout_name(chosen));
      p.state = own.state;
      p.workspace = own.workspace;
      p.run = own.run;
      return nullptr;
    }
  }
  p.state = s;
  p.workspace = s->workspace;
  p.run = run;
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  // Disjoint max windows' gradient: the own loops first (cpu_pool.cpp);
  // the forward pass weighs them against oneDNN in plan().
  t.add({"max_pool2d_grad", "cpu", plan_max_pool_tiles});
  for (const char* op : {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_grad", "avg_pool2d_grad",
                         "adaptive_avg_pool2d_grad"})
    t.add({op, "onednn", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
