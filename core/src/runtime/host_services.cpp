// Host services: log sink, error factory, config lookup, key-value store and
// trace hooks, as seen by plugins. All functions are thread-safe and never
// throw across the C boundary.
#include "runtime/host_services.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/profiler.h"
#include "support/log.h"

namespace spora {
namespace {

// ---- errors made by the host for plugins ----

struct HostError : spora_plugin_error_t {
  std::string text;
};

void destroy_host_error(spora_plugin_error_t* e) { delete static_cast<HostError*>(e); }
void destroy_nothing(spora_plugin_error_t*) {}
spora_plugin_error_t g_oom = {sizeof(spora_plugin_error_t), SPORA_PLUGIN_OUT_OF_MEMORY,
                              "[host] out of memory while creating an error", destroy_nothing};

spora_plugin_error_t* make_host_error(int32_t code, const char* message) noexcept {
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
  return e;
}

// ---- services ----

void svc_log(void*, int32_t level, const char* plugin, const char* message) noexcept {
  try {
    spdlog::level::level_enum l = spdlog::level::info;
    switch (level) {
      case SPORA_LOG_TRACE: l = spdlog::level::trace; break;
      case SPORA_LOG_DEBUG: l = spdlog::level::debug; break;
      case SPORA_LOG_INFO: l = spdlog::level::info; break;
      case SPORA_LOG_WARN: l = spdlog::level::warn; break;
      default: l = spdlog::level::err; break;
    }
    logger().log(l, "[{}] {}", plugin ? plugin : "plugin", message ? message : "");
  } catch (...) {
  }
}

spora_plugin_error_t* svc_error_create(void*, int32_t code, const char* message) noexcept {
  return make_host_error(code, message);
}

int64_t svc_config_get(void*, const char* key, char* buf, size_t capacity) noexcept {
  try {
    std::string v;
    if (!key || !config_lookup(key, &v)) return -1;
    if (buf && capacity > 0) {
      const size_t n = v.size() < capacity - 1 ? v.size() : capacity - 1;
      std::memcpy(buf, v.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int64_t>(v.size());
  } catch (...) {
    return -1;
  }
}

// In-process key-value store. Multi-process jobs (one process per rank) get
// a distributed store when the launcher provides one; within one process
// this serves every rank thread.
struct KvStore {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, std::vector<char>> map;
};
KvStore& kv() {
  static KvStore* s = new KvStore;  // lives for the process; plugins may use it at exit
  return *s;
}

spora_plugin_error_t* svc_kv_put(void*, const char* key, const void* value, size_t size) noexcept {
  if (!key || (!value && size > 0)) return make_host_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[kv] put: null argument");
  try {
    auto& s = kv();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      const char* p = static_cast<const char*>(value);
      s.map[key] = std::vector<char>(p, p + size);
    }
    s.cv.notify_all();
    return nullptr;
  } catch (...) {
    return make_host_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[kv] put: out of memory");
  }
}

spora_plugin_error_t* svc_kv_get(void*, const char* key, int64_t timeout_ms, void* buf, size_t capacity,
                                 size_t* out_size) noexcept {
  if (!key || (!buf && capacity > 0)) return make_host_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[kv] get: null argument");
  try {
    auto& s = kv();
    std::unique_lock<std::mutex> lock(s.mu);
    auto ready = [&] { return s.map.count(key) > 0; };
    if (timeout_ms < 0) {
      s.cv.wait(lock, ready);
    } else if (!s.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return make_host_error(SPORA_PLUGIN_TIMEOUT, (std::string("[kv] key '") + key + "' not set within " +
                                                    std::to_string(timeout_ms) + " ms").c_str());
    }
    const auto& v = s.map[key];
    if (buf) std::memcpy(buf, v.data(), v.size() < capacity ? v.size() : capacity);
    if (out_size) *out_size = v.size();
    return nullptr;
  } catch (...) {
    return make_host_error(SPORA_PLUGIN_INTERNAL, "[kv] get failed");
  }
}

// Trace spans: recorded by a running profiler session (runtime/profiler.h),
// else logged at trace level with their duration (SPORA_LOG_LEVEL=trace).
struct Span {
  std::string name;
  std::chrono::steady_clock::time_point start;
};
std::mutex g_span_mu;
std::map<uint64_t, Span> g_spans;
std::atomic<uint64_t> g_next_span{1};

uint64_t svc_trace_begin(void*, const char* category, const char* name) noexcept {
  // A profiler session takes the spans (its ids carry the top bit).
  if (profiler::on()) {
    try {
      return profiler::hook_begin(category, name);
    } catch (...) {
      return 0;
    }
  }
  if (!logger().should_log(spdlog::level::trace)) return 0;
  try {
    const uint64_t id = g_next_span++;
    std::lock_guard<std::mutex> lock(g_span_mu);
    g_spans[id] = {std::string(category ? category : "") + "/" + (name ? name : ""), std::chrono::steady_clock::now()};
    return id;
  } catch (...) {
    return 0;
  }
}

void svc_trace_end(void*, uint64_t id) noexcept {
  if (id == 0) return;
  if (id >> 63) {
    try {
      profiler::hook_end(id);
    } catch (...) {
    }
    return;
  }
  try {
    Span s;
    {
      std::lock_guard<std::mutex> lock(g_span_mu);
      auto it = g_spans.find(id);
      if (it == g_spans.end()) return;
      s = std::move(it->second);
      g_spans.erase(it);
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s.start).count();
    logger().trace("[trace] {} {:.1f} us", s.name, us);
  } catch (...) {
  }
}

}  // namespace

bool config_lookup(const std::string& key, std::string* value) {
  std::string env = "SPORA_";
  for (char c : key) env += (c == '.' || c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const char* v = std::getenv(env.c_str());
  if (!v) return false;
  *value = v;
  return true;
}

const spora_host_t* host_description() {
  static const spora_host_services_t services = [] {
    spora_host_services_t s{};
    s.struct_size = sizeof(s);
    s.ctx = nullptr;
    s.log = svc_log;
    s.error_create = svc_error_create;
    s.config_get = svc_config_get;
    s.kv_put = svc_kv_put;
    s.kv_get = svc_kv_get;
    s.trace_begin = svc_trace_begin;
    s.trace_end = svc_trace_end;
    return s;
  }();
  static const spora_host_t host = [] {
    spora_host_t h{};
    h.struct_size = sizeof(h);
    h.abi_major = SPORA_PLUGIN_ABI_MAJOR;
    h.abi_minor = SPORA_PLUGIN_ABI_MINOR;
    // Deployments may refuse plugins built against a minor older than a
    // given one (SPORA_PLUGIN_ABI_MINOR_FLOOR). A floor above the host's own
    // minor is allowed: plugins built against a newer minor still load, since
    // every check is "at least".
    std::string floor;
    h.abi_minor_floor = 0;
    if (config_lookup("plugin.abi_minor_floor", &floor)) {
      const long f = std::strtol(floor.c_str(), nullptr, 10);
      h.abi_minor_floor = f < 0 ? 0 : static_cast<uint32_t>(f);
    }
    h.host_version = "0.1.0";
    h.services = &services;
    return h;
  }();
  return &host;
}

}  // namespace spora
