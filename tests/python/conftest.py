"""pytest configuration for the ctypes C-API tests.

A missing numpy or SPORA_LIB is a hard failure with a clear message, never a
silent skip: the project's install script provides numpy and pytest, and
ctest sets SPORA_LIB to the built libspora.so.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        raise pytest.UsageError(
            f"tests/python needs numpy ({e}); install it into the project's venv "
            "(the install script does) or run with a Python that has it") from e
    if not os.environ.get("SPORA_LIB"):
        raise pytest.UsageError("SPORA_LIB is not set: point it at the built libspora.so (ctest sets it)")
