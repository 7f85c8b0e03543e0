"""pytest configuration for the Python frontend (the `spora` package).

ctest puts the build tree's package on PYTHONPATH; a missing package is a
hard failure (never a silent skip). PyTorch is optional: tests comparing with
it skip when it is not installed.
"""
import pytest

try:
    import spora  # noqa: F401
except ImportError as e:  # pragma: no cover - configuration error
    raise pytest.UsageError(f"cannot import spora ({e}); run through ctest or set "
                            "PYTHONPATH=build/python") from e


@pytest.fixture(autouse=True)
def _pynative():
    """Every test starts in PyNative mode on cpu."""
    import spora
    spora.set_context(mode=spora.PYNATIVE_MODE, jit_level=1)
    spora.set_device("cpu")
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE, jit_level=1)
    spora.set_device("cpu")
