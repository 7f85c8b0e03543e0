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

#include "kernel_plan.h"
#include "sim_memory.h"
#include "sim_stream.h"

namespace spora::sim {

// Maps the opaque handles given to the host back to live objects. Lookups
// return a shared_ptr, so an object stays alive for the rest of a call even if
// another thread destroys its handle meanwhile, and a stale or foreign handle
// is reported as an error instead of being dereferenced.
template <class T>
class HandleTable {
 public:
  void* add(std::shared_ptr<T> obj) {
    void* handle = obj.get();
    std::lock_guard<std::mutex> lock(mu_);
    map_.emplace(handle, std::move(obj));
    return handle;
  }
  std::shared_ptr<T> find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(handle);
    return it == map_.end() ? nullptr : it->second;
  }
  std::shared_ptr<T> remove(const void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(handle);
    if (it == map_.end()) return nullptr;
    std::shared_ptr<T> obj = std::move(it->second);
    map_.erase(it);
    return obj;
  }
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(map_.size());
    for (const auto& entry : map_) out.push_back(entry.second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<T>> map_;
};

// A planned kernel. Immutable after kernel_create, so launches copy the plan
// into the queued task and kernel_destroy never races with queued work.
struct Kernel {
  int32_t device;
  std::string op;  // for error messages
  spora::plugin::KernelPlan plan;
};

struct State {
  std::vector<std::unique_ptr<Arena>> arenas;  // one per device, index = device
  HandleTable<Stream> streams;
  HandleTable<Event> events;
  HandleTable<Kernel> kernels;
};

// Set by spora_plugin_entry_v1; the host keeps it valid for the process.
extern std::atomic<const spora_host_t*> g_host;

// Sends a message to the host's log sink, if it has one.
void host_log(int32_t level, const std::string& message);
// A string config value ("" when unset).
std::string config_string(const char* key);

// Reads the config and builds the state (initialize), or tears it down
// (shutdown: joins every stream, unmaps the arenas).
spora_plugin_error_t* create_state();
void destroy_state();

// The state, or an error if initialize has not run (or shutdown has).
spora_plugin_error_t* get_state(State** out);
// Validates `device` and returns its arena. `what` names the calling function.
spora_plugin_error_t* get_arena(const char* what, int32_t device, Arena** out);
spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out);
spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out);

// Waits for all work already enqueued on every stream of `device` (skipping
// the calling worker's own stream, which cannot wait for itself).
void drain_device(int32_t device);

}  // namespace spora::sim
