// One pass (epoch) over a dataset. A producer thread pulls the node chain
// and keeps up to `prefetch` finished rows (batches, after batch()) in a
// bounded queue, so the pipeline runs while the caller trains on the
// previous batch. Errors raised in the pipeline reach the caller at the
// next() that would have returned the failed row.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/dataset.h"

namespace spora::data {

class Iterator {
 public:
  Iterator(DatasetPtr dataset, uint64_t epoch, size_t prefetch);
  ~Iterator();  // stops the producer (mid-epoch is fine)
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;

  // The next row, or false after the last. Rethrows a pipeline error (then
  // keeps failing with it).
  bool next(Row& out);
  const Dataset& dataset() const { return *dataset_; }

 private:
  void produce();
  DatasetPtr dataset_;
  NodePtr root_;
  uint64_t epoch_;
  size_t cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Row> queue_;
  bool finished_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread producer_;  // last: started once everything above exists
};

}  // namespace spora::data
