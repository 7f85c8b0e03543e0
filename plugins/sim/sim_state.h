// Process-wide state of the sim plugin and the lookups every table function
// starts with. The state exists only between initialize and shutdown; before
// that nothing is allocated and no thread runs.
#pragma once
#include <spora/plugin.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "handle_table.h"
#include "kernel_plan.h"
#include "sim_device.h"
#include "sim_memory.h"
#include "sim_stream.h"

namespace spora::sim {

using spora::plugin::HandleTable;

// A planned kernel. Immutable after kernel_create, so launches copy the plan
// into the queued task and kernel_destroy never races with queued work.
struct Kernel {
  int32_t device;
  std::string op;  // for error messages
  spora::plugin::KernelPlan plan;
};

struct Captured;  // sim_capture.cpp

struct State {
  std::vector<std::unique_ptr<Arena>> arenas;     // one per device, index = device
  std::vector<std::shared_ptr<Device>> devices;   // engines and failure state, same index
  HandleTable<Stream> streams;
  HandleTable<Event> events;
  HandleTable<Kernel> kernels;
  HandleTable<Captured> captured;
};

// Set by spora_plugin_entry_v1; the host keeps it valid for the process.
extern std::atomic<const spora_host_t*> g_host;

// Sends a message to the host's log sink, if it has one.
void host_log(int32_t level, const std::string& message);
// A string config value ("" when unset).
std::string config_string(const char* key);

// Reads the config and builds the state (initialize), or tears it down
// (shutdown: joins every stream, then the devices' engine threads, and
// unmaps the arenas). Config keys (env SPORA_SIM_<KEY> through the host):
// sim.devices, sim.memory_bytes, sim.lag_us, sim.kernel_us, sim.fault_after_launches,
// sim.disable_ops (read by sim_kernels.cpp).
spora_plugin_error_t* create_state();
void destroy_state();

// The state, or an error if initialize has not run (or shutdown has).
spora_plugin_error_t* get_state(State** out);
// Validates `device` and returns its arena. `what` names the calling function.
spora_plugin_error_t* get_arena(const char* what, int32_t device, Arena** out);
// Validates `device` and returns its engines and failure state.
spora_plugin_error_t* get_device(const char* what, int32_t device, std::shared_ptr<Device>* out);
spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out);
spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out);

// Waits for all work already enqueued on every stream of `device`. Callers
// refuse first to run on its callback thread (refuse_in_callback).
void drain_device(int32_t device);
// The same for every device (host_free_pinned, like cudaFreeHost).
void drain_all_devices();

// An error when the calling thread captures on a stream of `device` (the
// capture is then broken): `fn` would wait for the device or allocate, which
// capture mode forbids (sim_capture.cpp). NULL otherwise.
spora_plugin_error_t* refuse_in_capture(const char* fn, int32_t device);

}  // namespace spora::sim
