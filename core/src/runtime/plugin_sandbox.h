// The probe sandbox: each candidate plugin's constructors, probe and entry
// run first in a child process (the spora-plugin-probe helper), so a plugin
// that crashes, aborts, calls exit() or hangs there never takes the host
// down. Only candidates that survive are loaded in the host.
#pragma once
#include <string>
#include <vector>

namespace spora {

struct SandboxVerdict {
  enum class Outcome {
    kSurvived,    // the handshake ran to its end (whatever it answered)
    kDied,        // crashed, aborted, exited or hung: never load it here
    kNotChecked,  // no child could be started (reason says why)
  };
  Outcome outcome = Outcome::kNotChecked;
  // kDied: "killed by SIGSEGV in spora_plugin_probe_v1", "exited with
  // status 3 in the constructor (dlopen)", "timed out after 5 s in
  // spora_plugin_entry_v1". kNotChecked: why no child ran.
  std::string reason;
  bool timed_out = false;  // kDied because it ran out of time
  // What the child reported, for the debug log ("probe 100 ; entry 1 1.2 cpu").
  std::string seen;
};

// Runs the helper at `helper` once per file (several at a time) and waits
// for each, killing any still running `timeout_s` seconds after its start.
// Every child is reaped before this returns. Results are in `files` order.
// Never throws for a bad plugin or a failed start.
std::vector<SandboxVerdict> run_probe_children(const std::string& helper, const std::vector<std::string>& files,
                                               double timeout_s);

}  // namespace spora
