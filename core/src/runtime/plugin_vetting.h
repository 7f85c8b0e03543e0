// Whether a candidate plugin file may be loaded in this process: the probe
// sandbox's verdict (plugin_sandbox.h), from this process's earlier answer,
// from the verdict cache (plugin_verdict_cache.h), or from probe processes
// run now. Knobs (environment, through config_lookup):
//   SPORA_PLUGIN_SANDBOX=0            load candidates without probe processes
//   SPORA_PLUGIN_PROBE_TIMEOUT_S=<s>  how long a probe process may take (default 5)
//   SPORA_PLUGIN_CACHE_DIR=<dir>      where verdicts are kept ("" = nowhere)
#pragma once
#include <string>
#include <vector>

namespace spora {

struct PluginClearance {
  bool may_load = true;
  std::string reason;  // why not (when !may_load)
};

// Vets every file not vetted yet in this process, the uncached ones in
// probe processes at once. Files are real paths. Thread-safe; never throws
// for a bad plugin.
void vet_plugins(const std::vector<std::string>& real_paths);
// The answer for one file, vetting it first if needed.
PluginClearance plugin_clearance(const std::string& real_path);

}  // namespace spora
