#include "sched/host_errors.h"

#include <mutex>

#include "support/log.h"

namespace spora::sched {

class HostErrors {
 public:
  ~HostErrors() {
    if (first_)
      logger().error("[graph] a host callback failed after its caller's thread ended, never reported: {}",
                     first_->what());
  }
  void record(Error e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_) {
      first_ = std::make_unique<Error>(std::move(e));
      return;
    }
    logger().warn("[graph] another host callback failed before the first failure was reported: {}", e.what());
  }
  std::unique_ptr<Error> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(first_);
  }

 private:
  std::mutex mu_;
  std::unique_ptr<Error> first_;
};

namespace {
thread_local std::shared_ptr<HostErrors> t_errors;
}  // namespace

std::shared_ptr<HostErrors> this_thread_host_errors() {
  if (!t_errors) t_errors = std::make_shared<HostErrors>();
  return t_errors;
}

void record_host_error(HostErrors& errors, Error e) { errors.record(std::move(e)); }

void raise_host_error() {
  if (!t_errors) return;
  if (std::unique_ptr<Error> e = t_errors->take()) throw Error(e->code(), e->what());
}

}  // namespace spora::sched
