// Python operators of spora.Tensor: + - * / ** @ and comparisons as type
// slots (no method lookup, no argument conversion), with PyTorch-like dtype
// promotion and Python scalars; the unary math methods (t.exp(), t.relu()).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include <spora/ops_elementwise.h>

#include "common.h"

namespace spora_py {

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

// Eager a (op) b for two tensors of one dtype or a tensor and a Python
// scalar of its dtype: straight to spora_op_call on the handles (the scalar
// never becomes a Python object). Returns an invalid object when the general
// path must handle it (tracing, promotion, integer division or power).
static nb::object eager_binary(Bin b, nb::handle x, nb::handle y) {
  if (current_trace() || b == Bin::kPow) return nb::object();
  const bool xt = is_tensor(x), yt = is_tensor(y);
  spora_tensor_t* hs[2];
  PyTensor* t = as_tensor(xt ? x : y);
  if (!t->t) return nb::object();
  if (xt && yt) {
    PyTensor* u = as_tensor(y);
    if (u->dtype != t->dtype || !u->t) return nb::object();
    hs[0] = t->t.get();
    hs[1] = u->t.get();
  } else {
    nb::handle sc = xt ? y : x;
    bool is_sc = false;
    if (PyBool_Check(sc.ptr())) return nb::object();
    const spora_dtype_t d = scalar_dtype(sc, t->dtype, &is_sc);
    if (!is_sc || d != t->dtype) return nb::object();
    const double v = PyFloat_AsDouble(sc.ptr());
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return nb::object();
    }
    const Handle& h = scalar_handle(v, d, tensor_device(*t));
    hs[xt ? 0 : 1] = t->t.get();
    hs[xt ? 1 : 0] = h.get();
  }
  if (b == Bin::kDiv && !is_float(t->dtype)) return nb::object();
  spora_tensor_t* out = nullptr;
  eager_call(bin_op(b), nullptr, hs, 2, nullptr, &out, 1, t->numel());
  return wrap_handle(out);
}

nb::object binary(Bin b, nb::handle x, nb::handle y) {
  if (!operand_ok(x) || !operand_ok(y)) return nb::borrow(Py_NotImplemented);
  if (nb::object r = eager_binary(b, x, y); r.is_valid()) return r;
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

// ------------------------------------------------------------ type slots --
// The arithmetic and comparison operators are the type's number and
// richcompare slots, so `a + b` calls binary() directly: no method lookup,
// no argument conversion (about half the Python-side cost of a bound method).

static PyObject* slot_call(Bin b, PyObject* x, PyObject* y) noexcept {
  try {
    return binary(b, x, y).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

template <Bin B>
static PyObject* slot_binary(PyObject* x, PyObject* y) noexcept {
  return slot_call(B, x, y);
}

static PyObject* slot_power(PyObject* x, PyObject* y, PyObject* mod) noexcept {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return slot_call(Bin::kPow, x, y);
}

static PyObject* slot_richcompare(PyObject* x, PyObject* y, int op) noexcept {
  static const Bin kOps[] = {Bin::kLt, Bin::kLe, Bin::kEq, Bin::kNe, Bin::kGt, Bin::kGe};
  return slot_call(kOps[op], x, y);
}

static PyObject* slot_unary(const char* op, PyObject* x) noexcept {
  try {
    nb::handle h(x);
    return dispatch(op, &h, 1, nullptr, 1, true).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}
static PyObject* slot_neg(PyObject* x) noexcept { return slot_unary("neg", x); }
static PyObject* slot_abs(PyObject* x) noexcept { return slot_unary("abs", x); }
// Identity hash (Py_HashPointer is 3.13+): tensors compare elementwise, so
// equality cannot back the hash; dict keys (optimizer state) use identity.
static Py_hash_t slot_hash(PyObject* x) noexcept {
  const auto h = static_cast<Py_hash_t>(reinterpret_cast<uintptr_t>(x) >> 4);
  return h == -1 ? -2 : h;
}

PyType_Slot g_tensor_slots[] = {
    {Py_nb_add, reinterpret_cast<void*>(slot_binary<Bin::kAdd>)},
    {Py_nb_subtract, reinterpret_cast<void*>(slot_binary<Bin::kSub>)},
    {Py_nb_multiply, reinterpret_cast<void*>(slot_binary<Bin::kMul>)},
    {Py_nb_true_divide, reinterpret_cast<void*>(slot_binary<Bin::kDiv>)},
    {Py_nb_matrix_multiply, reinterpret_cast<void*>(slot_binary<Bin::kMatmul>)},
    {Py_nb_power, reinterpret_cast<void*>(slot_power)},
    {Py_nb_negative, reinterpret_cast<void*>(slot_neg)},
    {Py_nb_absolute, reinterpret_cast<void*>(slot_abs)},
    {Py_tp_richcompare, reinterpret_cast<void*>(slot_richcompare)},
    {Py_tp_hash, reinterpret_cast<void*>(slot_hash)},
    {0, nullptr}};

namespace {
// The elementwise op table (plugin-api/include/spora/ops_elementwise.def),
// the one list the core, the plugins and this module share.
struct EwRow {
  const char* name;
  const char* kind;
  int arity;
  int flags;
};
const EwRow kEwRows[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) {name, #kind, arity, flags},
#include <spora/ops_elementwise.def>
};
}  // namespace

void bind_operators(nb::module_& m) {
  nb::handle cls = reinterpret_cast<PyObject*>(g_tensor_type);
  auto def2 = [&](const char* name, Bin b, bool reflected) {
    nb::object f;
    if (reflected)
      f = nb::cpp_function([b](nb::handle self, nb::handle o) { return binary(b, o, self); },
                           nb::is_method(), nb::scope(cls), nb::name(name));
    else
      f = nb::cpp_function([b](nb::handle self, nb::handle o) { return binary(b, self, o); },
                           nb::is_method(), nb::scope(cls), nb::name(name));
    nb::setattr(cls, name, f);
  };
  def2("matmul", Bin::kMatmul, false);
  def2("maximum", Bin::kMax, false);
  def2("minimum", Bin::kMin, false);
  auto def1 = [&](const char* name, const char* op) {
    nb::object f = nb::cpp_function([op](nb::handle self) { return dispatch(op, &self, 1, nullptr, 1, true); },
                                    nb::is_method(), nb::scope(cls), nb::name(name));
    nb::setattr(cls, name, f);
  };
  // Tensor methods: the elementwise table's rows marked as methods.
  for (const EwRow& r : kEwRows)
    if (r.flags & SPORA_EW_F_METHOD) def1(r.name, r.name);
  // The table itself, for tests that check lists against it:
  // [(name, kind, arity, flags)] in table order.
  m.def("_elementwise_table", [] {
    nb::list out;
    for (const EwRow& r : kEwRows) out.append(nb::make_tuple(r.name, r.kind, r.arity, r.flags));
    return out;
  });
}

}  // namespace spora_py
