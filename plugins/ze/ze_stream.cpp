// Streams, events and host callbacks over immediate command lists (see
// ze_stream.h for the design and its costs).
#include "ze_stream.h"

#include <atomic>
#include <cstdint>
#include <string>

#include "error.h"

namespace spora::ze {

using spora::plugin::make_error;

namespace {
constexpr uint32_t kPoolSize = 64;
}

EventAllocator::~EventAllocator() {
  for (ze_event_handle_t e : all_) zeEventDestroy(e);
  for (ze_event_pool_handle_t p : pools_) zeEventPoolDestroy(p);
}

spora_plugin_error_t* EventAllocator::acquire(ze_event_handle_t* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC};
    pd.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
    pd.count = kPoolSize;
    ze_event_pool_handle_t pool = nullptr;
    ze_device_handle_t dev = dev_;
    SPORA_ZE_CHECK(zeEventPoolCreate(ctx_, &pd, 1, &dev, &pool), "event pool");
    pools_.push_back(pool);
    for (uint32_t i = 0; i < kPoolSize; ++i) {
      ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC};
      ed.index = i;
      ed.signal = ZE_EVENT_SCOPE_FLAG_HOST;  // the host reads what the device signals
      ed.wait = ZE_EVENT_SCOPE_FLAG_HOST;
      ze_event_handle_t ev = nullptr;
      SPORA_ZE_CHECK(zeEventCreate(pool, &ed, &ev), "event pool");
      all_.push_back(ev);
      free_.push_back(ev);
    }
  }
  *out = free_.back();
  free_.pop_back();
  SPORA_ZE_CHECK(zeEventHostReset(*out), "event");
  return nullptr;
}

void EventAllocator::release(ze_event_handle_t ev) {
  if (!ev) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(ev);
}

// ---- streams ----

spora_plugin_error_t* Stream::create() {
  ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC};
  qd.ordinal = dev_->compute_ordinal;
  qd.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  qd.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  SPORA_ZE_CHECK(zeCommandListCreateImmediate(dev_->context, dev_->device, &qd, &list_), "stream_create");
  // The profiler's device track of this stream: "ze0-s3".
  static std::atomic<uint32_t> next_number{1};
  trace_ = std::make_unique<StreamTrace>(g_host.load(std::memory_order_acquire), dev_->events.get(),
                                         "ze" + std::to_string(device_) + "-s" +
                                             std::to_string(next_number.fetch_add(1, std::memory_order_relaxed)));
  return dev_->events->acquire(&sync_event_);
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    cb_stop_ = true;
  }
  cb_cv_.notify_all();
  if (cb_thread_.joinable()) cb_thread_.join();
  // The watcher waits for points the list still has to reach (callbacks
  // may have held it until now), so it goes before the list.
  trace_.reset();
  if (list_) zeCommandListDestroy(list_);
  dev_->events->release(sync_event_);
  dev_->events->release(query_event_);
  for (ze_event_handle_t e : retired_) dev_->events->release(e);
}

spora_plugin_error_t* Stream::enqueue(const char* what,
                                      const std::function<ze_result_t(ze_command_list_handle_t)>& append,
                                      const char* call) {
  std::lock_guard<std::mutex> lock(mu_);
  ++appended_;
  if (ze_result_t r = append(list_); r != ZE_RESULT_SUCCESS) return ze_error(r, what, call);
  SPORA_ZE_CHECK(zeCommandListAppendBarrier(list_, nullptr, 0, nullptr), what);
  return nullptr;
}

spora_plugin_error_t* Stream::locked(const std::function<spora_plugin_error_t*(ze_command_list_handle_t)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  ++appended_;
  return fn(list_);
}

StreamTrace::Mark Stream::trace_before(StreamTrace::Kind kind, const char* name) {
  if (!trace_) return {};
  StreamTrace::Mark m = trace_->begin(kind, name);  // no session: the only call
  if (m.launch) {
    std::lock_guard<std::mutex> lock(mu_);
    ++appended_;
    m.start = trace_->signal_point(list_);
  }
  return m;
}

void Stream::trace_after(StreamTrace::Mark& m) {
  if (!m.launch) return;
  ze_event_handle_t end = nullptr;
  if (m.start) {  // without a start point the work is not waited for at all
    std::lock_guard<std::mutex> lock(mu_);
    ++appended_;
    end = trace_->signal_point(list_);
  }
  trace_->hand_over(m, end);
}

void Stream::retire(ze_event_handle_t ev) {
  std::lock_guard<std::mutex> lock(cb_mu_);
  retired_.push_back(ev);
}

spora_plugin_error_t* Stream::synchronize() {
  {
    // The sync event is private to this call: the lock is held until the
    // device signalled it, so no other synchronize can reset it meanwhile.
    // A barrier that signals: reached once every earlier command finished.
    std::lock_guard<std::mutex> lock(mu_);
    SPORA_ZE_CHECK(zeEventHostReset(sync_event_), "stream_synchronize");
    SPORA_ZE_CHECK(zeCommandListAppendBarrier(list_, sync_event_, 0, nullptr), "stream_synchronize");
    SPORA_ZE_CHECK(zeEventHostSynchronize(sync_event_, UINT64_MAX), "stream_synchronize");
  }
  // Everything before the sync point ran, callbacks included.
  std::vector<ze_event_handle_t> done;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    if (cb_queue_.empty()) done.swap(retired_);
  }
  for (ze_event_handle_t e : done) dev_->events->release(e);
  return nullptr;
}

spora_plugin_error_t* Stream::query(int32_t* done) {
  std::lock_guard<std::mutex> lock(mu_);
  // A new point only when work was appended since the last query: the
  // previous point's signal may still be on its way, so that event is
  // retired rather than reset (a late signal would fake completion).
  if (!query_event_ || query_appended_ != appended_) {
    if (query_event_) retire(query_event_);
    query_event_ = nullptr;
    if (auto* e = dev_->events->acquire(&query_event_)) return e;
    SPORA_ZE_CHECK(zeCommandListAppendBarrier(list_, query_event_, 0, nullptr), "stream_query");
    query_appended_ = appended_;
  }
  const ze_result_t r = zeEventQueryStatus(query_event_);
  if (r != ZE_RESULT_SUCCESS && r != ZE_RESULT_NOT_READY) return ze_error(r, "stream_query", "zeEventQueryStatus");
  *done = r == ZE_RESULT_SUCCESS;
  return nullptr;
}

spora_plugin_error_t* Stream::wait_event(ze_event_handle_t ev) {
  return enqueue("stream_wait_event", [&](ze_command_list_handle_t l) { return zeCommandListAppendWaitOnEvents(l, 1, &ev); },
                 "zeCommandListAppendWaitOnEvents");
}

spora_plugin_error_t* Stream::add_callback(spora_host_callback_fn fn, void* user_data) {
  Callback cb{nullptr, nullptr, fn, user_data};
  if (auto* e = dev_->events->acquire(&cb.reached)) return e;
  if (auto* e = dev_->events->acquire(&cb.release)) {
    dev_->events->release(cb.reached);
    return e;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++appended_;
    ze_result_t r = zeCommandListAppendBarrier(list_, cb.reached, 0, nullptr);
    if (r == ZE_RESULT_SUCCESS) r = zeCommandListAppendWaitOnEvents(list_, 1, &cb.release);
    if (r != ZE_RESULT_SUCCESS) {
      dev_->events->release(cb.reached);
      dev_->events->release(cb.release);
      return ze_error(r, "stream_add_callback", "zeCommandListAppendBarrier/WaitOnEvents");
    }
  }
  std::lock_guard<std::mutex> lock(cb_mu_);
  if (!cb_thread_.joinable()) cb_thread_ = std::thread([this] { worker(); });
  cb_queue_.push_back(cb);
  cb_cv_.notify_one();
  return nullptr;
}

void Stream::worker() {
  for (;;) {
    Callback cb;
    {
      std::unique_lock<std::mutex> lock(cb_mu_);
      cb_cv_.wait(lock, [&] { return cb_stop_ || !cb_queue_.empty(); });
      if (cb_queue_.empty()) return;
      cb = cb_queue_.front();
    }
    const ze_result_t r = zeEventHostSynchronize(cb.reached, UINT64_MAX);
    spora_plugin_error_t* status =
        r == ZE_RESULT_SUCCESS ? nullptr : ze_error(r, "stream callback", "zeEventHostSynchronize");
    cb.fn(cb.user_data, status);
    if (status) status->destroy(status);
    zeEventHostSignal(cb.release);
    std::lock_guard<std::mutex> lock(cb_mu_);
    cb_queue_.pop_front();
    retired_.push_back(cb.reached);
    retired_.push_back(cb.release);
  }
}

// ---- events ----

spora_plugin_error_t* Event::create() {
  if (auto* e = dev_->events->acquire(&ev_)) return e;
  ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
  void* p = nullptr;
  SPORA_ZE_CHECK(zeMemAllocHost(dev_->context, &hd, sizeof(uint64_t), sizeof(uint64_t), &p), "event_create");
  stamp_ = static_cast<uint64_t*>(p);
  *stamp_ = 0;
  return nullptr;
}

Event::~Event() {
  if (stamp_) zeMemFree(dev_->context, stamp_);
  dev_->events->release(ev_);
}

spora_plugin_error_t* Event::record(Stream& s) {
  auto* err = s.locked([&](ze_command_list_handle_t l) -> spora_plugin_error_t* {
    // Re-recording moves the point (plugin.h): reset from the host, so a
    // query right after this call already sees the new, unreached point.
    // Unlike CUDA, a wait enqueued earlier on the old point then waits for
    // the new one (a Level Zero wait does not capture the event's state);
    // and re-recording while the old point is still pending on the device
    // is unsupported (the late signal would mark the new point reached).
    SPORA_ZE_CHECK(zeEventHostReset(ev_), "event_record");
    // The timestamp is taken once every earlier command finished.
    SPORA_ZE_CHECK(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), "event_record");
    SPORA_ZE_CHECK(zeCommandListAppendWriteGlobalTimestamp(l, stamp_, ev_, 0, nullptr), "event_record");
    SPORA_ZE_CHECK(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), "event_record");
    return nullptr;
  });
  if (!err) recorded_ = true;
  return err;
}

spora_plugin_error_t* Event::query(int32_t* done) {
  if (!recorded_) {
    *done = 1;  // never recorded counts as reached
    return nullptr;
  }
  const ze_result_t r = zeEventQueryStatus(ev_);
  if (r != ZE_RESULT_SUCCESS && r != ZE_RESULT_NOT_READY) return ze_error(r, "event_query", "zeEventQueryStatus");
  *done = r == ZE_RESULT_SUCCESS;
  return nullptr;
}

spora_plugin_error_t* Event::synchronize() {
  if (!recorded_) return nullptr;
  SPORA_ZE_CHECK(zeEventHostSynchronize(ev_, UINT64_MAX), "event_synchronize");
  return nullptr;
}

}  // namespace spora::ze
