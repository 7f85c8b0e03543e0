#include "data/worker_pool.h"

#include <system_error>

#include "support/error.h"

namespace spora::data {

WorkerPool::WorkerPool(int threads) {
  try {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
  } catch (const std::system_error& e) {
    // Out of threads (EAGAIN under a process limit): stop the ones started,
    // since destroying a joinable std::thread would terminate the process.
    stop_and_join();
    fail(Code::kOutOfMemory, "[dataset] map: cannot start worker thread {} of {}: {}", threads_.size() + 1, threads,
         e.what());
  }
}

WorkerPool::~WorkerPool() { stop_and_join(); }

void WorkerPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void WorkerPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkerPool::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop_ and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace spora::data
