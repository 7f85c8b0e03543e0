// The pass manager: named graph-to-graph passes, each with the lowest
// optimisation level that runs it, run in registration order.
//
// Instrumentation, in this order around every pass: the IR is dumped before
// (SPORA_DUMP_IR=<dir>: text, JSON and Graphviz DOT), the pass runs and is
// timed (logged at debug level), the IR is dumped after, and in debug builds
// the verifier checks the result, naming the pass that broke it.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace spora::passes {

// Returns true when it changed the graph.
using PassFn = bool (*)(ir::Graph& g);

// A pass that changes a graph's numerics (mixed_precision) is in no opt
// level: an opt level makes a graph faster, never less precise, so such a
// pass runs only when asked for by name (run_pass, spora_graph_run_pass).
constexpr int kOnRequest = -1;

struct Pass {
  const char* name;
  int level;  // runs at this opt level and above (O1 = 1, O2 = 2), or kOnRequest
  int order;  // position in the pipeline (lower runs first)
  PassFn run;
};

int register_pass(const Pass& p);
#define SPORA_PASS(name, level, order, fn) \
  static const int spora_pass_##fn = ::spora::passes::register_pass({name, level, order, fn})

std::vector<Pass> pipeline(int level);

struct PassStats {
  std::string name;
  double ms = 0;
  bool changed = false;
};

// Runs every pass of `level` (0 runs none) on `g`; returns per-pass timings.
std::vector<PassStats> optimize(ir::Graph& g, int level);

// Runs the pass called `name` (any level, kOnRequest included) on `g`, with
// the same instrumentation; an unknown name is an error listing the passes.
PassStats run_pass(ir::Graph& g, const std::string& name);

}  // namespace spora::passes
