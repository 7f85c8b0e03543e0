// A graph from JSON through the pipeline a model file's graph takes: load
// (ir/serialize.h), optimise at level 1 (passes/pass.h), and build the
// execution plan on the sim device when there is one (sched/plan_build.h).
// Nothing runs: a plan is what compile makes.
#include "fuzz_util.h"
#include "ir/serialize.h"
#include "passes/pass.h"
#include "sched/plan_build.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  spora::fuzz::expect_clean("graph_compile", [&] {
    spora::ir::Graph g = spora::ir::from_json(text);
    spora::passes::optimize(g, 1);
    if (spora::Device* d = spora::fuzz::device()) spora::sched::build_plan(g, d);
  });
  return 0;
}
