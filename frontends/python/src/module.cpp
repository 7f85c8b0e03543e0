// spora._C: module init, devices, dtypes, errors and source locations.

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "common.h"

namespace spora_py {

PyObject* g_untraceable = nullptr;
static PyObject* g_error = nullptr;        // spora.SporaError (RuntimeError)
static PyObject* g_value_error = nullptr;  // + ValueError
static PyObject* g_type_error = nullptr;   // + TypeError
static PyObject* g_unavailable = nullptr;  // backend could not be loaded

// ---------------------------------------------------------------- devices --

static spora_context_t* g_ctx = nullptr;
static spora_device_t* g_default = nullptr;
static std::unordered_map<std::string, spora_device_t*> g_devices;
static std::vector<std::string> g_plugin_paths;

spora_context_t* context() {
  if (!g_ctx) {
    spora_context_t* c = nullptr;
    check(spora_context_create(&c), false);
    for (const auto& p : g_plugin_paths) spora_context_add_plugin_path(c, p.c_str());
    g_ctx = c;
  }
  return g_ctx;
}

spora_device_t* find_device(const std::string& name) {
  auto it = g_devices.find(name);
  if (it != g_devices.end()) return it->second;
  spora_device_t* d = nullptr;
  const spora_status_t s = spora_device_find(context(), name.c_str(), &d);
  if (s != SPORA_OK) {
    std::string msg = spora_last_error();
    // The loader's reason is in msg; say what is there and how to fix it.
    std::string names;
    size_t n = 0;
    if (spora_device_count(context(), &n) == SPORA_OK) {
      for (size_t i = 0; i < n; ++i) {
        spora_device_t* dev = nullptr;
        const char* nm = nullptr;
        if (spora_device_get(context(), i, &dev) == SPORA_OK && spora_device_name(dev, &nm) == SPORA_OK)
          names += (names.empty() ? "" : ", ") + std::string(nm);
      }
    }
    msg += "; available devices: " + (names.empty() ? std::string("none") : names) +
           ". Plugins are searched in SPORA_PLUGIN_PATH (':'-separated directories) and next to libspora.so "
           "(spora/plugins); `spora devices` lists them with the reason each one failed";
    PyErr_SetString(s == SPORA_ERROR_UNAVAILABLE || s == SPORA_ERROR_NOT_FOUND ? g_unavailable : g_error,
                    msg.c_str());
    throw nb::python_error();
  }
  // The canonical name ("cpu" -> "cpu:0") maps to the same handle.
  g_devices[name] = d;
  return d;
}

spora_device_t* default_device() {
  if (!g_default) g_default = find_device("cpu");
  return g_default;
}

const char* device_name(spora_device_t* d) {
  const char* n = "?";
  spora_device_name(d, &n);
  // The host is "cpu" (as in PyTorch and MindSpore); there is one cpu device.
  if (std::strcmp(n, "cpu:0") == 0) return "cpu";
  return n;
}

spora_device_t* tensor_device(const PyTensor& t) {
  if (t.t) {
    spora_device_t* d = nullptr;
    check(spora_tensor_device(t.t.get(), &d));
    return d;
  }
  if (t.trace && t.trace->device) return t.trace->device;
  return default_device();
}

// ----------------------------------------------------------------- dtypes --

// Strong references held for the life of the process (handles, not
// nb::object: static destructors would run after the interpreter is gone).
static nb::handle g_dtypes[16];
static nb::handle g_dtype_of;  // Python fallback: anything -> code

nb::object dtype_object(spora_dtype_t d) {
  const int i = static_cast<int>(d);
  if (i <= 0 || i >= 16 || !g_dtypes[i].is_valid()) return nb::none();
  return nb::borrow(g_dtypes[i]);
}

spora_dtype_t dtype_from(nb::handle obj) {
  if (obj.is_none()) return SPORA_DTYPE_INVALID;
  for (int i = 1; i < 16; ++i)
    if (g_dtypes[i].is_valid() && g_dtypes[i].ptr() == obj.ptr()) return static_cast<spora_dtype_t>(i);
  if (!g_dtype_of.is_valid()) raise_type_error("spora dtypes are not registered yet");
  return static_cast<spora_dtype_t>(nb::cast<int>(g_dtype_of(obj)));
}

// ------------------------------------------------------- source locations --

static std::vector<std::string> g_internal_dirs;

static bool internal_file(const char* f) {
  for (const auto& d : g_internal_dirs)
    if (std::strncmp(f, d.data(), d.size()) == 0) return true;
  return false;
}

// PyFrame_GetLineNumber scans the code object's line table on each call --
// the largest single cost of a profiled eager op. A frame at the same
// instruction of the same code has the same line, so remember the last few
// (code, instruction) pairs. Entries hold a reference to their code object,
// so a freed one's address cannot come back as a false hit. GIL held.
static int frame_line(PyFrameObject* f, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  struct Entry {
    PyCodeObject* code = nullptr;
    int lasti = -1, line = 0;
  };
  static Entry cache[256];
  const int lasti = PyFrame_GetLasti(f);
  Entry& e = cache[((reinterpret_cast<uintptr_t>(code) >> 4) ^ static_cast<uintptr_t>(lasti)) & 255];
  if (e.code == code && e.lasti == lasti) return e.line;
  const int line = PyFrame_GetLineNumber(f);
  Py_INCREF(code);
  Py_XDECREF(e.code);
  e = {code, lasti, line};
  return line;
#else
  (void)code;
  return PyFrame_GetLineNumber(f);
#endif
}

bool user_location(std::string* file, int* line) {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  bool found = false;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    PyObject* fn = code->co_filename;
    const char* s = fn ? PyUnicode_AsUTF8(fn) : nullptr;
    if (s && !internal_file(s)) {
      *file = s;
      *line = frame_line(f, code);
      found = true;
    }
    Py_DECREF(code);
    PyFrameObject* back = found ? nullptr : PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  if (!found) PyErr_Clear();
  return found;
}

std::string user_location_suffix() {
  std::string file;
  int line = 0;
  if (!user_location(&file, &line)) return "";
  return " (" + file + ":" + std::to_string(line) + ")";
}

// ----------------------------------------------------------------- errors --

[[noreturn]] static void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

void raise_status(spora_status_t s, bool locate) {
  std::string msg = spora_last_error();
  if (locate && msg.find(".py:") == std::string::npos) msg += user_location_suffix();
  PyObject* type = g_error;
  if (s == SPORA_ERROR_INVALID_ARGUMENT) type = g_value_error;
  else if (s == SPORA_ERROR_UNAVAILABLE) type = g_unavailable;
  raise(type, msg);
}

void raise_value_error(const std::string& msg) { raise(g_value_error, msg + user_location_suffix()); }
void raise_type_error(const std::string& msg) { raise(g_type_error, msg + user_location_suffix()); }

void raise_untraceable(const PyTensor& t, const char* what) {
  if (t.meta()) raise_meta(t, what);
  std::string file;
  int line = 0;
  std::string where = user_location(&file, &line) ? file + ":" + std::to_string(line) : std::string("?");
  if (t.trace && t.trace->untraceable.empty()) t.trace->untraceable = where;
  raise(g_untraceable, std::string("[jit] ") + what +
                           " needs the value of a traced tensor, which is not known while tracing; Python control "
                           "flow on tensor values cannot be compiled (" +
                           where + ")");
}

Handle adopt(spora_tensor_t* t) { return Handle(t, [](spora_tensor_t* p) { spora_tensor_free(p); }); }

}  // namespace spora_py

using namespace spora_py;

static PyObject* make_exception(const char* name, PyObject* bases, const char* doc) {
  PyObject* e = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (!e) throw nb::python_error();
  return e;
}

NB_MODULE(_C, m) {
  m.doc() = "Spora's binding module (over spora.h). Use the `spora` package, not this module.";

  g_error = make_exception("spora.SporaError", PyExc_RuntimeError,
                           "An error from Spora: the message names the op and your file:line.");
  PyObject* vb = PyTuple_Pack(2, g_error, PyExc_ValueError);
  g_value_error = make_exception("spora.SporaValueError", vb, "Bad shapes, dtypes or attributes.");
  Py_DECREF(vb);
  PyObject* tb = PyTuple_Pack(2, g_error, PyExc_TypeError);
  g_type_error = make_exception("spora.SporaTypeError", tb, "An argument of the wrong type.");
  Py_DECREF(tb);
  g_unavailable = make_exception("spora.BackendUnavailableError", g_error,
                                 "A backend that is unknown or whose plugin failed to load.");
  g_untraceable = make_exception("spora.UntraceableError", g_error,
                                 "Tracing needed the value of a symbolic tensor (jit falls back to eager).");
  m.attr("SporaError") = nb::handle(g_error);
  m.attr("SporaValueError") = nb::handle(g_value_error);
  m.attr("SporaTypeError") = nb::handle(g_type_error);
  m.attr("BackendUnavailableError") = nb::handle(g_unavailable);
  m.attr("UntraceableError") = nb::handle(g_untraceable);

  m.def("_set_internal_dirs", [](std::vector<std::string> dirs) { g_internal_dirs = std::move(dirs); });
  m.def("_user_location", []() -> nb::object {
    std::string f;
    int l = 0;
    if (!user_location(&f, &l)) return nb::none();
    return nb::make_tuple(f, l);
  });
  m.def("_set_dtypes", [](nb::list objs, nb::object dtype_of) {
    for (size_t i = 0; i < objs.size() && i < 16; ++i) g_dtypes[i] = objs[i].inc_ref();
    g_dtype_of = dtype_of.release();
  });

  m.def("add_plugin_path", [](const std::string& p) {
    if (g_ctx) {
      check(spora_context_add_plugin_path(g_ctx, p.c_str()), false);
    }
    g_plugin_paths.push_back(p);
  }, "Adds a plugin file or directory to search first; only before the first device query.");
  m.def("set_device", [](const std::string& name) { g_default = find_device(name); });
  m.def("get_device", []() { return std::string(device_name(default_device())); });
  m.def("device_names", []() {
    size_t n = 0;
    check(spora_device_count(context(), &n), false);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      spora_device_t* d = nullptr;
      check(spora_device_get(context(), i, &d), false);
      out.emplace_back(device_name(d));
    }
    return out;
  });
  m.def("device_properties", [](const std::string& name) {
    spora_device_t* d = find_device(name);
    size_t n = 0;
    check(spora_device_property_count(d, &n), false);
    nb::dict out;
    for (size_t i = 0; i < n; ++i) {
      const char *k = nullptr, *v = nullptr;
      check(spora_device_property_at(d, i, &k, &v), false);
      out[k] = v;
    }
    return out;
  });
  m.def("plugins", []() {
    size_t n = 0;
    check(spora_plugin_count(context(), &n), false);
    nb::list out;
    for (size_t i = 0; i < n; ++i) {
      spora_plugin_t* p = nullptr;
      check(spora_plugin_get(context(), i, &p), false);
      const char *name = "", *kind = "", *path = "", *version = "", *reason = "";
      int32_t avail = 0;
      check(spora_plugin_describe(p, &name, &kind, &path, &version, &avail, &reason), false);
      nb::dict d;
      d["name"] = name;
      d["kind"] = kind;
      d["path"] = path;
      d["version"] = version;
      d["available"] = avail != 0;
      d["reason"] = reason;
      out.append(d);
    }
    return out;
  });
  m.def("synchronize", [](const std::string& name) { check(spora_device_synchronize(find_device(name)), false); });
  // spora.runtime's memory statistics (plugin ABI 1.1).
  m.def("memory_stats", [](const std::string& name) {
    uint64_t allocated = 0, peak_allocated = 0, reserved = 0, peak_reserved = 0;
    check(spora_device_memory_stats(find_device(name), &allocated, &peak_allocated, &reserved, &peak_reserved), false);
    nb::dict out;
    out["allocated_bytes"] = allocated;
    out["peak_allocated_bytes"] = peak_allocated;
    out["reserved_bytes"] = reserved;
    out["peak_reserved_bytes"] = peak_reserved;
    return out;
  });
  m.def("reset_peak_memory_stats",
        [](const std::string& name) { check(spora_device_reset_peak_memory_stats(find_device(name)), false); });
  // Process-wide planning options (spora_set_option): set_context's matmul_precision.
  m.def("set_option", [](const std::string& key, const std::string& value) {
    check(spora_set_option(key.c_str(), value.c_str()), false);
  });
  m.def("get_option", [](const std::string& key) {
    const char* v = nullptr;
    check(spora_get_option(key.c_str(), &v), false);
    return std::string(v);
  });
  m.def("op_names", []() {
    size_t n = 0;
    check(spora_op_count(&n), false);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      const char* s = nullptr;
      check(spora_op_name(i, &s), false);
      out.emplace_back(s);
    }
    return out;
  });
  m.def("op_schema", [](const std::string& op) {
    const char* s = nullptr;
    check(spora_op_schema(op.c_str(), &s), false);
    return std::string(s);
  });
  m.def("op_gradient", [](const std::string& op) {
    int32_t has = 0, diff = 0;
    check(spora_op_gradient(op.c_str(), &has, &diff), false);
    return nb::make_tuple(has != 0, diff != 0);
  });
  m.def("version", []() {
    int32_t a = 0, b = 0, c = 0;
    check(spora_version(&a, &b, &c), false);
    return nb::make_tuple(a, b, c);
  });

  bind_tape(m);
  bind_tensor(m);
  bind_dispatch(m);
  bind_graph(m);
  bind_io(m);
  bind_dataset(m);
  bind_comm(m);
  bind_profiler(m);
}
