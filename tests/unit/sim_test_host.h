// A minimal host for tests that drive the sim device plugin through its C
// table (sim_strict_test.cpp, sim_fault_test.cpp): it dlopens
// libspora-device-sim.so (SPORA_SIM_PLUGIN_PATH), hands it a config lookup
// and initializes it once per process, the way libspora's loader does.
//
// Config: each test binary defines simtest::config_overrides(); keys not
// overridden come from the environment exactly as the core maps them
// ("sim.lag_us" -> SPORA_SIM_LAG_US), so tests/ctest_env.cmake applies.
#pragma once
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spora/plugin.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#ifndef SPORA_SIM_PLUGIN_PATH
#error "compile with -DSPORA_SIM_PLUGIN_PATH=\"/path/to/libspora-device-sim.so\""
#endif

namespace simtest {

// Defined by each test binary.
const std::map<std::string, std::string>& config_overrides();

inline int64_t config_get(void*, const char* key, char* buf, size_t capacity) {
  if (!key) return -1;
  std::string value;
  const auto& overrides = config_overrides();
  auto it = overrides.find(key);
  if (it != overrides.end()) {
    value = it->second;
  } else {
    std::string env = "SPORA_";
    for (const char* c = key; *c; ++c)
      env += (*c == '.' || *c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
    const char* v = std::getenv(env.c_str());
    if (!v) return -1;
    value = v;
  }
  if (buf && capacity > 0) {
    const size_t n = value.size() < capacity - 1 ? value.size() : capacity - 1;
    std::memcpy(buf, value.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int64_t>(value.size());
}

inline spora_host_services_t make_services() {
  spora_host_services_t s{};
  s.struct_size = sizeof s;
  s.config_get = config_get;
  return s;
}
inline const spora_host_services_t g_services = make_services();

inline spora_host_t make_host() {
  spora_host_t h{};
  h.struct_size = sizeof h;
  h.abi_major = SPORA_PLUGIN_ABI_MAJOR;
  h.abi_minor = SPORA_PLUGIN_ABI_MINOR;
  h.host_version = "test";
  h.services = &g_services;
  return h;
}
inline const spora_host_t g_host = make_host();

inline const spora_device_api_t* api = nullptr;
inline std::string setup_error;

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    // SPORA_TEST_PLUGIN_FILE overrides the build-time path (a packed build
    // run on another machine, e.g. gpu_failure_test on a GPU host).
    const char* env_path = std::getenv("SPORA_TEST_PLUGIN_FILE");
    const char* path = env_path && *env_path ? env_path : SPORA_SIM_PLUGIN_PATH;
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      setup_error = std::string("dlopen: ") + dlerror();
      return;
    }
    auto entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(handle, SPORA_PLUGIN_ENTRY_SYMBOL));
    if (!entry) {
      setup_error = "no spora_plugin_entry_v1";
      return;
    }
    spora_plugin_info_t info{};
    info.struct_size = sizeof info;
    if (spora_plugin_error_t* err = entry(&g_host, &info)) {
      setup_error = std::string("entry: ") + err->message;
      err->destroy(err);
      return;
    }
    const auto* table = static_cast<const spora_device_api_t*>(info.api);
    if (spora_plugin_error_t* err = table->initialize()) {
      setup_error = std::string("initialize: ") + err->message;
      err->destroy(err);
      return;
    }
    api = table;
  }
  void TearDown() override {
    if (api && api->shutdown) api->shutdown();
  }
};

// The error's message ("" for success); frees the error.
inline std::string take(spora_plugin_error_t* err) {
  if (!err) return "";
  std::string message = err->message ? err->message : "(NULL message)";
  if (message.empty()) message = "(empty message)";
  err->destroy(err);
  return message;
}

// The error's code and message; {0, ""} for success. Frees the error.
struct Err {
  int32_t code = 0;
  std::string message;
};
inline Err take_err(spora_plugin_error_t* err) {
  Err e;
  if (!err) return e;
  e.code = err->code;
  e.message = err->message ? err->message : "";
  err->destroy(err);
  return e;
}

inline spora_tensor_desc_t tensor(const int64_t* dims, int32_t rank, int32_t dtype = SPORA_DTYPE_F32) {
  spora_tensor_desc_t t{};
  t.struct_size = sizeof t;
  t.dtype = dtype;
  t.rank = rank;
  t.dims = dims;
  return t;
}

// Plans an f32 "add" of two [n] vectors on device 0.
inline spora_plugin_error_t* create_add(const int64_t* n, spora_kernel_t** out) {
  const spora_tensor_desc_t ins[2] = {tensor(n, 1), tensor(n, 1)};
  const spora_tensor_desc_t outs[1] = {tensor(n, 1)};
  spora_kernel_desc_t d{};
  d.struct_size = sizeof d;
  d.op = "add";
  d.num_inputs = 2;
  d.inputs = ins;
  d.num_outputs = 1;
  d.outputs = outs;
  size_t workspace = 0;
  return api->kernel_create(0, &d, out, &workspace);
}

}  // namespace simtest

#define SIM_OK(expr) ASSERT_EQ(simtest::take(expr), "")
