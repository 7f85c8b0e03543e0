// Op dispatch: eager, or recorded into the open trace; scalar operands,
// dtype promotion, casts. Operators are in
// operators.cpp, spora.ops functions in opfn.cpp.
//
// This is the per-op hot path: no dicts, no Python frames unless an error
// happens or a trace is open.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common.h"

namespace spora_py {

// ----------------------------------------------------------------- traces --

static thread_local std::vector<TraceRef> t_traces;
// The innermost trace as a plain pointer: the eager fast path reads only
// this (a trivially initialised thread_local costs no guard check).
static thread_local Trace* t_top = nullptr;

Trace* current_trace() { return t_top; }
static TraceRef current_trace_ref() { return t_traces.empty() ? nullptr : t_traces.back(); }
void push_trace(TraceRef t) {
  t_traces.push_back(std::move(t));
  t_top = t_traces.back().get();
}
void pop_trace(const Trace* t) {
  if (t_traces.empty() || t_traces.back().get() != t)
    raise_value_error("[trace] traces closed out of order (a jit/grad function returned into another thread?)");
  t_traces.pop_back();
  t_top = t_traces.empty() ? nullptr : t_traces.back().get();
}

// --------------------------------------------------------------- dispatch --

static void fill_meta_from_graph(PyTensor& t) {
  int64_t dims[SPORA_MAX_NDIM];
  check(spora_graph_value_type(t.trace->graph->g, t.value, &t.dtype, dims, SPORA_MAX_NDIM, &t.ndim), false);
  std::memcpy(t.shape, dims, sizeof(int64_t) * static_cast<size_t>(t.ndim));
}

[[noreturn]] static void raise_escaped() {
  raise_value_error(
      "[trace] a tensor recorded inside a jit or grad function was used after that function returned; return it "
      "from the function instead of storing it");
}

// Large inputs run without the GIL so other Python threads proceed; small
// ones keep it, since releasing costs more than the op.
static constexpr int64_t kReleaseGilElements = 1 << 16;

void eager_call(const char* op, spora_device_t* device, spora_tensor_t* const* hs, size_t n,
                       const spora_attrs_t* attrs, spora_tensor_t** outs, size_t nout, int64_t work) {
  spora_status_t s;
  if (g_profile_locations) {  // the profiler shows each op's user source line
    std::string file;
    int line = 0;
    user_location(&file, &line);
    s = spora_op_call_at(op, device, hs, n, attrs, file.empty() ? nullptr : file.c_str(), line, outs, nout);
  } else if (work >= kReleaseGilElements) {
    nb::gil_scoped_release nogil;
    s = spora_op_call(op, device, hs, n, attrs, outs, nout);
  } else {
    s = spora_op_call(op, device, hs, n, attrs, outs, nout);
  }
  if (s != SPORA_OK) raise_status(s, true);
}

nb::object dispatch(const char* op, const nb::handle* inputs, size_t n, const spora_attrs_t* attrs, size_t nout,
                    bool single, spora_device_t* device) {
  constexpr size_t kStack = 8;
  spora_tensor_t* hs_stack[kStack];
  std::vector<spora_tensor_t*> hs_heap;
  spora_tensor_t** hs = hs_stack;
  if (n > kStack) {
    hs_heap.resize(n);
    hs = hs_heap.data();
  }
  Trace* tr = current_trace();
  bool rec = false;
  int64_t work = 0;
  for (size_t i = 0; i < n; ++i) {
    PyTensor* p = as_tensor(inputs[i]);
    if (tr && (p->live_symbolic() || p->is_param)) rec = true;
    hs[i] = p->t.get();
    if (p->ndim) work = std::max(work, p->numel());
  }
  if (!rec) {
    for (size_t i = 0; i < n; ++i)
      if (!hs[i]) {
        const PyTensor* p = as_tensor(inputs[i]);
        if (p->meta()) raise_meta(*p, (std::string("op '") + op + "'").c_str());
        raise_escaped();
      }
    spora_tensor_t* outs_stack[kStack];
    std::vector<spora_tensor_t*> outs_heap;
    spora_tensor_t** outs = outs_stack;
    if (nout > kStack) {
      outs_heap.resize(nout);
      outs = outs_heap.data();
    }
    eager_call(op, device, hs, n, attrs, outs, nout, work);
    if (single && nout == 1) return wrap_handle(outs[0]);
    nb::tuple res = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(nout)));
    for (size_t i = 0; i < nout; ++i) PyTuple_SET_ITEM(res.ptr(), i, wrap_handle(outs[i]).release().ptr());
    return res;
  }

  // Recorded: map the inputs to values of this trace.
  TraceRef ref = current_trace_ref();
  std::vector<spora_value_t> vals(n);
  for (size_t i = 0; i < n; ++i) {
    PyTensor* p = as_tensor(inputs[i]);
    if (p->symbolic_in(tr)) {
      vals[i] = p->value;
    } else {
      if (!tr->lift.is_valid()) raise_value_error("[trace] the trace is closed");
      vals[i] = nb::cast<spora_value_t>(tr->lift(inputs[i]));
    }
  }
  std::string file;
  int line = 0;
  user_location(&file, &line);
  std::vector<spora_value_t> outv(64);
  size_t got = 0;
  check(spora_graph_add_op(tr->graph->g, op, vals.data(), n, attrs, file.empty() ? nullptr : file.c_str(), line,
                           outv.data(), outv.size(), &got),
        false);
  nb::tuple res = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(got)));
  for (size_t i = 0; i < got; ++i) {
    PyTensor t;
    t.trace = ref;
    t.value = outv[i];
    fill_meta_from_graph(t);
    PyTuple_SET_ITEM(res.ptr(), i, wrap(std::move(t)).release().ptr());
  }
  if (single && got == 1) return res[0];
  return res;
}

// -------------------------------------------------------- scalars, dtypes --

bool is_float(spora_dtype_t d) {
  return d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
}

static int rank(spora_dtype_t d) {
  switch (d) {
    case SPORA_DTYPE_BOOL: return 0;
    case SPORA_DTYPE_U8: return 1;
    case SPORA_DTYPE_I32: return 2;
    case SPORA_DTYPE_I64: return 3;
    case SPORA_DTYPE_F16:
    case SPORA_DTYPE_BF16: return 4;
    case SPORA_DTYPE_F32: return 5;
    case SPORA_DTYPE_F64: return 6;
    default: return -1;
  }
}

// The common dtype of a binary op (PyTorch-like: floats win over integers,
// f16 with bf16 gives f32, else the wider type).
spora_dtype_t promote(spora_dtype_t a, spora_dtype_t b) {
  if (a == b) return a;
  if ((a == SPORA_DTYPE_F16 && b == SPORA_DTYPE_BF16) || (a == SPORA_DTYPE_BF16 && b == SPORA_DTYPE_F16))
    return SPORA_DTYPE_F32;
  if (is_float(a) && !is_float(b)) return a;
  if (is_float(b) && !is_float(a)) return b;
  return rank(a) >= rank(b) ? a : b;
}

static const spora_attrs_t* cast_attrs(spora_dtype_t d) {
  static PyAttrs* table[16] = {};
  const int i = static_cast<int>(d);
  if (i <= 0 || i >= 16) raise_value_error("[cast] invalid dtype");
  if (!table[i]) {
    auto* a = new PyAttrs();  // lives for the process, like the dtype set
    spora_attrs_set_string(a->a, "dtype", spora_dtype_name(d));
    table[i] = a;
  }
  return table[i]->a;
}

nb::object cast_to(nb::handle x, spora_dtype_t dtype) {
  if (dtype == SPORA_DTYPE_INVALID) raise_type_error("[cast] unknown dtype");
  if (as_tensor(x)->dtype == dtype) return nb::borrow(x);
  return dispatch("cast", &x, 1, cast_attrs(dtype), 1, true);
}

static Handle make_scalar(double v, spora_dtype_t dtype, spora_device_t* device) {
  unsigned char buf[8];
  size_t bytes = 0;
  spora_dtype_t make = dtype;
  switch (dtype) {
    case SPORA_DTYPE_F64: { double x = v; std::memcpy(buf, &x, 8); bytes = 8; break; }
    case SPORA_DTYPE_I64: { int64_t x = static_cast<int64_t>(v); std::memcpy(buf, &x, 8); bytes = 8; break; }
    case SPORA_DTYPE_I32: { int32_t x = static_cast<int32_t>(v); std::memcpy(buf, &x, 4); bytes = 4; break; }
    case SPORA_DTYPE_U8: buf[0] = static_cast<unsigned char>(v); bytes = 1; break;
    case SPORA_DTYPE_BOOL: buf[0] = v != 0; bytes = 1; break;
    default: { float x = static_cast<float>(v); std::memcpy(buf, &x, 4); bytes = 4; make = SPORA_DTYPE_F32; }
  }
  spora_tensor_t* t = nullptr;
  check(spora_tensor_create(device, make, nullptr, 0, buf, bytes, &t));
  Handle h = adopt(t);
  if (make == dtype) return h;
  // f16 / bf16: convert through the cast kernel (exact rounding rules).
  spora_tensor_t* in = h.get();
  spora_tensor_t* out = nullptr;
  check(spora_op_call("cast", device, &in, 1, cast_attrs(dtype), &out, 1));
  return adopt(out);
}

// Scalar operands repeat (x * 2.0 in a loop): a small direct-mapped cache of
// 0-d tensors saves an allocation and a host-to-device copy per op. Safe
// because tensors are immutable and these never reach user code.
struct ScalarSlot {
  uint64_t bits = 0;
  spora_dtype_t dtype = SPORA_DTYPE_INVALID;
  spora_device_t* device = nullptr;
  Handle h;
};
static ScalarSlot* scalar_cache() {
  static ScalarSlot* slots = new ScalarSlot[64];  // never freed: outlives static destruction
  return slots;
}

const Handle& scalar_handle(double v, spora_dtype_t dtype, spora_device_t* device) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  const size_t i = (bits ^ (bits >> 29) ^ (static_cast<uint64_t>(dtype) * 0x9E3779B97F4A7C15ull)) & 63;
  ScalarSlot& s = scalar_cache()[i];
  if (!(s.h && s.bits == bits && s.dtype == dtype && s.device == device)) {
    s.h = make_scalar(v, dtype, device);
    s.bits = bits;
    s.dtype = dtype;
    s.device = device;
  }
  return s.h;
}

nb::object scalar_tensor(double v, spora_dtype_t dtype, spora_device_t* device) {
  PyTensor t;
  t.t = scalar_handle(v, dtype, device);
  t.dtype = dtype;
  t.ndim = 0;
  return wrap(std::move(t));
}

spora_dtype_t scalar_dtype(nb::handle x, spora_dtype_t like, bool* is_scalar) {
  *is_scalar = true;
  if (PyBool_Check(x.ptr())) return like == SPORA_DTYPE_INVALID ? SPORA_DTYPE_BOOL : like;
  if (PyLong_Check(x.ptr()))
    return like == SPORA_DTYPE_BOOL || like == SPORA_DTYPE_INVALID ? SPORA_DTYPE_I64 : like;
  if (PyFloat_Check(x.ptr())) return is_float(like) ? like : SPORA_DTYPE_F32;
  *is_scalar = false;
  return SPORA_DTYPE_INVALID;
}

nb::object operand(nb::handle x, const PyTensor* like) {
  if (is_tensor(x)) return nb::borrow(x);
  bool sc = false;
  const spora_dtype_t d = scalar_dtype(x, like ? like->dtype : SPORA_DTYPE_INVALID, &sc);
  spora_device_t* dev = like ? tensor_device(*like) : default_device();
  if (sc) return scalar_tensor(PyFloat_AsDouble(x.ptr()), d, dev);
  // Arrays, lists: through the Tensor constructor, on like's device.
  nb::object dn = nb::str(device_name(dev));
  return nb::handle(reinterpret_cast<PyObject*>(g_tensor_type))(x, nb::none(), dn);
}

// Generic call used by the Python layer: _C.call(op, inputs, attrs, nout).
static nb::object generic_call(const std::string& op, nb::sequence inputs, PyAttrs* attrs, size_t nout,
                               nb::handle device) {
  std::vector<nb::object> ts;
  const PyTensor* like = nullptr;
  for (nb::handle h : inputs)
    if (is_tensor(h)) {
      like = as_tensor(h);
      break;
    }
  for (nb::handle h : inputs) ts.push_back(operand(h, like));
  std::vector<nb::handle> hs(ts.begin(), ts.end());
  spora_device_t* d = device.is_none() ? (ts.empty() ? default_device() : nullptr)
                                       : find_device(nb::cast<std::string>(nb::str(device)));
  return dispatch(op.c_str(), hs.data(), hs.size(), attrs ? attrs->a : nullptr, nout, true, d);
}

void bind_dispatch(nb::module_& m) {
  bind_operators(m);
  bind_opfn(m);
  m.def("call", &generic_call, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs").none() = nb::none(),
        nb::arg("nout") = 1, nb::arg("device").none() = nb::none(),
        "Runs (or records) registry op `op` on `inputs`; one Tensor for a single output, else a tuple.");
  m.def("cast", [](nb::handle x, nb::handle dtype) { return cast_to(x, dtype_from(dtype)); });
  m.def("promote", [](nb::handle a, nb::handle b) -> nb::object {
    return dtype_object(promote(dtype_from(a), dtype_from(b)));
  });
  m.def("scalar", [](double v, nb::handle dtype, nb::handle device) {
    spora_device_t* d = device.is_none() ? default_device() : find_device(nb::cast<std::string>(nb::str(device)));
    return scalar_tensor(v, dtype_from(dtype), d);
  }, nb::arg("value"), nb::arg("dtype"), nb::arg("device").none() = nb::none());
  m.def("operand", [](nb::handle x, nb::handle like) {
    return operand(x, like.is_none() || !is_tensor(like) ? nullptr : as_tensor(like));
  }, nb::arg("x"), nb::arg("like").none(), "A tensor for x: Python scalars take like's dtype and device.");
}

}  // namespace spora_py
