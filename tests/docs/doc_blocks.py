"""Verdicts on the code blocks of README.md and docs/*.md (read by
test_doc_blocks.py): each block, known by key(its text), is run, mirrored by
a named test, or not run for a reason. Edit a block and its key changes:
the test then lists it with its new key, to be judged again here.

    run(setup=, check=)   Python: run in the page's session (setup first,
                          then the block, then check); shell: run with bash
                          in a temporary directory (setup is Python run
                          there first; check is Python reading the output
                          on stdin)
    mirror(test, files)   a ctest test runs the same commands or code (paths,
                          names and the prefix may differ; a comment says
                          what else does)
    skip(reason)          why not: a GPU, several ranks, the network,
                          system packages, a whole build, a fragment
"""
import hashlib


def key(body):
    text = "\n".join(line.rstrip() for line in body.strip("\n").split("\n"))
    return hashlib.sha1(text.encode()).hexdigest()[:10]


class Verdict:
    def __init__(self, kind, setup="", check="", test="", files=(), reason="", needs=()):
        self.kind, self.setup, self.check, self.test = kind, setup, check, test
        self.files, self.reason, self.needs = tuple(files), reason, tuple(needs)


def run(setup="", check="", needs=()):
    return Verdict("run", setup=setup, check=check, needs=needs)


def mirror(test, *files):
    return Verdict("mirror", test=test, files=files)


def skip(reason):
    assert reason
    return Verdict("skip", reason=reason)


NONE = Verdict("none")

# Setups shared by several pages: a small LeNet-shaped net, data for it, a
# Model and a dataset, all cheap (a few batches).
_DATA = """
import numpy as np
import spora
from spora import nn
_rng = np.random.default_rng(0)
x_train = _rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
y_train = _rng.integers(0, 10, 64).astype(np.int32)
x, y = spora.Tensor(x_train[:8]), spora.Tensor(y_train[:8])
"""
_SMALL_NET = """
class SmallNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="same", has_bias=True)
        self.pool = nn.MaxPool2d(4)
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(4 * 7 * 7, 10)

    def construct(self, x):
        return self.fc(self.flatten(self.pool(nn.ReLU()(self.conv(x)))))
"""
_MODEL = _DATA + _SMALL_NET + """
from spora.dataset import NumpySlicesDataset
from spora.train import Model
_net = SmallNet()
model = Model(_net, nn.CrossEntropyLoss(), nn.SGD(_net.trainable_params(), 0.01))
dataset = NumpySlicesDataset((x_train, y_train)).batch(32)
"""
# An MNIST-format directory (IDX files) of 128 images, as the download has.
_MNIST = """
import os, struct
import numpy as np
os.makedirs("MNIST_Data/train", exist_ok=True)
_r = np.random.default_rng(1)
with open("MNIST_Data/train/train-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 128, 28, 28) + _r.integers(0, 256, (128, 28, 28), dtype=np.uint8).tobytes())
with open("MNIST_Data/train/train-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x801, 128) + _r.integers(0, 10, 128, dtype=np.uint8).tobytes())
"""
# Model files for the `spora` tool's pages: model.spora (input x.npy) and
# model.onnx whose input is named "images" (batch.npy).
_CLI_MODELS = _DATA + _SMALL_NET + """
import onnx
net = SmallNet()
spora.export(net, x, file_name="model")
spora.export(net, x, file_name="model", file_format="ONNX", dynamic_batch=True)
m = onnx.load("model.onnx")
old = m.graph.input[0].name
m.graph.input[0].name = "images"
for node in m.graph.node:
    node.input[:] = ["images" if i == old else i for i in node.input]
onnx.save(m, "model.onnx")
np.save("x.npy", x_train[:8])
np.save("batch.npy", x_train[:16])
"""

_BUILD = "builds the whole tree (CI's own build and test step)"
_DEPS = "packaging/install-deps.sh installs system packages (apt)"

VERDICTS = {
    # ---- README.md
    "3f99b3b835": skip(f"{_DEPS}; {_BUILD}; the example it ends with trains for minutes on the download "
                       "(the same example on generated data: python_frontend's test_train_dataset.py)"),
    "a097de4db2": skip(f"{_DEPS}; {_BUILD}"),
    "e719de3b60": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),  # + sdk_deb_packages: cpack -G DEB
    # ---- docs/c-api.md
    # The same pkg-config line, on a small program of its own (example.c is
    # built through find_package, next).
    "3cebf0d3de": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),
    "f22bb0bf99": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),  # find_package(Spora) build
    "03b3bc6cff": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),  # extracted between its markers
    "70c19e966d": skip("a C fragment (graph building); the whole program is the example above, run by sdk_install"),
    "8760439c9f": skip("a C fragment (checkpoints); io_checkpoint_test covers the calls"),
    "1b5a4399e7": skip("a C fragment (ONNX import, resnet.onnx is the reader's own)"),
    "9a96448d1d": skip("a C fragment (the tape); the tape tests cover the calls"),
    # ---- docs/cli.md
    "7b6d0108b8": run(setup=_CLI_MODELS, needs=("spora",), check="""
        import os, sys
        out = sys.stdin.read()
        assert os.path.exists("out/output_0.npy"), out
    """),
    "fb42a1330c": run(setup=_CLI_MODELS, needs=("spora", "dot")),
    # ---- docs/data.md
    "e1a2ab4c36": run(setup=_MODEL + _MNIST, check="assert train.get_dataset_size() == 2"),
    "b5d49b8c85": run(),
    # The block's `model` must be made on the device it sets (a Model made on
    # cpu first fails: its weights are on cpu:0), so the setup sets it too.
    "881547c9a5": run(setup="import spora; spora.set_device('sim:0')\n" + _MODEL + "x, y = x_train, y_train\n"),
    # ---- docs/install.md
    "2926837722": skip("pip installs into the environment and mpirun starts ranks; the packaging tests build and "
                       "install the wheels into a scratch venv"),
    "e2f8ece142": skip("a pyproject.toml fragment for a plugin package's author"),
    "203f3256e9": skip(f"{_DEPS}; {_BUILD}"),
    "aafb087dc9": skip("downloads NVIDIA's wheels (network, GBs), and using them needs a GPU"),
    "68046b22bf": mirror("sdk_pip_wheel", "tests/integration/sdk/pip_template_test.py"),
    # ---- docs/onnx.md
    "c1cb357e5f": run(setup=_DATA + _SMALL_NET + "LeNet = SmallNet\n",
                      check="import os; assert os.path.getsize('lenet.onnx') > 0"),
    "6d56dfe882": run(setup="images = np.zeros((3, 1, 28, 28), np.float32)", check="assert y.shape == (3, 10)"),
    # resnet50.onnx stands for any ONNX file: the one just exported here.
    "f3298a47a2": run(setup="import shutil; shutil.copy('lenet.onnx', 'resnet50.onnx')",
                      check="assert y.shape == (3, 10)"),
    # ---- docs/ops-optim.md
    "722e197c08": run(setup="""
        import numpy as np
        import spora_capi as S
        from spora_capi import op_call, op_call_into
        _cpu = S.Context().device_find("cpu")
        def _t(a):
            a = np.asarray(a, np.float32)
            return S.Tensor.from_numpy(_cpu, np.ascontiguousarray(a) if a.ndim else a.copy())
        N = 2
        params = [_t(np.ones((3, 2))), _t(np.ones(4))]
        grads = [_t(np.full((3, 2), 0.5)), _t(np.full(4, 0.5))]
        bufs = [_t(np.zeros((3, 2))), _t(np.zeros(4))]
        m = [_t(np.zeros((3, 2))), _t(np.zeros(4))]
        v = [_t(np.zeros((3, 2))), _t(np.zeros(4))]
        lr_t, one_t, step = _t(0.1), _t(1.0), 0
        step_t = _t(1.0)
    """, check="assert len(outs) == 3 * N"),
    # ---- docs/parallel.md
    "6ffee1b0ee": skip("several ranks (and, second line, hosts a and b); cli_launch runs spora launch -n N"),
    "6de0d69832": skip("mpirun with a train.py of the reader's; mpi_python_data_parallel trains the same way"),
    "8802c2ba02": skip("2 ranks under mpirun; mpi_python_data_parallel trains the same way (sharded "
                       "NumpySlicesDataset, Model, gradients_mean)"),
    "a8c78dce96": skip("a C fragment under a launcher; mpi_collectives covers the calls"),
    "eb3c166b27": skip("a fragment of a Cell under 4 ranks; mpi_python_semi_auto_4 runs such nets"),
    "9a4ca0bc2e": skip("4 ranks under mpirun; mpi_python_semi_auto_4 runs auto_parallel searches"),
    "86a737013d": skip("GPT(...) stands for the reader's model; test_parallel_plan.py (python_frontend) plans "
                       "the same way"),
    "e2ca5f145c": skip("ranks under mpirun; mpi_python_zero_4 trains the same way"),
    "7f986b5a65": skip("a fragment (net.blocks is the reader's model); mpi_python_semi_auto_2 runs recompute"),
    "43d06c3bef": skip("a C++ fragment inside the core's bench"),
    "a0ee1494e5": skip("a fragment under 2 ranks; mpi_python_semi_auto_2 runs pipeline training"),
    # ---- docs/plugin-guide.md
    # The guide's walk: sdk_install runs it against an installed prefix (the
    # same sed line); test_plugin_guide_template_configures_once_named here.
    "72d985f031": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),
    "7b5ac8e4f1": mirror("sdk_install", "sdk/template/CMakeLists.txt"),
    "ee306a4acf": skip("a C fragment; sdk/template/device.c is the whole file (built by sdk_install)"),
    "1c6f000bf6": skip("a C fragment; sdk/template/device.c is the whole file (built by sdk_install)"),
    "dc289b99cd": mirror("sdk_install", "tests/integration/sdk/install_test.sh"),
    "2627e2a126": skip("needs the reader's built plugin and certifies it for minutes; sdk_install checks the "
                       "template's, sdk_pip_template runs --quick, vendor_plugins --ops and --report"),
    # ---- docs/plugins-ze-nccl.md
    "508f458d66": skip(f"{_DEPS}; {_BUILD}"),
    # ---- docs/profiler.md
    "96846b8dbe": run(setup=_MODEL, check="""
        import json, os
        assert os.path.exists("prof/op_summary.txt")
        json.load(open("prof/trace.json"))
    """),
    "4df3da65fa": run(setup=_DATA + """
def train():
    (x * 2 + 1).relu().sum()
""", check="import os; assert os.path.exists('prof/trace.json')"),
    "d44cee68a4": skip("a C fragment; the profiler's C API test covers the calls"),
    # ---- docs/python-training.md (one session: LeNet from the first block)
    "fdabae2c2a": run(check="""
        import numpy as np
        assert LeNet()(spora.Tensor(np.zeros((2, 1, 28, 28), np.float32))).shape == (2, 10)
    """),
    "37d54c7cbf": run(setup=_DATA + """
net = LeNet()
opt = nn.Adam(net.trainable_params(), 1e-3)
loss_fn = nn.CrossEntropyLoss()
""", check="import math; assert math.isfinite(float(train_step(x, y).asnumpy()))"),
    "1fb7e1c14d": run(setup="""
        from spora.dataset import NumpySlicesDataset
        test = NumpySlicesDataset((x_train[:16], y_train[:16])).batch(16)
    """),
    "c6566f1b3b": run(check="import math; assert math.isfinite(float(loss.asnumpy()))"),
    "c8f1a630b0": run(),
    "8f6f3fa6a2": run(setup="example_batch = np.zeros((2, 1, 28, 28), np.float32); batch = spora.Tensor(example_batch)",
                      check="assert logits.shape == (2, 10)"),
    # ---- docs/python.md
    "f6e28b0dfd": run(),
    "f4eb0cf0d2": skip("needs a CUDA GPU (python_device_parity runs memory statistics on every device)"),
    "bc267f3f7b": run(setup=_MODEL),
}
