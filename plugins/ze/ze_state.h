// Process-wide state of the Level Zero plugin: the drivers, devices and
// contexts zeInit found, the live streams/events/kernels behind the opaque
// handles, and the helpers every table function starts with. Nothing here
// exists before initialize, so loading and probing touch no driver.
#pragma once
#include <level_zero/ze_api.h>
#include <spora/plugin.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "handle_table.h"

namespace spora::ze {

using spora::plugin::HandleTable;

class Stream;
class Event;
struct Kernel;
class EventAllocator;
class ModuleCache;

// One Level Zero device as the host sees it (index = position in State::devices).
struct Device {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_context_handle_t context = nullptr;  // shared by every device of `driver`
  ze_device_properties_t props{};
  uint64_t memory_bytes = 0;
  uint32_t compute_ordinal = 0;  // queue group (compute) of every command list
  double ns_per_tick = 1.0;      // global timestamp resolution
  uint64_t timestamp_mask = ~0ull;
  std::string name, arch;
  std::unique_ptr<EventAllocator> events;
  std::unique_ptr<ModuleCache> modules;
  // Synchronous copies and memsets go through one immediate list per device.
  std::mutex sync_mu;
  ze_command_list_handle_t sync_list = nullptr;
  // Live allocations (address -> bytes), so that a copy, memset or kernel
  // operand outside them is refused when enqueued: a device would fault
  // later, far from the call that caused it.
  std::mutex alloc_mu;
  std::map<uintptr_t, size_t> allocs;
};

// Checks that [ptr, ptr + size) lies inside one live allocation of `d`;
// `what` names the call and operand for the error.
spora_plugin_error_t* check_range(Device* d, const void* ptr, size_t size, const std::string& what);

struct State {
  std::vector<ze_context_handle_t> contexts;  // one per driver, destroyed at shutdown
  std::vector<std::unique_ptr<Device>> devices;
  HandleTable<Stream> streams;
  HandleTable<Event> events;
  HandleTable<Kernel> kernels;
};

extern std::atomic<const spora_host_t*> g_host;
void host_log(int32_t level, const std::string& message);

// "ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)".
std::string result_name(ze_result_t r);
// An error for a failed Level Zero call: "[ze] <what>: <call> returned <name>".
spora_plugin_error_t* ze_error(ze_result_t r, const std::string& what, const char* call);
// Throws-free check macro body: returns the error from the enclosing function.
#define SPORA_ZE_CHECK(call, what)                                       \
  do {                                                                   \
    const ze_result_t spora_ze_r_ = (call);                              \
    if (spora_ze_r_ != ZE_RESULT_SUCCESS) return ::spora::ze::ze_error(spora_ze_r_, what, #call); \
  } while (0)

spora_plugin_error_t* invalid(const std::string& message);

spora_plugin_error_t* create_state();  // zeInit and device discovery
void destroy_state();
spora_plugin_error_t* get_state(State** out);
spora_plugin_error_t* get_device(const char* what, int32_t device, Device** out);
spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out);
spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out);

// Waits for every stream of `device` (sync copies and mem_free are ordered
// after all enqueued work, see plugin.h).
spora_plugin_error_t* drain_device(int32_t device);

}  // namespace spora::ze
