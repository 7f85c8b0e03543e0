// Eager tensors: a shared device buffer plus dtype, shape and a byte offset
// (views such as reshape share the buffer).
#pragma once
#include <functional>
#include <memory>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "runtime/device.h"

namespace spora {

// Device memory owned by one allocation; freed when the last tensor using it
// goes away.
class Buffer {
 public:
  Buffer(Device* device, size_t bytes) : device_(device), bytes_(bytes), ptr_(device->alloc(bytes)) {}
  // Memory the device did not allocate (host memory of a unified-memory
  // device, e.g. a NumPy array imported through DLPack): `release` runs
  // instead of the device's free, because the plugin's allocator must never
  // see a pointer it did not hand out.
  Buffer(Device* device, spora_devptr_t external, size_t bytes, std::function<void()> release)
      : device_(device), bytes_(bytes), ptr_(external), release_(std::move(release)) {}
  ~Buffer() {
    if (release_)
      release_();
    else
      device_->free(ptr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device* device() const { return device_; }
  spora_devptr_t ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  Device* device_;
  size_t bytes_;
  spora_devptr_t ptr_;
  std::function<void()> release_;
};

struct Tensor {
  std::shared_ptr<Buffer> buffer;
  size_t offset = 0;  // bytes
  DType dtype = SPORA_DTYPE_INVALID;
  Shape shape;
  // The value's identity for the eager tape (runtime/tape.h): unique per
  // tensor or view made (make_tensor, eager views), shared by copies of this
  // struct, which are the same immutable value. Handles are freed and their
  // addresses reused, so the tape never keys by pointer. 0 for internal
  // tensors that never reach a user (arena slices of a compiled plan).
  uint64_t id = 0;

  Device* device() const { return buffer->device(); }
  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
  // Device address of the first element. Address arithmetic only: the host
  // never dereferences device addresses.
  spora_devptr_t data() const {
    return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(buffer->ptr()) + offset);
  }
};

// A fresh tensor identity (never 0; unique in the process).
uint64_t new_tensor_id();

// A new dense tensor on `device`, uninitialised.
Tensor make_tensor(Device* device, DType dtype, const Shape& shape);
// A new tensor with host data copied in (`bytes` must match) or zero-filled
// when `data` is null.
Tensor tensor_from_host(Device* device, DType dtype, const Shape& shape, const void* data, size_t bytes);
// Copies to another device (through the host when plugins differ).
Tensor tensor_to(const Tensor& t, Device* device);
void tensor_read(const Tensor& t, void* dst, size_t capacity);

}  // namespace spora
