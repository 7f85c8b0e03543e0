// Config, lifecycle of the process-wide state, and handle lookups.
#include "sim_state.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "error.h"

namespace spora::sim {

std::atomic<const spora_host_t*> g_host{nullptr};

namespace {

using spora::plugin::make_error;

constexpr int32_t kMaxDevices = 16;
constexpr uint64_t kDefaultMemoryBytes = uint64_t{1} << 30;

// Deleted only by destroy_state(); if the host never calls shutdown the
// state is deliberately leaked, so no static destructor joins threads or
// unmaps memory during process exit.
std::atomic<State*> g_state{nullptr};

const spora_host_services_t* services() {
  const spora_host_t* host = g_host.load(std::memory_order_acquire);
  return host ? host->services : nullptr;
}

// Reads an unsigned integer config key. Returns NULL and sets *out (to
// `fallback` when the key is unset), or an error naming the key and range.
spora_plugin_error_t* config_uint(const char* key, uint64_t fallback, uint64_t min, uint64_t max,
                                  uint64_t* out) {
  *out = fallback;
  const spora_host_services_t* svc = services();
  if (!SPORA_STRUCT_HAS(svc, spora_host_services_t, config_get) || !svc->config_get) return nullptr;
  char buf[64] = {};
  const int64_t len = svc->config_get(svc->ctx, key, buf, sizeof buf);
  if (len < 0) return nullptr;
  const std::string range = " (expected an integer in " + std::to_string(min) + ".." + std::to_string(max) + ")";
  if (len >= static_cast<int64_t>(sizeof buf)) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[sim] config ") + key + " is too long" + range);
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(buf, &end, 10);
  const bool numeric = end != buf && *end == '\0' && buf[0] != '-' && buf[0] != '+' && errno == 0;
  if (!numeric || value < min || value > max) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                      std::string("[sim] config ") + key + "='" + buf + "' is invalid" + range);
  }
  *out = value;
  return nullptr;
}

}  // namespace

std::string config_string(const char* key) {
  const spora_host_services_t* svc = services();
  if (!SPORA_STRUCT_HAS(svc, spora_host_services_t, config_get) || !svc->config_get) return {};
  const int64_t len = svc->config_get(svc->ctx, key, nullptr, 0);
  if (len <= 0) return {};
  std::string out(static_cast<size_t>(len) + 1, '\0');
  svc->config_get(svc->ctx, key, out.data(), out.size());
  out.resize(static_cast<size_t>(len));
  return out;
}

void host_log(int32_t level, const std::string& message) {
  const spora_host_services_t* svc = services();
  if (SPORA_STRUCT_HAS(svc, spora_host_services_t, log) && svc->log) {
    svc->log(svc->ctx, level, "sim", message.c_str());
  }
}

spora_plugin_error_t* create_state() {
  if (g_state.load(std::memory_order_acquire)) return nullptr;  // already initialized

  uint64_t devices = 0, bytes = 0;
  if (auto* err = config_uint("sim.devices", 1, 1, kMaxDevices, &devices)) return err;
  if (auto* err = config_uint("sim.memory_bytes", kDefaultMemoryBytes, kAlignment, kMaxArenaBytes, &bytes)) {
    return err;
  }
  DeviceConfig config;
  // At most 1 s: a larger lag is a typo, and tests would time out.
  if (auto* err = config_uint("sim.lag_us", 0, 0, 1000000, &config.lag_us)) return err;
  if (auto* err = config_uint("sim.kernel_us", 0, 0, 1000000, &config.kernel_us)) return err;
  if (auto* err = config_uint("sim.fault_after_launches", 0, 0, uint64_t{1} << 62, &config.fault_after_launches)) {
    return err;
  }
  // Round up so the capacity is a whole number of allocation units.
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;

  auto state = std::make_unique<State>();
  for (int32_t d = 0; d < static_cast<int32_t>(devices); ++d) {
    Arena* arena = nullptr;
    if (auto* err = Arena::create(d, bytes, &arena)) return err;  // earlier arenas unmap with `state`
    state->arenas.emplace_back(arena);
    state->devices.push_back(std::make_shared<Device>(d, config));
  }
  g_state.store(state.release(), std::memory_order_release);
  host_log(SPORA_LOG_INFO, "[sim] initialized " + std::to_string(devices) + " simulated device(s) with " +
                          std::to_string(bytes) + " bytes of memory each" +
                          (config.lag_us ? ", lag " + std::to_string(config.lag_us) + " us" : std::string()) +
                          (config.fault_after_launches
                               ? ", fault injected at kernel launch " + std::to_string(config.fault_after_launches)
                               : std::string()));
  return nullptr;
}

void destroy_state() {
  State* state = g_state.exchange(nullptr, std::memory_order_acq_rel);
  if (!state) return;
  // Join every worker before the arenas go away: queued work may still use them.
  for (const auto& stream : state->streams.all()) {
    if (spora_plugin_error_t* err = stream->close()) {
      host_log(SPORA_LOG_WARN, std::string("[sim] shutdown dropped an unreported stream error: ") + err->message);
      err->destroy(err);
    }
  }
  // Then the copy engines and callback threads the stream workers used.
  for (const auto& device : state->devices) device->stop();
  delete state;
}

spora_plugin_error_t* get_state(State** out) {
  State* state = g_state.load(std::memory_order_acquire);
  if (!state) {
    return make_error(SPORA_PLUGIN_UNAVAILABLE, "[sim] plugin is not initialized (call initialize first)");
  }
  *out = state;
  return nullptr;
}

spora_plugin_error_t* get_arena(const char* what, int32_t device, Arena** out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  const auto count = static_cast<int32_t>(state->arenas.size());
  if (device < 0 || device >= count) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[sim] ") + what + ": device " +
                                                         std::to_string(device) + " out of range [0, " +
                                                         std::to_string(count) + ")");
  }
  *out = state->arenas[device].get();
  return nullptr;
}

spora_plugin_error_t* get_device(const char* what, int32_t device, std::shared_ptr<Device>* out) {
  Arena* arena = nullptr;
  if (auto* err = get_arena(what, device, &arena)) return err;  // validates the index
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  *out = state->devices[static_cast<size_t>(device)];
  return nullptr;
}

spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  *out = state->streams.find(handle);
  if (!*out) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[sim] ") + what + ": " +
                                                         (handle ? "unknown or destroyed stream" : "stream is NULL"));
  }
  return nullptr;
}

spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  *out = state->events.find(handle);
  if (!*out) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[sim] ") + what + ": " +
                                                         (handle ? "unknown or destroyed event" : "event is NULL"));
  }
  return nullptr;
}

void drain_device(int32_t device) {
  State* state = g_state.load(std::memory_order_acquire);
  if (!state) return;
  for (const auto& stream : state->streams.all()) {
    if (stream->device() == device) stream->drain();
  }
}

void drain_all_devices() {
  State* state = g_state.load(std::memory_order_acquire);
  if (!state) return;
  for (const auto& stream : state->streams.all()) stream->drain();
}

}  // namespace spora::sim
