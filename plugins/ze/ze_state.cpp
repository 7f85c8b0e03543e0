// zeInit, device discovery and the process-wide state; result-code names for
// error messages.
#include "ze_state.h"

#include <cstdio>
#include <string>

#include "error.h"
#include "ze_module.h"
#include "ze_stream.h"

namespace spora::ze {

using spora::plugin::make_error;

std::atomic<const spora_host_t*> g_host{nullptr};

namespace {
std::mutex g_state_mu;
std::unique_ptr<State> g_state;
}  // namespace

void host_log(int32_t level, const std::string& message) {
  const spora_host_t* h = g_host.load(std::memory_order_acquire);
  if (h && SPORA_STRUCT_HAS(h, spora_host_t, services) && h->services && h->services->log)
    h->services->log(h->services->ctx, level, "ze", message.c_str());
}

std::string result_name(ze_result_t r) {
  const char* name = nullptr;
  switch (r) {
#define SPORA_ZE_NAME(x) case x: name = #x; break;
    SPORA_ZE_NAME(ZE_RESULT_SUCCESS)
    SPORA_ZE_NAME(ZE_RESULT_NOT_READY)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_DEVICE_LOST)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_NOT_AVAILABLE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNINITIALIZED)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_SIZE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION)
    SPORA_ZE_NAME(ZE_RESULT_ERROR_UNKNOWN)
#undef SPORA_ZE_NAME
    default: break;
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(r));
  return name ? std::string(name) + " (" + hex + ")" : std::string("ze_result ") + hex;
}

spora_plugin_error_t* ze_error(ze_result_t r, const std::string& what, const char* call) {
  int32_t code = SPORA_PLUGIN_INTERNAL;
  if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    code = SPORA_PLUGIN_OUT_OF_MEMORY;
  else if (r == ZE_RESULT_ERROR_DEVICE_LOST || r == ZE_RESULT_ERROR_UNINITIALIZED)
    code = SPORA_PLUGIN_UNAVAILABLE;
  else if (r == ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    code = SPORA_PLUGIN_UNIMPLEMENTED;
  // Keep just the function name of a call expression.
  std::string fn = call ? call : "";
  if (const size_t paren = fn.find('('); paren != std::string::npos) fn.resize(paren);
  return make_error(code, "[ze] " + what + ": " + fn + " returned " + result_name(r));
}

spora_plugin_error_t* invalid(const std::string& message) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[ze] " + message);
}

namespace {

const char* type_name(ze_device_type_t t) {
  switch (t) {
    case ZE_DEVICE_TYPE_GPU: return "gpu";
    case ZE_DEVICE_TYPE_CPU: return "cpu";
    case ZE_DEVICE_TYPE_FPGA: return "fpga";
    case ZE_DEVICE_TYPE_MCA: return "mca";
    case ZE_DEVICE_TYPE_VPU: return "npu";
    default: return "unknown";
  }
}

spora_plugin_error_t* add_device(State& st, ze_driver_handle_t drv, ze_context_handle_t ctx, ze_device_handle_t dh,
                                 ze_api_version_t api) {
  auto d = std::make_unique<Device>();
  d->driver = drv;
  d->device = dh;
  d->context = ctx;
  d->props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  SPORA_ZE_CHECK(zeDeviceGetProperties(dh, &d->props), "initialize");
  d->name = d->props.name;
  d->arch = std::string("level-zero-") + type_name(d->props.type) + "-" + std::to_string(d->props.deviceId);
  uint32_t n = 0;
  SPORA_ZE_CHECK(zeDeviceGetMemoryProperties(dh, &n, nullptr), "initialize");
  std::vector<ze_device_memory_properties_t> mem(n, ze_device_memory_properties_t{ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES});
  SPORA_ZE_CHECK(zeDeviceGetMemoryProperties(dh, &n, mem.data()), "initialize");
  for (const auto& m : mem) d->memory_bytes += m.totalSize;
  // Timer resolution is nanoseconds per tick before API 1.1, ticks per
  // second from 1.1 on (ze_device_properties_t's documentation).
  const double res = static_cast<double>(d->props.timerResolution);
  if (api >= ZE_MAKE_VERSION(1, 1))
    d->ns_per_tick = res > 0 ? 1e9 / res : 1.0;
  else
    d->ns_per_tick = res > 0 ? res : 1.0;
  const uint32_t bits = d->props.timestampValidBits;
  d->timestamp_mask = bits > 0 && bits < 64 ? (1ull << bits) - 1 : ~0ull;
  uint32_t groups = 0;
  SPORA_ZE_CHECK(zeDeviceGetCommandQueueGroupProperties(dh, &groups, nullptr), "initialize");
  std::vector<ze_command_queue_group_properties_t> gp(groups, ze_command_queue_group_properties_t{
                                                                  ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES});
  SPORA_ZE_CHECK(zeDeviceGetCommandQueueGroupProperties(dh, &groups, gp.data()), "initialize");
  bool found = false;
  for (uint32_t i = 0; i < groups && !found; ++i)
    if (gp[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) {
      d->compute_ordinal = i;
      found = true;
    }
  if (!found) {
    host_log(SPORA_LOG_INFO, "[ze] skipping " + d->name + ": no compute queue group");
    return nullptr;
  }
  d->events = std::make_unique<EventAllocator>(ctx, dh);
  d->modules = std::make_unique<ModuleCache>(ctx, dh);
  ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC};
  qd.ordinal = d->compute_ordinal;
  qd.mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
  SPORA_ZE_CHECK(zeCommandListCreateImmediate(ctx, dh, &qd, &d->sync_list), "initialize");
  st.devices.push_back(std::move(d));
  return nullptr;
}

}  // namespace

spora_plugin_error_t* create_state() {
  std::lock_guard<std::mutex> lock(g_state_mu);
  if (g_state) return nullptr;
  // With no Level Zero driver installed, the loader has nothing to
  // initialise and zeInit returns ZE_RESULT_ERROR_UNINITIALIZED.
  if (const ze_result_t r = zeInit(0); r != ZE_RESULT_SUCCESS) {
    return make_error(SPORA_PLUGIN_UNAVAILABLE,
                      "[ze] no device: zeInit returned " + result_name(r) +
                          (r == ZE_RESULT_ERROR_UNINITIALIZED
                               ? ": the Level Zero loader found no driver; install one (e.g. intel-level-zero-gpu "
                                 "or the NPU driver's libze_intel_vpu.so.1)"
                               : ""));
  }
  auto st = std::make_unique<State>();
  uint32_t ndrv = 0;
  SPORA_ZE_CHECK(zeDriverGet(&ndrv, nullptr), "initialize");
  std::vector<ze_driver_handle_t> drivers(ndrv);
  if (ndrv) SPORA_ZE_CHECK(zeDriverGet(&ndrv, drivers.data()), "initialize");
  for (ze_driver_handle_t drv : drivers) {
    ze_api_version_t api = ZE_API_VERSION_1_0;
    SPORA_ZE_CHECK(zeDriverGetApiVersion(drv, &api), "initialize");
    uint32_t ndev = 0;
    SPORA_ZE_CHECK(zeDeviceGet(drv, &ndev, nullptr), "initialize");
    if (ndev == 0) continue;
    std::vector<ze_device_handle_t> devs(ndev);
    SPORA_ZE_CHECK(zeDeviceGet(drv, &ndev, devs.data()), "initialize");
    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ze_context_handle_t ctx = nullptr;
    SPORA_ZE_CHECK(zeContextCreate(drv, &cd, &ctx), "initialize");
    st->contexts.push_back(ctx);
    for (ze_device_handle_t dh : devs)
      if (auto* e = add_device(*st, drv, ctx, dh, api)) return e;
  }
  if (st->devices.empty())
    return make_error(SPORA_PLUGIN_UNAVAILABLE, "[ze] no device: zeInit succeeded but " + std::to_string(ndrv) +
                                                    " Level Zero driver(s) report no device with a compute queue");
  g_state = std::move(st);
  return nullptr;
}

void destroy_state() {
  std::unique_ptr<State> st;
  {
    std::lock_guard<std::mutex> lock(g_state_mu);
    st = std::move(g_state);
  }
  if (!st) return;
  for (auto& s : st->streams.all()) s->synchronize();
  st->kernels.clear();
  st->streams.clear();
  st->events.clear();
  for (auto& d : st->devices) {
    d->modules.reset();
    if (d->sync_list) zeCommandListDestroy(d->sync_list);
    d->events.reset();
  }
  st->devices.clear();
  for (ze_context_handle_t c : st->contexts) zeContextDestroy(c);
}

spora_plugin_error_t* get_state(State** out) {
  std::lock_guard<std::mutex> lock(g_state_mu);
  if (!g_state) return make_error(SPORA_PLUGIN_UNAVAILABLE, "[ze] not initialised (initialize failed or shutdown ran)");
  *out = g_state.get();
  return nullptr;
}

spora_plugin_error_t* get_device(const char* what, int32_t device, Device** out) {
  State* st = nullptr;
  if (auto* e = get_state(&st)) return e;
  if (device < 0 || static_cast<size_t>(device) >= st->devices.size())
    return invalid(std::string(what) + ": device " + std::to_string(device) + " out of range (" +
                   std::to_string(st->devices.size()) + " devices)");
  *out = st->devices[static_cast<size_t>(device)].get();
  return nullptr;
}

spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out) {
  State* st = nullptr;
  if (auto* e = get_state(&st)) return e;
  *out = st->streams.find(handle);
  if (!*out) return invalid(std::string(what) + ": " + (handle ? "unknown or destroyed stream" : "stream is NULL"));
  return nullptr;
}

spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out) {
  State* st = nullptr;
  if (auto* e = get_state(&st)) return e;
  *out = st->events.find(handle);
  if (!*out) return invalid(std::string(what) + ": " + (handle ? "unknown or destroyed event" : "event is NULL"));
  return nullptr;
}

spora_plugin_error_t* check_range(Device* d, const void* ptr, size_t size, const std::string& what) {
  if (size == 0) return nullptr;
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(d->alloc_mu);
  auto it = d->allocs.upper_bound(p);
  if (it != d->allocs.begin()) {
    --it;
    const uintptr_t base = it->first;
    if (p - base <= it->second && size <= it->second - (p - base)) return nullptr;
  }
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", ptr);
  return invalid(what + ": [" + addr + ", +" + std::to_string(size) +
                 " bytes) is not inside one live allocation of this device");
}

spora_plugin_error_t* drain_device(int32_t device) {
  State* st = nullptr;
  if (auto* e = get_state(&st)) return e;
  for (auto& s : st->streams.all())
    if (s->device() == device)
      if (auto* e = s->synchronize()) return e;
  return nullptr;
}

}  // namespace spora::ze
