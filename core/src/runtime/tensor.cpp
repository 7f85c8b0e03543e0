#include "runtime/tensor.h"

#include <atomic>
#include <vector>

#include "support/error.h"

namespace spora {

uint64_t new_tensor_id() {
  // Relaxed: ids only need to be unique, not ordered between threads.
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Tensor make_tensor(Device* device, DType dtype, const Shape& shape) {
  const size_t es = dtype_size(dtype);
  if (es == 0) fail(Code::kInvalidArgument, "[tensor] invalid dtype {}", static_cast<int>(dtype));
  const uint64_t n = static_cast<uint64_t>(shape.numel());
  if (n > (static_cast<uint64_t>(1) << 62) / es)
    fail(Code::kInvalidArgument, "[tensor] shape {} of {} is too large", shape.str(), dtype_name(dtype));
  Tensor t;
  t.buffer = std::make_shared<Buffer>(device, static_cast<size_t>(n) * es);
  t.dtype = dtype;
  t.shape = shape;
  t.id = new_tensor_id();
  return t;
}

Tensor tensor_from_host(Device* device, DType dtype, const Shape& shape, const void* data, size_t bytes) {
  if (!dtype_valid(dtype)) fail(Code::kInvalidArgument, "[tensor] invalid dtype {}", static_cast<int>(dtype));
  Tensor t = make_tensor(device, dtype, shape);
  if (data) {
    if (bytes != t.nbytes())
      fail(Code::kInvalidArgument, "[tensor] shape {} of {} needs {} bytes, got {}", shape.str(), dtype_name(dtype),
           t.nbytes(), bytes);
    if (bytes) device->copy_h2d(t.data(), data, bytes);
  } else if (t.nbytes()) {
    device->memset(t.data(), 0, t.nbytes());
  }
  return t;
}

Tensor tensor_to(const Tensor& src, Device* device) {
  Tensor t = make_tensor(device, src.dtype, src.shape);
  const size_t n = src.nbytes();
  if (n == 0) return t;
  if (src.device() == device) {
    device->copy_d2d(t.data(), src.data(), n);
  } else {
    // Different plugins share no address space: stage through the host.
    std::vector<unsigned char> host(n);
    src.device()->copy_d2h(host.data(), src.data(), n);
    device->copy_h2d(t.data(), host.data(), n);
  }
  return t;
}

void tensor_read(const Tensor& t, void* dst, size_t capacity) {
  const size_t n = t.nbytes();
  if (capacity < n) fail(Code::kInvalidArgument, "[tensor] read needs {} bytes, buffer has {}", n, capacity);
  if (n == 0) return;
  if (!dst) fail(Code::kInvalidArgument, "[tensor] read into a null buffer");
  t.device()->copy_d2h(dst, t.data(), n);
}

}  // namespace spora
