"""A small ctypes binding of Spora's C API (libspora.so).

It exists for the Python tests, and doubles as a demonstration that the C ABI
(spora/spora.h) is usable from another language with nothing but a dynamic
loader: no headers, no compiler, no generated code.

The library is found through the SPORA_LIB environment variable (ctest sets it
to the built libspora.so). Every call's status is checked; a failure raises
SporaError carrying the status code and spora_last_error().
"""
import ctypes
import os

import numpy as np

# -- status codes (spora.h) -------------------------------------------------
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_NOT_FOUND = 2
ERROR_UNAVAILABLE = 3
ERROR_UNIMPLEMENTED = 4
ERROR_OUT_OF_MEMORY = 5
ERROR_TIMEOUT = 6
ERROR_ABORTED = 7
ERROR_INTERNAL = 8
ERROR_IO = 9

# -- dtypes (spora.h) -------------------------------------------------------
DTYPE_F32 = 1
DTYPE_F64 = 2
DTYPE_F16 = 3
DTYPE_BF16 = 4
DTYPE_I32 = 5
DTYPE_I64 = 6
DTYPE_U8 = 7
DTYPE_BOOL = 8

MAX_NDIM = 8
MAX_OP_OUTPUTS = 64  # SPORA_MAX_OP_OUTPUTS

_NP_TO_SPORA = {
    np.dtype(np.float32): DTYPE_F32,
    np.dtype(np.float64): DTYPE_F64,
    np.dtype(np.float16): DTYPE_F16,
    np.dtype(np.int32): DTYPE_I32,
    np.dtype(np.int64): DTYPE_I64,
    np.dtype(np.uint8): DTYPE_U8,
    np.dtype(np.bool_): DTYPE_BOOL,
}
_SPORA_TO_NP = {v: k for k, v in _NP_TO_SPORA.items()}


class SporaError(Exception):
    """A failed Spora call: `status` is the spora_status_t, `message` the
    thread's spora_last_error() right after the call."""

    def __init__(self, func, status, message):
        self.func = func
        self.status = status
        self.message = message
        super().__init__(f"{func} failed with status {status} ({status_string(status)}): {message}")


# -- loading and prototypes -------------------------------------------------
_status = ctypes.c_int32
_vp = ctypes.c_void_p
_cstr = ctypes.c_char_p
_size = ctypes.c_size_t
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
P = ctypes.POINTER

_PROTOTYPES = {
    "spora_last_error": (_cstr, []),
    "spora_status_string": (_cstr, [_status]),
    "spora_version": (_status, [P(_i32), P(_i32), P(_i32)]),
    "spora_dtype_size": (_size, [ctypes.c_int]),
    "spora_dtype_name": (_cstr, [ctypes.c_int]),
    "spora_context_create": (_status, [P(_vp)]),
    "spora_context_free": (_status, [_vp]),
    "spora_device_count": (_status, [_vp, P(_size)]),
    "spora_device_get": (_status, [_vp, _size, P(_vp)]),
    "spora_device_find": (_status, [_vp, _cstr, P(_vp)]),
    "spora_device_name": (_status, [_vp, P(_cstr)]),
    "spora_device_synchronize": (_status, [_vp]),
    "spora_device_set_fallback": (_status, [_vp, _i32]),
    "spora_tensor_create": (_status, [_vp, ctypes.c_int, P(_i64), _i32, _vp, _size, P(_vp)]),
    "spora_tensor_to": (_status, [_vp, _vp, P(_vp)]),
    "spora_tensor_read": (_status, [_vp, _vp, _size]),
    "spora_tensor_dtype": (_status, [_vp, P(ctypes.c_int)]),
    "spora_tensor_ndim": (_status, [_vp, P(_i32)]),
    "spora_tensor_shape": (_status, [_vp, P(_i64), _i32]),
    "spora_tensor_numel": (_status, [_vp, P(_i64)]),
    "spora_tensor_nbytes": (_status, [_vp, P(_size)]),
    "spora_tensor_device": (_status, [_vp, P(_vp)]),
    "spora_tensor_free": (_status, [_vp]),
    "spora_attrs_create": (_status, [P(_vp)]),
    "spora_attrs_free": (_status, [_vp]),
    "spora_attrs_set_int": (_status, [_vp, _cstr, _i64]),
    "spora_attrs_set_float": (_status, [_vp, _cstr, ctypes.c_double]),
    "spora_attrs_set_bool": (_status, [_vp, _cstr, _i32]),
    "spora_attrs_set_ints": (_status, [_vp, _cstr, P(_i64), _size]),
    "spora_attrs_set_floats": (_status, [_vp, _cstr, P(ctypes.c_double), _size]),
    "spora_attrs_set_string": (_status, [_vp, _cstr, _cstr]),
    "spora_op_count": (_status, [P(_size)]),
    "spora_op_name": (_status, [_size, P(_cstr)]),
    "spora_op_schema": (_status, [_cstr, P(_cstr)]),
    "spora_op_call": (_status, [_cstr, _vp, P(_vp), _size, _vp, P(_vp), _size]),
    "spora_op_call_into": (_status, [_cstr, _vp, P(_vp), _size, _vp, P(_vp), _size]),
    "spora_op_gradient": (_status, [_cstr, P(_i32), P(_i32)]),
    "spora_graph_create": (_status, [_cstr, P(_vp)]),
    "spora_graph_free": (_status, [_vp]),
    "spora_graph_add_input": (_status, [_vp, _cstr, ctypes.c_int, P(_i64), _i32, P(_i64)]),
    "spora_graph_add_weight": (_status, [_vp, _cstr, ctypes.c_int, P(_i64), _i32, P(_i64)]),
    "spora_graph_add_constant": (_status, [_vp, _vp, P(_i64)]),
    "spora_graph_add_op": (_status, [_vp, _cstr, P(_i64), _size, _vp, _cstr, _i32, P(_i64), _size, P(_size)]),
    "spora_graph_set_outputs": (_status, [_vp, P(_i64), _size]),
    "spora_graph_outputs": (_status, [_vp, P(_i64), _size, P(_size)]),
    "spora_graph_value_type": (_status, [_vp, _i64, P(ctypes.c_int), P(_i64), _i32, P(_i32)]),
    "spora_graph_to_text": (_status, [_vp, P(_cstr)]),
    "spora_graph_to_json": (_status, [_vp, P(_cstr)]),
    "spora_graph_from_json": (_status, [_cstr, _size, P(_vp)]),
    "spora_graph_grad": (_status, [_vp, P(_i64), _size, _size, P(_vp)]),
    "spora_graph_compile": (_status, [_vp, _vp, P(_vp)]),
    "spora_executable_free": (_status, [_vp]),
    "spora_executable_run": (_status, [_vp, P(_vp), _size, P(_vp), _size]),
    "spora_executable_memory": (_status, [_vp, P(ctypes.c_uint64), P(ctypes.c_uint64)]),
    "spora_graph_run_eager": (_status, [_vp, _vp, P(_vp), _size, P(_vp), _size]),
    "spora_graph_optimize": (_status, [_vp, _i32]),
    "spora_graph_run_pass": (_status, [_vp, _cstr]),
    "spora_graph_add_if": (_status, [_vp, _i64, _vp, _vp, P(_i64), _size, _cstr, _i32, P(_i64), _size, P(_size)]),
    "spora_graph_add_while": (_status, [_vp, _vp, _vp, P(_i64), _size, _cstr, _i32, P(_i64), _size, P(_size)]),
    "spora_op_call_at": (_status, [_cstr, _vp, P(_vp), _size, _vp, _cstr, _i32, P(_vp), _size]),
    "spora_tape_create": (_status, [P(_vp)]),
    "spora_tape_free": (_status, [_vp]),
    "spora_tape_start": (_status, [_vp]),
    "spora_tape_stop": (_status, [_vp]),
    "spora_tape_watch": (_status, [_vp, _vp]),
    "spora_tape_gradient": (_status, [_vp, _vp, _vp, P(_vp), _size, P(_vp)]),
    "spora_tape_graph": (_status, [_vp, P(_vp), _size, P(_vp)]),
}


def _load():
    path = os.environ.get("SPORA_LIB")
    if not path:
        raise RuntimeError(
            "SPORA_LIB is not set: point it at the built libspora.so "
            "(ctest sets it; e.g. SPORA_LIB=build/lib/libspora.so)")
    if not os.path.exists(path):
        raise RuntimeError(f"SPORA_LIB={path} does not exist; build the 'spora' target first")
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()


def last_error():
    return lib.spora_last_error().decode()


def status_string(status):
    return lib.spora_status_string(status).decode()


def check(func, status):
    """Raises SporaError unless `status` is SPORA_OK. Call it immediately
    after the call, on the same thread, so that last_error() belongs to it."""
    if status != OK:
        raise SporaError(func, status, last_error())


def call(name, *args):
    """Calls spora function `name` and checks its status."""
    check(name, getattr(lib, name)(*args))


def version():
    a, b, c = _i32(), _i32(), _i32()
    call("spora_version", ctypes.byref(a), ctypes.byref(b), ctypes.byref(c))
    return a.value, b.value, c.value


def op_names():
    n = _size()
    call("spora_op_count", ctypes.byref(n))
    out = []
    for i in range(n.value):
        s = _cstr()
        call("spora_op_name", i, ctypes.byref(s))
        out.append(s.value.decode())
    return out


def op_schema(op):
    s = _cstr()
    call("spora_op_schema", op.encode(), ctypes.byref(s))
    return s.value.decode()


# -- devices ----------------------------------------------------------------
class Device:
    """A borrowed device handle (devices live as long as the process)."""

    def __init__(self, handle):
        self.handle = handle
        s = _cstr()
        call("spora_device_name", handle, ctypes.byref(s))
        self.name = s.value.decode()

    def synchronize(self):
        call("spora_device_synchronize", self.handle)

    def set_fallback(self, enabled):
        call("spora_device_set_fallback", self.handle, 1 if enabled else 0)

    def __eq__(self, other):
        return isinstance(other, Device) and self.handle == other.handle

    def __hash__(self):
        return hash(self.handle)

    def __repr__(self):
        return f"Device({self.name})"


class Context:
    def __init__(self):
        h = _vp()
        call("spora_context_create", ctypes.byref(h))
        self.handle = h

    def free(self):
        if self.handle:
            call("spora_context_free", self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def device_count(self):
        n = _size()
        call("spora_device_count", self.handle, ctypes.byref(n))
        return n.value

    def device_get(self, index):
        h = _vp()
        call("spora_device_get", self.handle, index, ctypes.byref(h))
        return Device(h.value)

    def devices(self):
        return [self.device_get(i) for i in range(self.device_count())]

    def device_find(self, name):
        h = _vp()
        call("spora_device_find", self.handle, name.encode(), ctypes.byref(h))
        return Device(h.value)


# -- tensors ----------------------------------------------------------------
class Tensor:
    """An owned tensor handle; freed by free() or when garbage-collected."""

    def __init__(self, handle):
        self.handle = handle

    @staticmethod
    def from_numpy(device, array):
        a = np.asarray(array)
        if a.dtype not in _NP_TO_SPORA:
            raise TypeError(f"no Spora dtype for numpy dtype {a.dtype}")
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
        return Tensor.create_raw(device, _NP_TO_SPORA[a.dtype], a.shape, a, a.nbytes)

    @staticmethod
    def create_raw(device, dtype, shape, data, data_bytes):
        """spora_tensor_create with every argument explicit: `data` is a
        numpy array (its buffer is passed) or None (zero-filled)."""
        dims = (_i64 * max(len(shape), 1))(*shape)
        ptr = None if data is None else data.ctypes.data_as(_vp)
        h = _vp()
        call("spora_tensor_create", device.handle, dtype, dims, len(shape), ptr, data_bytes, ctypes.byref(h))
        return Tensor(h.value)

    @staticmethod
    def zeros(device, shape, dtype=DTYPE_F32):
        return Tensor.create_raw(device, dtype, shape, None, 0)

    def _need(self):
        if not self.handle:
            raise ValueError("tensor already freed")
        return self.handle

    @property
    def dtype(self):
        d = ctypes.c_int()
        call("spora_tensor_dtype", self._need(), ctypes.byref(d))
        return d.value

    @property
    def shape(self):
        n = _i32()
        call("spora_tensor_ndim", self._need(), ctypes.byref(n))
        dims = (_i64 * MAX_NDIM)()
        call("spora_tensor_shape", self.handle, dims, MAX_NDIM)
        return tuple(dims[i] for i in range(n.value))

    @property
    def numel(self):
        n = _i64()
        call("spora_tensor_numel", self._need(), ctypes.byref(n))
        return n.value

    @property
    def nbytes(self):
        n = _size()
        call("spora_tensor_nbytes", self._need(), ctypes.byref(n))
        return n.value

    @property
    def device(self):
        h = _vp()
        call("spora_tensor_device", self._need(), ctypes.byref(h))
        return Device(h.value)

    def numpy(self):
        dt = self.dtype
        if dt not in _SPORA_TO_NP:
            raise TypeError(f"no numpy dtype for Spora dtype {dt}")
        out = np.empty(self.shape, dtype=_SPORA_TO_NP[dt])
        call("spora_tensor_read", self.handle, out.ctypes.data_as(_vp), out.nbytes)
        return out

    def to(self, device):
        h = _vp()
        call("spora_tensor_to", self._need(), device.handle, ctypes.byref(h))
        return Tensor(h.value)

    def free(self):
        if self.handle:
            h, self.handle = self.handle, None
            call("spora_tensor_free", h)

    def __del__(self):
        try:
            if self.handle:
                lib.spora_tensor_free(self.handle)
                self.handle = None
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return f"Tensor(shape={self.shape}, dtype={self.dtype})" if self.handle else "Tensor(<freed>)"


# -- attributes -------------------------------------------------------------
class Attrs:
    """An owned spora_attrs_t built from a dict: bool -> set_bool, int ->
    set_int, float -> set_float, str -> set_string, list/tuple of ints ->
    set_ints, list/tuple containing floats -> set_floats."""

    def __init__(self, values=None):
        h = _vp()
        call("spora_attrs_create", ctypes.byref(h))
        self.handle = h.value
        for k, v in (values or {}).items():
            self.set(k, v)

    def set_int(self, name, v):
        call("spora_attrs_set_int", self.handle, name.encode(), int(v))

    def set_bool(self, name, v):
        call("spora_attrs_set_bool", self.handle, name.encode(), 1 if v else 0)

    def set_float(self, name, v):
        call("spora_attrs_set_float", self.handle, name.encode(), float(v))

    def set_string(self, name, v):
        call("spora_attrs_set_string", self.handle, name.encode(), v.encode())

    def set_ints(self, name, values):
        values = [int(x) for x in values]
        arr = (_i64 * max(len(values), 1))(*values)
        call("spora_attrs_set_ints", self.handle, name.encode(), arr, len(values))

    def set_floats(self, name, values):
        values = [float(x) for x in values]
        arr = (ctypes.c_double * max(len(values), 1))(*values)
        call("spora_attrs_set_floats", self.handle, name.encode(), arr, len(values))

    def set(self, name, v):
        if isinstance(v, (bool, np.bool_)):
            self.set_bool(name, v)
        elif isinstance(v, (int, np.integer)):
            self.set_int(name, v)
        elif isinstance(v, (float, np.floating)):
            self.set_float(name, v)
        elif isinstance(v, str):
            self.set_string(name, v)
        elif isinstance(v, (list, tuple)):
            if any(isinstance(x, (float, np.floating)) for x in v):
                self.set_floats(name, v)
            else:
                self.set_ints(name, v)
        else:
            raise TypeError(f"attribute {name!r}: unsupported value {v!r}")

    def free(self):
        if self.handle:
            h, self.handle = self.handle, None
            call("spora_attrs_free", h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            if self.handle:
                lib.spora_attrs_free(self.handle)
                self.handle = None
        except Exception:
            pass


# -- ops --------------------------------------------------------------------
def op_call(op, inputs, attrs=None, num_outputs=1, device=None):
    """Runs `op` eagerly; returns a list of `num_outputs` new Tensors.

    `inputs` is a sequence of Tensor or None (passed as a NULL handle);
    `attrs` an Attrs, a dict (converted for this call) or None; `device` a
    Device or None."""
    owned = None
    if isinstance(attrs, dict):
        owned = attrs = Attrs(attrs)
    try:
        n_in = len(inputs)
        arr_in = (_vp * max(n_in, 1))(*[t.handle if t is not None else None for t in inputs])
        arr_out = (_vp * max(num_outputs, 1))()
        status = lib.spora_op_call(op.encode(), device.handle if device else None, arr_in, n_in,
                                   attrs.handle if attrs is not None else None, arr_out, num_outputs)
        check(f"spora_op_call({op})", status)
        return [Tensor(arr_out[i]) for i in range(num_outputs)]
    finally:
        if owned is not None:
            owned.free()


def op_call_into(op, inputs, outputs, attrs=None, device=None):
    """Runs `op` eagerly into the existing Tensors `outputs`
    (spora_op_call_into): an output may be the input the op updates in
    place."""
    owned = None
    if isinstance(attrs, dict):
        owned = attrs = Attrs(attrs)
    try:
        arr_in = (_vp * max(len(inputs), 1))(*[t.handle if t is not None else None for t in inputs])
        arr_out = (_vp * max(len(outputs), 1))(*[t.handle if t is not None else None for t in outputs])
        status = lib.spora_op_call_into(op.encode(), device.handle if device else None, arr_in, len(inputs),
                                        attrs.handle if attrs is not None else None, arr_out, len(outputs))
        check(f"spora_op_call_into({op})", status)
    finally:
        if owned is not None:
            owned.free()


def run(op, *inputs, **attrs):
    """One-output convenience: run(op, t1, t2, axis=1) -> Tensor."""
    return op_call(op, list(inputs), attrs or None)[0]


# -- graphs -----------------------------------------------------------------
def op_gradient(op):
    """(has_rule, differentiable) for `op`."""
    h, d = _i32(), _i32()
    call("spora_op_gradient", op.encode(), ctypes.byref(h), ctypes.byref(d))
    return bool(h.value), bool(d.value)


class Graph:
    """An owned spora_graph_t; values are the C API's int64 value ids."""

    def __init__(self, name="main", handle=None):
        if handle is None:
            h = _vp()
            call("spora_graph_create", name.encode(), ctypes.byref(h))
            handle = h.value
        self.handle = handle
        self.params = []  # (value, kind) in creation order: what run() binds

    def _leaf(self, fn, name, dtype, shape):
        dims = (_i64 * max(len(shape), 1))(*shape)
        v = _i64()
        call(fn, self.handle, name.encode(), dtype, dims, len(shape), ctypes.byref(v))
        self.params.append(v.value)
        return v.value

    def input(self, name, dtype, shape):
        return self._leaf("spora_graph_add_input", name, dtype, shape)

    def weight(self, name, dtype, shape):
        return self._leaf("spora_graph_add_weight", name, dtype, shape)

    def constant(self, tensor):
        v = _i64()
        call("spora_graph_add_constant", self.handle, tensor.handle, ctypes.byref(v))
        return v.value

    def op(self, op, inputs, attrs=None, file=None, line=0, capacity=MAX_OP_OUTPUTS):
        owned = None
        if isinstance(attrs, dict):
            owned = attrs = Attrs(attrs)
        try:
            arr = (_i64 * max(len(inputs), 1))(*inputs)
            outs = (_i64 * capacity)()
            n = _size()
            call("spora_graph_add_op", self.handle, op.encode(), arr, len(inputs),
                 attrs.handle if attrs is not None else None, file.encode() if file else None, line, outs,
                 capacity, ctypes.byref(n))
            return [outs[i] for i in range(n.value)]
        finally:
            if owned is not None:
                owned.free()

    def if_else(self, cond, then_graph, else_graph, inputs, file=None, line=0, capacity=16):
        """spora_graph_add_if: the branches (Graphs) are copied in; returns
        the node's outputs."""
        arr = (_i64 * max(len(inputs), 1))(*inputs)
        outs = (_i64 * capacity)()
        n = _size()
        call("spora_graph_add_if", self.handle, cond, then_graph.handle, else_graph.handle, arr, len(inputs),
             file.encode() if file else None, line, outs, capacity, ctypes.byref(n))
        return [outs[i] for i in range(n.value)]

    def while_loop(self, cond_graph, body_graph, inputs, file=None, line=0, capacity=None):
        """spora_graph_add_while: `inputs` are the initial loop-carried
        values; returns their final values."""
        capacity = len(inputs) if capacity is None else capacity
        arr = (_i64 * max(len(inputs), 1))(*inputs)
        outs = (_i64 * max(capacity, 1))()
        n = _size()
        call("spora_graph_add_while", self.handle, cond_graph.handle, body_graph.handle, arr, len(inputs),
             file.encode() if file else None, line, outs, capacity, ctypes.byref(n))
        return [outs[i] for i in range(n.value)]

    def set_outputs(self, values):
        arr = (_i64 * max(len(values), 1))(*values)
        call("spora_graph_set_outputs", self.handle, arr, len(values))

    def outputs(self):
        n = _size()
        call("spora_graph_outputs", self.handle, None, 0, ctypes.byref(n))
        arr = (_i64 * max(n.value, 1))()
        call("spora_graph_outputs", self.handle, arr, n.value, ctypes.byref(n))
        return [arr[i] for i in range(n.value)]

    def value_type(self, v):
        dt, nd = ctypes.c_int(), _i32()
        dims = (_i64 * MAX_NDIM)()
        call("spora_graph_value_type", self.handle, v, ctypes.byref(dt), dims, MAX_NDIM, ctypes.byref(nd))
        return dt.value, tuple(dims[i] for i in range(nd.value))

    def text(self):
        s = _cstr()
        call("spora_graph_to_text", self.handle, ctypes.byref(s))
        return s.value.decode()

    def json(self):
        s = _cstr()
        call("spora_graph_to_json", self.handle, ctypes.byref(s))
        return s.value.decode()

    @staticmethod
    def from_json(text):
        b = text.encode()
        h = _vp()
        call("spora_graph_from_json", b, len(b), ctypes.byref(h))
        return Graph(handle=h.value)

    def grad(self, wrt, output=0):
        arr = (_i64 * max(len(wrt), 1))(*wrt)
        h = _vp()
        call("spora_graph_grad", self.handle, arr, len(wrt), output, ctypes.byref(h))
        g = Graph(handle=h.value)
        g.params = list(self.params)
        return g

    def optimize(self, level=1):
        call("spora_graph_optimize", self.handle, level)

    def run_pass(self, name):
        call("spora_graph_run_pass", self.handle, name.encode())

    def run_eager(self, device, params, num_outputs):
        arr = (_vp * max(len(params), 1))(*[t.handle if t is not None else None for t in params])
        outs = (_vp * max(num_outputs, 1))()
        call("spora_graph_run_eager", self.handle, device.handle, arr, len(params), outs, num_outputs)
        return [Tensor(outs[i]) for i in range(num_outputs)]

    def compile(self, device):
        h = _vp()
        call("spora_graph_compile", self.handle, device.handle, ctypes.byref(h))
        return Executable(h.value)

    def free(self):
        if self.handle:
            h, self.handle = self.handle, None
            call("spora_graph_free", h)

    def __del__(self):
        try:
            if self.handle:
                lib.spora_graph_free(self.handle)
                self.handle = None
        except Exception:
            pass


class Executable:
    def __init__(self, handle):
        self.handle = handle

    def run(self, params, num_outputs):
        arr = (_vp * max(len(params), 1))(*[t.handle if t is not None else None for t in params])
        outs = (_vp * max(num_outputs, 1))()
        call("spora_executable_run", self.handle, arr, len(params), outs, num_outputs)
        return [Tensor(outs[i]) for i in range(num_outputs)]

    def memory(self):
        p, n = ctypes.c_uint64(), ctypes.c_uint64()
        call("spora_executable_memory", self.handle, ctypes.byref(p), ctypes.byref(n))
        return p.value, n.value

    def __del__(self):
        try:
            if self.handle:
                lib.spora_executable_free(self.handle)
                self.handle = None
        except Exception:
            pass


# -- the eager tape -----------------------------------------------------------
class Tape:
    """An owned spora_tape_t. `with tape:` starts and stops it."""

    def __init__(self):
        h = _vp()
        call("spora_tape_create", ctypes.byref(h))
        self.handle = h.value

    def start(self):
        call("spora_tape_start", self.handle)

    def stop(self):
        call("spora_tape_stop", self.handle)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def watch(self, tensor):
        call("spora_tape_watch", self.handle, tensor.handle)

    def gradient(self, target, sources, sens=None):
        arr = (_vp * max(len(sources), 1))(*[t.handle if t is not None else None for t in sources])
        outs = (_vp * max(len(sources), 1))()
        call("spora_tape_gradient", self.handle, target.handle, sens.handle if sens is not None else None, arr,
             len(sources), outs)
        return [Tensor(outs[i]) for i in range(len(sources))]

    def graph(self, outputs):
        arr = (_vp * max(len(outputs), 1))(*[t.handle for t in outputs])
        h = _vp()
        call("spora_tape_graph", self.handle, arr, len(outputs), ctypes.byref(h))
        return Graph(handle=h.value)

    def free(self):
        if self.handle:
            h, self.handle = self.handle, None
            call("spora_tape_free", h)

    def __del__(self):
        try:
            if self.handle:
                lib.spora_tape_free(self.handle)
                self.handle = None
        except Exception:
            pass
