// spora._C.OpFn (one registry op as a Python callable: positional tensor
// inputs, schema-checked keyword attributes) and spora._C.Attrs.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "common.h"

namespace spora_py {

// ---------------------------------------------------------------- attrs --

enum class AttrKind { kInt, kFloat, kBool, kInts, kFloats, kString, kOptInt };

// "a float32 tensor of shape (2, 3)" or "a str": what an argument was, for
// errors that name the op and the argument.
static std::string describe(nb::handle v) {
  if (is_tensor(v)) {
    const PyTensor* t = as_tensor(v);
    std::string shape = "(";
    for (int i = 0; i < t->ndim; ++i) shape += (i ? ", " : "") + std::to_string(t->shape[i]);
    shape += t->ndim == 1 ? ",)" : ")";
    return std::string("a ") + nb::cast<std::string>(nb::str(dtype_object(t->dtype).attr("name"))) +
           " tensor of shape " + shape;
  }
  return "a " + nb::cast<std::string>(nb::str(v.type().attr("__name__")));
}

static int64_t to_int(nb::handle v, const std::string& op, const std::string& name) {
  if (PyLong_Check(v.ptr())) return PyLong_AsLongLong(v.ptr());
  if (is_tensor(v)) {
    // Not the tensor's own __index__ errors, which name neither the op nor
    // the attribute (a tensor here is often an argument in another order).
    const PyTensor* t = as_tensor(v);
    const bool integer = t->dtype == SPORA_DTYPE_I32 || t->dtype == SPORA_DTYPE_I64 || t->dtype == SPORA_DTYPE_U8;
    if (!integer || t->numel() != 1)
      raise_type_error("[" + op + "] attribute '" + name + "' takes an int, got " + describe(v));
  }
  if (is_tensor(v) || PyIndex_Check(v.ptr())) {
    nb::object i = nb::steal(PyNumber_Index(v.ptr()));
    if (!i.is_valid()) throw nb::python_error();
    return PyLong_AsLongLong(i.ptr());
  }
  raise_type_error("[" + op + "] attribute '" + name + "' takes an int, got " + describe(v));
}

static double to_float(nb::handle v, const std::string& op, const std::string& name) {
  if (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())) return PyFloat_AsDouble(v.ptr());
  nb::object f = nb::steal(PyNumber_Float(v.ptr()));
  if (!f.is_valid()) {
    PyErr_Clear();
    raise_type_error("[" + op + "] attribute '" + name + "' takes a float, got " + describe(v));
  }
  return PyFloat_AsDouble(f.ptr());
}

void set_attr(spora_attrs_t* a, const std::string& op, const std::string& name, AttrKind kind, nb::handle v) {
  const char* n = name.c_str();
  spora_status_t s = SPORA_OK;
  switch (kind) {
    case AttrKind::kInt:
    case AttrKind::kOptInt:
      if (PyBool_Check(v.ptr()) && kind == AttrKind::kInt) {
        s = spora_attrs_set_int(a, n, v.ptr() == Py_True);
        break;
      }
      s = spora_attrs_set_int(a, n, to_int(v, op, name));
      break;
    case AttrKind::kFloat: s = spora_attrs_set_float(a, n, to_float(v, op, name)); break;
    case AttrKind::kBool:
      if (!PyBool_Check(v.ptr()) && !PyLong_Check(v.ptr()))
        raise_type_error("[" + op + "] attribute '" + name + "' takes a bool, got " + describe(v));
      s = spora_attrs_set_bool(a, n, PyObject_IsTrue(v.ptr()));
      break;
    case AttrKind::kInts: {
      std::vector<int64_t> xs;
      if (PyLong_Check(v.ptr())) {
        xs.push_back(PyLong_AsLongLong(v.ptr()));
      } else {
        if (!PySequence_Check(v.ptr()) || PyUnicode_Check(v.ptr()))
          raise_type_error("[" + op + "] attribute '" + name + "' takes a sequence of ints, got " + describe(v));
        for (nb::handle e : nb::iter(v)) xs.push_back(to_int(e, op, name));
      }
      s = spora_attrs_set_ints(a, n, xs.data(), xs.size());
      break;
    }
    case AttrKind::kFloats: {
      std::vector<double> xs;
      if (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())) {
        xs.push_back(PyFloat_AsDouble(v.ptr()));
      } else {
        for (nb::handle e : nb::iter(v)) xs.push_back(to_float(e, op, name));
      }
      s = spora_attrs_set_floats(a, n, xs.data(), xs.size());
      break;
    }
    case AttrKind::kString: {
      std::string str;
      if (PyUnicode_Check(v.ptr())) {
        str = nb::cast<std::string>(v);
      } else {
        // dtype attributes take spora / NumPy dtypes as well as "f32".
        const spora_dtype_t d = dtype_from(v);
        if (d == SPORA_DTYPE_INVALID)
          raise_type_error("[" + op + "] attribute '" + name + "' takes a string, got " + describe(v));
        str = spora_dtype_name(d);
      }
      s = spora_attrs_set_string(a, n, str.c_str());
      break;
    }
  }
  check(s);
}

// One registry op as a Python callable: positional tensor inputs (Python
// scalars become tensors of the first tensor input's dtype), then attributes
// by keyword or position, checked against the schema's types. Attributes
// left out take the schema's defaults (filled in by the core).
struct OpFn {
  std::string name;
  int n_inputs = 0;       // fixed tensor inputs
  bool variadic = false;  // x...: a list of tensors (or all positional args)
  size_t nout = 1;
  bool dynamic_out = false;
  std::vector<std::string> attr_names;
  std::vector<AttrKind> attr_kinds;
  std::vector<bool> attr_required;
  std::vector<std::string> input_names;  // the schema's, for errors

  nb::object call(nb::args args, nb::kwargs kwargs) const {
    std::vector<nb::object> tensors;
    std::vector<nb::handle> raw;
    size_t pos = 0;
    const size_t na = args.size();
    if (variadic) {
      if (na >= 1 && (PyList_Check(args[0].ptr()) || PyTuple_Check(args[0].ptr()))) {
        for (nb::handle e : nb::iter(args[0])) raw.push_back(e);
        pos = 1;
      } else {
        while (pos < na && (is_tensor(args[pos]) || PyObject_CheckBuffer(args[pos].ptr()))) raw.push_back(args[pos++]);
      }
    } else {
      if (na < static_cast<size_t>(n_inputs))
        raise_type_error("[" + name + "] takes " + std::to_string(n_inputs) + " tensor inputs, got " +
                         std::to_string(na));
      for (int i = 0; i < n_inputs; ++i) raw.push_back(args[pos++]);
    }
    // Scalars take the dtype of a tensor input: the first non-bool one (a
    // mask, as in where(mask, x, 0.0), says nothing about the value dtype).
    const PyTensor* like = nullptr;
    for (nb::handle h : raw)
      if (is_tensor(h) && (!like || like->dtype == SPORA_DTYPE_BOOL)) like = as_tensor(h);
    for (size_t i = 0; i < raw.size(); ++i) {
      try {
        tensors.push_back(operand(raw[i], like));
      } catch (nb::python_error& e) {
        // Name the op and the input, not only what the conversion saw.
        const std::string what = nb::cast<std::string>(nb::str(e.value()));
        const std::string input = variadic ? "inputs[" + std::to_string(i) + "]"
                                  : i < input_names.size() ? "'" + input_names[i] + "'"
                                                           : std::to_string(i);
        raise_type_error("[" + name + "] input " + input + " takes a tensor or a number, got " + describe(raw[i]) +
                         " (" + what + ")");
      }
    }

    PyAttrs attrs;
    std::vector<bool> given(attr_names.size(), false);
    if (na - pos > attr_names.size())
      raise_type_error("[" + name + "] takes at most " + std::to_string(attr_names.size()) +
                       " attributes after its inputs, got " + std::to_string(na - pos));
    for (size_t i = 0; pos < na; ++i, ++pos) {
      set_attr(attrs.a, name, attr_names[i], attr_kinds[i], args[pos]);
      given[i] = true;
    }
    spora_device_t* device = nullptr;
    size_t nout_now = nout;
    for (auto [k, v] : kwargs) {
      const std::string key = nb::cast<std::string>(k);
      if (key == "device") {
        if (!v.is_none()) device = find_device(nb::cast<std::string>(nb::str(v)));
        continue;
      }
      size_t i = 0;
      while (i < attr_names.size() && attr_names[i] != key) ++i;
      if (i == attr_names.size()) {
        std::string known;
        for (const auto& a : attr_names) known += (known.empty() ? "" : ", ") + a;
        raise_type_error("[" + name + "] has no attribute '" + key + "' (attributes: " +
                         (known.empty() ? "none" : known) + ")");
      }
      if (given[i]) raise_type_error("[" + name + "] attribute " + key + " given twice");
      if (v.is_none() && attr_kinds[i] == AttrKind::kOptInt) continue;
      set_attr(attrs.a, name, key, attr_kinds[i], v);
      given[i] = true;
      if (dynamic_out && key == "sizes") nout_now = nb::len(v);
      if (dynamic_out && key == "sections") nout_now = nb::cast<size_t>(v);
    }
    for (size_t i = 0; i < attr_names.size(); ++i)
      if (attr_required[i] && !given[i])
        raise_type_error("[" + name + "] attribute '" + attr_names[i] + "' is required");
    if (dynamic_out && nout_now == 0) raise_value_error("[" + name + "] give sizes or sections");
    if (!device && tensors.empty()) device = default_device();
    std::vector<nb::handle> hs(tensors.begin(), tensors.end());
    return dispatch(name.c_str(), hs.data(), hs.size(), attrs.a, nout_now, true, device);
  }
};


void bind_opfn(nb::module_& m) {
  nb::class_<PyAttrs>(m, "Attrs", "Op attributes (spora_attrs_t).")
      .def(nb::init<>())
      .def("set_int", [](PyAttrs& a, const std::string& n, int64_t v) { check(spora_attrs_set_int(a.a, n.c_str(), v)); })
      .def("set_float",
           [](PyAttrs& a, const std::string& n, double v) { check(spora_attrs_set_float(a.a, n.c_str(), v)); })
      .def("set_bool",
           [](PyAttrs& a, const std::string& n, bool v) { check(spora_attrs_set_bool(a.a, n.c_str(), v ? 1 : 0)); })
      .def("set_ints",
           [](PyAttrs& a, const std::string& n, const std::vector<int64_t>& v) {
             check(spora_attrs_set_ints(a.a, n.c_str(), v.data(), v.size()));
           })
      .def("set_floats",
           [](PyAttrs& a, const std::string& n, const std::vector<double>& v) {
             check(spora_attrs_set_floats(a.a, n.c_str(), v.data(), v.size()));
           })
      .def("set_string", [](PyAttrs& a, const std::string& n, const std::string& v) {
        check(spora_attrs_set_string(a.a, n.c_str(), v.c_str()));
      });

  nb::class_<OpFn>(m, "OpFn", nb::dynamic_attr(), "A registry op as a function (see spora.ops).")
      .def("__init__",
           [](OpFn* self, std::string name, int n_inputs, bool variadic, size_t nout, bool dynamic_out,
              std::vector<std::string> attr_names, std::vector<int> kinds, std::vector<bool> required) {
             new (self) OpFn();
             self->name = std::move(name);
             self->n_inputs = n_inputs;
             self->variadic = variadic;
             self->nout = nout;
             self->dynamic_out = dynamic_out;
             self->attr_names = std::move(attr_names);
             for (int k : kinds) self->attr_kinds.push_back(static_cast<AttrKind>(k));
             self->attr_required = std::move(required);
           })
      .def_ro("op", &OpFn::name)
      .def_rw("input_names", &OpFn::input_names, "the schema's input names (for errors)")
      .def("__call__", &OpFn::call);
}

}  // namespace spora_py
