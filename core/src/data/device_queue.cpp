#include "data/device_queue.h"

#include <cstring>
#include <string>
#include <utility>

#include "runtime/profiler.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::data {

// One batch in flight: its device tensors, the event after its copies and
// the host memory they read (a pinned staging buffer, or the row itself).
struct DeviceQueue::Slot {
  explicit Slot(Device* d) : device(d), event(d) {}
  ~Slot() {
    if (staging) device->host_free_pinned(staging);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  Device* device;
  Device::Event event;
  void* staging = nullptr;  // pinned, `capacity` bytes
  size_t capacity = 0;
  Row row;  // the bytes sent when there is no pinned memory
  std::vector<Tensor> tensors;
};

namespace {
// Column offsets in a staging buffer: aligned for the DMA engines.
constexpr size_t kStagingAlign = 256;
size_t aligned(size_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }
}  // namespace

bool DeviceQueue::usable(Device* device) {
  return device && !device->unified_memory() && device->has_async() && device->has_events();
}

DeviceQueue::DeviceQueue(Device* device, int32_t depth)
    : device_(device), depth_(depth < 1 ? 1 : depth), pinned_(device && device->has_pinned()) {
  if (!usable(device))
    fail(Code::kInvalidArgument, "[dataset] device queue on {}: the device shares host memory or lacks async "
         "copies and events", device ? device->name() : "no device");
}

DeviceQueue::~DeviceQueue() {
  // The copies may still read the host memory: wait for them first.
  for (auto* q : {&retiring_, &ready_}) {
    for (auto& s : *q) {
      try {
        device_->synchronize(s->event);
      } catch (const std::exception& e) {
        logger().warn("[dataset] device queue on {}: a copy did not finish: {}", device_->name(), e.what());
      }
    }
  }
}

std::unique_ptr<DeviceQueue::Slot> DeviceQueue::take_slot() {
  // The batch handed out last may still be copying (its step has not even
  // been enqueued): reuse only older slots, whose copies ran a step ago.
  if (retiring_.size() < 2) return std::make_unique<Slot>(device_);
  std::unique_ptr<Slot> s = std::move(retiring_.front());
  retiring_.pop_front();
  device_->synchronize(s->event);  // normally reached long ago: returns at once
  s->row.clear();
  s->tensors.clear();
  return s;
}

void DeviceQueue::issue(Row&& row) {
  const int64_t t0 = profiler::on() ? profiler::now_ns() : -1;
  std::unique_ptr<Slot> s = take_slot();
  size_t total = 0;
  for (const Column& c : row) total += aligned(c.bytes.size());
  if (pinned_ && s->capacity < total) {
    if (s->staging) device_->host_free_pinned(s->staging);
    s->staging = nullptr;
    s->capacity = 0;
    s->staging = device_->host_alloc_pinned(total);
    s->capacity = total;
  }
  try {
    stage_and_copy(*s, row);
  } catch (...) {
    // Copies already enqueued may read the staging buffer: let them finish
    // before the slot (and its buffer) goes.
    try {
      device_->record(s->event, Device::Lane::kCopy);
      device_->synchronize(s->event);
    } catch (...) {
    }
    throw;
  }
  if (!pinned_) s->row = std::move(row);  // read by the copies until the event is reached
  ++issued_;
  if (t0 >= 0)
    profiler::record_span(profiler::Track::kHost, "dataset", "device queue: copy batch " + std::to_string(issued_),
                          t0, profiler::now_ns(), "\"batch\":" + std::to_string(issued_) + ",\"bytes\":" +
                                                  std::to_string(total) + ",\"device\":\"" + device_->name() + "\"");
  ready_.push_back(std::move(s));
}

void DeviceQueue::stage_and_copy(Slot& s, const Row& row) {
  size_t off = 0;
  for (const Column& c : row) {
    const Shape shape = Shape::from(c.shape.data(), static_cast<int32_t>(c.shape.size()), "dataset device queue");
    Tensor t = make_tensor(device_, c.dtype, shape);
    if (t.nbytes() != c.bytes.size())
      fail(Code::kInternal, "[dataset] device queue: a column of shape {} has {} bytes, expected {}", shape.str(),
           c.bytes.size(), t.nbytes());
    if (!c.bytes.empty()) {
      const void* src = c.bytes.data();
      if (pinned_) {
        void* dst = static_cast<char*>(s.staging) + off;
        std::memcpy(dst, src, c.bytes.size());
        src = dst;
        off += aligned(c.bytes.size());
      }
      device_->copy_h2d_async(Device::Lane::kCopy, t.data(), src, c.bytes.size());
    }
    s.tensors.push_back(std::move(t));
  }
  device_->record(s.event, Device::Lane::kCopy);
}

void DeviceQueue::fill(const Pull& pull, size_t ahead) {
  while (!ended_ && !error_ && ready_.size() < ahead) {
    try {
      Row r;
      if (!pull(r)) {
        ended_ = true;
        break;
      }
      issue(std::move(r));
    } catch (...) {
      // Raised once the batches before it are handed out.
      error_ = std::current_exception();
    }
  }
}

bool DeviceQueue::next(const Pull& pull, std::vector<Tensor>& out) {
  fill(pull, 1);
  if (ready_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  std::unique_ptr<Slot> s = std::move(ready_.front());
  ready_.pop_front();
  // Work the caller enqueues from now on runs after the batch arrived.
  device_->wait(Device::Lane::kCompute, s->event);
  out = std::move(s->tensors);
  s->tensors.clear();
  retiring_.push_back(std::move(s));
  // The next batches' copies, overlapping the step the caller runs now.
  fill(pull, static_cast<size_t>(depth_));
  return true;
}

}  // namespace spora::data
