// The profiler's view of a ze stream (see ze_trace.h for the design and
// what its times mean).
#include "ze_trace.h"

#include <pthread.h>

#include <utility>

#include "trace_hooks.h"
#include "ze_stream.h"

namespace spora::ze {

const char* StreamTrace::category(Kind kind) { return kind == Kind::kCopy ? "ze.copy" : "ze.kernel"; }

StreamTrace::StreamTrace(const spora_host_t* host, EventAllocator* events, std::string track)
    : host_(host), events_(events), track_(std::move(track)) {}

StreamTrace::~StreamTrace() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();  // it drains what was handed to it first
}

StreamTrace::Mark StreamTrace::begin(Kind kind, const char* name) {
  Mark m;
  m.kind = kind;
  m.name = name ? name : "";
  m.launch = spora::plugin::trace_begin(host_, "ze.launch", m.name);
  return m;
}

ze_event_handle_t StreamTrace::signal_point(ze_command_list_handle_t list) {
  ze_event_handle_t ev = nullptr;
  if (spora_plugin_error_t* e = events_->acquire(&ev)) {
    e->destroy(e);  // no point to wait for: the work is traced without it
    return nullptr;
  }
  if (zeCommandListAppendBarrier(list, ev, 0, nullptr) != ZE_RESULT_SUCCESS) {
    events_->release(ev);  // never appended: nothing will signal it
    return nullptr;
  }
  return ev;
}

void StreamTrace::hand_over(Mark& m, ze_event_handle_t end) {
  if (!m.launch) return;
  Item it;
  it.launch = m.launch;
  it.kind = m.kind;
  it.name = m.name;
  it.start = m.start;
  it.end = end;
  m.launch = 0;
  m.start = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!watcher_.joinable()) {
    try {
      watcher_ = std::thread([this] { watch(); });
      // The profiler's track name, in place before the thread's first span.
      pthread_setname_np(watcher_.native_handle(), track_.substr(0, 15).c_str());
    } catch (...) {
      // No thread, no trace of this work (it was enqueued all the same).
      // Its events may still be signalled, so they are not recycled: the
      // allocator destroys them with the device.
      return;
    }
  }
  items_.push_back(std::move(it));
  cv_.notify_one();
}

void StreamTrace::watch() {
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;
      it = std::move(items_.front());
      items_.pop_front();
    }
    // A lost device reports its error here at once: the spans still end.
    const bool started = it.start && zeEventHostSynchronize(it.start, UINT64_MAX) == ZE_RESULT_SUCCESS;
    spora::plugin::trace_end(host_, it.launch);  // a hand-off: the arrow ends on the span begun next
    const uint64_t span = spora::plugin::trace_begin(host_, category(it.kind), it.name.c_str());
    const bool ended = it.end && zeEventHostSynchronize(it.end, UINT64_MAX) == ZE_RESULT_SUCCESS;
    spora::plugin::trace_end(host_, span);
    // Only a signalled event is recycled: a late signal must not land on it
    // once it marks other work (the allocator destroys the others).
    if (started) events_->release(it.start);
    if (ended) events_->release(it.end);
  }
}

}  // namespace spora::ze
