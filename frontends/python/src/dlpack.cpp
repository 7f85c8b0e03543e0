// DLPack: zero-copy exchange with NumPy, PyTorch and anything else that
// speaks it, for tensors on devices whose memory is host memory (cpu).
//
// Export: Tensor.__dlpack__ hands out the tensor's own buffer through a
// nanobind ndarray that keeps the Tensor's handle alive. Import:
// spora.from_dlpack takes the producer's buffer with spora_tensor_wrap; the
// producer's DLPack capsule is released when the last spora tensor sharing
// the memory goes away.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include "common.h"

namespace spora_py {

spora_dtype_t from_dl_dtype(nb::dlpack::dtype t);
nb::dlpack::dtype to_dl_dtype(spora_dtype_t d);

namespace {

constexpr int32_t kDLCPU = 1;

// The producer's array, kept alive until spora releases the memory. The
// deleter may run on any thread and, at exit, after the interpreter is gone.
struct Imported {
  nb::ndarray<> array;
};

void release_imported(void* ctx) {
  auto* imp = static_cast<Imported*>(ctx);
  if (!Py_IsInitialized()) return;  // interpreter gone: the memory goes with the process
  nb::gil_scoped_acquire gil;
  delete imp;
}

nb::object export_array(nb::handle self) {
  PyTensor* t = as_tensor(self);
  if (!t->t) raise_untraceable(*t, "__dlpack__");
  void* ptr = nullptr;
  check(spora_tensor_data(t->t.get(), &ptr));
  // The owner keeps a Handle (shared buffer) alive for as long as the
  // consumer holds the memory, independent of the Python Tensor object.
  auto* keep = new Handle(t->t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Handle*>(p); });
  size_t shape[SPORA_MAX_NDIM];
  for (int i = 0; i < t->ndim; ++i) shape[i] = static_cast<size_t>(t->shape[i]);
  nb::ndarray<nb::array_api> arr(ptr, static_cast<size_t>(t->ndim), shape, owner, nullptr, to_dl_dtype(t->dtype),
                                 kDLCPU, 0);
  return nb::cast(arr, nb::rv_policy::reference);
}

nb::object import_array(nb::handle obj, nb::handle device_name) {
  if (is_tensor(obj)) return nb::borrow(obj);
  nb::ndarray<> a;
  if (!nb::try_cast(obj, a, /*convert=*/false))
    raise_type_error("[from_dlpack] object of type " + nb::cast<std::string>(nb::str(obj.type().attr("__name__"))) +
                     " does not support DLPack (__dlpack__) or the buffer protocol");
  if (a.device_type() != kDLCPU)
    raise_value_error("[from_dlpack] only host (cpu) memory can be imported without a copy; device type " +
                      std::to_string(a.device_type()));
  const spora_dtype_t dt = from_dl_dtype(a.dtype());
  if (dt == SPORA_DTYPE_INVALID) raise_type_error("[from_dlpack] dtype not supported by spora");
  if (a.ndim() > SPORA_MAX_NDIM) raise_value_error("[from_dlpack] too many dimensions");
  // Row-major and dense only: spora tensors have no strides.
  int64_t expect = 1;
  bool dense = true;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) dense = false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  if (!dense)
    raise_value_error("[from_dlpack] the array is not C-contiguous; spora tensors are dense row-major (copy it "
                      "first, e.g. numpy.ascontiguousarray, or use spora.Tensor(x) which copies)");
  spora_device_t* d = device_name.is_none() ? find_device("cpu")
                                            : find_device(nb::cast<std::string>(nb::str(device_name)));
  int64_t shape[SPORA_MAX_NDIM];
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  auto* imp = new Imported{a};
  spora_tensor_t* t = nullptr;
  const spora_status_t s = spora_tensor_wrap(d, dt, shape, static_cast<int32_t>(a.ndim()), a.data(),
                                             release_imported, imp, &t);
  if (s != SPORA_OK) {
    delete imp;
    raise_status(s, true);
  }
  return wrap_handle(t);
}

}  // namespace

void bind_dlpack(nb::class_<PyTensor>& cls, nb::module_& m) {
  cls.def(
         "__dlpack__",
         [](nb::handle self, nb::kwargs kwargs) {
           // nanobind's ndarray implements the protocol (versioned and
           // legacy capsules, stream and copy arguments).
           return export_array(self).attr("__dlpack__")(**kwargs);
         },
         "DLPack export (zero-copy; cpu tensors only).")
      .def("__dlpack_device__", [](nb::handle self) {
        PyTensor* t = as_tensor(self);
        spora_device_t* d = tensor_device(*t);
        const char* v = nullptr;
        const bool host = spora_device_property(d, "unified_memory", &v) == SPORA_OK && v && v[0] == '1';
        return nb::make_tuple(host ? kDLCPU : -1, 0);
      });
  m.def("from_dlpack", &import_array, nb::arg("x"), nb::arg("device").none() = nb::none(),
        "A Tensor sharing the memory of a DLPack-capable object (NumPy array, PyTorch tensor), without copying.");
  m.def("_host_view", &export_array, "A nanobind ndarray viewing the tensor's memory (zero-copy; cpu only).");
}

}  // namespace spora_py
