// What a start beside the hostile set must show (shared by the in-process
// test, sandbox_test.cpp, and the program that makes later starts,
// sandbox_start.cpp): public API only.
#pragma once
#include <spora/spora.hpp>

#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace sandbox_test {
namespace fs = std::filesystem;

// The hostile set (tests/loader/CMakeLists.txt builds each from
// plugins/misbehaves.c) and the reason each must be listed with, under a
// 1 s probe timeout.
struct Hostile {
  const char* name;
  const char* reason;
};
inline const Hostile kHostile[] = {
    {"ctorsegv", "killed by SIGSEGV in the constructor (dlopen)"},
    {"probeabort", "killed by SIGABRT in spora_plugin_probe_v1"},
    {"entryexit", "exited with status 3 in spora_plugin_entry_v1"},
    {"probehang", "timed out after 1 s in spora_plugin_probe_v1"},
    {"entrysegv", "killed by SIGSEGV in spora_plugin_entry_v1"},
};

inline std::string plugin_file(const std::string& name) { return "libspora-device-" + name + ".so"; }

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// File name -> what the context says of each plugin under `dir`.
inline std::map<std::string, spora::PluginInfo> plugins_under(const spora::Context& ctx, const fs::path& dir) {
  std::map<std::string, spora::PluginInfo> out;
  for (auto& p : ctx.plugins())
    if (p.path.rfind(dir.string() + "/", 0) == 0) out[fs::path(p.path).filename().string()] = p;
  return out;
}

// Probe processes of this process that are still there, and zombie
// children of any kind. (Other live children are not the sandbox's: the
// mpi plugin's Open MPI starts an orted daemon.)
inline std::vector<std::string> children_left() {
  std::vector<std::string> out;
  const std::string me = std::to_string(getpid());
  DIR* d = opendir("/proc");
  if (!d) return {"cannot read /proc"};
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string stat = read_file(std::string("/proc/") + e->d_name + "/stat");
    // "pid (comm) state ppid ...": comm may hold spaces; parse after the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state, ppid;
    rest >> state >> ppid;
    const bool probe = stat.find("(spora-plugin-pr") != std::string::npos;  // comm: 15 characters
    if (ppid == me && (probe || state == "Z")) out.push_back(stat.substr(0, close + 1) + " state " + state);
  }
  closedir(d);
  return out;
}

// Discovers with `plugins` (holding the hostile set, good and a copy of
// sim) on the path; returns what was wrong, "" when all is well. Each bad
// plugin's reason must say whether its verdict came from a probe process
// now or from the cache.
inline std::string check_start(const fs::path& plugins, bool expect_cached) {
  std::ostringstream bad;
  spora::Context ctx;
  ctx.add_plugin_path(plugins.string());
  const auto mine = plugins_under(ctx, plugins);
  for (const auto& h : kHostile) {
    auto it = mine.find(plugin_file(h.name));
    if (it == mine.end()) {
      bad << h.name << " is not listed\n";
      continue;
    }
    const spora::PluginInfo& p = it->second;
    const std::string want = "[loader] " + plugin_file(h.name) + ": " + h.reason + " (";
    if (p.available) bad << h.name << " is available\n";
    if (p.reason.rfind(want, 0) != 0) bad << h.name << " reason: " << p.reason << "\n  wanted: " << want << "...\n";
    const char* source = expect_cached ? "(verdict cached in " : "(seen in a probe process; not loaded)";
    if (p.reason.find(source) == std::string::npos)
      bad << h.name << " reason lacks '" << source << "': " << p.reason << "\n";
  }
  for (const char* good : {"good", "sim"}) {
    auto it = mine.find(plugin_file(good));
    if (it == mine.end() || !it->second.available)
      bad << good << " is not usable: " << (it == mine.end() ? "not listed" : it->second.reason) << "\n";
  }
  if (!bad.str().empty()) return bad.str();
  try {
    // sim from `plugins` (searched before the default directory, so it wins
    // there): one of its own kernels runs.
    spora::Device sim = ctx.device("sim:0");
    const std::vector<float> a = {1.f, 2.f, 3.f}, b = {10.f, 20.f, 30.f};
    spora::Tensor ta = spora::Tensor::from(sim, {3}, a), tb = spora::Tensor::from(sim, {3}, b);
    spora::Tensor sum = spora::op("add", {&ta, &tb});
    if (sum.device().get() != sim.get()) bad << "add did not run on sim:0\n";
    if (sum.read<float>() != std::vector<float>({11.f, 22.f, 33.f})) bad << "add on sim:0 gave other numbers\n";
    spora::Device good = ctx.device("good:0");
    if (spora::Tensor::from(good, {3}, a).read<float>() != a) bad << "good:0 returned other data\n";
  } catch (const std::exception& e) {
    bad << "exception: " << e.what() << "\n";
  }
  for (const auto& c : children_left()) bad << "child left behind: " << c << "\n";
  return bad.str();
}

}  // namespace sandbox_test
