#include "host.h"

#include <dirent.h>
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <new>

namespace spora::conformance {
namespace {

// ---- host-made errors ----

struct HostError : spora_plugin_error_t {
  std::string text;
};

void destroy_host_error(spora_plugin_error_t* e) {
  ++host_log().errors_destroyed;
  delete static_cast<HostError*>(e);
}

void destroy_nothing(spora_plugin_error_t*) {}
spora_plugin_error_t g_oom = {sizeof(spora_plugin_error_t), SPORA_PLUGIN_OUT_OF_MEMORY,
                              "[conformance host] out of memory while creating an error", destroy_nothing};

spora_plugin_error_t* svc_error_create(void*, int32_t code, const char* message) noexcept {
  auto* e = new (std::nothrow) HostError;
  if (!e) return &g_oom;
  try {
    e->text = message ? message : "";
  } catch (...) {
    delete e;
    return &g_oom;
  }
  e->struct_size = sizeof(spora_plugin_error_t);
  e->code = code;
  e->message = e->text.c_str();
  e->destroy = destroy_host_error;
  ++host_log().errors_created;
  return e;
}

void svc_log(void*, int32_t level, const char* plugin, const char* message) noexcept {
  try {
    HostLog& l = host_log();
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.lines.size() < 1000)
      l.lines.push_back("[" + std::to_string(level) + "] " + (plugin ? plugin : "?") + ": " + (message ? message : ""));
  } catch (...) {
  }
}

// The kit's host has no options: every key is unset, so plugins run with
// their defaults.
int64_t svc_config_get(void*, const char*, char* buf, size_t capacity) noexcept {
  if (buf && capacity) buf[0] = '\0';
  return -1;
}

struct Kv {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> map;
};
Kv& kv() {
  static Kv* k = new Kv;  // plugin threads may use it until _exit
  return *k;
}

spora_plugin_error_t* svc_kv_put(void*, const char* key, const void* value, size_t size) noexcept {
  if (!key || (!value && size)) return svc_error_create(nullptr, SPORA_PLUGIN_INVALID_ARGUMENT, "[kv] put: null argument");
  try {
    std::lock_guard<std::mutex> lock(kv().mu);
    kv().map[key] = std::string(static_cast<const char*>(value), size);
  } catch (...) {
    return svc_error_create(nullptr, SPORA_PLUGIN_OUT_OF_MEMORY, "[kv] put: out of memory");
  }
  kv().cv.notify_all();
  return nullptr;
}

spora_plugin_error_t* svc_kv_get(void*, const char* key, int64_t timeout_ms, void* buf, size_t capacity,
                                 size_t* out_size) noexcept {
  if (!key || (!buf && capacity)) return svc_error_create(nullptr, SPORA_PLUGIN_INVALID_ARGUMENT, "[kv] get: null argument");
  try {
    std::unique_lock<std::mutex> lock(kv().mu);
    auto ready = [&] { return kv().map.count(key) > 0; };
    const auto limit = std::chrono::milliseconds(timeout_ms < 0 ? 60000 : timeout_ms);
    if (!kv().cv.wait_for(lock, limit, ready))
      return svc_error_create(nullptr, SPORA_PLUGIN_TIMEOUT, "[kv] get: key not set in time");
    const std::string& v = kv().map[key];
    if (buf) std::memcpy(buf, v.data(), v.size() < capacity ? v.size() : capacity);
    if (out_size) *out_size = v.size();
    return nullptr;
  } catch (...) {
    return svc_error_create(nullptr, SPORA_PLUGIN_INTERNAL, "[kv] get failed");
  }
}

uint64_t svc_trace_begin(void*, const char*, const char*) noexcept { return 0; }
void svc_trace_end(void*, uint64_t) noexcept {}

const spora_host_services_t* services() {
  static const spora_host_services_t s = [] {
    spora_host_services_t v{};
    v.struct_size = sizeof(v);
    v.log = svc_log;
    v.error_create = svc_error_create;
    v.config_get = svc_config_get;
    v.kv_put = svc_kv_put;
    v.kv_get = svc_kv_get;
    v.trace_begin = svc_trace_begin;
    v.trace_end = svc_trace_end;
    return v;
  }();
  return &s;
}

}  // namespace

HostLog& host_log() {
  static HostLog* l = new HostLog;
  return *l;
}

ErrorStats& error_stats() {
  static ErrorStats* s = new ErrorStats;
  return *s;
}

PluginFile open_plugin(const std::string& path) {
  PluginFile f;
  dlerror();
  f.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!f.handle) {
    const char* e = dlerror();
    f.error = e ? e : "unknown dlopen failure";
    return f;
  }
  f.probe = reinterpret_cast<spora_plugin_probe_fn>(::dlsym(f.handle, SPORA_PLUGIN_PROBE_SYMBOL));
  f.entry = reinterpret_cast<spora_plugin_entry_fn>(::dlsym(f.handle, SPORA_PLUGIN_ENTRY_SYMBOL));
  return f;
}

const spora_host_t* make_host(uint32_t abi_major, uint32_t abi_minor, uint32_t abi_minor_floor) {
  static std::mutex mu;
  static auto* hosts = new std::vector<std::unique_ptr<spora_host_t>>;  // never freed: plugins keep them
  std::lock_guard<std::mutex> lock(mu);
  auto h = std::make_unique<spora_host_t>();
  *h = spora_host_t{};
  h->struct_size = sizeof(spora_host_t);
  h->abi_major = abi_major;
  h->abi_minor = abi_minor;
  h->abi_minor_floor = abi_minor_floor;
  h->host_version = "conformance-kit";
  h->services = services();
  hosts->push_back(std::move(h));
  return hosts->back().get();
}

const char* code_name(int32_t code) {
  switch (code) {
    case SPORA_PLUGIN_OK: return "OK";
    case SPORA_PLUGIN_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case SPORA_PLUGIN_NOT_FOUND: return "NOT_FOUND";
    case SPORA_PLUGIN_UNAVAILABLE: return "UNAVAILABLE";
    case SPORA_PLUGIN_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case SPORA_PLUGIN_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case SPORA_PLUGIN_TIMEOUT: return "TIMEOUT";
    case SPORA_PLUGIN_ABORTED: return "ABORTED";
    case SPORA_PLUGIN_INTERNAL: return "INTERNAL";
    default: return "not a code";
  }
}

TakenError take_error(spora_plugin_error_t* err, const std::string& from) {
  TakenError t;
  if (!err) return t;
  t.present = true;
  ErrorStats& stats = error_stats();
  ++stats.seen;
  std::string problem;
  auto add = [&](const std::string& p) { problem += (problem.empty() ? "" : "; ") + p; };
  if (err->struct_size < sizeof(spora_plugin_error_t))
    add("struct_size " + std::to_string(err->struct_size) + " is below v1.0's " +
        std::to_string(sizeof(spora_plugin_error_t)));
  t.code = err->code;
  if (err->code <= SPORA_PLUGIN_OK || err->code > SPORA_PLUGIN_INTERNAL)
    add("code " + std::to_string(err->code) + " is not an error code (1..8)");
  if (!err->message) {
    add("message is NULL");
  } else {
    t.message.assign(err->message, ::strnlen(err->message, 4096));
    if (t.message.empty()) add("message is empty");
    else if (t.message[0] != '[' && stats.unbracketed.size() < 20) stats.unbracketed.push_back(from + ": \"" + t.message + "\"");
  }
  if (!err->destroy) add("destroy is NULL (the receiver cannot release it)");
  else err->destroy(err);
  if (!problem.empty()) {
    t.problem = problem;
    if (stats.malformed.size() < 20) stats.malformed.push_back(from + ": " + problem);
  }
  return t;
}

int thread_count() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

}  // namespace spora::conformance
