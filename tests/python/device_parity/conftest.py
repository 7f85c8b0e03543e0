"""pytest configuration for the device-parity tests (every device vs cpu).

ctest puts the build tree's package on PYTHONPATH; a missing package is a
hard failure, never a silent skip.
"""
import os
import sys

import pytest

try:
    import spora  # noqa: F401
except ImportError as e:  # pragma: no cover - configuration error
    raise pytest.UsageError(f"cannot import spora ({e}); run through ctest or set "
                            "PYTHONPATH=build/python") from e

# The main job's LeNet and its C API runner live in examples/fashion_mnist.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples"))


@pytest.fixture(autouse=True)
def _cpu_pynative():
    """Every test starts and ends in PyNative mode on cpu."""
    spora.set_context(mode=spora.PYNATIVE_MODE, jit_level=1)
    spora.set_device("cpu")
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE, jit_level=1)
    spora.set_device("cpu")


def pytest_report_header(config):
    disabled = os.environ.get("SPORA_SIM_DISABLE_OPS", "")
    return [f"spora devices: {', '.join(str(d) for d in spora.devices())}",
            f"SPORA_SIM_DISABLE_OPS: {disabled or '(none)'}"]
