// Non-blocking NCCL communicators with polling, a watchdog for timeouts, and
// aborts that are safe from any thread (see nccl_comm.h).
#include "nccl_comm.h"

#include "error.h"

namespace spora::nccl {

using spora::plugin::make_error;

namespace {
// Poll interval: short enough that a timeout fires within a millisecond or
// two, long enough not to spin a core.
void nap() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }
}  // namespace

Comm::~Comm() {
  destroy();
}

spora_plugin_error_t* Comm::sticky() {
  std::lock_guard<std::mutex> lock(err_mu_);
  if (err_code_ == 0) return nullptr;
  return make_error(err_code_, err_);
}

void Comm::abort(int32_t code, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(err_mu_);
    if (err_code_ == 0) {
      err_code_ = code;
      err_ = why;
    }
  }
  if (aborted_.exchange(true)) return;
  std::unique_lock<std::shared_mutex> lock(use_);
  lib()->ncclCommAbort(comm_);
  host_log(SPORA_LOG_WARN, why);
}

spora_plugin_error_t* Comm::health() {
  if (auto* e = sticky()) return e;
  std::shared_lock<std::shared_mutex> lock(use_);
  if (aborted_) return make_error(SPORA_PLUGIN_ABORTED, "[nccl] communicator aborted");
  ncclResult_t st = ncclSuccess;
  if (ncclResult_t r = lib()->ncclCommGetAsyncError(comm_, &st); r != ncclSuccess)
    return nccl_error(r, "comm_async_error", "ncclCommGetAsyncError");
  if (st != ncclSuccess && st != ncclInProgress) return nccl_error(st, "asynchronous failure", "the communicator");
  return nullptr;
}

spora_plugin_error_t* Comm::wait_issued(const char* what, int64_t timeout_ms) {
  const auto deadline = deadline_after(timeout_ms);
  for (;;) {
    {
      std::shared_lock<std::shared_mutex> lock(use_);
      if (aborted_) {
        if (auto* e = sticky()) return e;
        return make_error(SPORA_PLUGIN_ABORTED, std::string("[nccl] ") + what + ": communicator aborted");
      }
      ncclResult_t st = ncclSuccess;
      if (ncclResult_t r = lib()->ncclCommGetAsyncError(comm_, &st); r != ncclSuccess)
        return nccl_error(r, what, "ncclCommGetAsyncError");
      if (st == ncclSuccess) return nullptr;
      if (st != ncclInProgress) {
        spora_plugin_error_t* e = nccl_error(st, what, "the communicator");
        lock.unlock();
        abort(e->code, e->message);
        return e;
      }
    }
    if (Clock::now() >= deadline) {
      const std::string why = std::string("[nccl] ") + what + ": not issued within " + std::to_string(timeout_ms) +
                              " ms; communicator aborted";
      abort(SPORA_PLUGIN_TIMEOUT, why);
      return make_error(SPORA_PLUGIN_TIMEOUT, why);
    }
    nap();
  }
}

spora_plugin_error_t* Comm::run(const char* what, void* native_stream, int64_t timeout_ms,
                                const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& issue) {
  if (auto* e = sticky()) return e;
  if (cudaError_t r = cudaSetDevice(device_); r != cudaSuccess) return cuda_error(r, what, "cudaSetDevice");
  cudaStream_t stream = static_cast<cudaStream_t>(native_stream);
  if (!stream) {
    if (!own_stream_)
      if (cudaError_t r = cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking); r != cudaSuccess)
        return cuda_error(r, what, "cudaStreamCreateWithFlags");
    stream = own_stream_;
  }
  {
    std::shared_lock<std::shared_mutex> lock(use_);
    if (aborted_) return make_error(SPORA_PLUGIN_ABORTED, std::string("[nccl] ") + what + ": communicator aborted");
    const ncclResult_t r = issue(comm_, stream);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_error(r, what, "the NCCL call");
  }
  if (auto* e = wait_issued(what, timeout_ms)) return e;
  if (native_stream && timeout_ms < 0) return nullptr;  // stream-ordered, no deadline
  cudaEvent_t done = nullptr;
  if (cudaError_t r = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); r != cudaSuccess)
    return cuda_error(r, what, "cudaEventCreateWithFlags");
  if (cudaError_t r = cudaEventRecord(done, stream); r != cudaSuccess) {
    cudaEventDestroy(done);
    return cuda_error(r, what, "cudaEventRecord");
  }
  if (native_stream) {  // the watchdog enforces the deadline
    std::lock_guard<std::mutex> lock(wd_mu_);
    pending_.push_back({done, deadline_after(timeout_ms), what, timeout_ms});
    if (!wd_.joinable()) wd_ = std::thread([this] { watchdog(); });
    wd_cv_.notify_one();
    return nullptr;
  }
  // Synchronous: poll here.
  const auto deadline = deadline_after(timeout_ms);
  for (;;) {
    const cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) {
      cudaEventDestroy(done);
      return cuda_error(q, what, "cudaEventQuery");
    }
    if (auto* e = health()) {
      cudaEventDestroy(done);
      abort(e->code, e->message);
      return e;
    }
    if (Clock::now() >= deadline) {
      cudaEventDestroy(done);
      const std::string why = std::string("[nccl] ") + what + ": did not complete within " +
                              std::to_string(timeout_ms) + " ms; communicator aborted";
      abort(SPORA_PLUGIN_TIMEOUT, why);
      return make_error(SPORA_PLUGIN_TIMEOUT, why);
    }
    nap();
  }
  cudaEventDestroy(done);
  return nullptr;
}

void Comm::watchdog() {
  cudaSetDevice(device_);
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(wd_mu_);
      wd_cv_.wait(lock, [&] { return wd_stop_ || !pending_.empty(); });
      if (pending_.empty()) return;
      p = pending_.front();
    }
    bool finished = false;
    const cudaError_t q = cudaEventQuery(p.done);
    if (q == cudaSuccess) {
      finished = true;
    } else if (q != cudaErrorNotReady || aborted_) {
      abort(SPORA_PLUGIN_ABORTED, "[nccl] " + p.what + ": " + (aborted_ ? "communicator aborted" : cudaGetErrorString(q)));
      finished = true;
    } else if (spora_plugin_error_t* e = health()) {
      abort(e->code, e->message);
      e->destroy(e);
      finished = true;
    } else if (Clock::now() >= p.deadline) {
      abort(SPORA_PLUGIN_TIMEOUT, "[nccl] " + p.what + ": did not complete within " + std::to_string(p.timeout_ms) +
                                      " ms; communicator aborted");
      finished = true;
    }
    if (finished) {
      cudaEventDestroy(p.done);
      std::lock_guard<std::mutex> lock(wd_mu_);
      pending_.pop_front();
    } else {
      nap();
    }
  }
}

spora_plugin_error_t* Comm::rank(int32_t* rank, int32_t* size) {
  std::shared_lock<std::shared_mutex> lock(use_);
  if (aborted_) return make_error(SPORA_PLUGIN_ABORTED, "[nccl] comm_rank: communicator aborted");
  int r = 0, n = 0;
  if (ncclResult_t e = lib()->ncclCommUserRank(comm_, &r); e != ncclSuccess)
    return nccl_error(e, "comm_rank", "ncclCommUserRank");
  if (ncclResult_t e = lib()->ncclCommCount(comm_, &n); e != ncclSuccess)
    return nccl_error(e, "comm_rank", "ncclCommCount");
  if (rank) *rank = r;
  if (size) *size = n;
  return nullptr;
}

spora_plugin_error_t* Comm::split(int32_t color, int32_t key, ncclComm_t* out) {
  {
    std::shared_lock<std::shared_mutex> lock(use_);
    if (aborted_) return make_error(SPORA_PLUGIN_ABORTED, "[nccl] comm_split: communicator aborted");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = lib()->ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, out, &config);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_error(r, "comm_split", "ncclCommSplit");
  }
  // The parent reports the split's progress too; the child is polled by
  // the caller once wrapped.
  return wait_issued("comm_split", -1);
}

spora_plugin_error_t* Comm::barrier_buffer(void** out) {
  if (!barrier_buf_) {
    if (cudaError_t r = cudaSetDevice(device_); r != cudaSuccess) return cuda_error(r, "barrier", "cudaSetDevice");
    if (cudaError_t r = cudaMalloc(&barrier_buf_, sizeof(float)); r != cudaSuccess)
      return cuda_error(r, "barrier", "cudaMalloc");
  }
  *out = barrier_buf_;
  return nullptr;
}

spora_plugin_error_t* Comm::destroy() {
  {
    std::lock_guard<std::mutex> lock(wd_mu_);
    wd_stop_ = true;
  }
  wd_cv_.notify_all();
  // The watchdog drains what is pending (each item finishes, fails or times out).
  if (wd_.joinable()) wd_.join();
  spora_plugin_error_t* err = nullptr;
  if (comm_ && !aborted_.exchange(true)) {
    std::unique_lock<std::shared_mutex> lock(use_);
    const ncclResult_t r = lib()->ncclCommDestroy(comm_);
    if (r != ncclSuccess && r != ncclInProgress) err = nccl_error(r, "comm_destroy", "ncclCommDestroy");
  }
  comm_ = nullptr;
  if (own_stream_) cudaStreamDestroy(own_stream_);
  own_stream_ = nullptr;
  if (barrier_buf_) cudaFree(barrier_buf_);
  barrier_buf_ = nullptr;
  return err;
}

}  // namespace spora::nccl
