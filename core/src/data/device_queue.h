// The device queue: batches copied to their device ahead of the step that
// uses them. When the caller takes batch k, the host->device copies of the
// next `depth` batches are already enqueued on the device's copy stream
// (Device::Lane::kCopy), so they run while the caller's step k runs on the
// compute stream. Each batch's copies end with an event; the compute
// stream waits for it when the batch is handed out, so no kernel reads a
// batch before it has arrived and the host never waits for a copy.
//
// Host memory: with the plugin's pinned memory the rows are staged into
// pinned buffers (true asynchronous DMA on CUDA); otherwise the row's own
// bytes are sent. Either way a batch's host memory is kept until its event
// is reached, and a staging buffer is reused only after that.
//
// Errors: a row the source fails to produce while looking ahead is not
// raised early: the batches before it are handed out first, then next()
// raises it, at the batch that failed (and keeps raising it).
//
// Two ways in: next(pull) takes rows from a pipeline callback and keeps
// `depth` batches copied ahead (the built-in pipelines' iterator); push()
// and pop() let a caller that produces batches itself (the Python pipeline,
// through spora_device_queue_*) decide how far ahead it copies.
//
// Only for devices with their own memory, async copies and events
// (usable()); one thread at a time.
#pragma once
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "data/column.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace spora::data {

class DeviceQueue {
 public:
  // Produces the next row into its argument; false at the end.
  using Pull = std::function<bool(Row&)>;
  // A column's host bytes, read only during push().
  struct HostColumn {
    DType dtype;
    const int64_t* shape;
    int32_t ndim;
    const void* data;
    size_t bytes;
  };

  // A device of its own memory with async copies and events.
  static bool usable(Device* device);
  // depth >= 1: batches kept copied (or copying) ahead of the one handed out.
  DeviceQueue(Device* device, int32_t depth);
  // Waits for the copies still in flight before their host memory goes.
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  // The next batch's tensors (the compute stream waits for their copy), or
  // false at the end; then enqueues the copies of the following batches.
  bool next(const Pull& pull, std::vector<Tensor>& out);
  // Enqueues one batch's copies; its bytes are staged (or copied) before
  // this returns. A column whose byte count does not match its dtype and
  // shape is an error, and then nothing is enqueued.
  void push(const std::vector<HostColumn>& columns);
  // The oldest pushed batch's tensors (the compute stream waits for their
  // copy); false when none is queued.
  bool pop(std::vector<Tensor>& out);
  // Batches pushed (or copied ahead by next()) and not handed out yet.
  size_t pending() const { return ready_.size(); }
  // The column count of the batch pop() hands out next (0 when none).
  size_t front_columns() const;
  // Takes effect at the next call (batches already enqueued stay).
  void set_depth(int32_t depth) { depth_ = depth < 1 ? 1 : depth; }
  // Batches whose copies were enqueued so far (tests: the copy of batch k+1
  // is enqueued when batch k is handed out).
  uint64_t issued() const { return issued_; }

 private:
  struct Slot;
  void fill(const Pull& pull, size_t ahead);
  void issue(const std::vector<HostColumn>& columns, Row* owned);
  void stage_and_copy(Slot& slot, const std::vector<HostColumn>& columns, const std::vector<Shape>& shapes);
  std::unique_ptr<Slot> take_slot();

  Device* device_;
  int32_t depth_;
  bool pinned_;
  uint64_t issued_ = 0;
  bool ended_ = false;
  std::exception_ptr error_;
  std::deque<std::unique_ptr<Slot>> ready_;     // copies enqueued, not handed out
  std::deque<std::unique_ptr<Slot>> retiring_;  // handed out; the copy may still run
};

}  // namespace spora::data
