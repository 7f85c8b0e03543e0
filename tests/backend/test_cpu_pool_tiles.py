"""The cpu plugin's own max pooling loops for disjoint windows
(plugins/cpu/cpu_pool.cpp: kernel == stride, no padding) against the
reference kernels, which the sim device runs, bit for bit: ties (the first
maximum wins), NaN (it wins; gradient only, the forward pass may be
oneDNN's), -0 and denormal gradients, rows and columns past the last whole
window, f32 and bf16. Plus the overlapping window that
stays on oneDNN, against the same reference within rounding."""
import numpy as np
import pytest

import harness as H
import spora_capi as S


@pytest.fixture(scope="module")
def devices():
    c = S.Context()
    yield c.device_find("cpu"), c.device_find("sim")
    c.free()


def _bits(t):
    """The tensor's raw storage (uint16 for bf16, uint32 for f32)."""
    if t.dtype == S.DTYPE_BF16:
        out = np.empty(t.shape, np.uint16)
    else:
        out = np.empty(t.shape, np.uint32)
    S.call("spora_tensor_read", t.handle, out.ctypes.data_as(S._vp), out.nbytes)
    return out


def _store(v, dt):
    return H.f32_to_bf16_bits(v) if dt == "bf16" else np.asarray(v, np.float32)


def _inputs(shape, out_shape, rng):
    # Small integers: many ties inside a window. A few NaNs, and gradients
    # with -0 and an f32 denormal (the launch flushes denormals).
    x = rng.integers(-2, 3, shape).astype(np.float32)
    x.flat[::53] = np.nan
    dy = rng.standard_normal(out_shape).astype(np.float32)
    dy.flat[::7] = -0.0
    dy.flat[3::11] = np.float32(1e-40)
    return x, dy


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("shape,k", [((2, 3, 9, 11), 2), ((1, 4, 12, 13), 3), ((64, 6, 28, 28), 2), ((3, 2, 8, 6), (2, 3))],
                         ids=["2x2-odd", "3x3", "lenet", "2x3"])
def test_disjoint_max_pool_is_the_reference_bit_for_bit(devices, dt, shape, k):
    kh, kw = (k, k) if isinstance(k, int) else k
    out_shape = (shape[0], shape[1], shape[2] // kh, shape[3] // kw)
    x, dy = _inputs(shape, out_shape, np.random.default_rng(0))
    attrs = {"kernel_size": [kh, kw]}
    got = {}
    # The forward pass may run on oneDNN (where it has a jit kernel for
    # NCHW), which treats NaN otherwise: its input has none.
    x_finite = np.nan_to_num(x)
    for dev in devices:
        xt, dyt = H.to_spora(dev, _store(x, dt), dt), H.to_spora(dev, _store(dy, dt), dt)
        y = S.op_call("max_pool2d", [H.to_spora(dev, _store(x_finite, dt), dt)], attrs, device=dev)[0]
        dx = S.op_call("max_pool2d_grad", [xt, dyt], attrs, device=dev)[0]
        got[dev] = (_bits(y), _bits(dx))
    cpu, sim = devices
    np.testing.assert_array_equal(got[cpu][0], got[sim][0], err_msg="max_pool2d")
    np.testing.assert_array_equal(got[cpu][1], got[sim][1], err_msg="max_pool2d_grad")
    # The rows and columns no window covers get +0.
    dxb = got[cpu][1]
    assert not dxb[:, :, out_shape[2] * kh:, :].any() and not dxb[:, :, :, out_shape[3] * kw:].any()


def test_overlapping_window_stays_on_onednn_and_agrees(devices):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 15, 15)).astype(np.float32)
    dy = rng.standard_normal((4, 8, 7, 7)).astype(np.float32)
    attrs = {"kernel_size": [3, 3], "stride": [2, 2]}
    res = []
    for dev in devices:
        xt, dyt = H.to_spora(dev, x, "f32"), H.to_spora(dev, dy, "f32")
        res.append([H.from_spora(S.op_call("max_pool2d", [xt], attrs, device=dev)[0]),
                    H.from_spora(S.op_call("max_pool2d_grad", [xt, dyt], attrs, device=dev)[0])])
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6, atol=1e-6)
