// spora._C.Tensor: construction from host data, metadata, host copies.
// Operators live in dispatch.cpp, DLPack in dlpack.cpp; the rest of the
// Tensor API is Python (spora/_tensor.py) attached to this class.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>

#include "common.h"

namespace spora_py {

PyTypeObject* g_tensor_type = nullptr;
static nb::handle g_as_array;  // Python helper: (data, dtype code) -> contiguous ndarray (never released)

void PyTensor::set_meta_from_handle() {
  check(spora_tensor_dtype(t.get(), &dtype));
  check(spora_tensor_ndim(t.get(), &ndim));
  check(spora_tensor_shape(t.get(), shape, SPORA_MAX_NDIM));
}

nb::object wrap(PyTensor&& t) { return nb::cast(std::move(t), nb::rv_policy::move); }

nb::object wrap_handle(spora_tensor_t* h) {
  PyTensor t;
  t.t = adopt(h);
  t.set_meta_from_handle();
  return wrap(std::move(t));
}

static nb::dlpack::dtype dl_dtype(spora_dtype_t d) {
  using C = nb::dlpack::dtype_code;
  auto mk = [](C c, int bits) { return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1}; };
  switch (d) {
    case SPORA_DTYPE_F32: return mk(C::Float, 32);
    case SPORA_DTYPE_F64: return mk(C::Float, 64);
    case SPORA_DTYPE_F16: return mk(C::Float, 16);
    case SPORA_DTYPE_BF16: return mk(C::Bfloat, 16);
    case SPORA_DTYPE_I32: return mk(C::Int, 32);
    case SPORA_DTYPE_I64: return mk(C::Int, 64);
    case SPORA_DTYPE_U8: return mk(C::UInt, 8);
    case SPORA_DTYPE_BOOL: return mk(C::Bool, 8);
    default: return mk(C::Float, 32);
  }
}

spora_dtype_t from_dl_dtype(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return SPORA_DTYPE_INVALID;
  const C c = static_cast<C>(t.code);
  if (c == C::Float && t.bits == 32) return SPORA_DTYPE_F32;
  if (c == C::Float && t.bits == 64) return SPORA_DTYPE_F64;
  if (c == C::Float && t.bits == 16) return SPORA_DTYPE_F16;
  if (c == C::Bfloat && t.bits == 16) return SPORA_DTYPE_BF16;
  if (c == C::Int && t.bits == 32) return SPORA_DTYPE_I32;
  if (c == C::Int && t.bits == 64) return SPORA_DTYPE_I64;
  if (c == C::UInt && t.bits == 8) return SPORA_DTYPE_U8;
  if (c == C::Bool && t.bits == 8) return SPORA_DTYPE_BOOL;
  return SPORA_DTYPE_INVALID;
}
nb::dlpack::dtype to_dl_dtype(spora_dtype_t d) { return dl_dtype(d); }

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// A new tensor on `device` with a copy of a C-contiguous host array.
static Handle from_host(const HostArray& a, spora_device_t* device) {
  const spora_dtype_t dt = from_dl_dtype(a.dtype());
  if (dt == SPORA_DTYPE_INVALID) raise_type_error("[tensor] unsupported array dtype");
  if (a.ndim() > SPORA_MAX_NDIM)
    raise_value_error("[tensor] " + std::to_string(a.ndim()) + " dimensions; at most " +
                      std::to_string(SPORA_MAX_NDIM) + " are supported");
  int64_t shape[SPORA_MAX_NDIM];
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  spora_tensor_t* t = nullptr;
  check(spora_tensor_create(device, dt, shape, static_cast<int32_t>(a.ndim()), a.size() ? a.data() : nullptr,
                            a.size() ? a.nbytes() : 0, &t));
  return adopt(t);
}

static void init_tensor(PyTensor* self, nb::handle data, nb::handle dtype, nb::handle device) {
  const spora_dtype_t want = dtype_from(dtype);
  if (is_tensor(data)) {
    // Tensor(t): shares t's immutable value (a cast or a move to another
    // device makes a new one).
    nb::object src = nb::borrow(data);
    if (want != SPORA_DTYPE_INVALID && want != as_tensor(src)->dtype) src = cast_to(src, want);
    PyTensor* s = as_tensor(src);
    new (self) PyTensor(*s);
    self->is_param = false;
    if (!device.is_none()) {
      spora_device_t* d = find_device(nb::cast<std::string>(nb::str(device)));
      if (self->t && tensor_device(*self) != d) {
        spora_tensor_t* moved = nullptr;
        check(spora_tensor_to(self->t.get(), d, &moved));
        self->t = adopt(moved);
        self->trace.reset();
        self->value = -1;
      }
    }
    return;
  }
  spora_device_t* d = device.is_none() ? default_device() : find_device(nb::cast<std::string>(nb::str(device)));
  if (!g_as_array.is_valid()) raise_type_error("[tensor] spora is not initialised");
  nb::object arr = g_as_array(data, static_cast<int>(want));
  HostArray a = nb::cast<HostArray>(arr);
  new (self) PyTensor();
  self->t = from_host(a, d);
  self->set_meta_from_handle();
  if (want != SPORA_DTYPE_INVALID && want != self->dtype) {
    // bfloat16 has no NumPy dtype: the helper hands over float32.
    nb::object tmp = wrap(PyTensor(*self));
    nb::object c = cast_to(tmp, want);
    *self = *as_tensor(c);
  }
}

// Tensor(shape=, dtype=, init=): shape and dtype, no data (PyTensor::meta).
// The declaration number orders init_data draws as eager construction
// would have made them (spora.nn.Cell.init_parameters_data).
static int64_t g_declared = 0;  // declarations so far (the GIL orders them)

static void init_meta(PyTensor* self, nb::handle dtype, nb::handle device, nb::handle shape, nb::handle init) {
  if (!device.is_none())
    raise_value_error("[tensor] a tensor declared without data (shape=...) is on no device yet; it is made on the "
                      "default device by init_data()");
  const spora_dtype_t dt = dtype.is_none() ? SPORA_DTYPE_F32 : dtype_from(dtype);
  if (dt == SPORA_DTYPE_INVALID) raise_type_error("[tensor] unknown dtype for Tensor(shape=...)");
  std::vector<int64_t> dims;
  if (PyLong_Check(shape.ptr())) {
    dims.push_back(nb::cast<int64_t>(shape));
  } else {
    for (nb::handle d : nb::iter(shape)) {
      if (!PyLong_Check(d.ptr()) && !PyIndex_Check(d.ptr()))
        raise_type_error("[tensor] Tensor(shape=...) takes whole numbers, got " +
                         nb::cast<std::string>(nb::str(shape)));
      dims.push_back(nb::cast<int64_t>(nb::int_(d)));
    }
  }
  if (dims.size() > SPORA_MAX_NDIM)
    raise_value_error("[tensor] " + std::to_string(dims.size()) + " dimensions; at most " +
                      std::to_string(SPORA_MAX_NDIM) + " are supported");
  for (int64_t d : dims)
    if (d < 0) raise_value_error("[tensor] negative dimension in Tensor(shape=" + nb::cast<std::string>(nb::str(shape)) + ")");
  new (self) PyTensor();
  self->dtype = dt;
  self->ndim = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) self->shape[i] = dims[i];
  self->init = nb::make_tuple(nb::borrow(init), g_declared++);
}

static nb::tuple shape_tuple(const PyTensor& t);

void raise_meta(const PyTensor& t, const char* what) {
  std::string who = "a Tensor";
  nb::object self = nb::find(t);
  if (self.is_valid() && nb::hasattr(self, "name")) {
    nb::object name = self.attr("name");
    if (!name.is_none()) who = "Parameter '" + nb::cast<std::string>(nb::str(name)) + "'";
  }
  const bool param = who != "a Tensor";
  const std::string msg =
      std::string("[meta] ") + what + " needs the data of " + who + " (shape " +
      nb::cast<std::string>(nb::str(shape_tuple(t))) + ", " +
      nb::cast<std::string>(nb::str(dtype_object(t.dtype).attr("name"))) +
      "), which was declared without data (spora.nn.utils.no_init_parameters, or Tensor(shape=, dtype=, init=)); " +
      (param ? "materialise it first: net.init_parameters_data() for a whole network, or param.init_data()"
             : "materialise it first: t = t.init_data()") +
      user_location_suffix();
  PyErr_SetString(PyExc_RuntimeError, msg.c_str());
  throw nb::python_error();
}

static nb::object host_copy(const PyTensor& t) {
  if (!t.t) raise_untraceable(t, "asnumpy()");
  nb::object src;
  const PyTensor* p = &t;
  if (t.dtype == SPORA_DTYPE_BF16) {  // NumPy has no bfloat16: widen to float32
    src = cast_to(wrap(PyTensor(t)), SPORA_DTYPE_F32);
    p = as_tensor(src);
  }
  size_t nbytes = 0;
  check(spora_tensor_nbytes(p->t.get(), &nbytes));
  void* buf = std::malloc(nbytes ? nbytes : 1);
  if (!buf) throw std::bad_alloc();
  nb::capsule owner(buf, [](void* q) noexcept { std::free(q); });
  {
    nb::gil_scoped_release nogil;
    const spora_status_t s = spora_tensor_read(p->t.get(), buf, nbytes);
    if (s != SPORA_OK) {
      nb::gil_scoped_acquire gil;
      raise_status(s, true);
    }
  }
  size_t shape[SPORA_MAX_NDIM];
  for (int i = 0; i < p->ndim; ++i) shape[i] = static_cast<size_t>(p->shape[i]);
  nb::ndarray<nb::numpy> arr(buf, static_cast<size_t>(p->ndim), shape, owner, nullptr, dl_dtype(p->dtype));
  return nb::cast(arr, nb::rv_policy::reference);
}

static nb::tuple shape_tuple(const PyTensor& t) {
  PyObject* tup = PyTuple_New(t.ndim);
  for (int i = 0; i < t.ndim; ++i) PyTuple_SET_ITEM(tup, i, PyLong_FromLongLong(t.shape[i]));
  return nb::steal<nb::tuple>(tup);
}

// The one element of a size-1 tensor as a Python number.
static nb::object scalar_value(const PyTensor& t, const char* what) {
  if (!t.t) raise_untraceable(t, what);
  if (t.numel() != 1)
    raise_value_error(std::string("[tensor] ") + what + " needs a tensor with one element, this one has shape " +
                      nb::cast<std::string>(nb::str(shape_tuple(t))));
  nb::object a = host_copy(t);
  return a.attr("item")();
}

extern PyType_Slot g_tensor_slots[];  // dispatch.cpp: operators as type slots

void bind_tensor(nb::module_& m) {
  auto cls = nb::class_<PyTensor>(m, "Tensor", nb::type_slots(g_tensor_slots),
                                  "A multi-dimensional array on a device (see the spora package for the full API).");
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  cls.def(
         "__init__",
         [](PyTensor* self, nb::handle data, nb::handle dtype, nb::handle device, nb::handle shape,
            nb::handle init) {
           if (data.is_none() && !shape.is_none()) return init_meta(self, dtype, device, shape, init);
           if (!shape.is_none() || !init.is_none())
             raise_type_error("[tensor] Tensor() takes data, or shape= (with dtype= and init=) for a tensor "
                              "without data, not both");
           if (data.is_none())
             raise_type_error("[tensor] Tensor() needs data, or shape= and dtype= for a tensor without data");
           init_tensor(self, data, dtype, device);
         },
         nb::arg("data").none() = nb::none(), nb::arg("dtype").none() = nb::none(),
         nb::arg("device").none() = nb::none(), nb::kw_only(), nb::arg("shape").none() = nb::none(),
         nb::arg("init").none() = nb::none(),
         "Tensor(data, dtype=None, device=None): from a NumPy array, nested lists, a scalar or another Tensor "
         "(copied to the device; dtype converts). Tensor(shape=..., dtype=..., init=...): shape and dtype but "
         "no data yet (init_data() makes it with the initializer `init`).")
      .def_prop_ro("shape", [](const PyTensor& t) { return shape_tuple(t); })
      .def_prop_ro("dtype", [](const PyTensor& t) { return dtype_object(t.dtype); })
      .def_prop_ro("ndim", [](const PyTensor& t) { return t.ndim; })
      .def_prop_ro("size", [](const PyTensor& t) { return t.numel(); })
      .def_prop_ro("device", [](const PyTensor& t) { return std::string(device_name(tensor_device(t))); })
      .def_prop_rw(
          "_is_param", [](const PyTensor& t) { return t.is_param; }, [](PyTensor& t, bool v) { t.is_param = v; })
      .def_prop_ro("_meta", [](const PyTensor& t) { return t.meta(); })
      .def_prop_ro("_lazy_init", [](const PyTensor& t) { return t.init.is_valid() ? t.init : nb::none(); })
      .def_prop_ro("_symbolic", [](const PyTensor& t) { return t.live_symbolic() && !t.t; })
      .def_prop_ro("_traced", [](const PyTensor& t) { return t.live_symbolic(); })
      .def("_sig", [](const PyTensor& t) {
        // Cache key of a jit argument: dtype, shape and device.
        return nb::make_tuple(static_cast<int>(t.dtype), shape_tuple(t),
                              reinterpret_cast<uintptr_t>(tensor_device(t)));
      })
      .def("_set_value", [](PyTensor& self, const PyTensor& src) {
        // Parameter.set_data: take over src's value (and its trace).
        const bool p = self.is_param;
        self = src;
        self.is_param = p;
      })
      .def("_detach", [](const PyTensor& t) {
        // The concrete value without any trace.
        if (!t.t) raise_untraceable(t, "the tensor's value");
        PyTensor c;
        c.t = t.t;
        c.dtype = t.dtype;
        c.ndim = t.ndim;
        std::memcpy(c.shape, t.shape, sizeof(t.shape));
        return wrap(std::move(c));
      })
      .def("asnumpy", [](const PyTensor& t) { return host_copy(t); }, "A NumPy copy (bfloat16 becomes float32).")
      .def("numpy", [](const PyTensor& t) { return host_copy(t); }, "Same as asnumpy().")
      .def("item", [](const PyTensor& t) { return scalar_value(t, "item()"); })
      .def("__bool__", [](const PyTensor& t) { return PyObject_IsTrue(scalar_value(t, "bool(tensor)").ptr()) == 1; })
      .def("__float__", [](const PyTensor& t) { return nb::cast<double>(nb::float_(scalar_value(t, "float(tensor)"))); })
      .def("__int__", [](const PyTensor& t) { return nb::int_(scalar_value(t, "int(tensor)")); })
      .def("__index__", [](const PyTensor& t) {
        if (t.dtype != SPORA_DTYPE_I32 && t.dtype != SPORA_DTYPE_I64 && t.dtype != SPORA_DTYPE_U8 &&
            t.dtype != SPORA_DTYPE_BOOL)
          raise_type_error("[tensor] only integer tensors can be used as an index");
        return nb::int_(scalar_value(t, "an index"));
      })
      .def("__len__", [](const PyTensor& t) {
        if (t.ndim == 0) raise_type_error("[tensor] len() of a 0-d tensor");
        return t.shape[0];
      })
      .def(
          "to",
          [](nb::handle self, nb::handle device) -> nb::object {
            PyTensor* t = as_tensor(self);
            spora_device_t* d = find_device(nb::cast<std::string>(nb::str(device)));
            if (tensor_device(*t) == d) return nb::borrow(self);
            if (!t->t || t->live_symbolic())
              raise_value_error(std::string("[tensor] moving a traced tensor to another device (") + device_name(d) +
                                ") is not supported inside jit or grad");
            spora_tensor_t* moved = nullptr;
            check(spora_tensor_to(t->t.get(), d, &moved));
            return wrap_handle(moved);
          },
          nb::arg("device"), "A copy on another device (\"cpu\", \"sim:0\"); self when it is there already.")
      .def("astype", [](nb::handle self, nb::handle dtype) { return cast_to(self, dtype_from(dtype)); },
           nb::arg("dtype"));
  // The next declaration number, for draws deferred by something other
  // than a tensor (spora.nn.Dropout's seed under no_init_parameters).
  m.def("_declare", []() { return g_declared++; });
  m.def("_set_array_helper", [](nb::object f) { g_as_array = f.release(); });
  m.def("_tensor_bytes", [](const PyTensor& t) {
    size_t n = 0;
    if (t.t) check(spora_tensor_nbytes(t.t.get(), &n));
    return n;
  });
  bind_dlpack(cls, m);
}

}  // namespace spora_py
