// The probe sandbox, through the public C API: plugins whose constructor,
// probe or entry crashes, aborts, exits or hangs sit beside a good plugin
// and a copy of sim; the program keeps running, the good ones work, each
// bad one is listed with why, and its verdict is cached for the next start.
//
// Every case makes fresh plugin and cache directories (verdicts are kept
// per process by real path, and per cache file) and sets the knobs before
// its context discovers. A later start is a new process: sandbox_start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spora/spora.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "sandbox_checks.h"

#ifndef SPORA_LOADER_TEST_PLUGIN_DIR
#error "compile with -DSPORA_LOADER_TEST_PLUGIN_DIR=\"<dir holding the built test plugins>\""
#endif
#ifndef SPORA_SIM_PLUGIN
#error "compile with -DSPORA_SIM_PLUGIN=\"<path of the built sim plugin>\""
#endif
#ifndef SPORA_SANDBOX_START
#error "compile with -DSPORA_SANDBOX_START=\"<path of sandbox_start>\""
#endif

namespace {
using namespace sandbox_test;
using testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/spora-sandbox-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = fs::canonical(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& f) const { return path_ / f; }

 private:
  fs::path path_;
};

// The plugins (hostile set, good, a copy of sim), the verdict cache and the
// log the hostile plugins append to before misbehaving, under one root.
struct Scenario {
  TempDir root;
  fs::path plugins = root / "plugins";
  fs::path cache = root / "cache";
  fs::path log = root / "misbehave.log";

  Scenario() {
    fs::create_directory(plugins);
    const std::string built = SPORA_LOADER_TEST_PLUGIN_DIR;
    fs::copy_file(built + "/" + plugin_file("good"), plugins / plugin_file("good"));
    fs::copy_file(SPORA_SIM_PLUGIN, plugins / plugin_file("sim"));
    for (const auto& h : kHostile) fs::copy_file(built + "/" + plugin_file(h.name), plugins / plugin_file(h.name));
    // Knobs, read at each discovery, inherited by every process started below.
    setenv("SPORA_PLUGIN_CACHE_DIR", cache.c_str(), 1);
    setenv("SPORA_PLUGIN_PROBE_TIMEOUT_S", "1", 1);
    setenv("SPORA_TEST_MISBEHAVE_LOG", log.c_str(), 1);
    unsetenv("SPORA_PLUGIN_SANDBOX");
  }
  // How often each hostile step ran, in any process.
  std::map<std::string, int> steps_run() const {
    std::map<std::string, int> n;
    std::istringstream in(read_file(log));
    for (std::string name, step, pid; in >> name >> step >> pid;) ++n[name];
    return n;
  }
  std::string cache_text() const { return read_file(cache / "plugin-verdicts.txt"); }
};

// Runs sandbox_start as a new process; its wait status and stdout.
struct Started {
  int status = -1;
  std::string out;
};
Started start_again(const fs::path& plugins, const char* mode) {
  const std::string cmd = std::string("exec '") + SPORA_SANDBOX_START + "' '" + plugins.string() + "' " + mode;
  Started r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  r.status = pclose(p);
  return r;
}

class SandboxEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    // Only the scenario's directory and the default one are searched.
    ASSERT_EQ(setenv("SPORA_PLUGIN_PATH", "/nonexistent/spora-sandbox-test-plugin-path", 1), 0);
  }
};
const testing::Environment* const g_env = testing::AddGlobalTestEnvironment(new SandboxEnvironment);

TEST(Sandbox, HostilePluginsBesideGoodOnesAreListedAndCached) {
  Scenario s;
  // This process survives every hostile plugin; good and sim work.
  EXPECT_EQ(check_start(s.plugins, /*expect_cached=*/false), "");

  // Each hostile step ran once, in a probe process, not in this one.
  std::map<std::string, int> once;
  for (const auto& h : kHostile) once[h.name] = 1;
  EXPECT_EQ(s.steps_run(), once);
  EXPECT_EQ(read_file(s.log).find(" " + std::to_string(getpid()) + "\n"), std::string::npos)
      << "a hostile step ran in the host:\n"
      << read_file(s.log);

  // The cache holds every candidate's verdict.
  for (const auto& h : kHostile)
    EXPECT_THAT(s.cache_text(), HasSubstr("died\t" + (s.plugins / plugin_file(h.name)).string() + "\t" + h.reason));
  for (const char* good : {"good", "sim"})
    EXPECT_THAT(s.cache_text(), HasSubstr("survived\t" + (s.plugins / plugin_file(good)).string()));

  // The next start takes every verdict from the cache: no hostile step runs
  // again, the same reasons are listed, and it works.
  const Started again = start_again(s.plugins, "cached");
  EXPECT_TRUE(WIFEXITED(again.status) && WEXITSTATUS(again.status) == 0) << again.status;
  EXPECT_EQ(again.out, "start fine\n");
  EXPECT_EQ(s.steps_run(), once);
  EXPECT_EQ(children_left(), std::vector<std::string>{});
}

// A changed plugin file is judged again; a timeout is judged again under a
// longer limit, and not under the same one.
TEST(Sandbox, ChangedFilesAndLongerTimeoutsAreProbedAgain) {
  Scenario s;
  {
    spora::Context ctx;
    ctx.add_plugin_path(s.plugins.string());
    (void)ctx.plugins();
  }
  ASSERT_EQ(s.steps_run()["probehang"], 1);
  const std::string hang = plugin_file("probehang") + " 0 [loader] " + plugin_file("probehang") + ": timed out after ";

  Started r = start_again(s.plugins, "list");
  EXPECT_THAT(r.out, HasSubstr(hang + "1 s in spora_plugin_probe_v1 (verdict cached in "));
  EXPECT_EQ(s.steps_run()["probehang"], 1);

  setenv("SPORA_PLUGIN_PROBE_TIMEOUT_S", "1.5", 1);
  r = start_again(s.plugins, "list");
  EXPECT_THAT(r.out, HasSubstr(hang + "1.5 s in spora_plugin_probe_v1 (seen in a probe process; not loaded)"));
  EXPECT_EQ(s.steps_run()["probehang"], 2);
  EXPECT_EQ(s.steps_run()["entryexit"], 1) << "verdicts that were not timeouts stand";

  // A rewritten file (another modification time) is judged again.
  const fs::path f = s.plugins / plugin_file("entryexit");
  fs::last_write_time(f, fs::last_write_time(f) + std::chrono::seconds(5));
  r = start_again(s.plugins, "list");
  EXPECT_THAT(r.out, HasSubstr(plugin_file("entryexit") + " 0 [loader] " + plugin_file("entryexit") +
                               ": exited with status 3 in spora_plugin_entry_v1 (seen in a probe process"));
  EXPECT_EQ(s.steps_run()["entryexit"], 2);
  EXPECT_EQ(s.steps_run()["ctorsegv"], 1);
  EXPECT_EQ(s.steps_run()["probehang"], 2);
  EXPECT_EQ(children_left(), std::vector<std::string>{});
}

// A cache that cannot be read or written changes nothing but the speed.
TEST(Sandbox, CorruptOrUnwritableCacheIsIgnored) {
  Scenario s;
  setenv("SPORA_PLUGIN_PROBE_TIMEOUT_S", "0.2", 1);  // probehang's reason is not looked at here
  fs::create_directory(s.cache);
  std::ofstream(s.cache / "plugin-verdicts.txt") << "spora-plugin-verdicts 1 garbage\n\x01\x02 not\ta\tverdict\n";
  {
    spora::Context ctx;
    ctx.add_plugin_path(s.plugins.string());
    (void)ctx.plugins();
  }
  EXPECT_EQ(s.steps_run()["ctorsegv"], 1);
  EXPECT_THAT(s.cache_text(), HasSubstr("died\t" + (s.plugins / plugin_file("ctorsegv")).string()))
      << "the foreign file is replaced by a good one";

  // A file where the cache directory should be: nothing is cached, all works.
  Scenario blocked;
  setenv("SPORA_PLUGIN_PROBE_TIMEOUT_S", "0.2", 1);
  std::ofstream(blocked.cache) << "x";
  const Started r = start_again(blocked.plugins, "list");
  EXPECT_THAT(r.out, HasSubstr(plugin_file("ctorsegv") + " 0 [loader] " + plugin_file("ctorsegv") +
                               ": killed by SIGSEGV in the constructor (dlopen)"));
  EXPECT_THAT(r.out, HasSubstr(plugin_file("good") + " 1 \n"));
  EXPECT_EQ(read_file(blocked.cache), "x");
  EXPECT_EQ(children_left(), std::vector<std::string>{});
}

// A program that ignores SIGCHLD has its children reaped by the kernel, so
// how a probe process ended is lost; that it ended before finishing the
// handshake is not, and the plugin is still never loaded here.
TEST(Sandbox, HostIgnoringSigchldIsStillProtected) {
  Scenario s;
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &old), 0);
  std::map<std::string, spora::PluginInfo> mine;
  {
    spora::Context ctx;
    ctx.add_plugin_path(s.plugins.string());
    mine = plugins_under(ctx, s.plugins);
  }
  sigaction(SIGCHLD, &old, nullptr);
  const std::map<std::string, std::string> want = {
      {"ctorsegv", "ended in the constructor (dlopen) (how is unknown: this program ignores SIGCHLD)"},
      {"probeabort", "ended in spora_plugin_probe_v1 (how is unknown"},
      {"entryexit", "ended in spora_plugin_entry_v1 (how is unknown"},
      {"probehang", "timed out after 1 s in spora_plugin_probe_v1"},
      {"entrysegv", "ended in spora_plugin_entry_v1 (how is unknown"},
  };
  for (const auto& [name, reason] : want) {
    ASSERT_EQ(mine.count(plugin_file(name)), 1u) << name;
    EXPECT_FALSE(mine.at(plugin_file(name)).available) << name;
    EXPECT_THAT(mine.at(plugin_file(name)).reason, HasSubstr(reason));
  }
  EXPECT_TRUE(mine.at(plugin_file("good")).available) << mine.at(plugin_file("good")).reason;
  EXPECT_TRUE(mine.at(plugin_file("sim")).available) << mine.at(plugin_file("sim")).reason;
  EXPECT_EQ(children_left(), std::vector<std::string>{});
}

// SPORA_PLUGIN_SANDBOX=0 loads candidates in the host as before: the
// crashing constructor then takes the program down, which is what the
// sandbox prevents.
TEST(Sandbox, SwitchedOffTheHostLoadsDirectly) {
  Scenario s;
  setenv("SPORA_PLUGIN_SANDBOX", "0", 1);
  const Started r = start_again(s.plugins, "list");
  unsetenv("SPORA_PLUGIN_SANDBOX");
  EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV) << r.status << "\n" << r.out;
  EXPECT_EQ(s.steps_run()["ctorsegv"], 1) << "it ran once, in the program itself";
  EXPECT_FALSE(fs::exists(s.cache / "plugin-verdicts.txt"));
}

}  // namespace
