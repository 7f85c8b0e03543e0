// Process-wide state of the CUDA/ROCm plugin: the devices found at
// initialize, the live streams, events and kernels, and the helpers every
// table function starts with. Nothing exists before initialize: probe and
// entry touch no driver.
#pragma once
#include <spora/plugin.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gpu_kernel.h"
#include "gpu_runtime.h"
#include "handle_table.h"

namespace spora::gpu {

struct Device {
  std::string name;  // from the driver
  std::string arch;  // "sm_90", "gfx90a"
  uint64_t memory_bytes = 0;
  int32_t compute_units = 0;
};

class StreamTrace;  // gpu_trace.h

struct Stream {
  int32_t device = 0;
  cudaStream_t stream = nullptr;
  // Reports the stream's work to the host's profiler (gpu_trace.h); null on
  // a capture's recording stream.
  std::shared_ptr<StreamTrace> trace;
};

struct Event {
  int32_t device = 0;
  cudaEvent_t event = nullptr;
};

struct Kernel {
  int32_t device = 0;
  GpuPlan plan;
};

// Recorded work (gpu_capture.cpp): an instantiated CUDA graph.
struct Captured {
  int32_t device = 0;
  cudaGraphExec_t exec = nullptr;
  ~Captured();
};

struct State {
  std::vector<Device> devices;
  spora::plugin::HandleTable<Stream> streams;
  spora::plugin::HandleTable<Event> events;
  spora::plugin::HandleTable<Kernel> kernels;
  spora::plugin::HandleTable<Captured> captured;
};

// Set by spora_plugin_entry_v1; the host keeps it valid for the process.
extern std::atomic<const spora_host_t*> g_host;

void host_log(int32_t level, const std::string& message);

// "[cuda] <what>: cudaErrorX (message)" with a plugin code that fits the
// runtime's error (out of memory, unavailable, invalid argument, internal).
spora_plugin_error_t* runtime_error(const std::string& what, cudaError_t e);
// Errors after which the context is unusable (illegal address, launch
// failure, device assert, ...): runtime_error reports them as
// SPORA_PLUGIN_UNAVAILABLE and records the first as the device's failure.
bool is_sticky(cudaError_t e);
// The recorded failure as an UNAVAILABLE error, or NULL while healthy.
spora_plugin_error_t* failed_error(const std::string& what);
// Clears the thread's last-error slot before a launch, so that an earlier
// call's error is not blamed on the next kernel; returns it only if sticky.
cudaError_t take_stale_error(const char* what);
// An error of `code` whose message starts with "[cuda] " / "[rocm] ".
spora_plugin_error_t* plugin_error(int32_t code, const std::string& message);

// initialize / shutdown.
spora_plugin_error_t* create_state();
void destroy_state();

spora_plugin_error_t* get_state(State** out);
// Validates `device` and makes it current on the calling thread.
spora_plugin_error_t* use_device(const char* what, int32_t device);
spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out);
spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out);

}  // namespace spora::gpu
