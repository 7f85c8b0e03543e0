#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {
namespace {

std::vector<Pass>& registry() {
  static std::vector<Pass> v;
  return v;
}

// SPORA_DUMP_IR=<dir>: <graph>.<seq>.<pass>.<before|after>.{txt,json,dot}
void dump(const ir::Graph& g, int seq, const std::string& pass, const char* when) {
  static const char* dir = std::getenv("SPORA_DUMP_IR");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    logger().warn("[passes] cannot create SPORA_DUMP_IR directory {}: {}", dir, ec.message());
    return;
  }
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%03d", seq);
  const std::string base = std::string(dir) + "/" + g.name() + "." + prefix + "." + pass + "." + when;
  std::ofstream(base + ".txt") << ir::to_text(g);
  std::ofstream(base + ".json") << ir::to_json(g, 1);
  std::ofstream(base + ".dot") << ir::to_dot(g);
}

}  // namespace

int register_pass(const Pass& p) {
  registry().push_back(p);
  return 0;
}

std::vector<Pass> pipeline(int level) {
  std::vector<Pass> out;
  for (const Pass& p : registry())
    if (p.level != kOnRequest && level >= p.level) out.push_back(p);
  std::stable_sort(out.begin(), out.end(), [](const Pass& a, const Pass& b) { return a.order < b.order; });
  return out;
}

namespace {

// One pass with the instrumentation: IR dumps around it, its time, and in
// debug builds the verifier after it, naming the pass that broke the graph.
PassStats run_instrumented(ir::Graph& g, const Pass& p) {
  static std::atomic<int> seq{0};
  const int n = seq++;
  dump(g, n, p.name, "before");
  const auto t0 = std::chrono::steady_clock::now();
  bool changed = false;
  try {
    changed = p.run(g);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("[pass ") + p.name + "] " + e.what());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  dump(g, n, p.name, "after");
#ifndef NDEBUG
  try {
    ir::verify(g);
  } catch (const Error& e) {
    throw Error(Code::kInternal, std::string("[pass ") + p.name + "] left an invalid graph: " + e.what());
  }
#endif
  logger().debug("[passes] {} on '{}': {:.3f} ms{}", p.name, g.name(), ms, changed ? " (changed)" : "");
  return {p.name, ms, changed};
}

}  // namespace

std::vector<PassStats> optimize(ir::Graph& g, int level) {
  if (level < 0 || level > 2) fail(Code::kInvalidArgument, "[passes] opt level {} is not 0, 1 or 2", level);
  std::vector<PassStats> stats;
  ir::check_json_roundtrip(g, "optimize, input");
  for (const Pass& p : pipeline(level)) stats.push_back(run_instrumented(g, p));
  ir::check_json_roundtrip(g, "optimize, result");
  return stats;
}

PassStats run_pass(ir::Graph& g, const std::string& name) {
  std::string known;
  for (const Pass& p : registry()) {
    if (name == p.name) {
      // No check of the input: a pass may be asked to mend a graph that
      // does not verify yet (shape_inference after an input is retyped).
      PassStats st = run_instrumented(g, p);
      // A pass asked for out of the pipeline's order may meet a graph it
      // was not written for: verify in every build before the caller keeps it.
      try {
        ir::verify(g);
      } catch (const Error& e) {
        throw Error(Code::kInternal, std::string("[pass ") + p.name + "] left an invalid graph: " + e.what());
      }
      ir::check_json_roundtrip(g, "run_pass, result");
      return st;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  fail(Code::kInvalidArgument, "[passes] no pass named '{}' (known: {})", name, known);
}

}  // namespace spora::passes
