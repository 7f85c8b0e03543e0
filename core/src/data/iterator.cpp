#include "data/iterator.h"

#include "support/error.h"

namespace spora::data {

Iterator::Iterator(DatasetPtr dataset, uint64_t epoch, size_t prefetch)
    : dataset_(std::move(dataset)), root_(dataset_->build()), epoch_(epoch), cap_(prefetch < 1 ? 1 : prefetch) {
  producer_ = std::thread([this] { produce(); });
}

Iterator::~Iterator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  producer_.join();
}

void Iterator::produce() {
  try {
    root_->reset(epoch_);
    for (;;) {
      Row r;
      const bool more = root_->next(r);
      std::unique_lock<std::mutex> lock(mu_);
      if (!more) break;
      cv_.wait(lock, [&] { return stop_ || queue_.size() < cap_; });
      if (stop_) return;
      queue_.push_back(std::move(r));
      lock.unlock();
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
}

bool Iterator::next(Row& out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || finished_; });
  if (!queue_.empty()) {
    out = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

}  // namespace spora::data
