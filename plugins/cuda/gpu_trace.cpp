#include "gpu_trace.h"

#include <pthread.h>

#include <utility>

#include "trace_hooks.h"

namespace spora::gpu {
namespace {

#if defined(SPORA_GPU_HIP)
constexpr const char* kLaunchCategory = "rocm.launch";
constexpr const char* kKernelCategory = "rocm.kernel";
constexpr const char* kCopyCategory = "rocm.copy";
#else
constexpr const char* kLaunchCategory = "cuda.launch";
constexpr const char* kKernelCategory = "cuda.kernel";
constexpr const char* kCopyCategory = "cuda.copy";
#endif

}  // namespace

const char* StreamTrace::category(Kind kind) { return kind == Kind::kCopy ? kCopyCategory : kKernelCategory; }

StreamTrace::StreamTrace(const spora_host_t* host, int32_t device, std::string track)
    : host_(host), device_(device), track_(std::move(track)) {}

StreamTrace::~StreamTrace() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();  // it drains what was handed to it first
  for (cudaEvent_t e : pool_) (void)cudaEventDestroy(e);
}

cudaEvent_t StreamTrace::take_event() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
  }
  // Ordering only: no timestamps to take.
  cudaEvent_t e = nullptr;
  return cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess ? e : nullptr;
}

void StreamTrace::give_back(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.push_back(e);
}

StreamTrace::Mark StreamTrace::before(cudaStream_t stream, Kind kind, const char* name) {
  Mark m;
  m.kind = kind;
  m.name = name ? name : "";
  m.launch = spora::plugin::trace_begin(host_, kLaunchCategory, m.name);
  if (!m.launch) return m;
  m.start = take_event();
  if (m.start && cudaEventRecord(m.start, stream) != cudaSuccess) {
    give_back(m.start);
    m.start = nullptr;
  }
  return m;
}

void StreamTrace::after(Mark& m, cudaStream_t stream) {
  if (!m.launch) return;
  Item it;
  it.launch = m.launch;
  it.kind = m.kind;
  it.name = m.name;
  it.start = m.start;
  m.launch = 0;
  m.start = nullptr;
  if (it.start) {
    it.end = take_event();
    if (it.end && cudaEventRecord(it.end, stream) != cudaSuccess) {
      give_back(it.end);
      it.end = nullptr;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!watcher_.joinable()) {
    try {
      watcher_ = std::thread([this] { watch(); });
    } catch (...) {
      // No thread, no trace of this work (the launch itself went through).
      if (it.start) pool_.push_back(it.start);
      if (it.end) pool_.push_back(it.end);
      return;
    }
  }
  items_.push_back(std::move(it));
  cv_.notify_one();
}

void StreamTrace::watch() {
  (void)cudaSetDevice(device_);
  pthread_setname_np(pthread_self(), track_.substr(0, 15).c_str());  // the profiler's track name
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;
      it = std::move(items_.front());
      items_.pop_front();
    }
    // A failed device reports its error here at once: the spans still end.
    if (it.start) (void)cudaEventSynchronize(it.start);
    spora::plugin::trace_end(host_, it.launch);  // a hand-off: the arrow ends on the span begun next
    const uint64_t span = spora::plugin::trace_begin(host_, category(it.kind), it.name.c_str());
    if (it.end) (void)cudaEventSynchronize(it.end);
    spora::plugin::trace_end(host_, span);
    if (it.start) give_back(it.start);
    if (it.end) give_back(it.end);
  }
}

}  // namespace spora::gpu
