// spora_conformance/conformance.h -- the plugin conformance kit behind
// `spora plugin check`.
//
// The kit certifies one plugin in three parts:
//  1. ABI: the file is a loadable ELF shared object named by the convention;
//     probe and entry behave (handshake, refusals, no threads before
//     initialize), the info struct and the function table are complete.
//  2. Runtime: memory, copies, streams, events and host callbacks of the
//     plugin's first device keep the contract (data, ordering, errors on bad
//     handles).
//  3. Kernels: every case of the conformance cases runs on the plugin's
//     device and on cpu with the same inputs; results are compared with the
//     differential harness's per-dtype tolerances. Only the plugin's own
//     kernels run (fallback is disabled on its device): an op it has no
//     kernel for is "unsupported", not a failure. Gradients are compiled
//     value_and_grad graphs on both devices.
//
// Every part runs in forked child processes, so a plugin that crashes or
// hangs is reported with the check or case it was in (a crashed kernel case
// fails, and a new child goes on with the next case). Parts 1 and 2 act as a
// minimal host (they dlopen the plugin themselves); part 3 goes through the
// public C API (spora.h). The calling process never loads the plugin.
//
// Not thread-safe: run one check per process. The kit links only libspora's
// public API and spora/plugin.h.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace spora::conformance {

struct Options {
  // A plugin name ("sim": searched like the host searches) or a path to a
  // plugin file (libspora-device-<name>.so).
  std::string target;
  // Directory of *.json case files; empty = default_cases_dir().
  std::string cases_dir;
  // Only these ops (and their gradients); empty = all.
  std::vector<std::string> ops;
  // One case per op x dtype (the smallest) and one gradient case per op.
  bool quick = false;
  // Also write a JSON report here (empty = none).
  std::string report_path;
  // How long a child process may go without finishing a check or a case
  // before it is killed as hung, in seconds.
  double child_timeout_s = 120.0;
};

// <directory of the running executable>/../share/spora/conformance/cases,
// the install layout (the build tree mirrors it); "" if it cannot be found.
std::string default_cases_dir();

// Runs the kit and prints the results and the certification table to `out`.
// Returns the process exit status: 0 when every check passed, 1 when any
// failed or the target cannot be checked at all (missing file, not a
// plugin, cannot be loaded), with a message saying what and where.
int run(const Options& options, std::FILE* out);

}  // namespace spora::conformance
