// C API of the data pipeline (spora_dataset_*, spora_transform_*): handles
// over the immutable descriptions of core/src/data and its iterators.
#include <cstring>

#include "abi/abi.h"
#include "data/device_queue.h"
#include "data/image_decode.h"
#include "data/iterator.h"
#include "runtime/device.h"

struct spora_dataset {
  spora::data::DatasetPtr d;
};
struct spora_transform {
  spora::data::TransformPtr t;
};
struct spora_dataset_iter {
  std::unique_ptr<spora::data::Iterator> it;
  spora::Device* device = nullptr;
  // Batches copied ahead on a device of its own memory (null: each row is
  // copied when it is taken). Destroyed before `it`.
  std::unique_ptr<spora::data::DeviceQueue> queue;
  bool started = false;  // next() was called
};
struct spora_device_queue {
  std::unique_ptr<spora::data::DeviceQueue> q;
};

namespace {
// Batches the device queue keeps copied ahead by default.
constexpr int32_t kDefaultDeviceQueue = 1;
}  // namespace

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;

namespace {

std::vector<std::string> strings(const char* const* s, size_t n, const char* fn, const char* what) {
  std::vector<std::string> out;
  if (n && !s) fail(Code::kInvalidArgument, "[{}] {} is null", fn, what);
  for (size_t i = 0; i < n; ++i) out.emplace_back(need(s[i], fn, what));
  return out;
}

spora_dataset_t* wrap(spora::data::DatasetPtr d) { return new spora_dataset{std::move(d)}; }

}  // namespace

extern "C" {

spora_status_t spora_dataset_from_idx(const char* const* paths, const char* const* names, const spora_dtype_t* dtypes,
                                      size_t n, spora_dataset_t** out) {
  return guard([&] {
    const char* fn = "spora_dataset_from_idx";
    need(out, fn, "out");
    if (n == 0) fail(Code::kInvalidArgument, "[{}] no files given", fn);
    std::vector<spora::DType> types;
    for (size_t i = 0; dtypes && i < n; ++i) {
      const int32_t v = spora::abi::dtype_arg(dtypes[i]);
      if (v != SPORA_DTYPE_INVALID && !spora::dtype_valid(v))
        fail(Code::kInvalidArgument, "[{}] unknown dtype value {}", fn, v);
      types.push_back(static_cast<spora::DType>(v));
    }
    auto src = spora::data::idx_source(strings(paths, n, fn, "paths"), strings(names, n, fn, "names"), types);
    *out = wrap(spora::data::make_source(std::move(src)));
  });
}

spora_status_t spora_dataset_from_tensors(spora_tensor_t* const* tensors, const char* const* names, size_t n,
                                          spora_dataset_t** out) {
  return guard([&] {
    const char* fn = "spora_dataset_from_tensors";
    need(out, fn, "out");
    if (n == 0 || !tensors) fail(Code::kInvalidArgument, "[{}] no tensors given", fn);
    auto src = std::make_shared<spora::data::SourceData>();
    src->origin = "arrays";
    src->names = strings(names, n, fn, "names");
    for (size_t i = 0; i < n; ++i) {
      const spora::Tensor& t = need(tensors[i], fn, "tensors[i]")->t;
      if (t.shape.rank == 0)
        fail(Code::kInvalidArgument, "[{}] column '{}' is a scalar; each column needs a first (sample) dimension", fn,
             src->names[i]);
      spora::data::Column c;
      c.dtype = t.dtype;
      c.shape.assign(t.shape.dims, t.shape.dims + t.shape.rank);
      c.bytes.resize(t.nbytes());
      spora::tensor_read(t, c.bytes.data(), c.bytes.size());
      if (i == 0) src->rows = c.shape[0];
      src->columns.push_back(std::move(c));
    }
    *out = wrap(spora::data::make_source(std::move(src)));
  });
}

spora_status_t spora_dataset_sampler(const spora_dataset_t* source, int32_t shuffle, uint64_t seed,
                                     int64_t num_shards, int64_t shard_id, spora_dataset_t** out) {
  return guard([&] {
    need(out, "spora_dataset_sampler", "out");
    *out = wrap(spora::data::with_sampler(need(source, "spora_dataset_sampler", "source")->d, shuffle != 0, seed,
                                          num_shards, shard_id));
  });
}

spora_status_t spora_dataset_shuffle(const spora_dataset_t* ds, int64_t buffer_size, uint64_t seed,
                                     spora_dataset_t** out) {
  return guard([&] {
    need(out, "spora_dataset_shuffle", "out");
    *out = wrap(spora::data::make_shuffle(need(ds, "spora_dataset_shuffle", "dataset")->d, buffer_size, seed));
  });
}

spora_status_t spora_transform_create(const char* name, const spora_attrs_t* attrs, spora_transform_t** out) {
  return guard([&] {
    need(out, "spora_transform_create", "out");
    static const spora::Attrs kNone;
    *out = new spora_transform{
        spora::data::make_transform(need(name, "spora_transform_create", "name"), attrs ? attrs->attrs : kNone)};
  });
}

spora_status_t spora_transform_free(spora_transform_t* t) {
  return guard([&] { delete t; });
}

spora_status_t spora_dataset_map(const spora_dataset_t* ds, spora_transform_t* const* ops, size_t num_ops,
                                 const char* const* columns, size_t num_columns, int32_t num_workers, uint64_t seed,
                                 spora_dataset_t** out) {
  return guard([&] {
    const char* fn = "spora_dataset_map";
    need(out, fn, "out");
    std::vector<spora::data::TransformPtr> v;
    if (num_ops && !ops) fail(Code::kInvalidArgument, "[{}] ops is null", fn);
    for (size_t i = 0; i < num_ops; ++i) v.push_back(need(ops[i], fn, "ops[i]")->t);
    *out = wrap(spora::data::make_map(need(ds, fn, "dataset")->d, std::move(v), strings(columns, num_columns, fn, "columns"),
                                      num_workers, seed));
  });
}

spora_status_t spora_dataset_batch(const spora_dataset_t* ds, int64_t batch_size, int32_t drop_remainder,
                                   spora_dataset_t** out) {
  return guard([&] {
    need(out, "spora_dataset_batch", "out");
    *out = wrap(spora::data::make_batch(need(ds, "spora_dataset_batch", "dataset")->d, batch_size, drop_remainder != 0));
  });
}

spora_status_t spora_dataset_repeat(const spora_dataset_t* ds, int64_t count, spora_dataset_t** out) {
  return guard([&] {
    need(out, "spora_dataset_repeat", "out");
    *out = wrap(spora::data::make_repeat(need(ds, "spora_dataset_repeat", "dataset")->d, count));
  });
}

spora_status_t spora_dataset_free(spora_dataset_t* ds) {
  return guard([&] { delete ds; });
}

spora_status_t spora_dataset_size(const spora_dataset_t* ds, int64_t* out) {
  return guard([&] { *need(out, "spora_dataset_size", "out") = need(ds, "spora_dataset_size", "dataset")->d->size(); });
}

spora_status_t spora_dataset_num_columns(const spora_dataset_t* ds, size_t* out) {
  return guard([&] {
    *need(out, "spora_dataset_num_columns", "out") =
        need(ds, "spora_dataset_num_columns", "dataset")->d->column_names().size();
  });
}

spora_status_t spora_dataset_column_name(const spora_dataset_t* ds, size_t index, const char** out) {
  return guard([&] {
    const auto& names = need(ds, "spora_dataset_column_name", "dataset")->d->column_names();
    need(out, "spora_dataset_column_name", "out");
    if (index >= names.size())
      fail(Code::kInvalidArgument, "[spora_dataset_column_name] index {} >= {} columns", index, names.size());
    *out = names[index].c_str();
  });
}

spora_status_t spora_dataset_iter_create(const spora_dataset_t* ds, spora_device_t* device, uint64_t epoch,
                                         int32_t prefetch, spora_dataset_iter_t** out) {
  return guard([&] {
    const char* fn = "spora_dataset_iter_create";
    need(out, fn, "out");
    spora::Device* d = from_handle(need(device, fn, "device"));
    if (prefetch < 1 || prefetch > 1024)
      fail(Code::kInvalidArgument, "[{}] prefetch must be in [1, 1024], got {}", fn, prefetch);
    auto it = std::make_unique<spora_dataset_iter>();
    it->device = d;
    it->it = std::make_unique<spora::data::Iterator>(need(ds, fn, "dataset")->d, epoch, static_cast<size_t>(prefetch));
    if (spora::data::DeviceQueue::usable(d))
      it->queue = std::make_unique<spora::data::DeviceQueue>(d, kDefaultDeviceQueue);
    *out = it.release();
  });
}

spora_status_t spora_dataset_iter_next(spora_dataset_iter_t* iter, spora_tensor_t** outs, size_t capacity,
                                       int32_t* has_row) {
  return guard([&] {
    const char* fn = "spora_dataset_iter_next";
    need(iter, fn, "iter");
    need(has_row, fn, "has_row");
    const size_t ncol = iter->it->dataset().column_names().size();
    if (capacity < ncol || !outs)
      fail(Code::kInvalidArgument, "[{}] outs has room for {} tensors, the dataset has {} columns", fn, capacity, ncol);
    *has_row = 0;
    iter->started = true;
    if (iter->queue) {
      std::vector<spora::Tensor> ts;
      if (!iter->queue->next([&](spora::data::Row& r) { return iter->it->next(r); }, ts)) return;
      std::vector<std::unique_ptr<spora_tensor_t>> made;
      for (spora::Tensor& t : ts) made.push_back(std::make_unique<spora_tensor_t>(spora_tensor_t{std::move(t)}));
      for (size_t i = 0; i < made.size(); ++i) outs[i] = made[i].release();
      *has_row = 1;
      return;
    }
    spora::data::Row row;
    if (!iter->it->next(row)) return;
    std::vector<std::unique_ptr<spora_tensor_t>> made;
    for (const spora::data::Column& c : row) {
      const spora::Shape s =
          spora::Shape::from(c.shape.data(), static_cast<int32_t>(c.shape.size()), "spora_dataset_iter_next");
      made.push_back(std::make_unique<spora_tensor_t>(
          spora_tensor_t{spora::tensor_from_host(iter->device, c.dtype, s, c.bytes.data(), c.bytes.size())}));
    }
    for (size_t i = 0; i < made.size(); ++i) outs[i] = made[i].release();
    *has_row = 1;
  });
}

spora_status_t spora_dataset_iter_set_device_queue(spora_dataset_iter_t* iter, int32_t depth) {
  return guard([&] {
    const char* fn = "spora_dataset_iter_set_device_queue";
    need(iter, fn, "iter");
    if (depth < 0 || depth > 64) fail(Code::kInvalidArgument, "[{}] depth must be in [0, 64], got {}", fn, depth);
    // Rows the queue took from the pipeline must not be lost: the choice is
    // made before the first row.
    if (iter->started)
      fail(Code::kInvalidArgument, "[{}] call it before the first spora_dataset_iter_next", fn);
    if (depth == 0) {
      iter->queue.reset();
    } else if (iter->queue) {
      iter->queue->set_depth(depth);
    } else if (spora::data::DeviceQueue::usable(iter->device)) {
      iter->queue = std::make_unique<spora::data::DeviceQueue>(iter->device, depth);
    }
  });
}

spora_status_t spora_dataset_iter_free(spora_dataset_iter_t* iter) {
  return guard([&] { delete iter; });
}

spora_status_t spora_device_queue_create(spora_device_t* device, spora_device_queue_t** out) {
  return guard([&] {
    const char* fn = "spora_device_queue_create";
    need(out, fn, "out");
    *out = nullptr;
    spora::Device* d = from_handle(need(device, fn, "device"));
    if (!spora::data::DeviceQueue::usable(d)) return;  // nothing to copy ahead
    // The caller decides how far ahead it pushes: the depth is next()'s.
    auto q = std::make_unique<spora_device_queue>();
    q->q = std::make_unique<spora::data::DeviceQueue>(d, 1);
    *out = q.release();
  });
}

spora_status_t spora_device_queue_push(spora_device_queue_t* queue, const spora_dtype_t* dtypes,
                                       const int64_t* const* shapes, const int32_t* ndims, const void* const* data,
                                       const size_t* data_bytes, size_t num_columns) {
  return guard([&] {
    const char* fn = "spora_device_queue_push";
    need(queue, fn, "queue");
    if (num_columns) {
      need(dtypes, fn, "dtypes");
      need(shapes, fn, "shapes");
      need(ndims, fn, "ndims");
      need(data, fn, "data");
      need(data_bytes, fn, "data_bytes");
    }
    std::vector<spora::data::DeviceQueue::HostColumn> cols;
    for (size_t i = 0; i < num_columns; ++i) {
      const int32_t dt = spora::abi::dtype_arg(dtypes[i]);
      if (!spora::dtype_valid(dt)) fail(Code::kInvalidArgument, "[{}] column {}: unknown dtype value {}", fn, i, dt);
      if (ndims[i] > 0 && !shapes[i]) fail(Code::kInvalidArgument, "[{}] column {}: shape is null", fn, i);
      cols.push_back({static_cast<spora::DType>(dt), shapes[i], ndims[i], data[i], data_bytes[i]});
    }
    queue->q->push(cols);
  });
}

spora_status_t spora_device_queue_pop(spora_device_queue_t* queue, spora_tensor_t** outs, size_t capacity,
                                      size_t* num_columns) {
  return guard([&] {
    const char* fn = "spora_device_queue_pop";
    need(queue, fn, "queue");
    need(num_columns, fn, "num_columns");
    if (!queue->q->pending()) fail(Code::kInvalidArgument, "[{}] no batch is queued", fn);
    const size_t n = queue->q->front_columns();
    if (capacity < n || (n && !outs))
      fail(Code::kInvalidArgument, "[{}] outs has room for {} tensors, the batch has {} columns", fn,
           outs ? capacity : 0, n);
    std::vector<spora::Tensor> ts;
    queue->q->pop(ts);
    spora::abi::publish(ts, outs);
    *num_columns = n;
  });
}

spora_status_t spora_device_queue_pending(const spora_device_queue_t* queue, size_t* out) {
  return guard([&] {
    const char* fn = "spora_device_queue_pending";
    *need(out, fn, "out") = need(queue, fn, "queue")->q->pending();
  });
}

spora_status_t spora_device_queue_free(spora_device_queue_t* queue) {
  return guard([&] { delete queue; });
}

spora_status_t spora_image_decode(const void* data, size_t size, const char* name, spora_device_t* device,
                                  spora_tensor_t** out) {
  return guard([&] {
    const char* fn = "spora_image_decode";
    need(out, fn, "out");
    spora::Device* d = from_handle(need(device, fn, "device"));
    if (size && !data) fail(Code::kInvalidArgument, "[{}] data is null", fn);
    const spora::data::Column c =
        spora::data::decode_image(static_cast<const uint8_t*>(data), size, name ? name : "image");
    const spora::Shape s = spora::Shape::from(c.shape.data(), static_cast<int32_t>(c.shape.size()), fn);
    *out = new spora_tensor_t{spora::tensor_from_host(d, c.dtype, s, c.bytes.data(), c.bytes.size())};
  });
}

}  // extern "C"
