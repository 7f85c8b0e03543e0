"""The collective ops the SPMD pass inserts (all_gather, reduce_scatter
along a dim), run inside compiled graphs on real ranks, and their gradients
(all_gather <-> reduce_scatter(sum)), against numpy. Run by ctest under
mpirun -np 2 and -np 4 with test_semi_auto.py."""
import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import _C


def _call(name, inputs, **attrs):
    """The registry op `name` (collectives are not in spora.ops.raw)."""
    a = _C.Attrs()
    for k, v in attrs.items():
        if isinstance(v, str):
            a.set_string(k, v)
        else:
            a.set_int(k, int(v))
    return _C.call(name, inputs, a, 1)



def rank_block(r, shape):
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * (r + 1) - 3 * r)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_all_gather_and_reduce_scatter_along_a_dim(axis):
    spora.set_context(mode=spora.GRAPH_MODE)
    r, n, gid = comm.get_rank(), comm.get_group_size(), comm._comm().id
    shape = [2, 3, 4]
    x = rank_block(r, shape)
    every = [rank_block(k, shape) for k in range(n)]

    @spora.jit
    def gather(t):
        return _call("all_gather", [t], axis=axis, group=gid, size=n)

    np.testing.assert_array_equal(gather(spora.Tensor(x)).asnumpy(), np.concatenate(every, axis=axis))

    big = [np.concatenate([rank_block(k + j, shape) for j in range(n)], axis=axis) for k in range(n)]

    @spora.jit
    def scatter(t):
        return _call("reduce_scatter", [t], axis=axis, group=gid, size=n, op="sum")

    total = np.sum(big, axis=0)
    want = np.split(total, n, axis=axis)[r]
    np.testing.assert_allclose(scatter(spora.Tensor(big[r])).asnumpy(), want, rtol=1e-12)


def test_gradients_of_gather_and_scatter():
    """Job loss = sum over ranks of sum(c_r * all_gather(x_r)): d/dx_r is
    block r of sum_r' c_r' (a reduce_scatter of the adjoints); and for
    sum(c_r * reduce_scatter(x_r)) it is all_gather of every rank's c."""
    spora.set_context(mode=spora.GRAPH_MODE)
    r, n, gid = comm.get_rank(), comm.get_group_size(), comm._comm().id
    x = rank_block(r, [3, 2])
    cs = [rank_block(k + 5, [3, 2 * n]) for k in range(n)]
    c = spora.Tensor(cs[r])

    def gathered(t):
        return (_call("all_gather", [t], axis=1, group=gid, size=n) * c).sum()

    g = spora.jit(spora.grad(gathered))(spora.Tensor(x)).asnumpy()
    np.testing.assert_allclose(g, np.split(np.sum(cs, axis=0), n, axis=1)[r], rtol=1e-12)

    small = [rank_block(k + 2, [3, 2]) for k in range(n)]
    d = spora.Tensor(small[r])

    def scattered(t):
        return (_call("reduce_scatter", [t], axis=1, group=gid, size=n, op="sum") * d).sum()

    g = spora.jit(spora.grad(scattered))(spora.Tensor(cs[r])).asnumpy()
    np.testing.assert_allclose(g, np.concatenate(small, axis=1), rtol=1e-12)


def test_size_must_match_the_communicator():
    spora.set_context(mode=spora.GRAPH_MODE)
    n, gid = comm.get_group_size(), comm._comm().id

    @spora.jit
    def gather(t):
        return _call("all_gather", [t], axis=0, group=gid, size=n + 1)

    with pytest.raises(Exception, match=f"built for {n + 1} ranks but communicator"):
        gather(spora.Tensor(np.ones((2, 2))))


@pytest.mark.parametrize("split_axis,concat_axis", [(1, 0), (0, 2), (2, 2)])
def test_all_to_all_and_its_gradient(split_axis, concat_axis):
    spora.set_context(mode=spora.GRAPH_MODE)
    r, n, gid = comm.get_rank(), comm.get_group_size(), comm._comm().id
    shape = [2 * n, 2 * n, 3 * n]
    every = [rank_block(k, shape) for k in range(n)]

    def a2a(t, s=split_axis, c=concat_axis):
        return _call("all_to_all", [t], split_axis=s, concat_axis=c, group=gid, size=n)

    # Rank r receives block r (along split_axis) of every rank's x.
    want = np.concatenate([np.split(every[k], n, axis=split_axis)[r] for k in range(n)], axis=concat_axis)
    np.testing.assert_array_equal(spora.jit(a2a)(spora.Tensor(every[r])).asnumpy(), want)
    # Gradient of sum over ranks of sum(c_r * a2a(x_r)): block j of dx_r
    # along split_axis is rank j's c block r (along concat_axis).
    cs = [rank_block(k + 3, want.shape) for k in range(n)]
    g = spora.jit(spora.grad(lambda t: (a2a(t) * spora.Tensor(cs[r])).sum()))(spora.Tensor(every[r])).asnumpy()
    want_g = np.concatenate([np.split(cs[j], n, axis=concat_axis)[r] for j in range(n)], axis=split_axis)
    np.testing.assert_array_equal(g, want_g)
