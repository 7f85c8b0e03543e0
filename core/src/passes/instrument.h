// Pass instrumentation: hooks the manager calls around every pass it runs
// (run_sequence, optimize, run_pass), in a documented order:
//
//   for each instrument, in PassContext::instruments order: before_pass
//   the pass runs (timed by the manager)
//   for each instrument, in the same order: after_pass
//
// A pass that throws ends the sequence: no after_pass runs for it. An
// instrument that throws (verify-each on a broken graph) ends it too, and
// the instruments after it in the list are not called. Put an IR dump
// before verify-each so that the broken graph is on disk when it fails.
//
// Hooks run on the thread that runs the passes; an instrument shared by
// contexts used on several threads (the defaults are) must be thread-safe.
#pragma once
#include <memory>
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"

namespace spora::passes {

class Instrument {
 public:
  virtual ~Instrument() = default;
  virtual void before_pass(const ir::Graph& g, const Pass& p) { (void)g, (void)p; }
  // `g` is the pass's result; `stats` its name, time and whether it changed g.
  virtual void after_pass(const ir::Graph& g, const Pass& p, const PassStats& stats) {
    (void)g, (void)p, (void)stats;
  }
};

// Logs each pass's time at debug level ("[passes] dce on 'main': 0.012 ms").
std::shared_ptr<Instrument> timing_instrument();

// Writes <dir>/<graph>.<seq>.<pass>.<before|after>.{txt,json,dot} (what
// SPORA_DUMP_IR=<dir> turns on); seq numbers the passes run in the process.
std::shared_ptr<Instrument> dump_ir_instrument(std::string dir);

// Runs the IR verifier after every pass; a pass that leaves an invalid
// graph fails with Code::kInternal, "[pass <name>] left an invalid graph:
// ...". What SPORA_VERIFY_EACH=1 turns on (in any build).
std::shared_ptr<Instrument> verify_each_instrument();

// SPORA_VERIFY_EACH: "1" on, "0" off, unset: on in debug builds only.
bool verify_each_from_env();

}  // namespace spora::passes
