// The pass manager: named graph-to-graph passes run in an explicit order
// under a PassContext that carries the instrumentation and what the passes
// may ask of the world outside the IR (an evaluator, a target).
//
// A pass declares, where it is defined (SPORA_PASS):
//   - its name, the key of run_pass and spora_graph_run_pass;
//   - its level: the lowest opt level whose pipeline runs it (O1 = 1,
//     O2 = 2), or kOnRequest for a pass no level runs;
//   - what it needs: passes that must have run before it in any sequence
//     the manager runs (shape_inference for every pass that reads types).
// The order of the optimisation pipeline is one declared list
// (pipeline.cpp); an opt level picks the passes of that list with a level
// at or below it. A sequence whose pass needs a pass that does not come
// earlier in it is refused before anything runs, naming both. run_pass runs
// exactly the one pass asked for: the caller vouches for its needs (a graph
// built or loaded through the IR has current types), and the result is
// verified in every build.
//
// Thread safety: registration happens during static initialisation; after
// that every function here may be called from any thread, each call on its
// own graph. Errors are spora::Error; a pass's own error is prefixed with
// "[pass <name>]".
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace spora::passes {

class Evaluator;
class Instrument;
class Target;

// What a pass runs under. The default context (PassContext::defaults())
// holds the instruments the environment asks for and no evaluator or
// target of its own, so passes use the registered ones (default_evaluator,
// default_target).
struct PassContext {
  // Called around every pass, in this order (instrument.h): every
  // before_pass in list order, the pass, every after_pass in list order.
  std::vector<std::shared_ptr<Instrument>> instruments;
  // Null: default_evaluator() / default_target().
  const Evaluator* evaluator = nullptr;
  const Target* target = nullptr;

  const Evaluator* evaluator_in_use() const;  // may be null: nothing is evaluated
  const Target& target_in_use() const;        // never null

  // SPORA_DUMP_IR=<dir>: the IR before and after every pass;
  // SPORA_VERIFY_EACH=1|0: the verifier after every pass (default: on in
  // debug builds, off in release builds); the timing log (debug level).
  // Built from the environment once, on first use.
  static const PassContext& defaults();
};

// Returns true when it changed the graph.
using PassFn = bool (*)(ir::Graph& g, const PassContext& ctx);

// A pass that changes a graph's numerics (mixed_precision) is in no opt
// level: an opt level makes a graph faster, never less precise, so such a
// pass runs only when asked for by name (run_pass, spora_graph_run_pass).
constexpr int kOnRequest = -1;

struct Pass {
  const char* name;
  int level;  // runs at this opt level and above, or kOnRequest
  PassFn run;
  std::vector<std::string> needs;  // passes that must run before it in a sequence
};

int register_pass(const Pass& p);
#define SPORA_PASS_CAT2(a, b) a##b
#define SPORA_PASS_CAT(a, b) SPORA_PASS_CAT2(a, b)
#define SPORA_PASS(...) \
  static const int SPORA_PASS_CAT(spora_pass_, __LINE__) = ::spora::passes::register_pass(::spora::passes::Pass{__VA_ARGS__})

// The registered pass called `name`, or null.
const Pass* find_pass(const std::string& name);

// The declared order of the optimisation pipeline (every pass with an opt
// level, once each). Checked on first use: a pass with a level missing from
// it, a name no pass registered, or a pass placed before one it needs is an
// internal error naming it.
const std::vector<std::string>& pipeline_order();

// The passes of the pipeline that run at `level`, in order.
std::vector<Pass> pipeline(int level);

struct PassStats {
  std::string name;
  double ms = 0;
  bool changed = false;
};

// Runs `seq` in order on `g` under `ctx`, after checking that every pass's
// needs come earlier in `seq`; returns per-pass timings.
std::vector<PassStats> run_sequence(ir::Graph& g, const std::vector<Pass>& seq, const PassContext& ctx);

// Runs every pass of `level` (0 runs none) on `g`; returns per-pass timings.
std::vector<PassStats> optimize(ir::Graph& g, int level, const PassContext& ctx = PassContext::defaults());

// Runs the pass called `name` (any level, kOnRequest included) on `g`, with
// the same instrumentation, and verifies the result in every build; an
// unknown name is an error listing the passes.
PassStats run_pass(ir::Graph& g, const std::string& name, const PassContext& ctx = PassContext::defaults());

// For the pattern-matching passes: whether `n` applies the op named `op`.
inline bool is_apply(const ir::Node& n, const char* op) { return n.kind == ir::NodeKind::kApply && n.op->name == op; }

}  // namespace spora::passes
