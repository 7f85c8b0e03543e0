// Loader robustness: hostile plugins beside one good plugin, seen only
// through the public API (spora.h / spora.hpp).
//
// Every test builds its own fresh temporary plugin directory (copies of the
// plugins built into SPORA_LOADER_TEST_PLUGIN_DIR plus files generated here)
// and its own context. The loader caches plugin records process-wide by real
// path, so fresh directories mean fresh records: no test sees another test's
// loads or initialisations, and the tests may run in any order, alone
// (ctest runs each in its own process) or all in one process.
//
// SPORA_PLUGIN_PATH is pointed at a path that does not exist before anything
// loads, so only the test's directories and the default directory
// (<dir of libspora.so>/spora/plugins: cpu, sim, maybe others) are searched.
// Plugins from the default directory are tolerated, never required.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spora/plugin.h>  // SPORA_PLUGIN_ABI_MINOR: what this libspora speaks
#include <spora/spora.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#ifndef SPORA_LOADER_TEST_PLUGIN_DIR
#error "compile with -DSPORA_LOADER_TEST_PLUGIN_DIR=\"<dir holding the built test plugins>\""
#endif

namespace fs = std::filesystem;
using testing::HasSubstr;

namespace {

// What oldminor.c reports: 1.<kOldMinorReports> (TEST_REPORTED_MINOR in
// CMakeLists.txt). Its test raises the host's floor one above that.
constexpr unsigned kOldMinorReports = 0;
constexpr unsigned kRaisedFloor = kOldMinorReports + 1;

// Before any test, hence before libspora reads either variable. The floor is
// read once per process (the host description is static), so the default
// floor (0) holds in this process; OldMinorIsRefusedBelowTheFloor raises it
// in a child process.
class LoaderEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(setenv("SPORA_PLUGIN_PATH", "/nonexistent/spora-loader-test-plugin-path", 1), 0);
    ASSERT_EQ(unsetenv("SPORA_PLUGIN_ABI_MINOR_FLOOR"), 0);
  }
};
const testing::Environment* const g_env = testing::AddGlobalTestEnvironment(new LoaderEnvironment);

// ---- files ----

const char* const kBuiltPlugins[] = {"good", "noentry", "badmajor", "oldminor", "initfail", "probezero"};
// The main scenario's directory: every built plugin but oldminor, which is
// only bad under a raised floor (see OldMinor* below).
const char* const kMainScenarioPlugins[] = {"good", "noentry", "badmajor", "initfail", "probezero"};

std::string plugin_file(const std::string& name) { return "libspora-device-" + name + ".so"; }

std::string built_plugin(const std::string& name) {
  return std::string(SPORA_LOADER_TEST_PLUGIN_DIR) + "/" + plugin_file(name);
}

// A fresh directory under $TMPDIR (or /tmp), by real path, removed at the end.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/spora-loader-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = fs::canonical(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);  // loaded plugins stay mapped; records keep only strings
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  fs::path operator/(const std::string& f) const { return path_ / f; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

void copy_plugin(const std::string& name, const fs::path& dir) {
  fs::copy_file(built_plugin(name), dir / plugin_file(name), fs::copy_options::overwrite_existing);
}

// What one hostile candidate must look like through spora_plugin_describe.
struct Expect {
  std::string file;                // file name in the test directory
  std::string name;                // what describe reports as the name
  std::vector<std::string> cause;  // substrings of the reason
};

// The hostile files of the main scenario, besides good.
std::vector<Expect> hostile_expectations() {
  return {
      {plugin_file("noentry"), "noentry", {plugin_file("noentry"), "spora_plugin_entry_v1"}},
      {plugin_file("badmajor"), "badmajor", {plugin_file("badmajor"), "ABI 2.0", "speaks 1.x"}},
      // The init-failure reason names the plugin, not its file; describe's
      // `path` names the file (checked separately).
      {plugin_file("initfail"), "initfail", {"initfail", "initialize failed", "[initfail] no device: driver missing"}},
      {plugin_file("probezero"), "probezero", {plugin_file("probezero"), "cannot run here", "no XYZ driver"}},
      // Broken files: the reason carries dlopen's own words (glibc's).
      {plugin_file("notelf"), "notelf", {plugin_file("notelf"), "cannot be loaded", "invalid ELF header"}},
      {plugin_file("empty"), "empty", {plugin_file("empty"), "cannot be loaded", "file too short"}},
      {plugin_file("headeronly"), "headeronly", {plugin_file("headeronly"), "cannot be loaded", "cannot read file data"}},
      {plugin_file("isdir"), "isdir", {plugin_file("isdir"), "not a regular file"}},
  };
}

// Copies the main scenario's plugins into `dir` and generates the broken files.
void populate_hostile_dir(const fs::path& dir) {
  for (const char* p : kMainScenarioPlugins) copy_plugin(p, dir);
  const std::string good = read_file(built_plugin("good"));
  ASSERT_GT(good.size(), 1000u) << "the good plugin is implausibly small";
  // Text, like the linker scripts some distributions install as lib*.so;
  // longer than an ELF header, so dlopen reads it and rejects the magic.
  write_file(dir / plugin_file("notelf"),
             "/* GNU ld script\n"
             "   Use the shared library, but some functions are only in\n"
             "   the static library, so try that secondarily.  */\n"
             "OUTPUT_FORMAT(elf64-x86-64)\n"
             "GROUP ( /usr/lib/libspora-device-real.so.1 /usr/lib/libspora-device-real_nonshared.a )\n");
  write_file(dir / plugin_file("empty"), "");
  // The ELF header alone: its program headers lie past the end of the file.
  write_file(dir / plugin_file("headeronly"), good.substr(0, 300));
  // NOT here: libspora-device-truncated.so (the first 1000 bytes: header and
  // program headers intact, segments cut off). dlopen itself dies of SIGBUS
  // on it unless the loader checks the file first, which would take every
  // test using this directory down with it; it has its own test below,
  // run in a child process. Add it here once the loader survives it.
  fs::create_directory(dir / plugin_file("isdir"));  // named like a plugin, but a directory
}

// ---- API helpers ----

std::vector<spora::PluginInfo> plugins_under(const spora::Context& ctx, const fs::path& dir) {
  std::vector<spora::PluginInfo> out;
  const std::string prefix = dir.string() + "/";
  for (auto& p : ctx.plugins())
    if (p.path.rfind(prefix, 0) == 0) out.push_back(p);
  return out;
}

const spora::PluginInfo* by_file(const std::vector<spora::PluginInfo>& ps, const std::string& file) {
  for (const auto& p : ps)
    if (fs::path(p.path).filename() == file) return &p;
  return nullptr;
}

std::string last_error() { return spora_last_error(); }

class Loader : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* p : kBuiltPlugins)
      ASSERT_TRUE(fs::is_regular_file(built_plugin(p))) << built_plugin(p) << " was not built";
  }
};

// ---- the main scenario ----

TEST_F(Loader, OnlyTheGoodPluginIsUsable) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(populate_hostile_dir(dir.path()));
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());

  // Listing devices initialises every usable-looking device plugin.
  std::vector<std::string> device_names;
  for (auto& d : ctx.devices()) device_names.push_back(d.name());

  const auto mine = plugins_under(ctx, dir.path());
  std::set<std::string> files, usable;
  for (const auto& p : mine) {
    files.insert(fs::path(p.path).filename().string());
    if (p.available) usable.insert(p.name);
  }
  std::set<std::string> expected_files;
  for (const char* p : kMainScenarioPlugins) expected_files.insert(plugin_file(p));
  for (const char* p : {"notelf", "empty", "headeronly", "isdir"}) expected_files.insert(plugin_file(p));
  EXPECT_EQ(files, expected_files) << "every candidate is listed, usable or not, exactly once";

  EXPECT_EQ(usable, std::set<std::string>{"good"});

  // Of the test directory's plugins, only good has devices.
  // Everything else comes from the default directory and is tolerated.
  std::set<std::string> default_dir_names;
  for (const auto& p : ctx.plugins())
    if (p.path.rfind(dir.str() + "/", 0) != 0) default_dir_names.insert(p.name);
  for (const auto& n : device_names) {
    const std::string backend = n.substr(0, n.rfind(':'));
    if (backend == "good") continue;
    EXPECT_TRUE(default_dir_names.count(backend)) << n << " is neither good nor from the default directory";
  }
  EXPECT_EQ(std::count(device_names.begin(), device_names.end(), "good:0"), 1);
  for (const auto& e : hostile_expectations()) {
    const std::string prefix = e.name + ":";
    for (const auto& n : device_names) EXPECT_NE(n.rfind(prefix, 0), 0u) << "a broken plugin has a device: " << n;
  }
}

TEST_F(Loader, EveryBadPluginIsListedWithItsReason) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(populate_hostile_dir(dir.path()));
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());
  (void)ctx.devices();  // runs every initialize, so initfail has failed by now
  const auto mine = plugins_under(ctx, dir.path());

  for (const auto& e : hostile_expectations()) {
    SCOPED_TRACE(e.file);
    const spora::PluginInfo* p = by_file(mine, e.file);
    ASSERT_NE(p, nullptr) << e.file << " is not listed";
    EXPECT_EQ(p->name, e.name);
    EXPECT_EQ(p->path, (dir / e.file).string());
    EXPECT_FALSE(p->available);
    EXPECT_TRUE(p->kind == "device" || p->kind == "unknown") << p->kind;
    EXPECT_EQ(p->reason.rfind("[loader] ", 0), 0u) << p->reason;
    for (const auto& c : e.cause) EXPECT_THAT(p->reason, HasSubstr(c));
  }
  const spora::PluginInfo* good = by_file(mine, plugin_file("good"));
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(good->available) << good->reason;
  EXPECT_EQ(good->kind, "device");
  EXPECT_EQ(good->version, "0.0.1-test");
  EXPECT_EQ(good->reason, "");
}

// The first 1000 bytes of the good plugin: a valid ELF header and program
// headers, with the segments they describe cut off. glibc's dlopen maps the
// segments anyway and dies of SIGBUS zero-filling past the end of the file,
// so the loader must refuse such a file before calling dlopen. Run in a
// child process so a crash fails this test only; the child prints what it
// saw and exits 0 when all is well.
int truncated_scenario() {
  try {
    TempDir dir;
    copy_plugin("good", dir.path());
    write_file(dir / plugin_file("truncated"), read_file(built_plugin("good")).substr(0, 1000));
    spora::Context ctx;
    ctx.add_plugin_path(dir.str());
    const auto mine = plugins_under(ctx, dir.path());  // discovery opens both files
    const spora::PluginInfo* t = by_file(mine, plugin_file("truncated"));
    if (!t) return std::fprintf(stderr, "truncated plugin not listed\n"), 1;
    std::fprintf(stderr, "available=%d reason: %s\n", t->available ? 1 : 0, t->reason.c_str());
    if (t->available) return 2;
    spora::Device good = ctx.device("good:0");
    const std::vector<float> data = {1.f, 2.f, 3.f};
    if (spora::Tensor::from(good, {3}, data).read<float>() != data)
      return std::fprintf(stderr, "good:0 returned other data\n"), 3;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    return 4;
  }
}

// DISABLED until the loader checks ELF segments before dlopen: today the
// child dies of SIGBUS inside dlopen (PluginRecord::load). Run it with
// --gtest_also_run_disabled_tests; drop the prefix with the fix.
TEST_F(Loader, TruncatedPluginDoesNotCrashTheHost) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes this test alone
  EXPECT_EXIT(std::exit(truncated_scenario()), testing::ExitedWithCode(0),
              "available=0 reason: \\[loader\\] libspora-device-truncated\\.so: ");
}

TEST_F(Loader, GoodDeviceWorks) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(populate_hostile_dir(dir.path()));
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());

  spora::Device good = ctx.device("good:0");
  ASSERT_TRUE(good);
  EXPECT_EQ(good.name(), "good:0");
  EXPECT_EQ(ctx.device("good").get(), good.get()) << "a name without :N means device 0";
  EXPECT_EQ(good.property("plugin"), "good");
  EXPECT_EQ(good.property("plugin_version"), "0.0.1-test");
  EXPECT_EQ(good.property("unified_memory"), "1");
  EXPECT_EQ(good.property("alignment"), "16");
  // The handshake as the plugin saw it, and its entry ran once.
  EXPECT_THAT(good.property("name"),
              HasSubstr("host ABI 1." + std::to_string(SPORA_PLUGIN_ABI_MINOR) + " floor 0; entry calls 1"));

  const std::vector<float> data = {1.5f, -2.f, 3.25f, 0.f, 1e30f, -7.f};
  spora::Tensor t = spora::Tensor::from(good, {2, 3}, data);
  EXPECT_EQ(t.device().get(), good.get());
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.read<float>(), data);

  spora::Tensor z = spora::Tensor::zeros(good, SPORA_DTYPE_F64, {4});  // memset path
  EXPECT_EQ(z.read<double>(), std::vector<double>(4, 0.0));
  spora::Tensor copy = t.to(good);  // copy_d2d
  EXPECT_EQ(copy.read<float>(), data);
  spora::Tensor scalar = spora::Tensor::from(good, {}, std::vector<double>{42.0});
  EXPECT_EQ(scalar.read<double>(), std::vector<double>{42.0});
  good.synchronize();

  // A plugin without kernels still runs ops: the host falls back to the cpu
  // device with copies (when a cpu plugin is loaded), else refuses cleanly.
  try {
    spora::Tensor sum = spora::op("add", {&t, &t});
    EXPECT_EQ(sum.device().get(), good.get());
    std::vector<float> want;
    for (float v : data) want.push_back(v + v);
    EXPECT_EQ(sum.read<float>(), want);
  } catch (const spora::Error& e) {
    EXPECT_EQ(e.status(), SPORA_ERROR_UNIMPLEMENTED) << e.what();
    EXPECT_THAT(std::string(e.what()), HasSubstr("good:0"));
  }

  // Across plugins (when the default directory has a usable cpu plugin).
  spora_device_t* cpu = nullptr;
  if (spora_device_find(ctx.get(), "cpu:0", &cpu) == SPORA_OK) {
    spora::Tensor on_cpu = t.to(spora::Device(cpu));
    spora::Tensor back = on_cpu.to(good);
    EXPECT_EQ(back.read<float>(), data);
  }
}

TEST_F(Loader, FindingABrokenBackendReportsItsReason) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(populate_hostile_dir(dir.path()));
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());

  spora_device_t* d = nullptr;
  ASSERT_EQ(spora_device_find(ctx.get(), "initfail", &d), SPORA_ERROR_UNAVAILABLE);
  EXPECT_EQ(d, nullptr) << "out-parameters are written only on success";
  const std::string first = last_error();
  EXPECT_THAT(first, HasSubstr("initfail"));
  EXPECT_THAT(first, HasSubstr("initialize failed"));
  EXPECT_THAT(first, HasSubstr("[initfail] no device: driver missing"));
  // The same reason again: initialize is not retried, the reason is recorded.
  ASSERT_EQ(spora_device_find(ctx.get(), "initfail:0", &d), SPORA_ERROR_UNAVAILABLE);
  EXPECT_EQ(last_error(), first);
  // ... and it is the reason spora_plugin_describe gives.
  const auto mine = plugins_under(ctx, dir.path());
  const spora::PluginInfo* p = by_file(mine, plugin_file("initfail"));
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->available);
  EXPECT_THAT(first, HasSubstr(p->reason));

  // Every other broken candidate is found by its file's name and refused
  // with its recorded reason.
  for (const auto& e : hostile_expectations()) {
    SCOPED_TRACE(e.file);
    ASSERT_EQ(spora_device_find(ctx.get(), e.name.c_str(), &d), SPORA_ERROR_UNAVAILABLE) << last_error();
    const std::string msg = last_error();
    for (const auto& c : e.cause) EXPECT_THAT(msg, HasSubstr(c));
  }

  ASSERT_EQ(spora_device_find(ctx.get(), "nosuch", &d), SPORA_ERROR_NOT_FOUND);
  EXPECT_THAT(last_error(), HasSubstr("nosuch"));
  EXPECT_THAT(last_error(), HasSubstr("good")) << "the message lists what is available";
  ASSERT_EQ(spora_device_find(ctx.get(), "good:1", &d), SPORA_ERROR_NOT_FOUND);
  EXPECT_THAT(last_error(), HasSubstr("good"));
  ASSERT_EQ(spora_device_find(ctx.get(), "good:x", &d), SPORA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(spora_device_find(ctx.get(), "good:-1", &d), SPORA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(spora_device_find(ctx.get(), "", &d), SPORA_ERROR_NOT_FOUND);
  ASSERT_EQ(spora_device_find(ctx.get(), nullptr, &d), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(d, nullptr);

  // Failures leave the context usable.
  ASSERT_EQ(spora_device_find(ctx.get(), "good", &d), SPORA_OK) << last_error();
  EXPECT_NE(d, nullptr);
}

// ---- the ABI minor floor ----

// With the default floor (0) a plugin built against 1.0 loads, and it was
// told the host's version and floor at entry.
TEST_F(Loader, OldMinorLoadsUnderTheDefaultFloor) {
  TempDir dir;
  copy_plugin("oldminor", dir.path());
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());
  const auto mine = plugins_under(ctx, dir.path());
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_TRUE(mine[0].available) << mine[0].reason;
  EXPECT_THAT(ctx.device("oldminor:0").property("name"),
              HasSubstr("host ABI 1." + std::to_string(SPORA_PLUGIN_ABI_MINOR) + " floor 0;"));
}

// Its table is 1.0-sized: the 1.1 memory_stats slot lies past struct_size
// (and aborts if called), so the host reports statistics as unimplemented,
// naming the device, without reading it. The good plugin's table is full
// size with the slot NULL: the same answer.
TEST_F(Loader, MemoryStatsOfOlderOrPartialTablesAreUnimplemented) {
  TempDir dir;
  copy_plugin("oldminor", dir.path());
  copy_plugin("good", dir.path());
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());
  for (const char* name : {"oldminor:0", "good:0"}) {
    spora_device_t* d = nullptr;
    ASSERT_EQ(spora_device_find(ctx.get(), name, &d), SPORA_OK) << spora_last_error();
    uint64_t allocated = 7;
    EXPECT_EQ(spora_device_memory_stats(d, &allocated, nullptr, nullptr, nullptr), SPORA_ERROR_UNIMPLEMENTED) << name;
    EXPECT_THAT(spora_last_error(), HasSubstr(std::string("[") + name + "]"));
    EXPECT_THAT(spora_last_error(), HasSubstr("memory_stats"));
    EXPECT_EQ(allocated, 7u) << "outputs are written only on success";
    EXPECT_EQ(spora_device_reset_peak_memory_stats(d), SPORA_ERROR_UNIMPLEMENTED) << name;
    EXPECT_THAT(spora_last_error(), HasSubstr(std::string("[") + name + "]"));
  }
}

// SPORA_PLUGIN_ABI_MINOR_FLOOR one above what oldminor reports: it must be
// refused after its entry, with a reason naming the file and both minors.
// The host reads the floor once per process, so this runs in a child
// process (which raises the floor before anything loads); the child prints
// what it saw and exits 0 when all is well.
int old_minor_scenario() {
  try {
    if (setenv("SPORA_PLUGIN_ABI_MINOR_FLOOR", std::to_string(kRaisedFloor).c_str(), 1) != 0) return 1;
    TempDir dir;
    copy_plugin("oldminor", dir.path());
    spora::Context ctx;
    ctx.add_plugin_path(dir.str());
    const auto mine = plugins_under(ctx, dir.path());
    if (mine.size() != 1) return std::fprintf(stderr, "%zu plugins listed\n", mine.size()), 2;
    std::fprintf(stderr, "available=%d reason: %s\n", mine[0].available ? 1 : 0, mine[0].reason.c_str());
    if (mine[0].available) return 3;
    spora_device_t* d = nullptr;
    const spora_status_t s = spora_device_find(ctx.get(), "oldminor", &d);
    std::fprintf(stderr, "find: %d %s\n", s, spora_last_error());
    if (s != SPORA_ERROR_UNAVAILABLE || std::string(spora_last_error()).find(mine[0].reason) == std::string::npos)
      return 4;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    return 5;
  }
}

TEST_F(Loader, OldMinorIsRefusedBelowTheFloor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the floor is read once
  const std::string floor = "1\\." + std::to_string(kRaisedFloor);
  const std::string built = "1\\." + std::to_string(kOldMinorReports);
  EXPECT_EXIT(std::exit(old_minor_scenario()), testing::ExitedWithCode(0),
              "available=0 reason: \\[loader\\] libspora-device-oldminor\\.so: built for plugin ABI " + built +
                  ", older than the oldest accepted " + floor);
}

// ---- dedupe by real path ----

TEST_F(Loader, OneFileReachedThroughSeveralPathsIsLoadedOnce) {
  TempDir real_dir, link_dir;
  copy_plugin("good", real_dir.path());
  const fs::path real = real_dir / plugin_file("good");
  // Another directory holding a symlink to it under the same name, and an
  // alias under another plugin name in the same directory.
  fs::create_symlink(real, link_dir / plugin_file("good"));
  fs::create_symlink(real, real_dir / plugin_file("alias"));

  spora::Context ctx;
  ctx.add_plugin_path(link_dir.str());                          // via the symlink directory
  ctx.add_plugin_path(real_dir.str());                          // the real directory
  ctx.add_plugin_path((link_dir / plugin_file("good")).string());  // the symlink as a file
  ctx.add_plugin_path(real.string());                           // the file itself
  ctx.add_plugin_path(real_dir.str() + "/../" + real_dir.path().filename().string());  // a non-normal path

  size_t entries = 0;
  for (const auto& p : ctx.plugins()) {
    if (p.name != "good" && p.name != "alias") continue;
    ++entries;
    EXPECT_EQ(p.path, real.string()) << "records are keyed and shown by real path";
    EXPECT_TRUE(p.available) << p.reason;
  }
  EXPECT_EQ(entries, 1u);

  std::vector<std::string> goods;
  for (auto& d : ctx.devices())
    if (d.name().rfind("good:", 0) == 0) goods.push_back(d.name());
  EXPECT_EQ(goods, std::vector<std::string>{"good:0"});
  EXPECT_THAT(ctx.device("good").property("name"), HasSubstr("entry calls 1"));

  // A second context over the same files shares the process-wide record.
  spora::Context again;
  again.add_plugin_path(real.string());
  EXPECT_EQ(again.device("good:0").get(), ctx.device("good:0").get());
  EXPECT_THAT(again.device("good").property("name"), HasSubstr("entry calls 1"));
}

// ---- context rules ----

TEST_F(Loader, AddingAPluginPathAfterDiscoveryFails) {
  TempDir dir, late;
  copy_plugin("good", dir.path());
  copy_plugin("good", late.path());
  spora::Context ctx;
  ASSERT_EQ(spora_context_add_plugin_path(ctx.get(), dir.str().c_str()), SPORA_OK);
  size_t before = 0;
  ASSERT_EQ(spora_plugin_count(ctx.get(), &before), SPORA_OK);  // discovery happens here

  EXPECT_EQ(spora_context_add_plugin_path(ctx.get(), late.str().c_str()), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(last_error(), HasSubstr("after discovery"));
  EXPECT_THAT(last_error(), HasSubstr(late.str()));
  // The rejected path is not searched; the context keeps working.
  size_t after = 0;
  ASSERT_EQ(spora_plugin_count(ctx.get(), &after), SPORA_OK);
  EXPECT_EQ(after, before);
  EXPECT_TRUE(plugins_under(ctx, late.path()).empty());
  EXPECT_EQ(ctx.device("good:0").property("plugin"), "good");

  // A device query discovers, too.
  spora::Context other;
  spora_device_t* d = nullptr;
  ASSERT_EQ(spora_device_find(other.get(), "nosuch", &d), SPORA_ERROR_NOT_FOUND);
  EXPECT_EQ(spora_context_add_plugin_path(other.get(), dir.str().c_str()), SPORA_ERROR_INVALID_ARGUMENT);

  EXPECT_EQ(spora_context_add_plugin_path(nullptr, dir.str().c_str()), SPORA_ERROR_INVALID_ARGUMENT);
  spora::Context fresh;
  EXPECT_EQ(spora_context_add_plugin_path(fresh.get(), nullptr), SPORA_ERROR_INVALID_ARGUMENT);
}

TEST_F(Loader, TheDefaultDirectoryHoldsNoTestPlugins) {
  spora::Context ctx;  // SPORA_PLUGIN_PATH points nowhere: only the default directory
  for (const auto& p : ctx.plugins()) {
    EXPECT_EQ(p.path.find("/spora-loader-test-"), std::string::npos) << p.path;
    for (const char* n : kBuiltPlugins) EXPECT_NE(p.name, n) << p.path;
  }
  spora_device_t* d = nullptr;
  EXPECT_EQ(spora_device_find(ctx.get(), "good", &d), SPORA_ERROR_NOT_FOUND) << last_error();
}

// spora.h: "`available` is 1 when the plugin loaded and initialised, else 0
// and `reason` says why". Initialisation is lazy: until something asks for
// devices, a plugin whose initialize will fail has not failed yet, and
// spora_plugin_describe reports it available (PluginRecord::available()
// treats "not initialised yet" as fine). DISABLED until describe settles
// availability first (or spora.h documents the lazy answer); drop the
// prefix with the fix.
TEST_F(Loader, DescribeBeforeAnyDeviceQuery) {
  TempDir dir;
  copy_plugin("initfail", dir.path());
  copy_plugin("good", dir.path());
  spora::Context ctx;
  ctx.add_plugin_path(dir.str());
  const auto before = plugins_under(ctx, dir.path());  // discovery only, no initialize yet
  const spora::PluginInfo* initfail = by_file(before, plugin_file("initfail"));
  ASSERT_NE(initfail, nullptr);
  EXPECT_FALSE(initfail->available) << "a plugin that was never initialised is reported available";

  (void)ctx.devices();
  const auto now = plugins_under(ctx, dir.path());
  const spora::PluginInfo* after = by_file(now, plugin_file("initfail"));
  ASSERT_NE(after, nullptr);
  EXPECT_FALSE(after->available);
  EXPECT_THAT(after->reason, HasSubstr("[initfail] no device: driver missing"));
}

}  // namespace

// OpenMP reads its wait policy once, when a plugin's dlopen loads it; before
// opening a plugin the host asks libgomp for a short spin (GOMP_SPINCOUNT=
// 1000) and other runtimes for passive waiting (issue 19: a pool spinning
// ~3 ms lost most of its speed to one other busy process, a passive one
// paid a ~50 us wake-up per region on a quiet machine), unless the user
// chose: OMP_WAIT_POLICY, or libgomp's GOMP_SPINCOUNT.
TEST_F(Loader, OpeningAPluginDefaultsOpenMPToAShortSpinUnlessTheUserChose) {
  struct Case {
    const char* policy;     // OMP_WAIT_POLICY before, nullptr: unset
    const char* spincount;  // GOMP_SPINCOUNT before, nullptr: unset
    const char* expected_policy;     // OMP_WAIT_POLICY after, nullptr: unset
    const char* expected_spincount;  // GOMP_SPINCOUNT after, nullptr: unset
  };
  auto expect_env = [](const char* name, const char* expected) {
    const char* now = std::getenv(name);
    if (expected) {
      ASSERT_NE(now, nullptr) << name;
      EXPECT_STREQ(now, expected) << name;
    } else {
      EXPECT_EQ(now, nullptr) << name << "=" << now;
    }
  };
  for (const Case& c : {Case{nullptr, nullptr, "passive", "1000"}, Case{"active", nullptr, "active", nullptr},
                        Case{nullptr, "50", nullptr, "50"}, Case{"passive", nullptr, "passive", nullptr}}) {
    SCOPED_TRACE(std::string("OMP_WAIT_POLICY=") + (c.policy ? c.policy : "(unset)") +
                 " GOMP_SPINCOUNT=" + (c.spincount ? c.spincount : "(unset)"));
    c.policy ? setenv("OMP_WAIT_POLICY", c.policy, 1) : unsetenv("OMP_WAIT_POLICY");
    c.spincount ? setenv("GOMP_SPINCOUNT", c.spincount, 1) : unsetenv("GOMP_SPINCOUNT");
    TempDir dir;  // a fresh file: the loader opens it anew
    copy_plugin("good", dir.path());
    spora::Context ctx;
    ctx.add_plugin_path(dir.str());
    const auto mine = plugins_under(ctx, dir.path());
    ASSERT_EQ(mine.size(), 1u);
    ASSERT_TRUE(mine[0].available) << mine[0].reason;
    expect_env("OMP_WAIT_POLICY", c.expected_policy);
    expect_env("GOMP_SPINCOUNT", c.expected_spincount);
  }
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("GOMP_SPINCOUNT");
}
