"""spora.communication: collectives across processes (MindSpore's
mindspore.communication), over a collective plugin such as "mpi".

    # mpirun -np 2 python train.py
    from spora import communication as comm
    comm.init()                      # backend "mpi"; rank and size from mpirun
    rank, size = comm.get_rank(), comm.get_group_size()
    total = comm.all_reduce(spora.Tensor(local_value))
    comm.release()

Every rank must make the same calls in the same order. Inside spora.jit
(graph mode), all_reduce is recorded as a graph op that the scheduler runs
through the communicator; elsewhere the collectives run at once.
"""
from .. import _C
from .._tensor import Tensor

_world = None

__all__ = ["init", "release", "is_initialized", "get_rank", "get_group_size", "get_local_rank", "all_reduce",
           "all_gather", "broadcast", "barrier", "send", "recv", "ReduceOp", "GlobalComm"]


class ReduceOp:
    """Reduce ops by their MindSpore names."""
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    MEAN = "mean"


class GlobalComm:
    """The backend init() was called with, and the world group's name."""
    BACKEND = None
    WORLD_COMM_GROUP = "spora_world_group"


def init(backend_name=None, rank=None, group_size=None, timeout_ms=None):
    """Joins the job's world communicator over `backend_name`: "nccl"
    (MindSpore's GPU default; the communicator is bound to the device
    set_context chose, and collectives run on its stream) or "mpi" (host
    memory; any device). None picks "nccl" when training on a cuda device,
    else "mpi". rank and group_size default to the launcher's environment
    (spora launch, mpirun); a process started alone is rank 0 of 1.
    timeout_ms bounds every later collective (default:
    SPORA_COMM_TIMEOUT_MS, else 30 minutes; -1 waits forever). Calling
    init again with the same backend is a no-op."""
    global _world
    device = _C.get_device()
    if backend_name is None:
        backend_name = "nccl" if device.startswith("cuda") else "mpi"
    if backend_name == "hccl":
        raise ValueError("[communication] Spora has no Ascend backend (hccl); use init(\"nccl\") on cuda devices "
                         "or init(\"mpi\")")
    if _world is not None:
        if _world.backend != backend_name:
            raise ValueError(f"[communication] already initialised with backend '{_world.backend}'; "
                             f"call release() before init('{backend_name}')")
        return
    r = -1 if rank is None else int(rank)
    s = -1 if group_size is None else int(group_size)
    try:
        _world = _C.Comm(backend_name, r, s, device)
    except Exception as e:
        # A plugin from a Python package built for another spora: say which
        # package and the pip command that fixes it.
        from .. import _plugin_packages
        hint = _plugin_packages.refusal(backend_name, "collective")
        if hint and hint not in str(e):
            raise type(e)(f"{e}; {hint}") from e
        raise
    if timeout_ms is not None:
        _world.set_timeout(int(timeout_ms))
    GlobalComm.BACKEND = backend_name


def overlap_stats(reset=False):
    """How much of the graph-mode collectives' time was hidden behind other
    work (gradient buckets overlapped with backward; docs/parallel.md,
    "Overlap"), since the last reset: (busy seconds, exposed seconds, hidden
    share = 1 - exposed / busy, or None before any). Host-memory backends
    (mpi) only. reset=True starts again from 0 after reading."""
    busy, exposed = _C.comm_overlap_stats(bool(reset))
    return busy * 1e-9, exposed * 1e-9, (1.0 - exposed / busy) if busy > 0 else None


def release():
    """Frees the world communicator (init() may be called again)."""
    global _world
    if _world is not None:
        from .. import _pipeline, _spmd
        _spmd.release_axis_comms()  # communicators split from the world go first
        _pipeline.release_comms()
        _world.release()
        _world = None
        GlobalComm.BACKEND = None


def is_initialized():
    return _world is not None


def _comm(group=None):
    if group not in (None, GlobalComm.WORLD_COMM_GROUP):
        raise ValueError(f"[communication] unknown group {group!r}; only the world group exists")
    if _world is None:
        raise RuntimeError("[communication] not initialised: call spora.communication.init() first")
    return _world


def get_rank(group=None):
    return _comm(group).rank


def get_group_size(group=None):
    return _comm(group).size


def get_local_rank(group=None):
    """The rank among the processes of this host (from Open MPI's
    environment; the world rank when the launcher does not say)."""
    import os
    v = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK")
    return int(v) if v is not None else get_rank(group)


def _tracing(x):
    return _C.current_trace() is not None and _C.trace_of(x) is not None


def _as_tensor(x, what):
    if not isinstance(x, Tensor):
        raise TypeError(f"[communication] {what} must be a spora.Tensor, got {type(x).__name__}")
    return x


def all_reduce(x, op=ReduceOp.SUM, group=None):
    """op (sum, prod, max, min, mean) over every rank's x; a new Tensor.
    Inside spora.jit this records an all_reduce op into the graph, whose
    gradient is the all_reduce of the incoming gradient (sum and mean)."""
    x = _as_tensor(x, "all_reduce input")
    c = _comm(group)
    if _tracing(x):
        a = _C.Attrs()
        a.set_string("op", str(op))
        a.set_int("group", c.id)
        return _C.call("all_reduce", [x], a)
    from .. import _autograd, ops
    if getattr(_autograd._recording, "depth", 0):
        raise RuntimeError("[communication] all_reduce inside spora.grad in PYNATIVE_MODE would not be "
                           "differentiated (the eager tape does not record collectives); reduce the gradients "
                           "instead (nn.DistributedGradReducer), or differentiate under spora.jit / GRAPH_MODE, "
                           "where all_reduce has a gradient")
    out = ops.zeros_like(x)  # a fresh buffer the collective writes into
    c.all_reduce(x, out, str(op))
    return out


def all_gather(x, group=None):
    """Every rank's x concatenated along a new leading axis of size
    get_group_size() (MindSpore concatenates along axis 0: reshape if you
    need that)."""
    x = _as_tensor(x, "all_gather input")
    c = _comm(group)
    from .. import ops
    out = ops.zeros((c.size,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    c.all_gather(x, out)
    return out


def broadcast(x, root=0, group=None):
    """The root rank's x, on every rank (a new Tensor)."""
    x = _as_tensor(x, "broadcast input")
    c = _comm(group)
    out = Tensor(x.asnumpy(), dtype=x.dtype, device=x.device)  # a fresh buffer
    c.broadcast(out, int(root))
    return out


def barrier(group=None):
    _comm(group).barrier()


def send(x, dst, group=None):
    """Sends x to rank `dst` of the group (PyTorch's dist.send; MindSpore's
    ops.Send): returns once x may be reused; the peer must recv a tensor of
    the same dtype and shape. Blocking, so two ranks that both send first
    to each other wait for each other: order the calls (pipeline schedules
    do)."""
    x = _as_tensor(x, "send input")
    _comm(group).send(x, int(dst))


def recv(src, shape, dtype, group=None, device=None):
    """Receives a tensor of `shape` and `dtype` sent by rank `src` of the
    group (a new Tensor; PyTorch's dist.recv fills a given one, MindSpore's
    ops.Receive takes shape and dtype like this)."""
    from .. import ops
    out = ops.zeros(tuple(shape), dtype=dtype, device=device)
    _comm(group).recv(out, int(src))
    return out
