"""Bad input to the optimizer ops (docs/ops-optim.md) fails with
SPORA_ERROR_INVALID_ARGUMENT and a message that starts with the op in
brackets and says what is wrong; in graph mode the message also carries the
user's source line. Values the op cannot check (lr < 0, step < 1) are data:
they are accepted and give the documented results."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
CPU = CTX.device_find("cpu")


def t(shape, dtype=np.float32, value=0.5):
    return S.Tensor.from_numpy(CPU, np.full(shape, value, dtype))


def scalar(v, dtype=np.float32):
    return S.Tensor.from_numpy(CPU, np.asarray(v, dtype))


def expect(op, inputs, attrs=None, fragment="", outputs=1):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, inputs, attrs, num_outputs=outputs, device=CPU)
    err = info.value
    assert err.status == S.ERROR_INVALID_ARGUMENT, f"{op}: status {err.status}, message {err.message!r}"
    assert err.message.startswith(f"[{op}]"), f"message does not name the op: {err.message!r}"
    assert fragment in err.message, f"{fragment!r} not in {err.message!r}"
    return err


LR, ONE = scalar(0.1), scalar(1.0)


# -- sgd_update -------------------------------------------------------------

def test_sgd_list_layout():
    p, g = t((2, 3)), t((2, 3))
    expect("sgd_update", [LR, ONE, p, p, g], None, "2 lists of N tensors after its 2 scalar input(s), got 3")
    expect("sgd_update", [LR, ONE, p, g], {"momentum": 0.9}, "needs a momentum buffer per param", outputs=2)
    expect("sgd_update", [LR, ONE, p, g, t((2, 3))], None, "momentum buffers are passed only when momentum > 0")
    expect("sgd_update", [LR, ONE], None, "takes 3 to 64 inputs, got 2")
    # 21 params with momentum: 65 inputs, past the per-call limit.
    many = [t((2,)) for _ in range(63)]
    expect("sgd_update", [LR, ONE] + many, {"momentum": 0.9}, "got 65 inputs and 1 outputs; an op call takes at most 64")
    expect("sgd_update", [LR, ONE, p, g], None, "produces 1 output(s), caller asked for 2", outputs=2)


def test_sgd_shapes_and_dtypes():
    p = t((2, 3))
    expect("sgd_update", [LR, ONE, p, t((3, 2))], None, "grad 0 has shape (3,2), but param 0 has (2,3)")
    expect("sgd_update", [LR, ONE, p, t((2, 3), np.float64)], None, "grad 0 has dtype f64, expected f32")
    expect("sgd_update", [LR, ONE, t((2,), np.int32), t((2,), np.int32)], None, "param 0 has dtype i32")
    expect("sgd_update", [LR, ONE, p, t((4,)), t((4,)), p], None, "grad 0 has shape (4,), but param 0 has (2,3)")
    expect("sgd_update", [LR, ONE, p, p, t((2, 3), np.float64)], {"momentum": 0.9}, "buf 0 has dtype f64, expected f32")
    h = t((4,), np.float16)
    expect("sgd_update", [LR, ONE, h, h, h], {"momentum": 0.9}, "buf 0 has dtype f16, expected f32 (state for f16 params)")


def test_sgd_scalars():
    p = t((2, 3))
    expect("sgd_update", [t((1,)), ONE, p, p], None, "lr must be a scalar tensor (shape ()) of f32, f64, got f32 (1,)")
    expect("sgd_update", [scalar(1, np.int32), ONE, p, p], None, "lr must be a scalar tensor")
    expect("sgd_update", [LR, t((2, 3)), p, p], None, "grad_scale must be a scalar tensor")


def test_sgd_attributes():
    p = t((2, 3))
    ins2, ins3 = [LR, ONE, p, p], [LR, ONE, p, p, p]
    expect("sgd_update", ins3, {"momentum": -0.1}, "momentum must be in [0, inf), got -0.1")
    expect("sgd_update", ins3, {"momentum": float("inf")}, "momentum must be in [0, inf)")
    expect("sgd_update", ins3, {"momentum": 0.9, "dampening": 1.5}, "dampening must be in [0, 1], got 1.5")
    expect("sgd_update", ins2, {"weight_decay": float("nan")}, "weight_decay must be in [0, inf), got nan")
    expect("sgd_update", ins2, {"nesterov": True}, "nesterov needs momentum > 0 and dampening = 0")
    expect("sgd_update", ins3, {"momentum": 0.9, "dampening": 0.1, "nesterov": True}, "nesterov needs momentum > 0")
    expect("sgd_update", ins2, {"lr": 0.1}, "unknown attribute 'lr'")
    expect("sgd_update", ins2, {"momentum": "high"}, "attribute 'momentum' must be float")


# -- adam_update ------------------------------------------------------------

STEP = scalar(1, np.int64)


def test_adam_layout_and_dtypes():
    p = t((3,))
    expect("adam_update", [LR, STEP, ONE, p, p, p], None, "params, grads, ms, vs: 4 lists of N tensors")
    expect("adam_update", [LR, STEP, ONE] + [p] * 8, {"amsgrad": True}, "5 lists of N tensors after its 3 scalar")
    expect("adam_update", [LR, STEP, ONE, p, p, p, t((4,))], None, "v 0 has shape (4,), but param 0 has (3,)")
    h = t((3,), np.float16)
    f = t((3,))
    expect("adam_update", [LR, STEP, ONE, h, h, h, f], None, "m 0 has dtype f16, expected f32 (state for f16 params)")
    expect("adam_update", [LR, STEP, ONE, h, f, f, f], None, "grad 0 has dtype f32, expected f16")
    expect("adam_update", [LR, STEP, ONE, h, h, f, f, f], {"amsgrad": False}, "4 lists")
    many = [t((2,)) for _ in range(64)]
    expect("adam_update", [LR, STEP, ONE] + many, None, "got 67 inputs and 1 outputs; an op call takes at most 64")


def test_adam_scalars():
    p = t((3,))
    ins = [p, p, p, p]
    expect("adam_update", [LR, scalar(1, np.uint8)] + [ONE] + ins, None,
           "step must be a scalar tensor (shape ()) of f32, f64, i32, i64, got u8 ()")
    expect("adam_update", [LR, t((1,))] + [ONE] + ins, None, "step must be a scalar tensor")
    expect("adam_update", [scalar(0.1, np.float16), STEP, ONE] + ins, None, "lr must be a scalar tensor")
    expect("adam_update", [LR, STEP, scalar(True, np.bool_)] + ins, None, "grad_scale must be a scalar tensor")


@pytest.mark.parametrize("attrs,fragment", [
    ({"beta1": 1.0}, "beta1 must be in [0, 1), got 1"),
    ({"beta1": -0.5}, "beta1 must be in [0, 1), got -0.5"),
    ({"beta2": 1.5}, "beta2 must be in [0, 1), got 1.5"),
    ({"beta2": float("nan")}, "beta2 must be in [0, 1), got nan"),
    ({"eps": -1e-8}, "eps must be in [0, inf)"),
    ({"weight_decay": -0.01}, "weight_decay must be in [0, inf)"),
    ({"weight_decay": float("inf"), "decoupled": True}, "weight_decay must be in [0, inf), got inf"),
])
def test_adam_attributes(attrs, fragment):
    p = t((3,))
    expect("adam_update", [LR, STEP, ONE, p, p, p, p], attrs, fragment, outputs=3)


# -- global_norm / clip_by_global_norm --------------------------------------

def test_norm_errors():
    expect("global_norm", [], None, "takes 1 to 64 inputs, got 0")
    expect("global_norm", [t((2,), np.int32)], None, "tensor 0 has dtype i32; tensors are f32, f64, f16 or bf16")
    expect("global_norm", [t((2,)), t((2,), np.float64)], None, "tensor 1 has dtype f64, tensor 0 has f32")
    expect("clip_by_global_norm", [t((2,))], None, "attribute 'max_norm' (float) is required", outputs=2)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        expect("clip_by_global_norm", [t((2,))], {"max_norm": bad}, "max_norm must be positive and finite", outputs=2)
    expect("clip_by_global_norm", [t((2,)) for _ in range(64)], {"max_norm": 1.0},
           "clips at most 63 tensors per call, got 64", outputs=64)
    expect("clip_by_global_norm", [t((2,))], {"max_norm": 1.0}, "produces 2 output(s), caller asked for 1")


def test_graph_mode_error_names_the_source_line():
    g = S.Graph("step")
    p = g.input("p", S.DTYPE_F32, [2, 3])
    grad = g.input("g", S.DTYPE_F32, [3, 2])
    lr = g.input("lr", S.DTYPE_F32, [])
    with pytest.raises(S.SporaError) as info:
        g.op("sgd_update", [lr, lr, p, grad], None, file="train.py", line=42)
    assert info.value.status == S.ERROR_INVALID_ARGUMENT
    assert info.value.message.startswith("[sgd_update] grad 0 has shape (3,2)")
    assert "train.py:42" in info.value.message


# -- values the ops accept (data, not attributes) ----------------------------

def test_negative_lr_ascends():
    p, g = np.array([1.0, -2.0], np.float32), np.array([0.5, 0.25], np.float32)
    out = S.op_call("sgd_update", [scalar(-0.1), ONE, S.Tensor.from_numpy(CPU, p), S.Tensor.from_numpy(CPU, g)])
    np.testing.assert_allclose(out[0].numpy(), p + 0.1 * g, rtol=1e-6)


def test_step_below_one_gives_nan_params_and_finite_state():
    p = S.Tensor.from_numpy(CPU, np.ones(4, np.float32))
    g = S.Tensor.from_numpy(CPU, np.full(4, 0.5, np.float32))
    z = S.Tensor.from_numpy(CPU, np.zeros(4, np.float32))
    outs = S.op_call("adam_update", [LR, scalar(0, np.int64), ONE, p, g, z, z], None, num_outputs=3)
    assert np.isnan(outs[0].numpy()).all()
    np.testing.assert_allclose(outs[1].numpy(), 0.1 * 0.5, rtol=1e-6)  # m = (1 - beta1) g
    np.testing.assert_allclose(outs[2].numpy(), 0.001 * 0.25, rtol=1e-6)  # v = (1 - beta2) g^2
