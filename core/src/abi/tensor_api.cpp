// C API: tensors and attributes.
#include <cstring>

#include "abi/abi.h"
#include "sched/host_errors.h"

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;
using spora::abi::to_handle;

using spora::abi::dtype_arg;

extern "C" {

spora_status_t spora_tensor_create(spora_device_t* device, spora_dtype_t dtype, const int64_t* shape, int32_t ndim,
                                   const void* data, size_t data_bytes, spora_tensor_t** out) {
  return guard([&] {
    spora::Device* d = from_handle(need(device, "spora_tensor_create", "device"));
    need(out, "spora_tensor_create", "out");
    if (!spora::dtype_valid(dtype_arg(dtype)))
      fail(Code::kInvalidArgument, "[spora_tensor_create] unknown dtype value {}", dtype_arg(dtype));
    const spora::Shape s = spora::Shape::from(shape, ndim, "spora_tensor_create");
    auto* t = new spora_tensor{spora::tensor_from_host(d, dtype, s, data, data_bytes)};
    *out = t;
  });
}

spora_status_t spora_tensor_to(const spora_tensor_t* tensor, spora_device_t* device, spora_tensor_t** out) {
  return guard([&] {
    need(tensor, "spora_tensor_to", "tensor");
    spora::Device* d = from_handle(need(device, "spora_tensor_to", "device"));
    need(out, "spora_tensor_to", "out");
    *out = new spora_tensor{spora::tensor_to(tensor->t, d)};
  });
}

spora_status_t spora_tensor_read(const spora_tensor_t* tensor, void* dst, size_t capacity) {
  return guard([&] {
    spora::tensor_read(need(tensor, "spora_tensor_read", "tensor")->t, dst, capacity);
    // The read waited for the device: a host callback of this thread's runs
    // that failed meanwhile (its outputs may be what was just read).
    spora::sched::raise_host_error();
  });
}

spora_status_t spora_tensor_dtype(const spora_tensor_t* tensor, spora_dtype_t* out) {
  return guard([&] { *need(out, "spora_tensor_dtype", "out") = need(tensor, "spora_tensor_dtype", "tensor")->t.dtype; });
}

spora_status_t spora_tensor_ndim(const spora_tensor_t* tensor, int32_t* out) {
  return guard([&] { *need(out, "spora_tensor_ndim", "out") = need(tensor, "spora_tensor_ndim", "tensor")->t.shape.rank; });
}

spora_status_t spora_tensor_shape(const spora_tensor_t* tensor, int64_t* dims, int32_t capacity) {
  return guard([&] {
    const spora::Shape& s = need(tensor, "spora_tensor_shape", "tensor")->t.shape;
    if (capacity < s.rank)
      fail(Code::kInvalidArgument, "[spora_tensor_shape] capacity {} is less than ndim {}", capacity, s.rank);
    if (s.rank) std::memcpy(need(dims, "spora_tensor_shape", "dims"), s.dims, sizeof(int64_t) * s.rank);
  });
}

spora_status_t spora_tensor_numel(const spora_tensor_t* tensor, int64_t* out) {
  return guard([&] { *need(out, "spora_tensor_numel", "out") = need(tensor, "spora_tensor_numel", "tensor")->t.shape.numel(); });
}

spora_status_t spora_tensor_nbytes(const spora_tensor_t* tensor, size_t* out) {
  return guard([&] { *need(out, "spora_tensor_nbytes", "out") = need(tensor, "spora_tensor_nbytes", "tensor")->t.nbytes(); });
}

spora_status_t spora_tensor_device(const spora_tensor_t* tensor, spora_device_t** out) {
  return guard([&] {
    *need(out, "spora_tensor_device", "out") = to_handle(need(tensor, "spora_tensor_device", "tensor")->t.device());
  });
}

spora_status_t spora_tensor_data(const spora_tensor_t* tensor, void** ptr) {
  return guard([&] {
    need(tensor, "spora_tensor_data", "tensor");
    need(ptr, "spora_tensor_data", "ptr");
    spora::Device* d = tensor->t.device();
    if (!d->unified_memory())
      fail(Code::kInvalidArgument,
           "[spora_tensor_data] device {} does not share memory with the host; copy with spora_tensor_read or "
           "spora_tensor_to a cpu device first",
           d->name());
    // Kernels may still be writing the buffer on a queued stream.
    d->synchronize();
    *ptr = reinterpret_cast<void*>(tensor->t.data());
  });
}

spora_status_t spora_tensor_wrap(spora_device_t* device, spora_dtype_t dtype, const int64_t* shape, int32_t ndim,
                                 void* data, void (*deleter)(void*), void* ctx, spora_tensor_t** out) {
  return guard([&] {
    spora::Device* d = from_handle(need(device, "spora_tensor_wrap", "device"));
    need(out, "spora_tensor_wrap", "out");
    if (!spora::dtype_valid(dtype_arg(dtype)))
      fail(Code::kInvalidArgument, "[spora_tensor_wrap] unknown dtype value {}", dtype_arg(dtype));
    if (!d->unified_memory())
      fail(Code::kInvalidArgument,
           "[spora_tensor_wrap] device {} does not share memory with the host; create the tensor with "
           "spora_tensor_create instead",
           d->name());
    const spora::Shape s = spora::Shape::from(shape, ndim, "spora_tensor_wrap");
    const size_t es = spora::dtype_size(dtype);
    const uint64_t n = static_cast<uint64_t>(s.numel());
    if (n > (static_cast<uint64_t>(1) << 62) / es)
      fail(Code::kInvalidArgument, "[spora_tensor_wrap] shape {} is too large", s.str());
    if (n && !data) fail(Code::kInvalidArgument, "[spora_tensor_wrap] data is null");
    // Kernels use element-wise access; a misaligned element would fault or
    // silently slow down vector loads.
    if (reinterpret_cast<uintptr_t>(data) % es != 0)
      fail(Code::kInvalidArgument, "[spora_tensor_wrap] data is not aligned to its {}-byte elements", es);
    std::function<void()> release;
    if (deleter) release = [deleter, ctx] { deleter(ctx); };
    else release = [] {};
    spora::Tensor t;
    t.buffer = std::make_shared<spora::Buffer>(d, reinterpret_cast<spora_devptr_t>(data),
                                               static_cast<size_t>(n) * es, std::move(release));
    t.dtype = dtype;
    t.shape = s;
    t.id = spora::new_tensor_id();  // a user-visible value: the tape keys by it
    *out = new spora_tensor{std::move(t)};
  });
}

spora_status_t spora_tensor_free(spora_tensor_t* tensor) {
  return guard([&] { delete tensor; });
}

spora_status_t spora_attrs_create(spora_attrs_t** out) {
  return guard([&] { *need(out, "spora_attrs_create", "out") = new spora_attrs; });
}

spora_status_t spora_attrs_free(spora_attrs_t* attrs) {
  return guard([&] { delete attrs; });
}

spora_status_t spora_attrs_set_int(spora_attrs_t* attrs, const char* name, int64_t value) {
  return guard([&] {
    need(attrs, "spora_attrs_set_int", "attrs")->attrs.set(need(name, "spora_attrs_set_int", "name"),
                                                          spora::AttrValue::of_int(value));
  });
}

spora_status_t spora_attrs_set_float(spora_attrs_t* attrs, const char* name, double value) {
  return guard([&] {
    need(attrs, "spora_attrs_set_float", "attrs")->attrs.set(need(name, "spora_attrs_set_float", "name"),
                                                            spora::AttrValue::of_float(value));
  });
}

spora_status_t spora_attrs_set_bool(spora_attrs_t* attrs, const char* name, int32_t value) {
  return guard([&] {
    need(attrs, "spora_attrs_set_bool", "attrs")->attrs.set(need(name, "spora_attrs_set_bool", "name"),
                                                           spora::AttrValue::of_bool(value != 0));
  });
}

spora_status_t spora_attrs_set_ints(spora_attrs_t* attrs, const char* name, const int64_t* values, size_t count) {
  return guard([&] {
    need(attrs, "spora_attrs_set_ints", "attrs");
    need(name, "spora_attrs_set_ints", "name");
    if (count) need(values, "spora_attrs_set_ints", "values");
    attrs->attrs.set(name, spora::AttrValue::of_ints(std::vector<int64_t>(values, values + count)));
  });
}

spora_status_t spora_attrs_set_floats(spora_attrs_t* attrs, const char* name, const double* values, size_t count) {
  return guard([&] {
    need(attrs, "spora_attrs_set_floats", "attrs");
    need(name, "spora_attrs_set_floats", "name");
    if (count) need(values, "spora_attrs_set_floats", "values");
    attrs->attrs.set(name, spora::AttrValue::of_floats(std::vector<double>(values, values + count)));
  });
}

spora_status_t spora_attrs_set_string(spora_attrs_t* attrs, const char* name, const char* value) {
  return guard([&] {
    need(attrs, "spora_attrs_set_string", "attrs");
    attrs->attrs.set(need(name, "spora_attrs_set_string", "name"),
                     spora::AttrValue::of_string(need(value, "spora_attrs_set_string", "value")));
  });
}

}  // extern "C"
