// Copy engine, host-callback thread, failure state and pinned memory of the
// simulated devices (see sim_device.h).
#include "sim_device.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "error.h"

namespace spora::sim {
namespace {

using spora::plugin::make_error;

thread_local int32_t tls_callback_device = -1;

void name_thread(const std::string& name) {
  // Linux keeps 15 characters; the names help in gdb, top and the tests.
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

// ---- EngineThread ----

EngineThread::EngineThread(std::function<void()> on_start) {
  thread_ = std::thread([this, on_start = std::move(on_start)] { loop(on_start); });
}

EngineThread::~EngineThread() { stop(); }

void EngineThread::run(const std::function<void()>& job) {
  Job j{&job};
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    job();
    return;
  }
  queue_.push_back(&j);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return j.done; });
}

void EngineThread::stop() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineThread::loop(const std::function<void()>& on_start) {
  on_start();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    Job* job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    (*job->fn)();  // the jobs the streams hand over catch their own exceptions
    lock.lock();
    job->done = true;
    done_cv_.notify_all();
  }
}

// ---- Device ----

Device::Device(int32_t index, DeviceConfig config)
    : index_(index),
      config_(config),
      copy_engine_([index] { name_thread("sim" + std::to_string(index) + "-copy"); }),
      callbacks_([index] {
        name_thread("sim" + std::to_string(index) + "-callback");
        tls_callback_device = index;
      }) {}

void Device::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(fault_mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  fault_ = message;
  failed_.store(true, std::memory_order_release);
}

spora_plugin_error_t* Device::sticky_error(const char* fn) const {
  if (!failed()) return nullptr;
  std::lock_guard<std::mutex> lock(fault_mu_);
  return make_error(SPORA_PLUGIN_UNAVAILABLE, "[sim] " + std::string(fn) + ": device " + std::to_string(index_) +
                                                  " failed earlier (sticky, like CUDA): " + fault_);
}

void Device::stop() {
  copy_engine_.stop();
  callbacks_.stop();
}

// ---- thread roles ----

int32_t callback_device_of_this_thread() { return tls_callback_device; }

spora_plugin_error_t* refuse_in_callback(const char* fn, int32_t device) {
  if (tls_callback_device < 0 || tls_callback_device != device) return nullptr;
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                    std::string("[sim] ") + fn +
                        " called from a host callback: a real runtime forbids waiting for the device's work "
                        "there (the stream cannot pass the running callback, so the wait would never end; CUDA "
                        "forbids runtime calls in host functions). Wait on the host thread instead");
}

// ---- PinnedRegistry ----

PinnedRegistry& PinnedRegistry::get() {
  // Never destroyed: the host may free pinned memory from static destructors.
  static PinnedRegistry* registry = new PinnedRegistry;
  return *registry;
}

spora_plugin_error_t* PinnedRegistry::allocate(size_t size, void** out) {
  constexpr size_t kPage = 4096;
  if (size > (SIZE_MAX - kPage)) {
    return make_error(SPORA_PLUGIN_OUT_OF_MEMORY,
                      "[sim] host_alloc_pinned: " + std::to_string(size) + " bytes is more than can be allocated");
  }
  // Page-aligned like cudaHostAlloc; a size of 0 still gets a unique address.
  const size_t rounded = size == 0 ? kPage : (size + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, rounded);
  if (!p) {
    return make_error(SPORA_PLUGIN_OUT_OF_MEMORY,
                      "[sim] host_alloc_pinned: cannot allocate " + std::to_string(size) + " bytes of host memory");
  }
  try {
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(reinterpret_cast<uintptr_t>(p), size);
  } catch (...) {
    std::free(p);
    throw;  // the table function's guard reports it
  }
  *out = p;
  return nullptr;
}

spora_plugin_error_t* PinnedRegistry::release(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) {
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                        "[sim] host_free_pinned: " + pointer_text(ptr) +
                            " was not returned by host_alloc_pinned (or was already freed)");
    }
    live_.erase(it);
  }
  std::free(ptr);
  return nullptr;
}

bool PinnedRegistry::contains(const void* p, size_t size) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(begin);
  if (it == live_.begin()) return false;
  --it;
  const uintptr_t start = it->first;
  // Size-0 allocations own one byte of address space.
  const size_t len = it->second == 0 ? 1 : it->second;
  return begin >= start && begin - start <= len && size <= len - (begin - start);
}

}  // namespace spora::sim
