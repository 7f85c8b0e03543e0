"""Errors name the op and the user's file:line, in eager and graph mode;
unknown backends explain themselves."""
import os

import numpy as np
import pytest

import spora

HERE = os.path.basename(__file__)


def _line_of(marker):
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "_line_of" not in text:
                return i
    raise AssertionError(marker)


def bad_matmul(a, b):
    return a @ b  # MARK-matmul


def test_eager_error_names_op_and_line():
    a = spora.Tensor(np.ones((2, 3), np.float32))
    b = spora.Tensor(np.ones((4, 5), np.float32))
    with pytest.raises(spora.SporaError) as e:
        bad_matmul(a, b)
    msg = str(e.value)
    assert "[matmul]" in msg and f"{HERE}:{_line_of('MARK-matmul')}" in msg
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)


def test_graph_mode_error_names_op_and_line():
    f = spora.jit(bad_matmul)
    with pytest.raises(spora.SporaError) as e:
        f(spora.Tensor(np.ones((2, 3), np.float32)), spora.Tensor(np.ones((4, 5), np.float32)))
    msg = str(e.value)
    assert "[matmul]" in msg and f"{HERE}:{_line_of('MARK-matmul')}" in msg


def test_error_through_ops_module_names_the_user_line():
    with pytest.raises(spora.SporaError) as e:
        spora.ops.conv2d(spora.Tensor(np.ones((1, 3, 8, 8), np.float32)),  # MARK-conv
                         spora.Tensor(np.ones((4, 2, 3, 3), np.float32)))
    assert "[conv2d" in str(e.value) and f"{HERE}:{_line_of('MARK-conv')}" in str(e.value)


def test_attribute_type_and_name_errors():
    x = spora.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"\[softmax\] has no attribute 'dim'"):
        spora.ops.raw.softmax(x, dim=1)
    with pytest.raises(TypeError, match=r"\[softmax\] attribute 'axis' takes an int, got a str"):
        spora.ops.raw.softmax(x, axis="1")
    with pytest.raises(TypeError, match=r"\[zeros\] attribute 'shape' is required"):
        spora.ops.raw.zeros()
    with pytest.raises(TypeError, match=r"\[add\] takes 2 tensor inputs"):
        spora.ops.raw.add(x)


def test_unknown_backend_error_text():
    with pytest.raises(spora.BackendUnavailableError) as e:
        spora.set_device("nosuchdev")
    msg = str(e.value)
    assert "nosuchdev" in msg and "SPORA_PLUGIN_PATH" in msg and "cpu" in msg
    with pytest.raises(spora.SporaError):
        spora.Tensor([1.0], device="nosuchdev:3")
    with pytest.raises(spora.BackendUnavailableError):
        spora.set_context(device_target="NoSuch")


def test_escaped_traced_tensor():
    kept = []

    @spora.jit
    def f(x):
        y = x + 1
        kept.append(y)
        return y

    f(spora.Tensor([1.0]))
    with pytest.raises(ValueError, match="used after that function returned"):
        kept[0] + 1


def conv_in_model(x, w):
    return spora.ops.conv2d(x, w)  # MARK-jitconv


def test_graph_mode_error_inside_library_code_names_the_user_line():
    f = spora.jit(conv_in_model)
    with pytest.raises(spora.SporaError) as e:
        f(spora.Tensor(np.ones((1, 3, 8, 8), np.float32)), spora.Tensor(np.ones((4, 2, 3, 3), np.float32)))
    assert "[conv2d" in str(e.value) and f"{HERE}:{_line_of('MARK-jitconv')}" in str(e.value)


def test_error_inside_grad_names_the_user_line():
    def f(x):
        return (x @ spora.Tensor(np.ones((4, 1)))).sum()  # MARK-gradmm

    with pytest.raises(spora.SporaError) as e:
        spora.grad(f)(spora.Tensor(np.ones((2, 3))))
    assert "[matmul]" in str(e.value) and f"{HERE}:{_line_of('MARK-gradmm')}" in str(e.value)
