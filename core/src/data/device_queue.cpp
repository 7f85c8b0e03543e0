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

namespace {
std::vector<DeviceQueue::HostColumn> views_of(const Row& row) {
  std::vector<DeviceQueue::HostColumn> v;
  v.reserve(row.size());
  for (const Column& c : row)
    v.push_back({c.dtype, c.shape.data(), static_cast<int32_t>(c.shape.size()), c.bytes.data(), c.bytes.size()});
  return v;
}
}  // namespace

void DeviceQueue::issue(const std::vector<HostColumn>& columns, Row* owned) {
  const int64_t t0 = profiler::on() ? profiler::now_ns() : -1;
  // Checked before anything is enqueued: a refused batch leaves no copy behind.
  std::vector<Shape> shapes;
  size_t total = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    const HostColumn& c = columns[i];
    if (!dtype_valid(static_cast<int32_t>(c.dtype)))
      fail(Code::kInvalidArgument, "[dataset] device queue: column {} has the unknown dtype value {}", i,
           static_cast<int32_t>(c.dtype));
    shapes.push_back(Shape::from(c.shape, c.ndim, "dataset device queue"));
    const uint64_t n = static_cast<uint64_t>(shapes.back().numel());
    if (n > (uint64_t{1} << 62) / dtype_size(c.dtype))
      fail(Code::kInvalidArgument, "[dataset] device queue: column {} has the too large shape {}", i,
           shapes.back().str());
    const size_t want = static_cast<size_t>(n) * dtype_size(c.dtype);
    if (c.bytes != want)
      fail(Code::kInvalidArgument, "[dataset] device queue: column {} ({} {}) has {} bytes, expected {}", i,
           dtype_name(c.dtype), shapes.back().str(), c.bytes, want);
    if (c.bytes && !c.data) fail(Code::kInvalidArgument, "[dataset] device queue: column {} has no data", i);
    total += aligned(c.bytes);
  }
  std::unique_ptr<Slot> s = take_slot();
  if (pinned_ && s->capacity < total) {
    if (s->staging) device_->host_free_pinned(s->staging);
    s->staging = nullptr;
    s->capacity = 0;
    s->staging = device_->host_alloc_pinned(total);
    s->capacity = total;
  }
  // Without pinned memory the copies read the host bytes until the event is
  // reached: the slot keeps them (the pipeline's row, or a copy of the
  // caller's columns).
  std::vector<HostColumn> sent;
  if (!pinned_) {
    if (owned) {
      s->row = std::move(*owned);
    } else {
      s->row.clear();
      for (size_t i = 0; i < columns.size(); ++i) {
        Column c;
        c.dtype = columns[i].dtype;
        c.shape.assign(columns[i].shape, columns[i].shape + columns[i].ndim);
        const auto* b = static_cast<const uint8_t*>(columns[i].data);
        c.bytes.assign(b, b + columns[i].bytes);
        s->row.push_back(std::move(c));
      }
    }
    sent = views_of(s->row);
  }
  try {
    stage_and_copy(*s, pinned_ ? columns : sent, shapes);
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
  ++issued_;
  if (t0 >= 0)
    profiler::record_span(profiler::Track::kHost, "dataset", "device queue: copy batch " + std::to_string(issued_),
                          t0, profiler::now_ns(), "\"batch\":" + std::to_string(issued_) + ",\"bytes\":" +
                                                  std::to_string(total) + ",\"device\":\"" + device_->name() + "\"");
  ready_.push_back(std::move(s));
}

void DeviceQueue::stage_and_copy(Slot& s, const std::vector<HostColumn>& columns, const std::vector<Shape>& shapes) {
  size_t off = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    const HostColumn& c = columns[i];
    Tensor t = make_tensor(device_, c.dtype, shapes[i]);
    if (c.bytes) {
      const void* src = c.data;
      if (pinned_) {
        void* dst = static_cast<char*>(s.staging) + off;
        std::memcpy(dst, src, c.bytes);
        src = dst;
        off += aligned(c.bytes);
      }
      device_->copy_h2d_async(Device::Lane::kCopy, t.data(), src, c.bytes);
    }
    s.tensors.push_back(std::move(t));
  }
  device_->record(s.event, Device::Lane::kCopy);
}

void DeviceQueue::push(const std::vector<HostColumn>& columns) { issue(columns, nullptr); }

size_t DeviceQueue::front_columns() const { return ready_.empty() ? 0 : ready_.front()->tensors.size(); }

bool DeviceQueue::pop(std::vector<Tensor>& out) {
  if (ready_.empty()) return false;
  std::unique_ptr<Slot> s = std::move(ready_.front());
  ready_.pop_front();
  // Work the caller enqueues from now on runs after the batch arrived.
  device_->wait(Device::Lane::kCompute, s->event);
  out = std::move(s->tensors);
  s->tensors.clear();
  retiring_.push_back(std::move(s));
  return true;
}

void DeviceQueue::fill(const Pull& pull, size_t ahead) {
  while (!ended_ && !error_ && ready_.size() < ahead) {
    try {
      Row r;
      if (!pull(r)) {
        ended_ = true;
        break;
      }
      issue(views_of(r), &r);
    } catch (...) {
      // Raised once the batches before it are handed out.
      error_ = std::current_exception();
    }
  }
}

bool DeviceQueue::next(const Pull& pull, std::vector<Tensor>& out) {
  fill(pull, 1);
  if (!pop(out)) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  // The next batches' copies, overlapping the step the caller runs now.
  fill(pull, static_cast<size_t>(depth_));
  return true;
}

}  // namespace spora::data
