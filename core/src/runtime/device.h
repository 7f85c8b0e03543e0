// A device of a loaded plugin: memory, copies, its default stream and the
// cache of planned kernels.
#pragma once
#include <spora/plugin.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/op.h"

namespace spora {

class PluginRecord;
class Buffer;

// A planned kernel with the descriptor it was planned from. Shared: the
// device's cache and every execution plan using it hold a reference, so the
// cache can evict it while plans keep it alive; the last owner destroys the
// plugin's kernel.
struct KernelEntry {
  const OpDef* op = nullptr;
  // The call's inferred operands (inputs, then outputs) and attributes: the
  // cache key, and the storage the plugin's descriptors pointed into. Not a
  // whole OpCall, which has room for kMaxOpInputs operands (~15 KB).
  int32_t num_inputs = 0;
  std::vector<TensorMeta> operands;
  Attrs attrs;
  uint64_t hash = 0;
  spora_kernel_t* kernel = nullptr;
  size_t workspace = 0;
  const spora_device_api_t* api = nullptr;
  uint64_t last_used = 0;
  ~KernelEntry();
};
using KernelRef = std::shared_ptr<const KernelEntry>;

class Device {
 public:
  Device(PluginRecord* plugin, int32_t index);

  const std::string& name() const { return name_; }  // "sim:0"
  PluginRecord* plugin() const { return plugin_; }
  int32_t index() const { return index_; }
  const std::vector<std::pair<std::string, std::string>>& properties() const { return props_; }
  bool unified_memory() const { return unified_; }

  spora_devptr_t alloc(size_t bytes);
  void free(spora_devptr_t ptr) noexcept;  // logs failures: runs from destructors
  void copy_h2d(spora_devptr_t dst, const void* src, size_t bytes);
  void copy_d2h(void* dst, spora_devptr_t src, size_t bytes);
  void copy_d2d(spora_devptr_t dst, spora_devptr_t src, size_t bytes);
  void memset(spora_devptr_t dst, int byte, size_t bytes);
  void synchronize();

  // Work enqueued on the device's stream, returning at once (execution
  // plans use these so that a run never waits for the device between
  // launches). Host memory must stay valid, and for d2h unread, until the
  // stream reaches the copy; a callback runs on a plugin thread in stream
  // order and must not wait for this device. Throw Code::kUnimplemented
  // when the plugin lacks the entry point.
  void copy_h2d_async(spora_devptr_t dst, const void* src, size_t bytes);
  void copy_d2h_async(void* dst, spora_devptr_t src, size_t bytes);
  void copy_d2d_async(spora_devptr_t dst, spora_devptr_t src, size_t bytes);
  void host_callback(spora_host_callback_fn fn, void* user_data);
  bool has_async() const;  // all four of the above are available
  // Blocks until the stream has run everything queued so far, without
  // taking its pending error (that stays for synchronize). Never waits for
  // a callback alone: a stream that drains without running the marker
  // callback means the device failed (its error is raised); a wait over
  // SPORA_DEVICE_TIMEOUT_S seconds (default 600, 0 = none) fails with
  // Code::kTimeout naming the device.
  void wait_idle();
  // True when the stream has run everything queued so far (never blocks;
  // plugins without stream_query report false).
  bool stream_done();

  // Page-locked host memory from this device's plugin. Async copies from
  // and to it are ordered by the stream alone (plugin.h), so a host callback
  // queued before an h2d copy may produce its bytes. has_pinned() is false
  // when the plugin has none: the host then orders such copies itself.
  bool has_pinned() const;
  void* host_alloc_pinned(size_t bytes);
  void host_free_pinned(void* ptr) noexcept;  // logs failures: runs from destructors

  // The plugin's memory statistics (plugin ABI 1.1 memory_stats), in bytes.
  // Throws Code::kUnimplemented naming the device when the plugin has none,
  // including a table built against 1.0, whose struct_size ends before the
  // slot (the slot is then never read).
  struct MemoryStats {
    uint64_t allocated = 0, peak_allocated = 0, reserved = 0, peak_reserved = 0;
  };
  MemoryStats memory_stats();
  // Peaks start again from the current values (same errors).
  void reset_peak_memory_stats();

  // Set when a plugin call reported the device lost (SPORA_PLUGIN_UNAVAILABLE
  // after initialize, e.g. CUDA's sticky illegal-address error): every later
  // call fails at once with this reason instead of queueing more work.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string failure() const;
  // Calls above that make the host wait for the device's queued work
  // (synchronous copies and memset, synchronize, free): a count for tests
  // that check an execution plan issues none between its launches.
  uint64_t host_waits() const { return host_waits_.load(std::memory_order_relaxed); }
  // Grows the shared kernel workspace now (plans size it when compiled), so
  // that the first launch does not free a smaller one under queued work.
  void reserve_workspace(size_t bytes);

  // The kernel planned for this call, planning it on first use. Throws
  // Code::kUnimplemented (with the plugin's reason) if the plugin has none.
  // At most kMaxCachedKernels plans stay cached per device (least recently
  // used ones are dropped), so ops whose attributes change every call
  // (random seeds) cannot grow memory without bound.
  KernelRef kernel(const OpDef& op, const OpCall& call);
  static constexpr size_t kMaxCachedKernels = 4096;
  // Scratch: kernels needing at most kSharedWorkspaceMax share one
  // device buffer, grown on demand; a larger need gets its own buffer for
  // the launch (freed in stream order), so that one big eager call does not
  // leave a big buffer allocated for good.
  void launch(const KernelEntry& k, const spora_devptr_t* inputs, const spora_devptr_t* outputs);
  // The same with the caller's scratch (`workspace`, at least k.workspace
  // bytes; an execution plan holds one for its steps).
  void launch(const KernelEntry& k, const spora_devptr_t* inputs, const spora_devptr_t* outputs,
              spora_devptr_t workspace);
  static constexpr size_t kSharedWorkspaceMax = size_t{1} << 20;

  // ---- lanes: the default stream, the communication and the copy stream ----
  // Collectives on device memory (a device-bound communicator) run on a
  // second stream so that backward kernels keep the default one busy; the
  // dataset's device queue (data/device_queue.h) copies the next batch on a
  // third while the step runs. Lanes are ordered by events (record / wait).
  enum class Lane { kCompute, kComm, kCopy };
  // The plugin's native handle (cudaStream_t, ...) of a lane's stream;
  // throws Code::kUnimplemented naming the device without
  // stream_native_handle.
  void* native_stream(Lane lane);
  // A point in a lane's stream, reusable (re-recording moves the point).
  class Event {
   public:
    explicit Event(Device* d);
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    spora_event_t* handle() const { return handle_; }

   private:
    Device* device_;
    spora_event_t* handle_ = nullptr;
  };
  // Records `e` at the current end of `lane`; work later enqueued on
  // `waiter` waits for it.
  void record(Event& e, Lane lane);
  void wait(Lane waiter, Event& e);
  // Blocks until every item of the comm lane has run (its errors raised).
  void synchronize_comm();
  // An async copy to the device enqueued on `lane` (copy_h2d_async is the
  // compute lane's); the same contract for the host memory.
  void copy_h2d_async(Lane lane, spora_devptr_t dst, const void* src, size_t bytes);
  // Blocks until `e`'s recorded point is reached (an event never recorded
  // counts as reached).
  void synchronize(Event& e);
  // event_create/record/synchronize and stream_wait_event are all there.
  bool has_events() const;

  // ---- stream capture (plugin ABI 1.2; plan_capture.h uses it) ----
  // Recorded work, freed with the plugin when the last reference goes.
  class Captured {
   public:
    Captured(Device* d, spora_captured_t* h) : device_(d), handle_(h) {}
    ~Captured();
    Captured(const Captured&) = delete;
    Captured& operator=(const Captured&) = delete;
    spora_captured_t* handle() const { return handle_; }

   private:
    Device* device_;
    spora_captured_t* handle_;
  };
  // All four capture slots are there (and the table is 1.2-sized).
  bool has_capture() const;
  // From now until end_capture, the launches, async copies and memsets this
  // thread enqueues on the device go to its capture stream and are recorded,
  // not run; other threads' work is unaffected. One thread captures on a
  // device at a time (others wait in begin_capture). Throws
  // Code::kUnimplemented without has_capture().
  void begin_capture();
  // Ends this thread's capture: the recorded work, or a throw with the
  // plugin's reason the capture broke (nothing recorded ran either way).
  std::shared_ptr<Captured> end_capture();
  // Enqueues one replay on the device's stream.
  void launch_captured(const Captured& c);

  // Whether an op the plugin has no kernel for may run another way (its
  // decomposition, or the cpu kernel with copies). On by default; the
  // conformance kit turns it off so that only the plugin's own kernels run.
  bool fallback() const { return fallback_.load(std::memory_order_relaxed); }
  void set_fallback(bool enabled) { fallback_.store(enabled, std::memory_order_relaxed); }

 private:
  spora_stream_t* stream();
  // Throws if the device failed earlier.
  void check_alive() const {
    if (failed_.load(std::memory_order_relaxed)) throw_failed();
  }
  [[noreturn]] void throw_failed() const;
  // throw_if_error, recording a lost device first.
  [[noreturn]] void raise(spora_plugin_error_t* e, const std::string& context);

  PluginRecord* plugin_;
  const spora_device_api_t* api_;
  int32_t index_;
  std::string name_;
  bool unified_ = false;
  std::vector<std::pair<std::string, std::string>> props_;
  std::mutex mu_;
  spora_stream_t* stream_ = nullptr;
  spora_stream_t* capture_stream_ = nullptr;  // the recording stream while a thread captures
  spora_stream_t* comm_stream_ = nullptr;     // Lane::kComm, made on first use
  spora_stream_t* copy_stream_ = nullptr;     // Lane::kCopy, made on first use
  spora_stream_t* lane_stream(Lane lane);
  std::mutex capture_mu_;                     // held from begin_capture to end_capture
  std::unordered_multimap<uint64_t, std::shared_ptr<KernelEntry>> kernels_;
  // Kernel scratch memory, grown on demand and reused: fresh pages for a
  // 50 MB conv workspace cost more than the conv's reorders. Launches that
  // use it hold workspace_mu_ (cpu kernels run inside launch).
  std::mutex workspace_mu_;
  std::shared_ptr<Buffer> workspace_;
  uint64_t clock_ = 0;
  std::atomic<uint64_t> host_waits_{0};
  std::atomic<bool> fallback_{true};
  std::atomic<bool> failed_{false};
  mutable std::mutex failed_mu_;
  std::string failure_;
};

}  // namespace spora
