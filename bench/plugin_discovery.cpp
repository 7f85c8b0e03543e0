// Plugin discovery of the default plugin directory (the in-tree plugins next
// to libspora) in fresh processes, three ways, interleaved round by round:
//   off   SPORA_PLUGIN_SANDBOX=0: every candidate dlopened in the host, as
//         before the probe sandbox (the anchor)
//   cold  the sandbox with an empty verdict cache: one probe process per
//         candidate, all at once, then the survivors loaded in the host
//   warm  the sandbox with the cache the cold runs filled: no process
// Each figure is the time spora_plugin_count takes in a new process (it
// discovers: lists, vets, dlopens, probes and enters every candidate; no
// plugin is initialised). Prints the median and range per way.
//
//   bench_plugin_discovery [rounds, default 15]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <spora/spora.h>
#include <string>
#include <vector>

extern char** environ;

namespace {

// The child: one discovery, its time in ms on stdout.
int measure_once() {
  const auto t0 = std::chrono::steady_clock::now();
  spora_context_t* ctx = nullptr;
  size_t n = 0;
  if (spora_context_create(&ctx) != SPORA_OK || spora_plugin_count(ctx, &n) != SPORA_OK) {
    std::fprintf(stderr, "discovery failed: %s\n", spora_last_error());
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.3f %zu\n", ms, n);
  spora_context_free(ctx);
  return 0;
}

// Runs this program with --once under `env` (NAME=VALUE entries added to
// ours); returns the child's figure.
double run_child(const char* self, const std::vector<std::string>& extra_env, size_t* plugins) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const auto& x : extra_env)
      if (kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0) replaced = true;
    if (!replaced) env_strings.push_back(kv);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  char once[] = "--once";
  char* argv[] = {const_cast<char*>(self), once, nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, self, &fa, nullptr, argv, envp.data()) != 0) std::exit(2);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || std::sscanf(out.c_str(), "%lf %zu", &ms, plugins) != 2) {
    std::fprintf(stderr, "a measuring child failed (status %d): %s\n", status, out.c_str());
    std::exit(1);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "--once")) return measure_once();
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  char tmpl[] = "/tmp/spora-bench-discovery-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  const std::string root = tmpl, cold_dir = root + "/cold", warm_dir = root + "/warm";
  // Only the default directory: the in-tree plugins next to libspora.
  const std::string no_path = "SPORA_PLUGIN_PATH=";
  size_t plugins = 0;
  const char* self = "/proc/self/exe";
  (void)run_child(self, {no_path, "SPORA_PLUGIN_CACHE_DIR=" + warm_dir}, &plugins);  // fills the warm cache
  std::map<std::string, std::vector<double>> ms;
  for (int r = 0; r < rounds; ++r) {
    ms["off"].push_back(run_child(self, {no_path, "SPORA_PLUGIN_SANDBOX=0"}, &plugins));
    std::filesystem::remove_all(cold_dir);
    ms["cold"].push_back(run_child(self, {no_path, "SPORA_PLUGIN_CACHE_DIR=" + cold_dir}, &plugins));
    ms["warm"].push_back(run_child(self, {no_path, "SPORA_PLUGIN_CACHE_DIR=" + warm_dir}, &plugins));
  }
  std::filesystem::remove_all(root);
  std::printf("discovery of the %zu in-tree plugins next to libspora, %d fresh processes each, ms:\n", plugins, rounds);
  std::printf("%-6s %8s %8s %8s\n", "way", "median", "min", "max");
  std::map<std::string, double> median;
  for (const char* way : {"off", "cold", "warm"}) {
    auto v = ms[way];
    std::sort(v.begin(), v.end());
    median[way] = v[v.size() / 2];
    std::printf("%-6s %8.2f %8.2f %8.2f\n", way, median[way], v.front(), v.back());
  }
  std::printf("medians: warm/off %.2f, cold/off %.2f; goal: warm <= 20 ms\n", median["warm"] / median["off"],
              median["cold"] / median["off"]);
  return 0;
}
