#include "runtime/plugin_vetting.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "runtime/context.h"
#include "runtime/host_services.h"
#include "runtime/plugin_sandbox.h"
#include "runtime/plugin_verdict_cache.h"
#include "support/log.h"

namespace spora {
namespace fs = std::filesystem;

namespace {

constexpr double kDefaultTimeoutS = 5.0;
constexpr const char* kHelperName = "spora-plugin-probe";

std::mutex g_mu;
std::map<std::string, PluginClearance>& answers() {
  static auto* m = new std::map<std::string, PluginClearance>;  // process-wide, like plugin records
  return *m;
}

// Warns once per process and message: discovery runs once per context.
void warn_once(const std::string& msg) {
  static std::mutex mu;
  static auto* said = new std::map<std::string, bool>;
  std::lock_guard<std::mutex> lock(mu);
  if ((*said)[msg]) return;
  (*said)[msg] = true;
  logger().warn("{}", msg);
}

bool sandbox_enabled() {
  std::string v;
  if (!config_lookup("plugin.sandbox", &v)) return true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return false;
  if (!(v == "1" || v == "on" || v == "true" || v == "yes"))
    warn_once("[loader] SPORA_PLUGIN_SANDBOX='" + v + "' is not 0 or 1; the probe sandbox stays on");
  return true;
}

double probe_timeout_s() {
  std::string v;
  if (!config_lookup("plugin.probe_timeout_s", &v)) return kDefaultTimeoutS;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !std::isfinite(s) || s <= 0) {
    warn_once("[loader] SPORA_PLUGIN_PROBE_TIMEOUT_S='" + v + "' is not a positive number of seconds; using " +
              std::to_string(static_cast<int>(kDefaultTimeoutS)));
    return kDefaultTimeoutS;
  }
  return s;
}

// Installed and in the build tree: <dir of libspora.so>/spora/, beside the
// plugins directory. Programs that link the core's objects directly (the
// unit tests in <build>/bin) find the build tree's copy in ../lib/spora/.
std::string helper_path() {
  const std::string dir = libspora_dir();
  if (dir.empty()) return "";
  for (const std::string& p : {dir + "/spora/" + kHelperName, dir + "/../lib/spora/" + kHelperName}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return "";
}

PluginClearance died(const std::string& reason) { return PluginClearance{false, reason}; }

}  // namespace

void vet_plugins(const std::vector<std::string>& paths) {
  std::vector<std::string> todo;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& p : paths) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) continue;  // the loader says why
      const std::string real = fs::canonical(p, ec).string();
      if (ec || answers().count(real) || std::find(todo.begin(), todo.end(), real) != todo.end()) continue;
      todo.push_back(real);
    }
  }
  if (todo.empty()) return;
  std::map<std::string, PluginClearance> found;
  if (!sandbox_enabled()) {
    for (const auto& p : todo) found[p] = PluginClearance{};
  } else {
    const double timeout = probe_timeout_s();
    VerdictCache cache(verdict_cache_file());
    struct Pending {
      std::string path;
      uint64_t size = 0;
      int64_t mtime_ns = 0;
    };
    std::vector<Pending> run;
    for (const auto& p : todo) {
      Pending q{p};
      const CachedVerdict* c = cache.lookup(p, &q.size, &q.mtime_ns);
      // A timeout is asked again when the limit has grown since.
      if (c && (c->survived || c->timeout_s <= 0 || timeout <= c->timeout_s)) {
        found[p] = c->survived ? PluginClearance{}
                               : died(c->reason + " (verdict cached in " + cache.file() +
                                      "; replace the plugin or delete that file to probe it again)");
      } else {
        run.push_back(q);
      }
    }
    const size_t cached = found.size();
    const std::string helper = run.empty() ? "" : helper_path();
    if (!run.empty() && helper.empty()) {
      warn_once("[loader] " + std::string(kHelperName) + " is missing next to libspora (" + libspora_dir() +
                "/spora/); plugins are loaded without the probe sandbox, so a crashing plugin takes the program "
                "down. Reinstall Spora");
      for (const auto& q : run) found[q.path] = PluginClearance{};
    } else if (!run.empty()) {
      std::vector<std::string> files;
      for (const auto& q : run) files.push_back(q.path);
      const std::vector<SandboxVerdict> verdicts = run_probe_children(helper, files, timeout);
      for (size_t i = 0; i < run.size(); ++i) {
        const SandboxVerdict& v = verdicts[i];
        using O = SandboxVerdict::Outcome;
        logger().debug("[loader] probe process for {}: {} {}", run[i].path,
                       v.outcome == O::kSurvived ? "survived" : v.outcome == O::kDied ? "died:" : "not run:",
                       v.outcome == O::kSurvived ? v.seen : v.reason);
        if (v.outcome == O::kNotChecked) {
          // Not the plugin's fault, and not remembered: load it as without the sandbox.
          warn_once("[loader] " + run[i].path + " could not be checked in a probe process (" + v.reason +
                    "); loading it without the sandbox");
          found[run[i].path] = PluginClearance{};
          continue;
        }
        const bool survived = v.outcome == O::kSurvived;
        cache.store(run[i].path, run[i].size, run[i].mtime_ns,
                    CachedVerdict{survived, v.reason, v.timed_out ? timeout : 0.0});
        found[run[i].path] = survived ? PluginClearance{} : died(v.reason + " (seen in a probe process; not loaded)");
      }
      cache.save();
    }
    logger().debug("[loader] probe sandbox: {} probe process(es) started, {} verdict(s) from the cache {}",
                   helper.empty() ? 0 : run.size(), cached, cache.file().empty() ? "(none)" : cache.file());
  }
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [p, c] : found) answers().emplace(p, std::move(c));
}

PluginClearance plugin_clearance(const std::string& real_path) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = answers().find(real_path);
    if (it != answers().end()) return it->second;
  }
  vet_plugins({real_path});
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = answers().find(real_path);
  return it != answers().end() ? it->second : PluginClearance{};
}

}  // namespace spora
