// spora._C data pipeline objects over spora_dataset_* (what spora.dataset
// builds on): Dataset (an immutable description), Transform, and the
// iterator yielding tuples of Tensors, and DeviceQueue (spora_device_queue_*),
// which copies the batches of the Python half of a pipeline to the device
// ahead of the step. Waiting for a batch releases the GIL, so the pipeline's
// producer and workers run while Python trains.

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <deque>
#include <memory>

#include "common.h"

namespace spora_py {

spora_dtype_t from_dl_dtype(nb::dlpack::dtype t);  // tensor.cpp

namespace {

struct PyDataset {
  std::shared_ptr<spora_dataset_t> d;
  explicit PyDataset(spora_dataset_t* p) : d(p, [](spora_dataset_t* x) { spora_dataset_free(x); }) {}
};

struct PyTransform {
  std::shared_ptr<spora_transform_t> t;
};

struct PyDatasetIter {
  spora_dataset_iter_t* it = nullptr;
  size_t ncol = 0;
  PyDatasetIter() = default;
  PyDatasetIter(const PyDatasetIter&) = delete;
  PyDatasetIter& operator=(const PyDatasetIter&) = delete;
  ~PyDatasetIter() {
    // Stopping joins the producer, which may be inside a worker's transform.
    nb::gil_scoped_release unlocked;
    spora_dataset_iter_free(it);
  }
};

struct PyDeviceQueue {
  spora_device_queue_t* q = nullptr;
  std::deque<size_t> columns;  // of each batch queued, oldest first
  PyDeviceQueue() = default;
  PyDeviceQueue(const PyDeviceQueue&) = delete;
  PyDeviceQueue& operator=(const PyDeviceQueue&) = delete;
  ~PyDeviceQueue() {
    // Freeing waits for the copies in flight.
    nb::gil_scoped_release unlocked;
    spora_device_queue_free(q);
  }
};

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

template <class F>
PyDataset step(F&& f) {
  spora_dataset_t* out = nullptr;
  check(f(&out), true);
  return PyDataset(out);
}

std::vector<const char*> cstrs(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const auto& s : v) out.push_back(s.c_str());
  return out;
}

}  // namespace

void bind_dataset(nb::module_& m) {
  m.def(
      "decode_image",
      [](nb::bytes data, const std::string& name) {
        spora_device_t* cpu = find_device("cpu");
        spora_tensor_t* out = nullptr;
        spora_status_t s;
        {
          nb::gil_scoped_release unlocked;  // decoding runs while other threads hold the GIL
          s = spora_image_decode(data.c_str(), data.size(), name.c_str(), cpu, &out);
        }
        check(s, false);
        return wrap_handle(out);
      },
      nb::arg("data"), nb::arg("name"), "JPEG/PNG bytes -> an HWC uint8 RGB Tensor on cpu (spora_image_decode).");

  nb::class_<PyTransform>(m, "DataTransform", "A built-in per-sample transform (spora_transform_create).")
      .def(
          "__init__",
          [](PyTransform* self, const std::string& name, const PyAttrs* attrs) {
            spora_transform_t* t = nullptr;
            check(spora_transform_create(name.c_str(), attrs ? attrs->a : nullptr, &t), true);
            new (self) PyTransform{std::shared_ptr<spora_transform_t>(t, [](spora_transform_t* x) {
              spora_transform_free(x);
            })};
          },
          nb::arg("name"), nb::arg("attrs").none());

  nb::class_<PyDatasetIter>(m, "DatasetIterator", "One epoch of a pipeline (spora_dataset_iter_*).")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", [](PyDatasetIter& self) {
        std::vector<spora_tensor_t*> out(self.ncol, nullptr);
        int32_t has = 0;
        spora_status_t s;
        {
          nb::gil_scoped_release unlocked;
          s = spora_dataset_iter_next(self.it, out.data(), out.size(), &has);
        }
        check(s, true);
        if (!has) throw nb::stop_iteration();
        nb::list l;
        for (spora_tensor_t* t : out) l.append(wrap_handle(t));
        return nb::tuple(l);
      });

  nb::class_<PyDeviceQueue>(m, "DeviceQueue",
                            "Batches copied to a device ahead of the step (spora_device_queue_*): push() "
                            "enqueues a batch's copies on the device's copy stream, pop() hands out the oldest.")
      .def(
          "push",
          [](PyDeviceQueue& self, const std::vector<HostArray>& columns) {
            const size_t n = columns.size();
            std::vector<spora_dtype_t> dtypes(n);
            std::vector<std::vector<int64_t>> shapes(n);
            std::vector<const int64_t*> shape_ptrs(n);
            std::vector<int32_t> ndims(n);
            std::vector<const void*> data(n);
            std::vector<size_t> bytes(n);
            for (size_t i = 0; i < n; ++i) {
              const HostArray& a = columns[i];
              dtypes[i] = from_dl_dtype(a.dtype());
              if (dtypes[i] == SPORA_DTYPE_INVALID)
                raise_type_error("[dataset] device queue: column " + std::to_string(i) + " has an unsupported dtype");
              for (size_t d = 0; d < a.ndim(); ++d) shapes[i].push_back(static_cast<int64_t>(a.shape(d)));
              shape_ptrs[i] = shapes[i].data();
              ndims[i] = static_cast<int32_t>(a.ndim());
              data[i] = a.size() ? a.data() : nullptr;
              bytes[i] = a.size() ? a.nbytes() : 0;
            }
            spora_status_t s;
            {
              // `columns` keeps the arrays alive; the push copies their bytes.
              nb::gil_scoped_release unlocked;
              s = spora_device_queue_push(self.q, dtypes.data(), shape_ptrs.data(), ndims.data(), data.data(),
                                          bytes.data(), n);
            }
            check(s, false);
            self.columns.push_back(n);
          },
          nb::arg("columns"))
      .def("pop",
           [](PyDeviceQueue& self) {
             if (self.columns.empty()) raise_value_error("[dataset] device queue: no batch is queued");
             std::vector<spora_tensor_t*> out(self.columns.front(), nullptr);
             size_t n = 0;
             spora_status_t s;
             {
               nb::gil_scoped_release unlocked;
               s = spora_device_queue_pop(self.q, out.data(), out.size(), &n);
             }
             check(s, false);
             self.columns.pop_front();
             nb::list l;
             for (size_t i = 0; i < n; ++i) l.append(wrap_handle(out[i]));
             return nb::tuple(l);
           })
      .def_prop_ro("pending", [](const PyDeviceQueue& self) {
        size_t n = 0;
        check(spora_device_queue_pending(self.q, &n), false);
        return n;
      });

  m.def(
      "device_queue",
      [](const std::string& device) -> nb::object {
        spora_device_t* dev = device.empty() ? default_device() : find_device(device);
        spora_device_queue_t* q = nullptr;
        check(spora_device_queue_create(dev, &q), true);
        if (!q) return nb::none();
        auto p = std::make_unique<PyDeviceQueue>();
        p->q = q;
        return nb::cast(p.release(), nb::rv_policy::take_ownership);
      },
      nb::arg("device"),
      "A DeviceQueue for `device` ('' : the default device), or None where the device shares host memory.");

  nb::class_<PyDataset>(m, "Dataset", "An immutable data pipeline description (spora_dataset_t).")
      .def_static(
          "from_idx",
          [](const std::vector<std::string>& paths, const std::vector<std::string>& names,
             const std::vector<int32_t>& dtypes) {
            if (names.size() != paths.size() || dtypes.size() != paths.size())
              raise_value_error("[dataset] from_idx: paths, names and dtypes differ in count");
            std::vector<spora_dtype_t> dt;
            for (int32_t d : dtypes) dt.push_back(static_cast<spora_dtype_t>(d));
            auto p = cstrs(paths), n = cstrs(names);
            return step([&](spora_dataset_t** o) {
              nb::gil_scoped_release unlocked;  // reading and inflating takes a while
              return spora_dataset_from_idx(p.data(), n.data(), dt.data(), p.size(), o);
            });
          },
          nb::arg("paths"), nb::arg("names"), nb::arg("dtypes"))
      .def_static(
          "from_tensors",
          [](const std::vector<nb::handle>& tensors, const std::vector<std::string>& names) {
            if (names.size() != tensors.size()) raise_value_error("[dataset] from_tensors: names and tensors differ in count");
            std::vector<spora_tensor_t*> hs;
            for (nb::handle h : tensors) {
              if (!is_tensor(h) || !as_tensor(h)->t) raise_type_error("[dataset] from_tensors: expected concrete Tensors");
              hs.push_back(as_tensor(h)->t.get());
            }
            auto n = cstrs(names);
            return step([&](spora_dataset_t** o) { return spora_dataset_from_tensors(hs.data(), n.data(), hs.size(), o); });
          },
          nb::arg("tensors"), nb::arg("names"))
      .def(
          "sampler",
          [](const PyDataset& d, bool shuffle, uint64_t seed, int64_t num_shards, int64_t shard_id) {
            return step([&](spora_dataset_t** o) {
              return spora_dataset_sampler(d.d.get(), shuffle ? 1 : 0, seed, num_shards, shard_id, o);
            });
          },
          nb::arg("shuffle"), nb::arg("seed"), nb::arg("num_shards"), nb::arg("shard_id"))
      .def(
          "shuffle",
          [](const PyDataset& d, int64_t buffer_size, uint64_t seed) {
            return step([&](spora_dataset_t** o) { return spora_dataset_shuffle(d.d.get(), buffer_size, seed, o); });
          },
          nb::arg("buffer_size"), nb::arg("seed"))
      .def(
          "map",
          [](const PyDataset& d, const std::vector<const PyTransform*>& ops, const std::vector<std::string>& columns,
             int32_t num_workers, uint64_t seed) {
            std::vector<spora_transform_t*> o;
            for (const PyTransform* t : ops) o.push_back(t ? t->t.get() : nullptr);
            auto c = cstrs(columns);
            return step([&](spora_dataset_t** out) {
              return spora_dataset_map(d.d.get(), o.data(), o.size(), c.data(), c.size(), num_workers, seed, out);
            });
          },
          nb::arg("ops"), nb::arg("columns"), nb::arg("num_workers"), nb::arg("seed"))
      .def(
          "batch",
          [](const PyDataset& d, int64_t batch_size, bool drop_remainder) {
            return step(
                [&](spora_dataset_t** o) { return spora_dataset_batch(d.d.get(), batch_size, drop_remainder ? 1 : 0, o); });
          },
          nb::arg("batch_size"), nb::arg("drop_remainder"))
      .def(
          "repeat",
          [](const PyDataset& d, int64_t count) {
            return step([&](spora_dataset_t** o) { return spora_dataset_repeat(d.d.get(), count, o); });
          },
          nb::arg("count"))
      .def("size",
           [](const PyDataset& d) {
             int64_t n = 0;
             check(spora_dataset_size(d.d.get(), &n), true);
             return n;
           })
      .def("column_names",
           [](const PyDataset& d) {
             size_t n = 0;
             check(spora_dataset_num_columns(d.d.get(), &n), true);
             std::vector<std::string> out;
             for (size_t i = 0; i < n; ++i) {
               const char* s = nullptr;
               check(spora_dataset_column_name(d.d.get(), i, &s), true);
               out.emplace_back(s);
             }
             return out;
           })
      .def(
          "iterate",
          [](const PyDataset& d, const std::string& device, uint64_t epoch, int32_t prefetch, int32_t device_queue) {
            spora_device_t* dev = device.empty() ? default_device() : find_device(device);
            size_t n = 0;
            check(spora_dataset_num_columns(d.d.get(), &n), true);
            auto it = std::make_unique<PyDatasetIter>();
            it->ncol = n;
            check(spora_dataset_iter_create(d.d.get(), dev, epoch, prefetch, &it->it), true);
            check(spora_dataset_iter_set_device_queue(it->it, device_queue), true);
            return it.release();
          },
          nb::arg("device"), nb::arg("epoch"), nb::arg("prefetch"), nb::arg("device_queue") = 1,
          nb::rv_policy::take_ownership);
}

}  // namespace spora_py
