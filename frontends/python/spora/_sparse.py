"""Sparse tensors as MindSpore writes them: CSRTensor(indptr, indices,
values, shape) and COOTensor(indices, values, shape).

How they compute: the index structure (indptr and indices) is read to the
host once, when the tensor is made, and checked there (in range, indptr
non-decreasing); every op then runs as dense Spora ops over the nnz stored
values -- gather of a dense operand at the stored positions, scatter_add to
sum products into rows -- so its cost is O(nnz) (times K for a product with
an (N, K) matrix), on the values' device, and gradients flow to the values
(and to a dense operand) through spora.grad. Structural steps that reorder
or merge positions (COO -> CSR, adding two sparse tensors, coalesce) sort
the indices on the host: O(nnz log nnz) there, plus one copy of the indices
to the device. to_dense() allocates the whole dense shape.

The index structure must be concrete: sparse tensors are not traced by
spora.jit (build them outside the jitted function, or use the dense ops).
Sparse tensors are 2-d (rows, columns); COOTensor accepts any rank.
"""
import numpy as np

from . import _dtype as D
from ._tensor import Tensor, _call

_INDEX_DTYPES = (D.int32, D.int64)


def _tensor(x, what, where):
    if isinstance(x, Tensor):
        return x
    try:
        return Tensor(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"[{where}] {what} must be a Tensor, got {type(x).__name__} ({e})") from None


def _host_index(t, what, where):
    """The concrete values of an index tensor, as int64 NumPy."""
    if t.dtype not in _INDEX_DTYPES:
        raise TypeError(f"[{where}] {what} must be int32 or int64, got {t.dtype.name}")
    if t._symbolic:
        raise ValueError(f"[{where}] {what} is traced (inside spora.jit or a graph): sparse tensors need concrete "
                         f"indices; build them outside the jitted function")
    return t.asnumpy().astype(np.int64)


def _shape(shape, where):
    if isinstance(shape, Tensor):
        shape = shape.asnumpy().tolist()
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"[{where}] shape must be a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"[{where}] shape {shape} has a negative dimension")
    return shape


def _index_tensor(a, like):
    return Tensor(np.ascontiguousarray(a, dtype=np.int64), device=like.device)


def _dense_operand(x, like, where):
    if isinstance(x, (CSRTensor, COOTensor)):
        raise TypeError(f"[{where}] expects a dense Tensor or a number here, got a {type(x).__name__}")
    if isinstance(x, Tensor):
        return x
    return Tensor(np.asarray(x, dtype=D.to_numpy_dtype(like.dtype)), device=like.device)


def _at(dense, flat_positions, shape, like):
    """dense (broadcast to `shape`) at the given row-major flat positions."""
    full = dense.astype(like.dtype)
    if tuple(full.shape) != tuple(shape):
        full = full.broadcast_to(shape)
    return _call("gather", [full.reshape(-1), _index_tensor(flat_positions, like)], axis=0)


def _scatter_dense(flat_positions, values, shape):
    """A dense tensor of `shape` holding the sum of `values` at each flat
    position (repeated positions add up)."""
    n = int(np.prod(shape)) if shape else 1
    zeros = Tensor(np.zeros(n, D.to_numpy_dtype(values.dtype)), dtype=values.dtype, device=values.device)
    if flat_positions.size == 0:
        return zeros.reshape(shape)
    out = _call("scatter_add", [zeros, _index_tensor(flat_positions, values), values], axis=0)
    return out.reshape(shape)


def _coalesce(flat_positions, values):
    """(unique sorted positions, values summed per position)."""
    uniq, inverse = np.unique(flat_positions, return_inverse=True)
    if uniq.size == flat_positions.size and np.all(np.diff(flat_positions) > 0):
        return flat_positions, values
    zeros = Tensor(np.zeros(uniq.size, D.to_numpy_dtype(values.dtype)), dtype=values.dtype, device=values.device)
    summed = _call("scatter_add", [zeros, _index_tensor(inverse.reshape(-1), values), values], axis=0)
    return uniq, summed


class _Sparse:
    """What CSRTensor and COOTensor share: dtype, sizes, value-wise ops."""

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        """The number of stored values (as MindSpore counts it)."""
        return int(self.values.size)

    @property
    def itemsize(self):
        return self.values.dtype.itemsize

    def _flat(self):
        """Row-major flat positions of the stored values (int64 NumPy)."""
        raise NotImplementedError

    def _with_values(self, values):
        raise NotImplementedError

    def astype(self, dtype):
        return self._with_values(self.values.astype(dtype))

    def abs(self):
        return self._with_values(self.values.abs())

    def __neg__(self):
        return self._with_values(-self.values)

    def _scale(self, other, op, where):
        """Same structure, values op the dense operand at the stored positions."""
        if isinstance(other, (int, float, np.number)) and not isinstance(other, bool):
            return self._with_values(op(self.values, other))
        d = _dense_operand(other, self.values, where)
        np.broadcast_shapes(tuple(d.shape), self._shape)  # raises on shapes that do not broadcast
        return self._with_values(op(self.values, _at(d, self._flat(), self._shape, self.values)))

    def __mul__(self, other):
        return self._scale(other, lambda a, b: a * b, f"{type(self).__name__}.__mul__")

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._scale(other, lambda a, b: a / b, f"{type(self).__name__}.__truediv__")

    def to_dense(self):
        """The dense Tensor (duplicate positions of a COOTensor add up)."""
        return _scatter_dense(self._flat(), self.values, self._shape)

    def asnumpy(self):
        return self.to_dense().asnumpy()


class CSRTensor(_Sparse):
    """A 2-d sparse matrix in compressed sparse row form, as MindSpore's
    CSRTensor: row i holds values[indptr[i]:indptr[i+1]] at columns
    indices[indptr[i]:indptr[i+1]].

    CSRTensor(indptr, indices, values, shape): indptr (M + 1,) and indices
    (nnz,) int32/int64, values (nnz,), shape (M, N). CSRTensor(csr_tensor=t)
    copies t's parts."""

    def __init__(self, indptr=None, indices=None, values=None, shape=None, csr_tensor=None):
        where = "CSRTensor"
        if csr_tensor is not None:
            if not isinstance(csr_tensor, CSRTensor):
                raise TypeError(f"[{where}] csr_tensor must be a CSRTensor, got {type(csr_tensor).__name__}")
            indptr, indices, values, shape = csr_tensor.indptr, csr_tensor.indices, csr_tensor.values, csr_tensor.shape
        if indptr is None or indices is None or values is None or shape is None:
            raise TypeError(f"[{where}] give indptr, indices, values and shape (or csr_tensor=)")
        self.indptr = _tensor(indptr, "indptr", where)
        self.indices = _tensor(indices, "indices", where)
        self.values = _tensor(values, "values", where)
        self._shape = _shape(shape, where)
        if len(self._shape) != 2:
            raise ValueError(f"[{where}] shape must be 2-d (rows, columns), got {self._shape}; use COOTensor for "
                             f"other ranks")
        m, n = self._shape
        ptr = _host_index(self.indptr, "indptr", where)
        cols = _host_index(self.indices, "indices", where)
        if self.indptr.ndim != 1 or self.indices.ndim != 1 or self.values.ndim != 1:
            raise ValueError(f"[{where}] indptr, indices and values must be 1-d, got shapes {self.indptr.shape}, "
                             f"{self.indices.shape}, {self.values.shape}")
        if ptr.size != m + 1:
            raise ValueError(f"[{where}] indptr has {ptr.size} entries; a matrix of {m} rows needs {m + 1}")
        if cols.size != self.values.shape[0]:
            raise ValueError(f"[{where}] {cols.size} indices but {self.values.shape[0]} values")
        if ptr[0] != 0 or ptr[-1] != cols.size or np.any(np.diff(ptr) < 0):
            raise ValueError(f"[{where}] indptr must start at 0, never decrease and end at nnz={cols.size}, got "
                             f"{ptr.tolist() if ptr.size <= 16 else '...'}")
        if cols.size and (cols.min() < 0 or cols.max() >= n):
            raise ValueError(f"[{where}] column indices must be in [0, {n}), got values in "
                             f"[{cols.min()}, {cols.max()}]")
        self._rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
        self._cols = cols

    def _flat(self):
        return self._rows * self._shape[1] + self._cols

    def _with_values(self, values):
        out = object.__new__(CSRTensor)
        out.indptr, out.indices, out.values, out._shape = self.indptr, self.indices, values, self._shape
        out._rows, out._cols = self._rows, self._cols
        return out

    def to_tuple(self):
        return self.indptr, self.indices, self.values, self._shape

    def to_coo(self):
        """The same matrix as a COOTensor (indices (nnz, 2), rows then
        columns, in row-major order)."""
        idx = np.stack([self._rows, self._cols], axis=1).astype(D.to_numpy_dtype(self.indices.dtype))
        return COOTensor(Tensor(idx, device=self.values.device), self.values, self._shape)

    def to_csr(self):
        return self

    def __add__(self, other):
        if not isinstance(other, CSRTensor):
            raise TypeError(f"[CSRTensor.__add__] adds another CSRTensor of the same shape, got "
                            f"{type(other).__name__}; for a dense operand write csr.to_dense() + x")
        return (self.to_coo() + other.to_coo()).to_csr()

    def __sub__(self, other):
        if not isinstance(other, CSRTensor):
            raise TypeError(f"[CSRTensor.__sub__] subtracts another CSRTensor of the same shape, got "
                            f"{type(other).__name__}; for a dense operand write csr.to_dense() - x")
        return self + (-other)

    def add(self, b, alpha, beta):
        """alpha * self + beta * b (b a CSRTensor of the same shape)."""
        return self * alpha + b * beta

    def mm(self, matrix):
        """self (M, N) @ matrix: a dense (N, K) Tensor gives a dense (M, K)
        Tensor; a CSRTensor (N, K) gives a CSRTensor (M, K)."""
        return csr_mm(self, matrix)

    def mv(self, dense_vector):
        """self (M, N) @ a dense vector: (N, 1) gives (M, 1) as in MindSpore,
        (N,) gives (M,)."""
        v = _dense_operand(dense_vector, self.values, "CSRTensor.mv")
        if v.ndim == 1:
            return csr_mm(self, v.reshape(-1, 1)).reshape(-1)
        if v.ndim != 2 or v.shape[1] != 1:
            raise ValueError(f"[CSRTensor.mv] the vector must be ({self._shape[1]},) or ({self._shape[1]}, 1), got "
                             f"{tuple(v.shape)}; use mm for a matrix")
        return csr_mm(self, v)

    def sum(self, axis):
        """The sum over `axis` (0 or 1, negative counts from the end) as a
        dense Tensor keeping that axis with size 1, as MindSpore returns it."""
        if axis not in (0, 1, -1, -2):
            raise ValueError(f"[CSRTensor.sum] axis must be 0 or 1 (or -1, -2), got {axis!r}")
        m, n = self._shape
        if axis % 2 == 1:
            return _scatter_dense(self._rows, self.values, (m,)).reshape(m, 1)
        return _scatter_dense(self._cols, self.values, (n,)).reshape(1, n)

    def __repr__(self):
        return (f"CSRTensor(shape={self._shape}, dtype={self.dtype.name}, nnz={self._cols.size},\n"
                f"  indptr={self.indptr.asnumpy().tolist()},\n  indices={self._cols.tolist()},\n"
                f"  values={self.values.asnumpy().tolist()})")

    __str__ = __repr__


class COOTensor(_Sparse):
    """A sparse tensor in coordinate form, as MindSpore's COOTensor:
    values[i] sits at position indices[i].

    COOTensor(indices, values, shape): indices (nnz, ndim) int32/int64,
    values (nnz,), shape of ndim dims. Repeated positions are allowed and
    add up (to_dense, coalesce). COOTensor(coo_tensor=t) copies t's parts."""

    def __init__(self, indices=None, values=None, shape=None, coo_tensor=None):
        where = "COOTensor"
        if coo_tensor is not None:
            if not isinstance(coo_tensor, COOTensor):
                raise TypeError(f"[{where}] coo_tensor must be a COOTensor, got {type(coo_tensor).__name__}")
            indices, values, shape = coo_tensor.indices, coo_tensor.values, coo_tensor.shape
        if indices is None or values is None or shape is None:
            raise TypeError(f"[{where}] give indices, values and shape (or coo_tensor=)")
        self.indices = _tensor(indices, "indices", where)
        self.values = _tensor(values, "values", where)
        self._shape = _shape(shape, where)
        idx = _host_index(self.indices, "indices", where)
        if self.indices.ndim != 2 or self.indices.shape[1] != len(self._shape):
            raise ValueError(f"[{where}] indices must be (nnz, {len(self._shape)}) for shape {self._shape}, got "
                             f"{tuple(self.indices.shape)}")
        if self.values.ndim != 1 or self.values.shape[0] != idx.shape[0]:
            raise ValueError(f"[{where}] values must be ({idx.shape[0]},), one per index row, got "
                             f"{tuple(self.values.shape)}")
        bad = (idx < 0) | (idx >= np.asarray(self._shape, dtype=np.int64))
        if bad.any():
            row = int(np.argwhere(bad.any(axis=1))[0, 0])
            raise ValueError(f"[{where}] index row {row} {idx[row].tolist()} is outside shape {self._shape}")
        self._idx = idx

    def _flat(self):
        if not self._shape:
            return np.zeros(self._idx.shape[0], np.int64)
        strides = np.cumprod((self._shape[1:] + (1,))[::-1])[::-1].astype(np.int64)
        return self._idx @ strides

    def _with_values(self, values):
        out = object.__new__(COOTensor)
        out.indices, out.values, out._shape, out._idx = self.indices, values, self._shape, self._idx
        return out

    def _from_flat(self, flat, values):
        idx = np.stack(np.unravel_index(flat, self._shape), axis=1) if flat.size else \
            np.zeros((0, len(self._shape)), np.int64)
        idx = idx.astype(D.to_numpy_dtype(self.indices.dtype))
        return COOTensor(Tensor(idx, device=self.values.device), values, self._shape)

    def to_tuple(self):
        return self.indices, self.values, self._shape

    def coalesce(self):
        """Positions sorted row-major, each once (repeated ones summed)."""
        flat, values = _coalesce(self._flat(), self.values)
        return self._from_flat(flat, values)

    def to_csr(self):
        """The same matrix as a CSRTensor (2-d only; repeated positions are
        summed)."""
        if len(self._shape) != 2:
            raise ValueError(f"[COOTensor.to_csr] needs a 2-d COOTensor, got shape {self._shape}")
        flat, values = _coalesce(self._flat(), self.values)
        m, n = self._shape
        rows, cols = flat // n if n else flat, flat % n if n else flat
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
        dt = D.to_numpy_dtype(self.indices.dtype)
        dev = self.values.device
        return CSRTensor(Tensor(indptr.astype(dt), device=dev), Tensor(cols.astype(dt), device=dev), values,
                         self._shape)

    def to_coo(self):
        return self

    def __add__(self, other):
        """COOTensor + COOTensor -> COOTensor (coalesced); + a dense Tensor ->
        a dense Tensor."""
        if isinstance(other, COOTensor):
            if other.shape != self._shape:
                raise ValueError(f"[COOTensor.__add__] shapes {self._shape} and {other.shape} differ")
            flat = np.concatenate([self._flat(), other._flat()])
            values = _call("concat", [self.values, other.values.astype(self.dtype)], axis=0)
            return self._from_flat(*_coalesce(flat, values))
        if isinstance(other, CSRTensor):
            return self + other.to_coo()
        return self.to_dense() + _dense_operand(other, self.values, "COOTensor.__add__")

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def add(self, other, thresh):
        """self + other (COOTensors), then entries whose magnitude is below
        thresh dropped (MindSpore's COOTensor.add)."""
        if not isinstance(other, COOTensor):
            raise TypeError(f"[COOTensor.add] adds another COOTensor, got {type(other).__name__}")
        s = self + other
        keep = np.abs(s.values.asnumpy()) >= float(thresh)
        if keep.all():
            return s
        pos = np.nonzero(keep)[0]
        values = _call("gather", [s.values, _index_tensor(pos, s.values)], axis=0)
        return s._from_flat(s._flat()[pos], values)

    def __repr__(self):
        return (f"COOTensor(shape={self._shape}, dtype={self.dtype.name}, nnz={self._idx.shape[0]},\n"
                f"  indices={self._idx.tolist()},\n  values={self.values.asnumpy().tolist()})")

    __str__ = __repr__


def csr_mm(a, b, trans_a=False, trans_b=False, adjoint_a=False, adjoint_b=False):
    """a @ b for a CSRTensor a (M, N): a dense b (N, K) gives a dense (M, K)
    Tensor, a CSRTensor b (N, K) a CSRTensor (M, K) holding the positions
    where some stored a[i, j] meets a stored b[j, k]. Each stored a[i, j]
    multiplies row j of b (gather, O(nnz * K)) and the products add into row
    i (scatter_add). trans_a / trans_b / adjoints are not supported (raise):
    transpose b densely, or build the transposed matrix."""
    if trans_a or trans_b or adjoint_a or adjoint_b:
        raise ValueError("[csr_mm] trans_a, trans_b, adjoint_a and adjoint_b are not supported; pass the "
                         "transposed matrices (a dense b: b.T; a CSRTensor: its transpose built with to_coo)")
    if not isinstance(a, CSRTensor):
        raise TypeError(f"[csr_mm] a must be a CSRTensor, got {type(a).__name__}")
    m, n = a.shape
    if isinstance(b, CSRTensor):
        if b.shape[0] != n:
            raise ValueError(f"[csr_mm] a is {a.shape} and b is {b.shape}: inner sizes differ")
        dense = csr_mm(a, b.to_dense())
        # The result's structure: where a's pattern times b's pattern is non-zero.
        pa = np.zeros((m, n), np.int64)
        pa[a._rows, a._cols] = 1
        pb = np.zeros(b.shape, np.int64)
        pb[b._rows, b._cols] = 1
        rows, cols = np.nonzero(pa @ pb)
        k = b.shape[1]
        values = _call("gather", [dense.reshape(-1), _index_tensor(rows * k + cols, a.values)], axis=0)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
        dt = D.to_numpy_dtype(a.indices.dtype)
        dev = a.values.device
        return CSRTensor(Tensor(indptr.astype(dt), device=dev), Tensor(cols.astype(dt), device=dev), values, (m, k))
    d = _dense_operand(b, a.values, "csr_mm")
    if d.ndim != 2 or d.shape[0] != n:
        raise ValueError(f"[csr_mm] a is {a.shape}, so b must be ({n}, K); got {tuple(d.shape)}")
    k = d.shape[1]
    d = d.astype(a.dtype) if d.dtype != a.dtype else d
    picked = _call("gather", [d, _index_tensor(a._cols, a.values)], axis=0)  # (nnz, K): row j of b per value
    products = picked * a.values.reshape(-1, 1)
    zeros = Tensor(np.zeros((m, k), D.to_numpy_dtype(a.dtype)), dtype=a.dtype, device=a.values.device)
    if a._rows.size == 0:
        return zeros
    rows = _index_tensor(np.broadcast_to(a._rows.reshape(-1, 1), (a._rows.size, k)), a.values)
    return _call("scatter_add", [zeros, rows, products], axis=0)


def csr_to_coo(tensor):
    return tensor.to_coo()


def _sparse_from_dense(x, where):
    if not isinstance(x, Tensor):
        raise TypeError(f"[{where}] takes a Tensor, got {type(x).__name__}")
    a = x.asnumpy()
    return a, np.argwhere(a != 0)


def dense_to_sparse_coo(tensor):
    """The non-zero entries of a dense Tensor as a COOTensor (row-major)."""
    a, idx = _sparse_from_dense(tensor, "dense_to_sparse_coo")
    values = _call("gather", [tensor.reshape(-1), _index_tensor(np.ravel_multi_index(idx.T, a.shape), tensor)],
                   axis=0) if idx.size else Tensor(np.zeros(0, D.to_numpy_dtype(tensor.dtype)), dtype=tensor.dtype)
    return COOTensor(Tensor(idx.astype(np.int64), device=tensor.device), values, a.shape)


def dense_to_sparse_csr(tensor):
    """The non-zero entries of a 2-d dense Tensor as a CSRTensor."""
    if tensor.ndim != 2:
        raise ValueError(f"[dense_to_sparse_csr] needs a 2-d Tensor, got shape {tuple(tensor.shape)}")
    return dense_to_sparse_coo(tensor).to_csr()


Tensor.to_coo = dense_to_sparse_coo
Tensor.to_csr = dense_to_sparse_csr
CSRTensor.__module__ = "spora"
COOTensor.__module__ = "spora"
