// The vendor plugins that cannot run here (ze: no Level Zero driver; nccl:
// no CUDA driver) must load, say why they cannot run, and fail loudly when
// asked for by name. On a machine that has the device, the no-device
// checks skip (saying so) and only the symbol and side-effect checks run.
// Run once per plugin: argv-free, the plugin is chosen by
// the SPORA_NODEVICE_PLUGIN / _NAME / _KIND / _PROBE / _INIT environment the
// ctest entry sets.
//
//   ExportsOnlyProbeAndEntry   nm -D lists exactly the two entry points
//   ProbeIsSideEffectFree      no thread, file descriptor or mapping appears
//                              or disappears, twice in a row, and score 0
//   InitializeReportsRealError bypassing the probe, the plugin's own
//                              initialize() calls the real API (zeInit,
//                              cudaGetDeviceCount) and reports its result
//   ListedUnavailableWithReason the C API lists the plugin, unavailable,
//                              with the probe's reason
//   ByNameFailsWithReason      spora_device_find("ze") fails with
//                              SPORA_ERROR_UNAVAILABLE and that reason
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spora/plugin.h>
#include <spora/spora.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

struct Expect {
  std::string file = env("SPORA_NODEVICE_PLUGIN");
  std::string name = env("SPORA_NODEVICE_NAME");
  std::string kind = env("SPORA_NODEVICE_KIND");
  std::string probe = env("SPORA_NODEVICE_PROBE");  // text the probe's reason must contain
  std::string init = env("SPORA_NODEVICE_INIT");    // text initialize()'s error must contain
};

const Expect& expect() {
  static const Expect e;
  return e;
}

std::set<std::string> dir_entries(const char* path) {
  std::set<std::string> out;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d)) out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

// The process's threads, open descriptors and mapped files.
struct Snapshot {
  std::set<std::string> tasks, fds, maps;
  static Snapshot take() {
    Snapshot s;
    s.tasks = dir_entries("/proc/self/task");
    s.fds = dir_entries("/proc/self/fd");
    std::ifstream m("/proc/self/maps");
    for (std::string line; std::getline(m, line);) {
      const size_t slash = line.find('/');
      if (slash != std::string::npos) s.maps.insert(line.substr(slash));
    }
    return s;
  }
};

TEST(NoDevicePlugin, ExportsOnlyProbeAndEntry) {
  ASSERT_FALSE(expect().file.empty());
  const std::string cmd = "nm -D --defined-only '" + expect().file + "'";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::set<std::string> syms;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string addr, type, sym;
    in >> addr >> type >> sym;
    if (!sym.empty()) syms.insert(sym);
  }
  ASSERT_EQ(pclose(p), 0) << cmd;
  EXPECT_EQ(syms, (std::set<std::string>{"spora_plugin_entry_v1", "spora_plugin_probe_v1"}));
}

TEST(NoDevicePlugin, ProbeIsSideEffectFree) {
  void* h = dlopen(expect().file.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto probe = reinterpret_cast<spora_plugin_probe_fn>(dlsym(h, SPORA_PLUGIN_PROBE_SYMBOL));
  ASSERT_NE(probe, nullptr);
  const Snapshot before = Snapshot::take();
  for (int i = 0; i < 2; ++i) {
    spora_probe_result_t r{};
    r.struct_size = sizeof r;
    r.score = 123;
    probe(&r);
    if (r.score > 0) {
      std::printf("a %s driver exists here: only side effects are checked\n", expect().name.c_str());
      continue;
    }
    EXPECT_EQ(r.score, 0);
    EXPECT_NE(std::string(r.reason).find("no device"), std::string::npos) << r.reason;
    EXPECT_NE(std::string(r.reason).find(expect().probe), std::string::npos) << r.reason;
  }
  const Snapshot after = Snapshot::take();
  EXPECT_EQ(before.tasks, after.tasks) << "the probe started or ended a thread";
  EXPECT_EQ(before.fds, after.fds) << "the probe left a file descriptor open or closed one";
  EXPECT_EQ(before.maps, after.maps) << "the probe left a library mapped";
  // A too-small result struct is left alone, not overrun.
  spora_probe_result_t tiny{};
  tiny.struct_size = sizeof(size_t);
  tiny.score = 7;
  probe(&tiny);
  EXPECT_EQ(tiny.score, 7);
}

TEST(NoDevicePlugin, InitializeReportsRealError) {
  void* h = dlopen(expect().file.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(h, SPORA_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr);
  spora_host_t host{};
  host.struct_size = sizeof host;
  host.abi_major = SPORA_PLUGIN_ABI_MAJOR;
  host.abi_minor = SPORA_PLUGIN_ABI_MINOR;
  host.host_version = "test";
  spora_plugin_info_t info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(entry(&host, &info), nullptr);
  EXPECT_EQ(std::string(info.name), expect().name);
  spora_plugin_error_t* err = nullptr;
  if (expect().kind == "device") {
    ASSERT_EQ(info.kind, SPORA_PLUGIN_KIND_DEVICE);
    auto* t = static_cast<const spora_device_api_t*>(info.api);
    err = t->initialize();
    if (!err) GTEST_SKIP() << "initialize succeeded: this machine has a Level Zero device";
    // Calls after a failed initialize are errors, not crashes.
    int32_t n = -1;
    spora_plugin_error_t* e2 = t->device_count(&n);
    ASSERT_NE(e2, nullptr);
    e2->destroy(e2);
    spora_devptr_t p = nullptr;
    e2 = t->mem_alloc(0, 16, &p);
    ASSERT_NE(e2, nullptr);
    e2->destroy(e2);
  } else {
    ASSERT_EQ(info.kind, SPORA_PLUGIN_KIND_COLLECTIVE);
    auto* t = static_cast<const spora_collective_api_t*>(info.api);
    err = t->initialize();
    if (!err) GTEST_SKIP() << "initialize succeeded: this machine has a CUDA device";
    spora_comm_id_t id{};
    spora_plugin_error_t* e2 = t->get_unique_id(&id);
    ASSERT_NE(e2, nullptr);
    e2->destroy(e2);
    spora_comm_t* comm = nullptr;
    e2 = t->comm_init(&id, 0, 1, 0, &comm);
    ASSERT_NE(e2, nullptr);
    e2->destroy(e2);
    e2 = t->all_reduce(reinterpret_cast<spora_comm_t*>(&id), nullptr, nullptr, 1, SPORA_DTYPE_F32, SPORA_REDUCE_SUM,
                       nullptr, 100);
    ASSERT_NE(e2, nullptr);  // a foreign handle is refused, not dereferenced
    EXPECT_EQ(e2->code, SPORA_PLUGIN_INVALID_ARGUMENT) << e2->message;
    e2->destroy(e2);
  }
  EXPECT_EQ(err->code, SPORA_PLUGIN_UNAVAILABLE) << err->message;
  EXPECT_NE(std::string(err->message).find("no device"), std::string::npos) << err->message;
  EXPECT_NE(std::string(err->message).find(expect().init), std::string::npos) << err->message;
  std::printf("initialize() says: %s\n", err->message);
  err->destroy(err);
}

// The plugin as the host sees it, through a context that searches only it.
spora_context_t* context() {
  spora_context_t* ctx = nullptr;
  EXPECT_EQ(spora_context_create(&ctx), SPORA_OK);
  EXPECT_EQ(spora_context_add_plugin_path(ctx, expect().file.c_str()), SPORA_OK);
  return ctx;
}

TEST(NoDevicePlugin, ListedUnavailableWithReason) {
  spora_context_t* ctx = context();
  size_t n = 0;
  ASSERT_EQ(spora_plugin_count(ctx, &n), SPORA_OK);
  bool found = false;
  for (size_t i = 0; i < n; ++i) {
    spora_plugin_t* p = nullptr;
    ASSERT_EQ(spora_plugin_get(ctx, i, &p), SPORA_OK);
    const char *name = nullptr, *kind = nullptr, *path = nullptr, *reason = nullptr;
    int32_t available = -1;
    ASSERT_EQ(spora_plugin_describe(p, &name, &kind, &path, nullptr, &available, &reason), SPORA_OK);
    if (std::string(path) != expect().file) continue;
    found = true;
    if (available) GTEST_SKIP() << expect().name << " is available on this machine";
    EXPECT_EQ(available, 0);
    EXPECT_EQ(std::string(kind), expect().kind);
    EXPECT_NE(std::string(reason).find("no device"), std::string::npos) << reason;
    EXPECT_NE(std::string(reason).find(expect().probe), std::string::npos) << reason;
  }
  EXPECT_TRUE(found) << expect().file << " is not among the context's plugins";
  spora_context_free(ctx);
}

TEST(NoDevicePlugin, ByNameFailsWithReason) {
  if (expect().kind != "device") GTEST_SKIP() << "collectives are not selected through spora_device_find";
  spora_context_t* ctx = context();
  spora_device_t* dev = nullptr;
  for (const std::string& n : {expect().name, expect().name + ":0"}) {
    if (spora_device_find(ctx, n.c_str(), &dev) == SPORA_OK) GTEST_SKIP() << n << " exists on this machine";
    EXPECT_EQ(spora_device_find(ctx, n.c_str(), &dev), SPORA_ERROR_UNAVAILABLE) << n;
    const std::string why = spora_last_error();
    EXPECT_NE(why.find("no device"), std::string::npos) << why;
    EXPECT_NE(why.find(expect().probe), std::string::npos) << why;
  }
  spora_context_free(ctx);
}

}  // namespace
