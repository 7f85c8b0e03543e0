// Optimizer kernels on the cpu: the shared loops of kernels/optim.h over a
// whole parameter group as one index space, split across threads in
// contiguous ranges (one OpenMP region per launch, not one per tensor), and
// compiled twice: for AVX2+FMA, chosen at plan time where the cpu has it,
// and for the baseline. This file is built with -fno-math-errno so that
// Adam's sqrt vectorises (nothing here reads errno).
//
// Launches run with the plugin's flush-to-zero/denormals-are-zero, carried
// into the worker threads by parallel_for: decaying momentum and second-
// moment buffers are where denormals show up first.
#include <string>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "kernels/optim.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
namespace optim = plugin::optim;

using UpdateFn = void (*)(const optim::Plan&, const optim::Coeffs&, const void* const*, void* const*, int64_t,
                          int64_t);
using NormFn = void (*)(const optim::Plan&, const void* const*, double*, int64_t, int64_t);
using ScaleFn = void (*)(const optim::Plan&, double, const void* const*, void* const*, int64_t, int64_t);

__attribute__((target("avx2,fma"))) void update_avx2(const optim::Plan& u, const optim::Coeffs& c,
                                                     const void* const* in, void* const* out, int64_t b, int64_t e) {
  optim::update_range(u, c, in, out, b, e);
}
void update_base(const optim::Plan& u, const optim::Coeffs& c, const void* const* in, void* const* out, int64_t b,
                 int64_t e) {
  optim::update_range(u, c, in, out, b, e);
}
__attribute__((target("avx2,fma"))) void norm_avx2(const optim::Plan& u, const void* const* in, double* partials,
                                                   int64_t b, int64_t e) {
  optim::norm_blocks_range(u, in, partials, b, e);
}
void norm_base(const optim::Plan& u, const void* const* in, double* partials, int64_t b, int64_t e) {
  optim::norm_blocks_range(u, in, partials, b, e);
}
__attribute__((target("avx2,fma"))) void scale_avx2(const optim::Plan& u, double f, const void* const* in,
                                                    void* const* out, int64_t b, int64_t e) {
  optim::scale_range(u, f, in, out, b, e);
}
void scale_base(const optim::Plan& u, double f, const void* const* in, void* const* out, int64_t b, int64_t e) {
  optim::scale_range(u, f, in, out, b, e);
}

struct State {
  optim::Plan u;
  UpdateFn update = nullptr;
  NormFn norm = nullptr;
  ScaleFn scale = nullptr;
  int64_t grain = kParallelGrain;
};

void run_update(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  const optim::Coeffs c = optim::coeffs(s.u, in);
  parallel_for(s.u.total(), s.grain, [&](int64_t b, int64_t e) { s.update(s.u, c, in, out, b, e); });
}

void run_norm(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto* partials = static_cast<double*>(workspace);
  // Whole blocks per thread; the grain in blocks keeps small groups on the
  // calling thread.
  const int64_t blocks = optim::norm_blocks(s.u);
  parallel_for(blocks, std::max<int64_t>(1, s.grain / optim::kNormBlock),
               [&](int64_t b, int64_t e) { s.norm(s.u, in, partials, b, e); });
  const double norm = optim::finish_norm(s.u, partials);
  if (s.u.kind == optim::Kind::kClip) {
    const double f = optim::clip_factor(s.u, norm);
    parallel_for(s.u.total(), s.grain, [&](int64_t b, int64_t e) { s.scale(s.u, f, in, out, b, e); });
  }
  optim::store_norm(s.u, norm, out[p.num_outputs - 1]);
}

spora_plugin_error_t* plan(KernelPlan& p) {
  auto s = std::make_shared<State>();
  if (auto* e = optim::describe(p, &s->u)) return e;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  s->update = avx2 ? update_avx2 : update_base;
  s->norm = avx2 ? norm_avx2 : norm_base;
  s->scale = avx2 ? scale_avx2 : scale_base;
  // An update reads and writes several streams per element (Adam: 4 in, 3
  // out): worth threads at a smaller element count than a plain add.
  s->grain = s->u.kind == optim::Kind::kAdam ? kParallelGrain / 4 : kParallelGrain / 2;
  const bool norm = s->u.kind == optim::Kind::kNorm || s->u.kind == optim::Kind::kClip;
  if (norm) p.workspace = optim::norm_workspace(s->u);
  p.run = norm ? run_norm : run_update;
  p.state = std::move(s);
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  for (const char* op : {"sgd_update", "adam_update", "global_norm", "clip_by_global_norm"}) t.add({op, "cpu", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
