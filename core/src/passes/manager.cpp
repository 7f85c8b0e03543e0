#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "ir/serialize.h"
#include "ir/verifier.h"
#include "passes/evaluator.h"
#include "passes/instrument.h"
#include "passes/pass.h"
#include "passes/target.h"
#include "support/error.h"

namespace spora::passes {
namespace {

std::vector<Pass>& registry() {
  static std::vector<Pass> v;
  return v;
}

std::string known_names() {
  std::string known;
  for (const Pass& p : registry()) known += (known.empty() ? "" : ", ") + std::string(p.name);
  return known;
}

// A sequence is refused, before anything runs, when a pass needs one that
// does not come earlier in it.
void check_needs(const std::vector<Pass>& seq) {
  for (size_t i = 0; i < seq.size(); ++i)
    for (const std::string& need : seq[i].needs) {
      bool before = false;
      for (size_t j = 0; j < i; ++j) before = before || need == seq[j].name;
      if (!before)
        fail(Code::kInvalidArgument, "[passes] {} needs {} to run before it; put {} earlier in the sequence",
             seq[i].name, need, need);
    }
}

// The pipeline order against the registry, once: every pass with a level
// listed exactly once, no unknown names, needs satisfied in order.
const std::vector<Pass>& checked_pipeline() {
  static const std::vector<Pass> all = [] {
    std::vector<Pass> out;
    for (const std::string& name : pipeline_order()) {
      const Pass* p = find_pass(name);
      if (!p) fail(Code::kInternal, "[passes] the pipeline order names '{}', which no pass registers", name);
      if (p->level == kOnRequest)
        fail(Code::kInternal, "[passes] '{}' runs only on request; take it out of the pipeline order", name);
      for (const Pass& q : out)
        if (name == q.name) fail(Code::kInternal, "[passes] '{}' is in the pipeline order twice", name);
      out.push_back(*p);
    }
    for (const Pass& p : registry())
      if (p.level != kOnRequest &&
          std::find(pipeline_order().begin(), pipeline_order().end(), p.name) == pipeline_order().end())
        fail(Code::kInternal, "[passes] '{}' has opt level {} but no place in the pipeline order (pipeline.cpp)",
             p.name, p.level);
    try {
      check_needs(out);
    } catch (const Error& e) {
      throw Error(Code::kInternal, std::string(e.what()) + " (pipeline.cpp)");
    }
    return out;
  }();
  return all;
}

// One pass with the instrumentation around it.
PassStats run_instrumented(ir::Graph& g, const Pass& p, const PassContext& ctx) {
  for (const auto& in : ctx.instruments) in->before_pass(g, p);
  const auto t0 = std::chrono::steady_clock::now();
  bool changed = false;
  try {
    changed = p.run(g, ctx);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("[pass ") + p.name + "] " + e.what());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const PassStats stats{p.name, ms, changed};
  for (const auto& in : ctx.instruments) in->after_pass(g, p, stats);
  return stats;
}

}  // namespace

const Evaluator* PassContext::evaluator_in_use() const { return evaluator ? evaluator : default_evaluator(); }
const Target& PassContext::target_in_use() const { return target ? *target : default_target(); }

const PassContext& PassContext::defaults() {
  static const PassContext ctx = [] {
    PassContext c;
    // The dump first: a graph that fails verification is on disk already.
    const char* dir = std::getenv("SPORA_DUMP_IR");
    if (dir && *dir) c.instruments.push_back(dump_ir_instrument(dir));
    if (verify_each_from_env()) c.instruments.push_back(verify_each_instrument());
    c.instruments.push_back(timing_instrument());
    return c;
  }();
  return ctx;
}

int register_pass(const Pass& p) {
  registry().push_back(p);
  return 0;
}

const Pass* find_pass(const std::string& name) {
  for (const Pass& p : registry())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<Pass> pipeline(int level) {
  std::vector<Pass> out;
  for (const Pass& p : checked_pipeline())
    if (level >= p.level) out.push_back(p);
  return out;
}

std::vector<PassStats> run_sequence(ir::Graph& g, const std::vector<Pass>& seq, const PassContext& ctx) {
  check_needs(seq);
  std::vector<PassStats> stats;
  for (const Pass& p : seq) stats.push_back(run_instrumented(g, p, ctx));
  return stats;
}

std::vector<PassStats> optimize(ir::Graph& g, int level, const PassContext& ctx) {
  if (level < 0 || level > 2) fail(Code::kInvalidArgument, "[passes] opt level {} is not 0, 1 or 2", level);
  const std::vector<Pass> seq = pipeline(level);
  ir::check_json_roundtrip(g, "optimize, input");
  std::vector<PassStats> stats = run_sequence(g, seq, ctx);
  ir::check_json_roundtrip(g, "optimize, result");
  return stats;
}

PassStats run_pass(ir::Graph& g, const std::string& name, const PassContext& ctx) {
  const Pass* p = find_pass(name);
  if (!p) fail(Code::kInvalidArgument, "[passes] no pass named '{}' (known: {})", name, known_names());
  // No check of the input: a pass may be asked to mend a graph that does
  // not verify yet (shape_inference after an input is retyped).
  PassStats st = run_instrumented(g, *p, ctx);
  // A pass asked for out of the pipeline's order may meet a graph it was
  // not written for: verify in every build before the caller keeps it.
  try {
    ir::verify(g);
  } catch (const Error& e) {
    throw Error(Code::kInternal, std::string("[pass ") + p->name + "] left an invalid graph: " + e.what());
  }
  ir::check_json_roundtrip(g, "run_pass, result");
  return st;
}

}  // namespace spora::passes
