// Shared pieces of the spora._C binding module: the Tensor object, traces
// (graphs being recorded), the error and source-location helpers.
//
// The binding sees only spora.h / spora.hpp (layering rule): every call into
// the core goes through the C API.
#pragma once
#include <nanobind/nanobind.h>
#include <spora/spora.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace spora_py {

// A tensor handle shared between Python objects (Tensor(t), a Parameter's
// set_data, the owner of a DLPack export): spora_tensor_t is not reference
// counted itself.
using Handle = std::shared_ptr<spora_tensor_t>;
Handle adopt(spora_tensor_t* t);

// A graph handle, shared by the traces and Python objects using it.
struct GraphBox {
  spora_graph_t* g = nullptr;
  explicit GraphBox(spora_graph_t* graph) : g(graph) {}
  ~GraphBox() { spora_graph_free(g); }
  GraphBox(const GraphBox&) = delete;
  GraphBox& operator=(const GraphBox&) = delete;
};

// A graph being recorded by running Python code with symbolic tensors (jit
// tracing, and grad inside jit). Symbolic tensors point at their trace and
// have no value: reading one is untraceable. (PyNative grad needs no trace:
// it runs on the core's eager tape.)
struct Trace {
  std::shared_ptr<GraphBox> graph;
  bool closed = false;
  spora_device_t* device = nullptr;
  // Python callable lift(tensor) -> value id in this graph, for tensors not
  // recorded in it yet (Parameters, tensors of an enclosing trace,
  // constants). Set by the Python side; dropped on close (it refers back).
  nb::object lift;
  // Python-side state of the trace (assigned Parameters, bindings, ...).
  nb::object state;
  // The first untraceable use (file:line), so a swallowed exception still
  // makes the jit fall back.
  std::string untraceable;
};
using TraceRef = std::shared_ptr<Trace>;

// The innermost open trace of this thread, or null.
Trace* current_trace();

struct PyTensor {
  Handle t;                 // concrete value (may be null for symbolic tensors)
  TraceRef trace;           // set for symbolic / recorded tensors
  spora_value_t value = -1; // value id in trace->graph
  spora_dtype_t dtype = SPORA_DTYPE_INVALID;
  int32_t ndim = 0;
  int64_t shape[SPORA_MAX_NDIM] = {};
  bool is_param = false;
  // A tensor declared without data (Tensor(shape=, dtype=, init=), or a
  // Parameter made under spora.nn.utils.no_init_parameters): a tuple
  // (initializer or None, declaration number), read by init_data.
  nb::object init;

  // Shape and dtype but no data and no trace: reading it is an error
  // naming it (raise_meta); a trace takes it as a weight or input by shape.
  bool meta() const { return !t && !trace; }
  bool symbolic_in(const Trace* tr) const { return trace && trace.get() == tr; }
  // Recorded in a trace that is still open (this one or an enclosing one).
  bool live_symbolic() const { return trace && !trace->closed; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  void set_meta_from_handle();
};

// Python type of spora._C.Tensor (set at module init).
extern PyTypeObject* g_tensor_type;
inline bool is_tensor(nb::handle h) {
  return Py_TYPE(h.ptr()) == g_tensor_type || PyObject_TypeCheck(h.ptr(), g_tensor_type);
}
inline PyTensor* as_tensor(nb::handle h) { return nb::inst_ptr<PyTensor>(h); }
nb::object wrap(PyTensor&& t);
nb::object wrap_handle(spora_tensor_t* t);

// Devices.
spora_context_t* context();
spora_device_t* default_device();
spora_device_t* find_device(const std::string& name);
const char* device_name(spora_device_t* d);
spora_device_t* tensor_device(const PyTensor& t);

// dtype objects: Python DType instances indexed by spora_dtype_t.
nb::object dtype_object(spora_dtype_t d);
spora_dtype_t dtype_from(nb::handle obj);  // None -> SPORA_DTYPE_INVALID

// Source locations and errors.
// The first Python frame outside the spora package: the user's line.
bool user_location(std::string* file, int* line);
std::string user_location_suffix();  // " (file.py:17)" or ""
// Raises the Python exception for a failed C call (SporaError family),
// appending the user's file:line when `locate` and none is in the message.
[[noreturn]] void raise_status(spora_status_t s, bool locate);
inline void check(spora_status_t s, bool locate = true) {
  if (s != SPORA_OK) raise_status(s, locate);
}
[[noreturn]] void raise_value_error(const std::string& msg);
[[noreturn]] void raise_type_error(const std::string& msg);
// Reading a symbolic tensor's value (bool(), item(), asnumpy(), ...):
// records the location on the trace and raises spora.UntraceableError.
[[noreturn]] void raise_untraceable(const PyTensor& t, const char* what);
// Reading a tensor declared without data (PyTensor::meta): a RuntimeError
// naming the Parameter (or "a Tensor"), its shape and what to call.
[[noreturn]] void raise_meta(const PyTensor& t, const char* what);
extern PyObject* g_untraceable;

// Op dispatch: eager when no trace is open (or no input is traced or a
// Parameter), else recorded into the innermost trace. `inputs` are Tensor objects. Returns one Tensor when
// `single` and the op has one output, else a tuple.
nb::object dispatch(const char* op, const nb::handle* inputs, size_t n, const spora_attrs_t* attrs, size_t nout,
                    bool single, spora_device_t* device = nullptr);
// A tensor for a Python scalar / array-like operand of `like`.
nb::object operand(nb::handle x, const PyTensor* like);
nb::object scalar_tensor(double v, spora_dtype_t dtype, spora_device_t* device);
nb::object cast_to(nb::handle x, spora_dtype_t dtype);
// The helpers behind them (dispatch.cpp), shared with operators.cpp.
bool is_float(spora_dtype_t d);
spora_dtype_t promote(spora_dtype_t a, spora_dtype_t b);  // PyTorch-like
// The dtype a Python scalar x takes next to a `like` tensor; *is_scalar is
// false (and the result invalid) when x is not a bool/int/float.
spora_dtype_t scalar_dtype(nb::handle x, spora_dtype_t like, bool* is_scalar);
// A cached 0-d tensor holding v (never handed to user code: tensors are
// shared by value).
const Handle& scalar_handle(double v, spora_dtype_t dtype, spora_device_t* device);
// spora_op_call, releasing the GIL for `work` elements and more.
void eager_call(const char* op, spora_device_t* device, spora_tensor_t* const* hs, size_t n,
                const spora_attrs_t* attrs, spora_tensor_t** outs, size_t nout, int64_t work);

// spora_attrs_t owned by Python (spora._C.Attrs).
struct PyAttrs {
  spora_attrs_t* a = nullptr;
  PyAttrs() { spora_attrs_create(&a); }
  ~PyAttrs() { spora_attrs_free(a); }
  PyAttrs(const PyAttrs&) = delete;
  PyAttrs& operator=(const PyAttrs&) = delete;
};

void bind_tensor(nb::module_& m);
void bind_dispatch(nb::module_& m);  // also binds operators.cpp and opfn.cpp
void bind_operators(nb::module_& m);
void bind_opfn(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_dlpack(nb::class_<PyTensor>& cls, nb::module_& m);
void bind_tape(nb::module_& m);  // tape.cpp: the eager tape behind PyNative grad
void bind_comm(nb::module_& m);  // comm.cpp: communicators for spora.communication
void bind_io(nb::module_& m);  // io.cpp: checkpoint and model files
void bind_dataset(nb::module_& m);  // dataset.cpp: the data pipeline (spora_dataset_*)
void bind_profiler(nb::module_& m);  // profiler.cpp: spora_profiler_* behind spora.Profiler
extern bool g_profile_locations;     // profiler.cpp: eager ops carry the user's source line

}  // namespace spora_py
