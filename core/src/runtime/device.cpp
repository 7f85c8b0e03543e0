#include "runtime/device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "runtime/options.h"
#include "runtime/plugin_library.h"
#include "runtime/tensor.h"
#include "support/error.h"
#include "support/log.h"

namespace spora {
// Every plugin call below builds its error context only when the call
// failed: these run per eager op, and formatting the context eagerly was
// ~10% of an op's instructions.
namespace {

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

uint64_t call_hash(const OpDef& op, const OpCall& c) {
  uint64_t h = mix(1469598103934665603ull, reinterpret_cast<uintptr_t>(&op));
  auto shape = [&](const TensorMeta& m) {
    h = mix(h, static_cast<uint64_t>(m.dtype));
    h = mix(h, static_cast<uint64_t>(m.shape.rank));
    for (int i = 0; i < m.shape.rank; ++i) h = mix(h, static_cast<uint64_t>(m.shape.dims[i]));
  };
  for (int i = 0; i < c.num_inputs; ++i) shape(c.in[i]);
  for (int i = 0; i < c.num_outputs; ++i) shape(c.out[i]);
  return c.attrs.empty() ? h : mix(h, c.attrs.hash());
}

bool same_call(const KernelEntry& a, const OpCall& b) {
  if (a.num_inputs != b.num_inputs || a.operands.size() != static_cast<size_t>(b.num_inputs + b.num_outputs))
    return false;
  for (int i = 0; i < b.num_inputs + b.num_outputs; ++i) {
    const TensorMeta& m = i < b.num_inputs ? b.in[i] : b.out[i - b.num_inputs];
    const TensorMeta& e = a.operands[static_cast<size_t>(i)];
    if (e.dtype != m.dtype || e.shape != m.shape) return false;
  }
  return a.attrs == b.attrs;
}

spora_tensor_desc_t desc_of(const TensorMeta& m) {
  spora_tensor_desc_t d{};
  d.struct_size = sizeof(d);
  d.dtype = m.dtype;
  d.rank = m.shape.rank;
  d.dims = m.shape.rank ? m.shape.dims : nullptr;
  d.strides = nullptr;
  return d;
}

}  // namespace

Device::Device(PluginRecord* plugin, int32_t index)
    : plugin_(plugin), api_(plugin->device_api()), index_(index), name_(plugin->name() + ":" + std::to_string(index)) {
  spora_device_properties_t p{};
  p.struct_size = sizeof(p);
  if (spora_plugin_error_t* e = api_->device_properties(index, &p))
    raise(e, "[" + name_ + "] device_properties");
  auto str = [](const char* s) { return std::string(s ? s : ""); };
  props_ = {{"name", str(p.name)},
            {"vendor", str(p.vendor)},
            {"arch", str(p.arch)},
            {"memory_bytes", std::to_string(p.memory_bytes)},
            {"compute_units", std::to_string(p.compute_units)},
            {"unified_memory", std::to_string(p.unified_memory)},
            {"alignment", std::to_string(p.alignment)},
            {"plugin", plugin->name()},
            {"plugin_version", plugin->version()}};
  unified_ = p.unified_memory != 0;
}

void Device::raise(spora_plugin_error_t* e, const std::string& context) {
  if (e && e->code == SPORA_PLUGIN_UNAVAILABLE) {
    std::lock_guard<std::mutex> lock(failed_mu_);
    if (!failed_.load(std::memory_order_relaxed)) {
      failure_ = context + ": " + (e->message ? e->message : "(no message)");
      failed_.store(true, std::memory_order_release);
      logger().error("[{}] device failed: {}", name_, failure_);
    }
  }
  throw_if_error(e, context);
  fail(Code::kInternal, "{}: failed without an error", context);  // e was NULL
}

std::string Device::failure() const {
  std::lock_guard<std::mutex> lock(failed_mu_);
  return failure_;
}

void Device::throw_failed() const {
  fail(Code::kUnavailable,
       "[{}] the device failed earlier and runs no more work: {}. Its memory and queued results are lost; "
       "restart the process to use it again",
       name_, failure());
}

namespace {
// The device this thread captures on (Device::begin_capture), whose work
// then goes to that device's capture stream.
thread_local const Device* tl_capturing = nullptr;
}  // namespace

spora_stream_t* Device::stream() {
  if (tl_capturing == this) return capture_stream_;
  std::lock_guard<std::mutex> lock(mu_);
  if (!stream_) {
    if (spora_plugin_error_t* e = api_->stream_create(index_, &stream_))
      raise(e, "[" + name_ + "] stream_create");
  }
  return stream_;
}

spora_devptr_t Device::alloc(size_t bytes) {
  check_alive();
  spora_devptr_t p = nullptr;
  if (spora_plugin_error_t* e = api_->mem_alloc(index_, bytes, &p))
    raise(e, "[" + name_ + "] alloc of " + std::to_string(bytes) + " bytes");
  return p;
}

void Device::free(spora_devptr_t ptr) noexcept {
  if (!ptr) return;
  ++host_waits_;  // plugins may wait for queued work before freeing
  if (spora_plugin_error_t* e = api_->mem_free(index_, ptr)) {
    // A failed device's memory is gone with it: its refusals are expected.
    if (failed())
      logger().debug("[{}] free on a failed device: {}", name_, e->message ? e->message : "");
    else
      logger().error("[{}] free failed: {}", name_, e->message ? e->message : "");
    if (e->destroy) e->destroy(e);
  }
}

void Device::copy_h2d(spora_devptr_t dst, const void* src, size_t bytes) {
  check_alive();
  ++host_waits_;
  if (spora_plugin_error_t* e = api_->copy_h2d(index_, dst, src, bytes))
    raise(e, "[" + name_ + "] copy to device");
}
void Device::copy_d2h(void* dst, spora_devptr_t src, size_t bytes) {
  check_alive();
  ++host_waits_;
  if (spora_plugin_error_t* e = api_->copy_d2h(index_, dst, src, bytes))
    raise(e, "[" + name_ + "] copy to host");
}
void Device::copy_d2d(spora_devptr_t dst, spora_devptr_t src, size_t bytes) {
  check_alive();
  ++host_waits_;
  if (spora_plugin_error_t* e = api_->copy_d2d(index_, dst, src, bytes))
    raise(e, "[" + name_ + "] copy on device");
}
void Device::memset(spora_devptr_t dst, int byte, size_t bytes) {
  check_alive();
  ++host_waits_;
  if (!api_->memset) {
    // Optional in practice: emulate with a host buffer.
    std::vector<unsigned char> zeros(bytes, static_cast<unsigned char>(byte));
    copy_h2d(dst, zeros.data(), bytes);
    return;
  }
  if (spora_plugin_error_t* e = api_->memset(index_, dst, byte, bytes)) raise(e, "[" + name_ + "] memset");
}

void Device::synchronize() {
  check_alive();
  ++host_waits_;
  spora_stream_t* s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stream_;
  }
  if (!s) return;
  if (spora_plugin_error_t* e = api_->stream_synchronize(s)) raise(e, "[" + name_ + "]");
}

bool Device::has_async() const {
  return api_->copy_h2d_async && api_->copy_d2h_async && api_->copy_d2d_async && api_->stream_add_callback;
}

namespace {
template <class Fn>
Fn* need_entry(Fn* fn, const char* what, const std::string& device) {
  if (!fn) fail(Code::kUnimplemented, "[{}] the plugin has no {}", device, what);
  return fn;
}
}  // namespace

spora_stream_t* Device::lane_stream(Lane lane) {
  if (lane == Lane::kCompute) return stream();
  std::lock_guard<std::mutex> lock(mu_);
  spora_stream_t*& s = lane == Lane::kComm ? comm_stream_ : copy_stream_;
  if (!s)
    if (spora_plugin_error_t* e = api_->stream_create(index_, &s))
      raise(e, "[" + name_ + "] stream_create (" + (lane == Lane::kComm ? "communication" : "copy") + " stream)");
  return s;
}

void* Device::native_stream(Lane lane) {
  check_alive();
  auto* fn = need_entry(api_->stream_native_handle, "stream_native_handle", name_);
  void* h = nullptr;
  if (spora_plugin_error_t* e = fn(lane_stream(lane), &h)) raise(e, "[" + name_ + "] stream_native_handle");
  return h;
}

Device::Event::Event(Device* d) : device_(d) {
  auto* fn = need_entry(d->api_->event_create, "event_create", d->name_);
  if (spora_plugin_error_t* e = fn(d->index_, &handle_)) d->raise(e, "[" + d->name_ + "] event_create");
}

Device::Event::~Event() {
  if (handle_ && device_->api_->event_destroy)
    if (spora_plugin_error_t* e = device_->api_->event_destroy(handle_)) {
      logger().error("[{}] event_destroy: {}", device_->name_, e->message ? e->message : "");
      e->destroy(e);
    }
}

void Device::record(Event& ev, Lane lane) {
  check_alive();
  auto* fn = need_entry(api_->event_record, "event_record", name_);
  if (spora_plugin_error_t* e = fn(ev.handle(), lane_stream(lane))) raise(e, "[" + name_ + "] event_record");
}

void Device::wait(Lane waiter, Event& ev) {
  check_alive();
  auto* fn = need_entry(api_->stream_wait_event, "stream_wait_event", name_);
  if (spora_plugin_error_t* e = fn(lane_stream(waiter), ev.handle())) raise(e, "[" + name_ + "] stream_wait_event");
}

void Device::copy_h2d_async(Lane lane, spora_devptr_t dst, const void* src, size_t bytes) {
  check_alive();
  auto* fn = need_entry(api_->copy_h2d_async, "copy_h2d_async", name_);
  if (spora_plugin_error_t* e = fn(lane_stream(lane), dst, src, bytes))
    raise(e, "[" + name_ + "] async copy to device");
}

void Device::synchronize(Event& ev) {
  check_alive();
  ++host_waits_;
  auto* fn = need_entry(api_->event_synchronize, "event_synchronize", name_);
  if (spora_plugin_error_t* e = fn(ev.handle())) raise(e, "[" + name_ + "] event_synchronize");
}

bool Device::has_events() const {
  return api_->event_create && api_->event_destroy && api_->event_record && api_->event_synchronize &&
         api_->stream_wait_event;
}

void Device::synchronize_comm() {
  ++host_waits_;
  if (spora_plugin_error_t* e = api_->stream_synchronize(lane_stream(Lane::kComm)))
    raise(e, "[" + name_ + "] synchronize (communication stream)");
}

Device::MemoryStats Device::memory_stats() {
  check_alive();
  const bool has = SPORA_STRUCT_HAS(api_, spora_device_api_t, memory_stats) && api_->memory_stats;
  if (!has)
    fail(Code::kUnimplemented,
         "[{}] memory statistics are not available: the '{}' plugin does not implement memory_stats (plugin ABI 1.1)",
         name_, plugin_->name());
  spora_memory_stats_t s{};
  s.struct_size = sizeof(s);
  if (spora_plugin_error_t* e = api_->memory_stats(index_, &s)) raise(e, "[" + name_ + "] memory_stats");
  MemoryStats out;
  out.allocated = s.allocated_bytes;
  out.peak_allocated = s.peak_allocated_bytes;
  out.reserved = s.reserved_bytes;
  out.peak_reserved = s.peak_reserved_bytes;
  return out;
}

void Device::reset_peak_memory_stats() {
  check_alive();
  const bool has = SPORA_STRUCT_HAS(api_, spora_device_api_t, reset_peak_memory_stats) && api_->reset_peak_memory_stats;
  if (!has)
    fail(Code::kUnimplemented,
         "[{}] memory statistics are not available: the '{}' plugin does not implement reset_peak_memory_stats "
         "(plugin ABI 1.1)",
         name_, plugin_->name());
  if (spora_plugin_error_t* e = api_->reset_peak_memory_stats(index_))
    raise(e, "[" + name_ + "] reset_peak_memory_stats");
}

void Device::copy_h2d_async(spora_devptr_t dst, const void* src, size_t bytes) {
  check_alive();
  auto* fn = need_entry(api_->copy_h2d_async, "copy_h2d_async", name_);
  if (spora_plugin_error_t* e = fn(stream(), dst, src, bytes))
    raise(e, "[" + name_ + "] async copy to device");
}
void Device::copy_d2h_async(void* dst, spora_devptr_t src, size_t bytes) {
  check_alive();
  auto* fn = need_entry(api_->copy_d2h_async, "copy_d2h_async", name_);
  if (spora_plugin_error_t* e = fn(stream(), dst, src, bytes)) raise(e, "[" + name_ + "] async copy to host");
}
void Device::copy_d2d_async(spora_devptr_t dst, spora_devptr_t src, size_t bytes) {
  check_alive();
  auto* fn = need_entry(api_->copy_d2d_async, "copy_d2d_async", name_);
  if (spora_plugin_error_t* e = fn(stream(), dst, src, bytes))
    raise(e, "[" + name_ + "] async copy on device");
}
void Device::host_callback(spora_host_callback_fn cb, void* user_data) {
  check_alive();
  auto* fn = need_entry(api_->stream_add_callback, "stream_add_callback", name_);
  if (spora_plugin_error_t* e = fn(stream(), cb, user_data)) raise(e, "[" + name_ + "] host callback");
}

bool Device::stream_done() {
  if (!api_->stream_query) return false;
  int32_t done = 0;
  if (spora_plugin_error_t* e = api_->stream_query(stream(), &done)) raise(e, "[" + name_ + "] stream_query");
  return done != 0;
}

// Seconds a host wait for a device's queued work may take before it fails
// with Code::kTimeout (SPORA_DEVICE_TIMEOUT_S; 0 = no limit).
static double device_timeout_s() {
  const char* s = std::getenv("SPORA_DEVICE_TIMEOUT_S");
  if (!s || !*s) return 600.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v) || v < 0)
    fail(Code::kInvalidArgument, "[device] SPORA_DEVICE_TIMEOUT_S='{}' is not a non-negative number of seconds", s);
  return v;
}

// wait_idle never waits for the marker callback alone: a runtime skips callbacks
// queued behind a failed device (CUDA's host functions never run once the
// context has a sticky error), so the wait also watches the stream. A stream
// that drained without running the marker means the device failed: its
// error is raised. A wait longer than SPORA_DEVICE_TIMEOUT_S fails with
// Code::kTimeout naming the device.
void Device::wait_idle() {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  // Shared with the callback, which may still run after a timeout.
  auto gate = std::make_shared<Gate>();
  auto* ref = new std::shared_ptr<Gate>(gate);
  try {
    host_callback(
        [](void* user, const spora_plugin_error_t*) {
          std::unique_ptr<std::shared_ptr<Gate>> g(static_cast<std::shared_ptr<Gate>*>(user));
          std::lock_guard<std::mutex> lock((*g)->mu);
          (*g)->open = true;
          (*g)->cv.notify_all();
        },
        ref);
  } catch (...) {
    delete ref;
    throw;
  }
  const double limit = device_timeout_s();
  const auto start = std::chrono::steady_clock::now();
  auto poll = std::chrono::microseconds(200);
  std::unique_lock<std::mutex> lock(gate->mu);
  while (!gate->cv.wait_for(lock, poll, [&] { return gate->open; })) {
    lock.unlock();
    const bool drained = stream_done();  // raises a lost device's error
    lock.lock();
    if (gate->open) break;
    if (drained) {
      lock.unlock();
      synchronize();  // raises the failure that made the runtime skip the marker
      spora_plugin_error_t lost{};
      lost.struct_size = sizeof(lost);
      lost.code = SPORA_PLUGIN_UNAVAILABLE;
      lost.message = "the stream finished without running a queued host callback: the device has failed";
      raise(&lost, "[" + name_ + "]");
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (limit > 0 && waited >= limit)
      fail(Code::kTimeout,
           "[{}] waited {:.0f} s for the device's queued work to finish (SPORA_DEVICE_TIMEOUT_S={}); the device or a "
           "host callback on it may be hung",
           name_, waited, limit);
    poll = std::min(poll * 2, std::chrono::microseconds(50000));
  }
}

bool Device::has_pinned() const { return api_->host_alloc_pinned && api_->host_free_pinned; }

void* Device::host_alloc_pinned(size_t bytes) {
  check_alive();
  auto* fn = need_entry(api_->host_alloc_pinned, "host_alloc_pinned", name_);
  void* p = nullptr;
  if (spora_plugin_error_t* e = fn(bytes, &p))
    raise(e, "[" + name_ + "] pinned host allocation of " + std::to_string(bytes) + " bytes");
  return p;
}

void Device::host_free_pinned(void* ptr) noexcept {
  if (!ptr || !api_->host_free_pinned) return;
  if (spora_plugin_error_t* e = api_->host_free_pinned(ptr)) {
    logger().error("[{}] freeing pinned host memory failed: {}", name_, e->message ? e->message : "");
    if (e->destroy) e->destroy(e);
  }
}

void Device::reserve_workspace(size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(workspace_mu_);
  if (workspace_ && workspace_->bytes() >= bytes) return;
  workspace_.reset();
  workspace_ = std::make_shared<Buffer>(this, bytes);
}

KernelEntry::~KernelEntry() {
  if (kernel && api && api->kernel_destroy) {
    if (spora_plugin_error_t* e = api->kernel_destroy(kernel)) {
      if (e->destroy) e->destroy(e);
    }
  }
}

KernelRef Device::kernel(const OpDef& op, const OpCall& user_call) {
  // Process-wide options the kernel must see (runtime/options.h): part of
  // the cache key, so kernels planned under another setting are not reused.
  std::unique_ptr<OpCall> with_options;  // allocated only when an option applies
  const OpCall& call = with_kernel_options(op, user_call, &with_options);
  const uint64_t h = call_hash(op, call);
  std::lock_guard<std::mutex> lock(mu_);
  auto range = kernels_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second->op == &op && same_call(*it->second, call)) {
      it->second->last_used = ++clock_;
      return it->second;
    }
  if (kernels_.size() >= kMaxCachedKernels) {
    // Evict the least recently used quarter in one sweep.
    std::vector<uint64_t> stamps;
    for (const auto& [k, e] : kernels_) stamps.push_back(e->last_used);
    std::nth_element(stamps.begin(), stamps.begin() + static_cast<long>(stamps.size() / 4), stamps.end());
    const uint64_t cutoff = stamps[stamps.size() / 4];
    for (auto it = kernels_.begin(); it != kernels_.end();)
      it = it->second->last_used <= cutoff ? kernels_.erase(it) : std::next(it);
  }

  if (!api_->kernel_create || !api_->kernel_launch)
    fail(Code::kUnimplemented, "[{}] device {} has no kernels", op.name, name_);
  auto entry = std::make_shared<KernelEntry>();
  entry->api = api_;
  entry->last_used = ++clock_;
  entry->op = &op;
  entry->num_inputs = call.num_inputs;
  entry->operands.assign(call.in, call.in + call.num_inputs);
  entry->operands.insert(entry->operands.end(), call.out, call.out + call.num_outputs);
  entry->attrs = call.attrs;
  entry->hash = h;
  // Descriptors point into the entry's copy.
  const KernelEntry& c = *entry;
  spora_tensor_desc_t ins[kMaxOpInputs], outs[kMaxOpOutputs];
  for (int i = 0; i < call.num_inputs; ++i) ins[i] = desc_of(c.operands[static_cast<size_t>(i)]);
  for (int i = 0; i < call.num_outputs; ++i) outs[i] = desc_of(c.operands[static_cast<size_t>(call.num_inputs + i)]);
  std::vector<spora_attr_t> attrs;
  for (const auto& [name, v] : c.attrs.items()) {
    spora_attr_t a{};
    a.struct_size = sizeof(a);
    a.name = name.c_str();
    a.type = static_cast<int32_t>(v.type);
    a.i = v.i;
    a.f = v.f;
    a.ints = v.ints.data();
    a.floats = v.floats.data();
    a.count = v.type == AttrType::kInts ? v.ints.size() : v.type == AttrType::kFloats ? v.floats.size() : 0;
    a.s = v.s.c_str();
    attrs.push_back(a);
  }
  spora_kernel_desc_t d{};
  d.struct_size = sizeof(d);
  d.op = op.name.c_str();
  d.num_inputs = static_cast<size_t>(call.num_inputs);
  d.inputs = ins;
  d.num_outputs = static_cast<size_t>(call.num_outputs);
  d.outputs = outs;
  d.num_attrs = attrs.size();
  d.attrs = attrs.data();
  if (spora_plugin_error_t* e = api_->kernel_create(index_, &d, &entry->kernel, &entry->workspace))
    raise(e, "[" + op.name + "] on " + name_);
  logger().debug("[{}] planned kernel on {}", op.name, name_);
  kernels_.emplace(h, entry);
  return entry;
}

void Device::launch(const KernelEntry& k, const spora_devptr_t* inputs, const spora_devptr_t* outputs) {
  check_alive();
  spora_stream_t* s = stream();
  if (k.workspace == 0) {
    if (spora_plugin_error_t* e = api_->kernel_launch(k.kernel, inputs, outputs, nullptr, s))
      raise(e, "[" + k.op->name + "] on " + name_);
    return;
  }
  if (k.workspace > kSharedWorkspaceMax) {
    // Freed after the launch is queued: plugins defer frees past queued work.
    const Buffer scratch(this, k.workspace);
    if (spora_plugin_error_t* e = api_->kernel_launch(k.kernel, inputs, outputs, scratch.ptr(), s))
      raise(e, "[" + k.op->name + "] on " + name_);
    return;
  }
  std::lock_guard<std::mutex> lock(workspace_mu_);
  // Growing frees the old buffer; plugins defer frees past queued work.
  if (!workspace_ || workspace_->bytes() < k.workspace) {
    workspace_.reset();
    workspace_ = std::make_shared<Buffer>(this, k.workspace);
  }
  if (spora_plugin_error_t* e = api_->kernel_launch(k.kernel, inputs, outputs, workspace_->ptr(), s))
    raise(e, "[" + k.op->name + "] on " + name_);
}

void Device::launch(const KernelEntry& k, const spora_devptr_t* inputs, const spora_devptr_t* outputs,
                    spora_devptr_t workspace) {
  check_alive();
  if (k.workspace && !workspace) fail(Code::kInternal, "[{}] on {}: launched without its {}-byte workspace", k.op->name, name_, k.workspace);
  if (spora_plugin_error_t* e = api_->kernel_launch(k.kernel, inputs, outputs, k.workspace ? workspace : nullptr, stream()))
    raise(e, "[" + k.op->name + "] on " + name_);
}

// ---- stream capture ----

bool Device::has_capture() const {
  return SPORA_STRUCT_HAS(api_, spora_device_api_t, captured_destroy) && api_->capture_begin && api_->capture_end &&
         api_->captured_launch && api_->captured_destroy;
}

Device::Captured::~Captured() {
  if (spora_plugin_error_t* e = device_->api_->captured_destroy(handle_)) {
    logger().warn("[{}] captured_destroy: {}", device_->name(), e->message ? e->message : "(no message)");
    e->destroy(e);
  }
}

void Device::begin_capture() {
  check_alive();
  if (!has_capture()) fail(Code::kUnimplemented, "[{}] the plugin has no stream capture (plugin ABI 1.2)", name_);
  if (tl_capturing == this) fail(Code::kInternal, "[{}] begin_capture: this thread already captures", name_);
  std::unique_lock<std::mutex> capture(capture_mu_);
  if (spora_plugin_error_t* e = api_->capture_begin(index_, &capture_stream_)) raise(e, "[" + name_ + "] capture_begin");
  tl_capturing = this;
  capture.release();  // end_capture unlocks it
}

std::shared_ptr<Device::Captured> Device::end_capture() {
  if (tl_capturing != this) fail(Code::kInternal, "[{}] end_capture without begin_capture on this thread", name_);
  tl_capturing = nullptr;
  std::unique_lock<std::mutex> capture(capture_mu_, std::adopt_lock);
  spora_captured_t* handle = nullptr;
  spora_stream_t* recording = std::exchange(capture_stream_, nullptr);
  if (spora_plugin_error_t* e = api_->capture_end(recording, &handle)) raise(e, "[" + name_ + "] capture_end");
  if (!handle) fail(Code::kInternal, "[{}] capture_end returned no graph and no error", name_);
  return std::make_shared<Captured>(this, handle);
}

void Device::launch_captured(const Captured& c) {
  check_alive();
  if (spora_plugin_error_t* e = api_->captured_launch(c.handle(), stream()))
    raise(e, "[" + name_ + "] captured_launch");
}


}  // namespace spora
