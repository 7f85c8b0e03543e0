// Stream worker threads and event generations (see sim_stream.h).
#include "sim_stream.h"

#include <pthread.h>
#include <xmmintrin.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>

#include "error.h"

namespace spora::sim {
namespace {

std::atomic<uint64_t> g_stream_serial{0};

}  // namespace

// ---- Stream ----

Stream::Stream(std::shared_ptr<Device> device) : device_(std::move(device)) {
  const uint64_t serial = g_stream_serial.fetch_add(1, std::memory_order_relaxed);
  const std::string name = "sim" + std::to_string(device_->index()) + "-s" + std::to_string(serial);
  worker_ = std::thread([this, name] {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    run();
  });
}

Stream::~Stream() {
  if (spora_plugin_error_t* err = close()) err->destroy(err);
}

spora_plugin_error_t* Stream::enqueue(Task task, Where where, bool wants_status, uint64_t* ticket,
                                      std::vector<Range> ranges) {
  const auto due = std::chrono::steady_clock::now() + device_->lag();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                                       "[sim] cannot enqueue work on a stream that is being destroyed");
    }
    if (capturing_) {
      if (capture_broken_.empty()) {
        if (where == Where::kCallbackThread) capture_broken_ = "a host callback was enqueued";
        else if (where == Where::kMarker) capture_broken_ = "an event was recorded or waited for";
        else if (ticket) capture_broken_ = "a copy the caller waits for was enqueued";
      }
      if (!capture_broken_.empty()) {
        return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                                         "[sim] the stream's capture is broken: " + capture_broken_);
      }
      recorded_.push_back(Recorded{std::move(task), where, std::move(ranges)});
      return nullptr;
    }
    queue_.push_back(Item{std::move(task), where, wants_status, due});
    ++enqueued_;
    if (ticket) *ticket = enqueued_;
  }
  work_cv_.notify_one();
  return nullptr;
}

spora_plugin_error_t* Stream::begin_capture() {
  std::lock_guard<std::mutex> lock(mu_);
  if (capturing_)
    return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] capture_begin: the stream already captures");
  capturing_ = true;
  capture_broken_.clear();
  recorded_.clear();
  return nullptr;
}

spora_plugin_error_t* Stream::end_capture(std::vector<Recorded>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capturing_)
    return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] capture_end: the stream is not capturing");
  capturing_ = false;
  std::vector<Recorded> work = std::move(recorded_);
  recorded_.clear();
  if (!capture_broken_.empty()) {
    return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                                     "[sim] capture_end: the capture broke: " + std::exchange(capture_broken_, ""));
  }
  *out = std::move(work);
  return nullptr;
}

bool Stream::capturing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capturing_;
}

spora_plugin_error_t* Stream::refuse_capture(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capturing_) return nullptr;
  if (capture_broken_.empty()) capture_broken_ = why;
  return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                                   "[sim] " + why + " (not allowed while capturing; the capture is broken)");
}

void Stream::wait_for(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  // Someone waits for these items: their lag has done its job.
  if (ticket > hurry_) {
    hurry_ = ticket;
    lag_cv_.notify_all();
  }
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void Stream::drain() {
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = enqueued_;
  }
  wait_for(target);
}

spora_plugin_error_t* Stream::synchronize() {
  drain();
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(first_error_, nullptr);
}

bool Stream::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ == enqueued_;
}

spora_plugin_error_t* Stream::close() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  lag_cv_.notify_all();
  // The worker empties the queue before it exits, so this also drains.
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(first_error_, nullptr);
}

spora_plugin_error_t* Stream::execute(Item& item, uint64_t ticket, const spora_plugin_error_t* status) {
  if (item.where != Where::kMarker) {
    // The device runs behind the host by the lag, unless the host already
    // waits for this item (then being late only costs time).
    if (device_->lag().count() > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      lag_cv_.wait_until(lock, item.due, [&] { return stopping_ || hurry_ >= ticket; });
    }
    // A failed device runs nothing more; callbacks are dropped, not called.
    if (device_->failed()) return nullptr;
  }
  spora_plugin_error_t* err = nullptr;
  auto job = [&] { err = spora::plugin::guard("sim", [&] { return item.task(status); }); };
  switch (item.where) {
    case Where::kCopyEngine:
      device_->copy_engine().run(job);
      break;
    case Where::kCallbackThread:
      device_->callbacks().run(job);
      break;
    case Where::kWorker:
    case Where::kMarker:
      job();
      break;
  }
  return err;
}

void Stream::run() {
  // Like the cpu plugin (and accelerators' fast-math defaults), kernels
  // flush denormals to zero; this is the worker's own thread, so the mode is
  // set once and never leaks into the host program.
  _mm_setcsr(_mm_getcsr() | 0x8040u);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    spora_plugin_error_t* err = nullptr;
    {
      const uint64_t ticket = completed_ + 1;  // items finish in order, one at a time
      Item item = std::move(queue_.front());
      queue_.pop_front();
      // Callbacks get a private copy of the first error: the original may be
      // handed to (and destroyed by) a concurrent stream_synchronize caller.
      spora_plugin_error_t* status = nullptr;
      if (item.wants_status && first_error_) {
        status = spora::plugin::make_error(first_error_->code, first_error_->message);
      }
      lock.unlock();
      err = execute(item, ticket, status);
      if (status) status->destroy(status);
      // `item` (and whatever its task captured) is released here, unlocked.
    }
    lock.lock();
    if (err) {
      if (!first_error_) {
        first_error_ = err;
      } else {
        err->destroy(err);
      }
    }
    ++completed_;
    done_cv_.notify_all();
  }
}

// ---- Event ----

uint64_t Event::begin_record() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++target_;
}

void Event::mark_reached(uint64_t gen, Clock::time_point when) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (gen <= reached_) return;
    reached_ = gen;
    when_ = when;
  }
  cv_.notify_all();
}

uint64_t Event::target() const {
  std::lock_guard<std::mutex> lock(mu_);
  return target_;
}

bool Event::reached(uint64_t gen) const {
  std::lock_guard<std::mutex> lock(mu_);
  return reached_ >= gen;
}

void Event::wait(uint64_t gen) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return reached_ >= gen; });
}

bool Event::timestamp(Clock::time_point* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (target_ == 0 || reached_ < target_) return false;
  *out = when_;
  return true;
}

}  // namespace spora::sim
