// oneDNN's reduction primitive for the cpu plugin, where it beats the own
// loops of cpu_reduce.cpp: the sum or mean of a whole bf16 tensor of 32k+
// elements. The primitive is created once at plan time.
//
// Measured with oneDNN 2.6.3 here (Zen4): on whole tensors it runs at
// AVX-512 speed, 2.5x the SSE2 loops while the data is in cache and equal
// once memory-bound. Elsewhere it does not fit: a (1000, 1001) row sum takes
// 25 ms and a column sum runs its reference implementation; max/min drop
// NaN; and its f32 accumulation misses the f32 rounding of the exact sum on
// cancelling inputs (1.2e-6 relative over 1e5 mixed-sign values), which the
// loops' double accumulators keep and devices must agree to. bf16 results
// carry 8 bits, far coarser than that error.
//
// cpu_reduce.cpp declines exactly this case, so the two never compete
// whatever order they are tried in.
#include <string>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;

struct State {
  dnnl::memory::desc src, dst;
  dnnl::reduction prim;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::memory src(s.src, eng, const_cast<void*>(in[0])), dst(s.dst, eng, out[0]);
  dnnl::stream strm(eng);
  s.prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  strm.wait();
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = plugin::expect_operands(p, 1, 1)) return e;
  if (p.in[0].dtype != SPORA_DTYPE_BF16 || p.out[0].dtype != SPORA_DTYPE_BF16)
    return plugin::unsupported(p, "oneDNN is used for bf16 only");
  // One output element: every dim of size above 1 is reduced.
  const int64_t n = p.in[0].shape.numel();
  if (p.out[0].shape.numel() != 1 || n < kParallelGrain)
    return plugin::unsupported(p, "oneDNN is used for whole tensors of 32k+ elements only");
  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto s = std::make_shared<State>();
    s->src = dnnl::memory::desc({n}, dnnl::memory::data_type::bf16, dnnl::memory::dims{1});
    s->dst = dnnl::memory::desc({1}, dnnl::memory::data_type::bf16, dnnl::memory::dims{1});
    const auto alg = p.op == "sum" ? dnnl::algorithm::reduction_sum : dnnl::algorithm::reduction_mean;
    dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, s->src, s->dst, 0.f, 0.f), onednn_engine());
    const std::string impl = pd.impl_info_str();
    if (impl.rfind("ref", 0) == 0) return plugin::unsupported(p, "oneDNN offers only its reference reduction");
    s->prim = dnnl::reduction(pd);
    p.state = s;
    p.run = run;
    return nullptr;
  });
}

void register_kernels(plugin::KernelTable& t) {
  t.add({"sum", "onednn", plan});
  t.add({"mean", "onednn", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
