import pathlib
import sys

# The ctypes binding lives with the C API tests.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
