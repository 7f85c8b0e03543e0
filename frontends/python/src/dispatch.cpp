// Op dispatch (eager, or recorded into the open trace), Python operators,
// and spora._C.OpFn: the callable behind every spora.ops function.
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
TraceRef trace_ref(Trace* t) {
  for (auto& r : t_traces)
    if (r.get() == t) return r;
  return nullptr;
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

static void eager_call(const char* op, spora_device_t* device, spora_tensor_t* const* hs, size_t n,
                       const spora_attrs_t* attrs, spora_tensor_t** outs, size_t nout, int64_t work) {
  spora_status_t s;
  if (work >= kReleaseGilElements) {
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
      if (!hs[i]) raise_escaped();
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
  std::vector<spora_tensor_t*> concrete;
  if (tr->record) {
    for (size_t i = 0; i < n; ++i) {
      PyTensor* p = as_tensor(inputs[i]);
      if (!p->t) raise_untraceable(*p, "running the op");
      hs[i] = p->t.get();
    }
    concrete.assign(got, nullptr);
    eager_call(op, device, hs, n, attrs, concrete.data(), got, work);
  }
  nb::tuple res = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(got)));
  for (size_t i = 0; i < got; ++i) {
    PyTensor t;
    t.trace = ref;
    t.value = outv[i];
    if (tr->record) {
      t.t = adopt(concrete[i]);
      concrete[i] = nullptr;
    }
    fill_meta_from_graph(t);
    PyTuple_SET_ITEM(res.ptr(), i, wrap(std::move(t)).release().ptr());
  }
  if (single && got == 1) return res[0];
  return res;
}

// -------------------------------------------------------- scalars, dtypes --

static bool is_float(spora_dtype_t d) {
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
static spora_dtype_t promote(spora_dtype_t a, spora_dtype_t b) {
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

nb::object scalar_tensor(double v, spora_dtype_t dtype, spora_device_t* device) {
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
  PyTensor t;
  t.t = s.h;
  t.dtype = dtype;
  t.ndim = 0;
  return wrap(std::move(t));
}

static spora_dtype_t scalar_dtype(nb::handle x, spora_dtype_t like, bool* is_scalar) {
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

// -------------------------------------------------------------- operators --

enum class Bin { kAdd, kSub, kMul, kDiv, kPow, kMatmul, kEq, kNe, kLt, kLe, kGt, kGe, kMax, kMin };

static const char* bin_op(Bin b) {
  switch (b) {
    case Bin::kAdd: return "add";
    case Bin::kSub: return "sub";
    case Bin::kMul: return "mul";
    case Bin::kDiv: return "div";
    case Bin::kPow: return "pow";
    case Bin::kMatmul: return "matmul";
    case Bin::kEq: return "equal";
    case Bin::kNe: return "not_equal";
    case Bin::kLt: return "less";
    case Bin::kLe: return "less_equal";
    case Bin::kGt: return "greater";
    case Bin::kGe: return "greater_equal";
    case Bin::kMax: return "maximum";
    case Bin::kMin: return "minimum";
  }
  return "";
}

static bool operand_ok(nb::handle x) {
  return is_tensor(x) || PyFloat_Check(x.ptr()) || PyLong_Check(x.ptr()) || PyList_Check(x.ptr()) ||
         PyTuple_Check(x.ptr()) || PyObject_CheckBuffer(x.ptr());
}

nb::object binary(Bin b, nb::handle x, nb::handle y) {
  if (!operand_ok(x) || !operand_ok(y)) return nb::borrow(Py_NotImplemented);
  const bool xt = is_tensor(x);
  nb::object a = xt ? nb::borrow(x) : operand(x, as_tensor(y));
  nb::object c = is_tensor(y) ? nb::borrow(y) : operand(y, as_tensor(a));
  spora_dtype_t da = as_tensor(a)->dtype, dc = as_tensor(c)->dtype;
  if (da != dc) {
    const spora_dtype_t p = promote(da, dc);
    a = cast_to(a, p);
    c = cast_to(c, p);
    da = dc = p;
  }
  if (b == Bin::kDiv && !is_float(da)) {  // true division of integers
    a = cast_to(a, SPORA_DTYPE_F32);
    c = cast_to(c, SPORA_DTYPE_F32);
  }
  if (b == Bin::kPow && !is_float(da)) {  // integer power, exact below 2^53
    nb::object fa = cast_to(a, SPORA_DTYPE_F64), fc = cast_to(c, SPORA_DTYPE_F64);
    nb::handle in[2] = {fa, fc};
    nb::object r = dispatch("pow", in, 2, nullptr, 1, true);
    nb::handle rr = r;
    r = dispatch("round", &rr, 1, nullptr, 1, true);
    return cast_to(r, da);
  }
  nb::handle in[2] = {a, c};
  return dispatch(bin_op(b), in, 2, nullptr, 1, true);
}

// ---------------------------------------------------------------- attrs --

enum class AttrKind { kInt, kFloat, kBool, kInts, kFloats, kString, kOptInt };

static int64_t to_int(nb::handle v, const std::string& op, const std::string& name) {
  if (PyLong_Check(v.ptr())) return PyLong_AsLongLong(v.ptr());
  if (is_tensor(v) || PyIndex_Check(v.ptr())) {
    nb::object i = nb::steal(PyNumber_Index(v.ptr()));
    if (!i.is_valid()) throw nb::python_error();
    return PyLong_AsLongLong(i.ptr());
  }
  raise_type_error("[" + op + "] attribute " + name + " takes an int, got " +
                   nb::cast<std::string>(nb::str(v.type().attr("__name__"))));
}

static double to_float(nb::handle v, const std::string& op, const std::string& name) {
  if (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())) return PyFloat_AsDouble(v.ptr());
  nb::object f = nb::steal(PyNumber_Float(v.ptr()));
  if (!f.is_valid()) {
    PyErr_Clear();
    raise_type_error("[" + op + "] attribute " + name + " takes a float, got " +
                     nb::cast<std::string>(nb::str(v.type().attr("__name__"))));
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
        raise_type_error("[" + op + "] attribute " + name + " takes a bool");
      s = spora_attrs_set_bool(a, n, PyObject_IsTrue(v.ptr()));
      break;
    case AttrKind::kInts: {
      std::vector<int64_t> xs;
      if (PyLong_Check(v.ptr())) {
        xs.push_back(PyLong_AsLongLong(v.ptr()));
      } else {
        if (!PySequence_Check(v.ptr()) || PyUnicode_Check(v.ptr()))
          raise_type_error("[" + op + "] attribute " + name + " takes a sequence of ints");
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
        if (d == SPORA_DTYPE_INVALID) raise_type_error("[" + op + "] attribute " + name + " takes a string");
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
    const PyTensor* like = nullptr;
    for (nb::handle h : raw)
      if (is_tensor(h)) {
        like = as_tensor(h);
        break;
      }
    for (nb::handle h : raw) tensors.push_back(operand(h, like));

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
  nb::handle cls = reinterpret_cast<PyObject*>(g_tensor_type);
  auto def2 = [&](const char* name, Bin b, bool reflected) {
    nb::object f;
    if (reflected)
      f = nb::cpp_function([b](nb::handle self, nb::handle o) { return binary(b, o, self); },
                           nb::is_method(), nb::scope(cls), nb::name(name), nb::arg("other").none());
    else
      f = nb::cpp_function([b](nb::handle self, nb::handle o) { return binary(b, self, o); },
                           nb::is_method(), nb::scope(cls), nb::name(name), nb::arg("other").none());
    nb::setattr(cls, name, f);
  };
  def2("__add__", Bin::kAdd, false);
  def2("__radd__", Bin::kAdd, true);
  def2("__sub__", Bin::kSub, false);
  def2("__rsub__", Bin::kSub, true);
  def2("__mul__", Bin::kMul, false);
  def2("__rmul__", Bin::kMul, true);
  def2("__truediv__", Bin::kDiv, false);
  def2("__rtruediv__", Bin::kDiv, true);
  def2("__pow__", Bin::kPow, false);
  def2("__rpow__", Bin::kPow, true);
  def2("__matmul__", Bin::kMatmul, false);
  def2("__rmatmul__", Bin::kMatmul, true);
  def2("matmul", Bin::kMatmul, false);
  def2("__eq__", Bin::kEq, false);
  def2("__ne__", Bin::kNe, false);
  def2("__lt__", Bin::kLt, false);
  def2("__le__", Bin::kLe, false);
  def2("__gt__", Bin::kGt, false);
  def2("__ge__", Bin::kGe, false);
  def2("maximum", Bin::kMax, false);
  def2("minimum", Bin::kMin, false);
  auto def1 = [&](const char* name, const char* op) {
    nb::object f = nb::cpp_function([op](nb::handle self) { return dispatch(op, &self, 1, nullptr, 1, true); },
                                    nb::is_method(), nb::scope(cls), nb::name(name));
    nb::setattr(cls, name, f);
  };
  def1("__neg__", "neg");
  def1("__abs__", "abs");
  for (const char* op : {"abs", "neg", "exp", "log", "sqrt", "rsqrt", "relu", "sigmoid", "tanh", "sin", "cos", "floor",
                         "ceil", "round", "sign", "square", "reciprocal", "erf", "log1p", "silu"})
    def1(op, op);

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
      .def("__call__", &OpFn::call);

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
