// The CUDA and ROCm plugins on a machine without a GPU (every machine
// Spora is built and tested on): they load, export only the two plugin
// symbols, probe without side effects and report "no device: <the
// runtime's reason>", refuse initialize with that reason, and asking for
// them by name through libspora or the `spora` CLI fails loudly with it.
// None of this runs GPU code; on a machine where the driver is installed
// the no-device cases skip (saying so) instead of asserting a failure.
#include <dirent.h>
#include <dlfcn.h>
#include <spora/plugin.h>
#include <spora/spora.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {

struct PluginCase {
  const char* name;  // "cuda", "rocm"
  const char* path;
  const char* runtime_reason;  // what the runtime's no-device error looks like here
};

std::vector<PluginCase> built_plugins() {
  std::vector<PluginCase> v;
#ifdef SPORA_CUDA_PLUGIN
  v.push_back({"cuda", SPORA_CUDA_PLUGIN, "cudaGetDeviceCount returned 35"});
#endif
#ifdef SPORA_ROCM_PLUGIN
  v.push_back({"rocm", SPORA_ROCM_PLUGIN, "hipGetDeviceCount returned hipErrorNoDevice"});
#endif
  return v;
}

// Why this machine might have a usable driver (then "no device" is not
// the expected answer); empty when it has none.
std::string driver_present(const std::string& name) {
  if (name == "cuda") {
    if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      return "libcuda.so.1 is installed";
    }
    return "";
  }
  return access("/dev/kfd", F_OK) == 0 ? "/dev/kfd exists" : "";
}

int count_entries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

std::string run(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

void* open_plugin(const PluginCase& c) {
  void* h = dlopen(c.path, RTLD_NOW | RTLD_LOCAL);  // kept: the host never unloads plugins
  EXPECT_NE(h, nullptr) << c.path << ": " << dlerror();
  return h;
}

class GpuPlugin : public ::testing::TestWithParam<PluginCase> {};

TEST_P(GpuPlugin, ExportsOnlyProbeAndEntry) {
  const std::string out = run(std::string("nm -D --defined-only ") + GetParam().path);
  std::set<std::string> names;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    const size_t sp = line.rfind(' ');
    if (sp != std::string::npos) names.insert(line.substr(sp + 1));
  }
  EXPECT_EQ(names, (std::set<std::string>{"spora_plugin_entry_v1", "spora_plugin_probe_v1"})) << out;
}

TEST_P(GpuPlugin, ProbeHasNoSideEffects) {
  void* h = open_plugin(GetParam());
  ASSERT_NE(h, nullptr);
  auto probe = reinterpret_cast<spora_plugin_probe_fn>(dlsym(h, SPORA_PLUGIN_PROBE_SYMBOL));
  ASSERT_NE(probe, nullptr);
  const int threads = count_entries("/proc/self/task"), fds = count_entries("/proc/self/fd");
  spora_probe_result_t a{}, b{};
  a.struct_size = b.struct_size = sizeof a;
  probe(&a);
  probe(&b);
  // No thread started, no file left open, and the same answer twice.
  EXPECT_EQ(count_entries("/proc/self/task"), threads);
  EXPECT_EQ(count_entries("/proc/self/fd"), fds);
  EXPECT_EQ(a.score, b.score);
  EXPECT_STREQ(a.reason, b.reason);
  // A result struct from an older host (no reason field) is not overrun.
  struct {
    spora_probe_result_t r;
    char guard[8];
  } small{};
  small.r.struct_size = offsetof(spora_probe_result_t, reason);
  probe(&small.r);
  EXPECT_EQ(small.r.reason[0], '\0');
}

TEST_P(GpuPlugin, ProbeReportsTheRuntimesNoDeviceReason) {
  const PluginCase& c = GetParam();
  if (const std::string why = driver_present(c.name); !why.empty()) GTEST_SKIP() << why << ": not a no-device machine";
  void* h = open_plugin(c);
  ASSERT_NE(h, nullptr);
  auto probe = reinterpret_cast<spora_plugin_probe_fn>(dlsym(h, SPORA_PLUGIN_PROBE_SYMBOL));
  spora_probe_result_t r{};
  r.struct_size = sizeof r;
  probe(&r);
  EXPECT_EQ(r.score, 0);
  const std::string reason = r.reason;
  EXPECT_EQ(reason.rfind("no device: ", 0), 0u) << reason;
  EXPECT_NE(reason.find(c.runtime_reason), std::string::npos) << reason;
}

int64_t no_config(void*, const char*, char*, size_t) { return -1; }

TEST_P(GpuPlugin, EntryGivesAFullRuntimeTableAndInitializeFailsWithTheReason) {
  const PluginCase& c = GetParam();
  void* h = open_plugin(c);
  ASSERT_NE(h, nullptr);
  auto entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(h, SPORA_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr);
  static spora_host_services_t services{};
  services.struct_size = sizeof services;
  services.config_get = no_config;
  static spora_host_t host{};
  host.struct_size = sizeof host;
  host.abi_major = SPORA_PLUGIN_ABI_MAJOR;
  host.abi_minor = SPORA_PLUGIN_ABI_MINOR;
  host.host_version = "test";
  host.services = &services;
  spora_plugin_info_t info{};
  info.struct_size = sizeof info;
  spora_plugin_error_t* err = entry(&host, &info);
  ASSERT_EQ(err, nullptr) << err->message;
  EXPECT_STREQ(info.name, c.name);
  EXPECT_EQ(info.kind, SPORA_PLUGIN_KIND_DEVICE);
  const auto* t = static_cast<const spora_device_api_t*>(info.api);
  ASSERT_NE(t, nullptr);
  // The runtime part of the table is complete, optional parts included.
  const void* fns[] = {
      reinterpret_cast<const void*>(t->initialize), reinterpret_cast<const void*>(t->device_count),
      reinterpret_cast<const void*>(t->device_properties), reinterpret_cast<const void*>(t->mem_alloc),
      reinterpret_cast<const void*>(t->mem_free), reinterpret_cast<const void*>(t->host_alloc_pinned),
      reinterpret_cast<const void*>(t->host_free_pinned), reinterpret_cast<const void*>(t->copy_h2d),
      reinterpret_cast<const void*>(t->copy_d2h), reinterpret_cast<const void*>(t->copy_d2d),
      reinterpret_cast<const void*>(t->memset), reinterpret_cast<const void*>(t->copy_h2d_async),
      reinterpret_cast<const void*>(t->copy_d2h_async), reinterpret_cast<const void*>(t->copy_d2d_async),
      reinterpret_cast<const void*>(t->memset_async), reinterpret_cast<const void*>(t->stream_create),
      reinterpret_cast<const void*>(t->stream_destroy), reinterpret_cast<const void*>(t->stream_synchronize),
      reinterpret_cast<const void*>(t->stream_query), reinterpret_cast<const void*>(t->stream_wait_event),
      reinterpret_cast<const void*>(t->stream_add_callback), reinterpret_cast<const void*>(t->stream_native_handle),
      reinterpret_cast<const void*>(t->event_create), reinterpret_cast<const void*>(t->event_destroy),
      reinterpret_cast<const void*>(t->event_record), reinterpret_cast<const void*>(t->event_query),
      reinterpret_cast<const void*>(t->event_synchronize), reinterpret_cast<const void*>(t->event_elapsed_ms),
      reinterpret_cast<const void*>(t->kernel_ops), reinterpret_cast<const void*>(t->kernel_create),
      reinterpret_cast<const void*>(t->kernel_destroy), reinterpret_cast<const void*>(t->kernel_launch),
      reinterpret_cast<const void*>(t->shutdown)};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) EXPECT_NE(fns[i], nullptr) << "table entry " << i;
  // ABI 1.1: memory statistics (gpu_alloc.cpp's counters and pool).
  ASSERT_TRUE(SPORA_STRUCT_HAS(t, spora_device_api_t, reset_peak_memory_stats)) << t->struct_size;
  EXPECT_NE(t->memory_stats, nullptr);
  EXPECT_NE(t->reset_peak_memory_stats, nullptr);
  // The kernels it plans (a static list; nothing is initialized for it).
  std::set<std::string> ops;
  for (const char* const* p = t->kernel_ops(); *p; ++p) ops.insert(*p);
  for (const char* op : {"add", "mul", "where", "cast", "equal", "exp", "sum", "argmax", "softmax", "log_softmax_grad", "matmul",
                         "sgd_update", "adam_update", "cross_entropy", "nll_loss", "linear", "linear_act", "transpose", "concat", "zeros",
                         "global_norm", "clip_by_global_norm", "one_hot", "gather"})
    EXPECT_TRUE(ops.count(op)) << op;
  // Before initialize, every call is an error, never a crash.
  int32_t count = -1;
  spora_plugin_error_t* e = t->device_count(&count);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, SPORA_PLUGIN_UNAVAILABLE);
  e->destroy(e);
  void* p = nullptr;
  e = t->mem_alloc(0, 16, &p);
  ASSERT_NE(e, nullptr);
  e->destroy(e);
  spora_memory_stats_t stats{};
  stats.struct_size = sizeof stats;
  e = t->memory_stats(0, &stats);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, SPORA_PLUGIN_UNAVAILABLE) << e->message;
  e->destroy(e);
  e = t->reset_peak_memory_stats(0);
  ASSERT_NE(e, nullptr);
  e->destroy(e);
  int dummy = 0;
  e = t->mem_free(0, &dummy);
  ASSERT_NE(e, nullptr) << "mem_free before initialize";
  e->destroy(e);
  if (const std::string why = driver_present(c.name); !why.empty()) GTEST_SKIP() << why << ": initialize may succeed here";
  e = t->initialize();
  ASSERT_NE(e, nullptr) << "initialize succeeded on a machine without a driver";
  EXPECT_EQ(e->code, SPORA_PLUGIN_UNAVAILABLE) << e->message;
  const std::string msg = e->message;
  e->destroy(e);
  EXPECT_EQ(msg.rfind(std::string("[") + c.name + "] no device: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(c.name == std::string("cuda") ? "cudaErrorInsufficientDriver" : "hipErrorNoDevice"), std::string::npos) << msg;
  e = t->device_count(&count);
  ASSERT_NE(e, nullptr);  // still not initialized
  e->destroy(e);
}

TEST_P(GpuPlugin, AskingForTheBackendByNameFailsWithTheReason) {
  const PluginCase& c = GetParam();
  if (const std::string why = driver_present(c.name); !why.empty()) GTEST_SKIP() << why;
  spora_context_t* ctx = nullptr;
  ASSERT_EQ(spora_context_create(&ctx), 0) << spora_last_error();
  // The build tree's plugin directory is next to libspora.so: searched by default.
  spora_device_t* dev = nullptr;
  const std::string name = std::string(c.name) + ":0";
  EXPECT_NE(spora_device_find(ctx, name.c_str(), &dev), 0);
  const std::string err = spora_last_error();
  EXPECT_NE(err.find("unavailable"), std::string::npos) << err;
  EXPECT_NE(err.find("no device: "), std::string::npos) << err;
  EXPECT_NE(err.find(c.runtime_reason), std::string::npos) << err;
  // Other devices keep working.
  EXPECT_EQ(spora_device_find(ctx, "cpu:0", &dev), 0) << spora_last_error();
  spora_context_free(ctx);
}

TEST_P(GpuPlugin, SporaDevicesListsItWithTheReason) {
  const PluginCase& c = GetParam();
  if (const std::string why = driver_present(c.name); !why.empty()) GTEST_SKIP() << why;
  const std::string out = run(std::string(SPORA_CLI) + " devices 2>&1");
  const size_t line = out.find(std::string("  ") + c.name + " ");
  ASSERT_NE(line, std::string::npos) << out;
  const std::string rest = out.substr(line, out.find("\n", out.find("\n", line) + 1) - line);
  EXPECT_NE(rest.find("UNAVAILABLE"), std::string::npos) << rest;
  EXPECT_NE(rest.find(std::string("libspora-device-") + c.name + ".so"), std::string::npos) << rest;
  EXPECT_NE(rest.find("reason: "), std::string::npos) << rest;
  EXPECT_NE(rest.find(c.runtime_reason), std::string::npos) << rest;
  // The device list does not claim a GPU.
  EXPECT_EQ(out.find(std::string("  ") + c.name + ":0"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Built, GpuPlugin, ::testing::ValuesIn(built_plugins()),
                         [](const ::testing::TestParamInfo<PluginCase>& i) { return std::string(i.param.name); });

}  // namespace
