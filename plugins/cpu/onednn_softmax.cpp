// The softmax family on the cpu plugin: softmax, log_softmax and their
// gradients (contract: core/src/ops/softmax.cpp).
//
// "onednn": oneDNN 2.6's softmax_v2 (softmax_accurate / softmax_log
// algorithms, forward and backward) for f32 and bf16 when the axis is
// innermost, viewed as (rows, len). For any other axis oneDNN offers only
// its reference implementation, and it has no f16 softmax on cpu.
// "cpu": own loops for everything else, parallel over independent
// (slice, column block) items: each item reads its `len` x `width` block
// row by row, so a non-innermost axis is still read sequentially.
#include <algorithm>
#include <cmath>
#include <string>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::compute_t;
using plugin::KernelPlan;
using plugin::load;
using plugin::store;

enum class Kind { kSoftmax, kLogSoftmax, kSoftmaxGrad, kLogSoftmaxGrad };

Kind kind_of(const std::string& op) {
  return op == "softmax" ? Kind::kSoftmax
         : op == "log_softmax" ? Kind::kLogSoftmax
         : op == "softmax_grad" ? Kind::kSoftmaxGrad
                                : Kind::kLogSoftmaxGrad;
}
bool is_grad(Kind k) { return k == Kind::kSoftmaxGrad || k == Kind::kLogSoftmaxGrad; }
bool is_log(Kind k) { return k == Kind::kLogSoftmax || k == Kind::kLogSoftmaxGrad; }

struct Geometry {
  int64_t outer = 0, len = 0, inner = 0;
};

// Checks the operands against the contract and splits the shape at the axis.
spora_plugin_error_t* geometry(const KernelPlan& p, Geometry* g) {
  const int inputs = is_grad(kind_of(p.op)) ? 2 : 1;
  if (auto* e = plugin::expect_operands(p, inputs, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return plugin::unsupported(p, std::string("dtype ") + plugin::dtype_name(dt) + " has no kernel");
  for (int i = 0; i < inputs; ++i)
    if (p.in[i].dtype != dt || p.in[i].shape != p.out[0].shape) return plugin::invalid(p, "inputs and output differ");
  const plugin::Shape& s = p.out[0].shape;
  const int64_t ax = p.attrs.get_int("axis", s.rank - 1);
  if (s.rank == 0 || s.numel() == 0) return plugin::unsupported(p, "scalar or empty tensor");
  if (ax < 0 || ax >= s.rank) return plugin::invalid(p, "axis out of range");
  *g = Geometry{1, s.dims[ax], 1};
  for (int i = 0; i < s.rank; ++i) {
    if (i < ax) g->outer *= s.dims[i];
    if (i > ax) g->inner *= s.dims[i];
  }
  return nullptr;
}

// ---- oneDNN ----

struct DnnlState {
  memory::desc md;
  dnnl::primitive prim;
};

void run_dnnl(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const DnnlState& s = p.get<DnnlState>();
  auto& eng = onednn_engine();
  dnnl::stream strm(eng);
  auto mem = [&](const void* ptr) { return memory(s.md, eng, const_cast<void*>(ptr)); };
  if (p.num_inputs == 1)
    s.prim.execute(strm, {{DNNL_ARG_SRC, mem(in[0])}, {DNNL_ARG_DST, mem(out[0])}});
  else
    s.prim.execute(strm, {{DNNL_ARG_DST, mem(in[0])}, {DNNL_ARG_DIFF_DST, mem(in[1])}, {DNNL_ARG_DIFF_SRC, mem(out[0])}});
  strm.wait();
}

spora_plugin_error_t* plan_dnnl(KernelPlan& p) {
  Geometry g;
  if (auto* e = geometry(p, &g)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_BF16)
    return plugin::unsupported(p, std::string("oneDNN has no cpu softmax for ") + plugin::dtype_name(dt));
  if (g.inner != 1) return plugin::unsupported(p, "axis is not innermost (oneDNN has only a reference kernel)");
  const Kind k = kind_of(p.op);
  const auto alg = is_log(k) ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  dnnl::memory::data_type mdt;
  onednn_dtype(dt, &mdt);
  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto s = std::make_shared<DnnlState>();
    s->md = memory::desc({g.outer, g.len}, mdt, memory::format_tag::ab);
    if (!is_grad(k)) {
      dnnl::softmax_v2_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, alg, s->md, s->md, 1}, onednn_engine());
      if (auto* e = reject_ref(p, pd)) return e;
      s->prim = dnnl::softmax_v2_forward(pd);
    } else {
      dnnl::softmax_v2_forward::primitive_desc hint({dnnl::prop_kind::forward_training, alg, s->md, s->md, 1},
                                                    onednn_engine());
      dnnl::softmax_v2_backward::primitive_desc pd({alg, s->md, s->md, s->md, 1}, onednn_engine(), hint);
      if (auto* e = reject_ref(p, pd)) return e;
      s->prim = dnnl::softmax_v2_backward(pd);
    }
    p.state = s;
    p.run = run_dnnl;
    return nullptr;
  });
}

// ---- own loops ----

constexpr int64_t kBlock = 64;  // columns per item when the axis is not innermost

struct LoopState {
  Kind kind;
  Geometry g;
  int64_t blocks;  // column blocks per outer slice
};

// One item: columns [c0, c0 + w) of slice o. Sums accumulate in double, as
// in the reference kernel.
template <class T>
void item(const LoopState& s, int64_t o, int64_t c0, int64_t w, const T* a, const T* b, T* y) {
  using C = compute_t<T>;
  const int64_t len = s.g.len, inner = s.g.inner, base = o * len * inner + c0;
  C mx[kBlock];
  double acc[kBlock];
  for (int64_t i = 0; i < w; ++i) {
    mx[i] = -INFINITY;
    acc[i] = 0;
  }
  if (!is_grad(s.kind)) {  // a = x
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < w; ++i) mx[i] = std::max(mx[i], load(a[base + j * inner + i]));
    const bool log = s.kind == Kind::kLogSoftmax;
    // exp dominates: softmax keeps exp(x - max) in y unless y is too narrow
    // to hold it without a second rounding.
    const bool keep = !log && !plugin::is_half_v<T>;
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < w; ++i) {
        const int64_t k = base + j * inner + i;
        const C e = std::exp(load(a[k]) - mx[i]);
        acc[i] += static_cast<double>(e);
        if (keep) y[k] = store<T>(e);
      }
    for (int64_t i = 0; i < w; ++i) acc[i] = log ? std::log(acc[i]) : 1.0 / acc[i];
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < w; ++i) {
        const int64_t k = base + j * inner + i;
        const C t = static_cast<C>(acc[i]);
        if (keep)
          y[k] = store<T>(load(y[k]) * t);
        else
          y[k] = store<T>(log ? load(a[k]) - mx[i] - t : std::exp(load(a[k]) - mx[i]) * t);
      }
    return;
  }
  const bool log = s.kind == Kind::kLogSoftmaxGrad;  // a = y, b = dy
  for (int64_t j = 0; j < len; ++j)
    for (int64_t i = 0; i < w; ++i) {
      const int64_t k = base + j * inner + i;
      acc[i] += static_cast<double>(log ? load(b[k]) : load(b[k]) * load(a[k]));
    }
  for (int64_t j = 0; j < len; ++j)
    for (int64_t i = 0; i < w; ++i) {
      const int64_t k = base + j * inner + i;
      const C d = static_cast<C>(acc[i]);
      y[k] = store<T>(log ? load(b[k]) - std::exp(load(a[k])) * d : load(a[k]) * (load(b[k]) - d));
    }
}

void run_loops(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const LoopState& s = p.get<LoopState>();
  plugin::visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (plugin::is_float_v<T>) {
      const T* a = static_cast<const T*>(in[0]);
      const T* b = p.num_inputs > 1 ? static_cast<const T*>(in[1]) : nullptr;
      T* y = static_cast<T*>(out[0]);
      const int64_t width = std::min(s.g.inner, kBlock);
      const int64_t grain = std::max<int64_t>(1, kParallelGrain / (s.g.len * width));
      parallel_for(s.g.outer * s.blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t it = begin; it < end; ++it) {
          const int64_t o = it / s.blocks, c0 = it % s.blocks * kBlock;
          item(s, o, c0, std::min(kBlock, s.g.inner - c0), a, b, y);
        }
      });
    }
  });
}

spora_plugin_error_t* plan_loops(KernelPlan& p) {
  LoopState s{};
  if (auto* e = geometry(p, &s.g)) return e;
  s.kind = kind_of(p.op);
  s.blocks = (s.g.inner + kBlock - 1) / kBlock;
  p.state = std::make_shared<LoopState>(s);
  p.run = run_loops;
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"}) {
    t.add({op, "onednn", plan_dnnl});
    t.add({op, "cpu", plan_loops});
  }
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
