// Choosing between two finished plans of one op by running both. Used where
// oneDNN's fastest implementation depends on the machine in ways its
// implementation list does not say: on the AVX-512 Xeon of 2026-11-27 with
// ONEDNN_MAX_CPU_ISA=AVX2, jit:avx2 max pooling with an argmax workspace
// (training) took 7-12 ms per LeNet b64 layer on nChw8c where simple_nchw
// took 2.5 ms, while without the workspace (inference) jit took 0.7 ms and
// simple_nchw 2.2 ms.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernel_plan.h"

namespace spora::cpu {

namespace detail {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBlock = std::unique_ptr<void, FreeDeleter>;

inline HostBlock host_block(size_t bytes) {
  const size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  HostBlock b(std::aligned_alloc(64, n));
  if (b) std::memset(b.get(), 0, n);  // zeros: finite inputs, and touches the pages before timing
  return b;
}

}  // namespace detail

// Runs `a` and `b` (plans of the same op and operands) alternately on
// scratch buffers, one warm-up each and then `rounds` timed runs, and returns
// true when `a` has the smaller best time. Alternating keeps a burst of
// other work on a shared machine from favouring one. When the scratch
// buffers cannot be had, `a` is kept.
inline bool first_is_faster(const plugin::KernelPlan& a, const plugin::KernelPlan& b, int rounds = 3) {
  std::vector<detail::HostBlock> blocks;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int i = 0; i < a.num_inputs; ++i) {
    blocks.push_back(detail::host_block(a.in[i].bytes()));
    in.push_back(blocks.back().get());
  }
  for (int i = 0; i < a.num_outputs; ++i) {
    blocks.push_back(detail::host_block(a.out[i].bytes()));
    out.push_back(blocks.back().get());
  }
  detail::HostBlock ws = detail::host_block(std::max(a.workspace, b.workspace));
  for (const auto& blk : blocks)
    if (!blk) return true;
  if (!ws) return true;
  using clock = std::chrono::steady_clock;
  auto time = [&](const plugin::KernelPlan& p) {
    const auto t0 = clock::now();
    plugin::run_plan(p, in.data(), out.data(), ws.get());
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  time(a);
  time(b);
  double best_a = 1e30, best_b = 1e30;
  for (int r = 0; r < rounds; ++r) {
    best_a = std::min(best_a, time(a));
    best_b = std::min(best_b, time(b));
  }
  return best_a <= best_b;
}

}  // namespace spora::cpu
