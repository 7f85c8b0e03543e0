#!/usr/bin/env python3
"""Fashion-MNIST with a LeNet-style CNN: Spora's main job, end to end.

    python examples/fashion_mnist.py [--epochs 4] [--device cpu] [--out-dir fashion_mnist_out]

1. reads the IDX files of Debian's dataset-fashion-mnist
   (/usr/share/datasets/fashion-mnist; no download) through spora.dataset's
   C++ pipeline (FashionMnistDataset, map on workers, batch, prefetch),
2. trains in GRAPH_MODE on --device (default cpu; any name spora.devices()
   lists, or a backend such as "sim" or "cuda") -- each step (forward, loss,
   gradients, Adam update) is one compiled graph -- with a progress bar,
3. evaluates on the 10,000 test images after every epoch and fails (exit 1)
   if the final test accuracy is below 89% (a --limit smoke run trains on too
   few images for that: it reports the accuracy and says the target was not
   checked),
4. saves a checkpoint and checks that it loads back into a fresh network,
5. exports the network (graph + weights) to a model file and runs that file
   through the C API (spora_model_load / spora_model_run, via the
   spora_run_model program when it is built, else ctypes on libspora.so) on
   the same device on test images, checking the outputs equal the Python ones,
6. writes the loss and accuracy curves to a PNG.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import spora
from spora import nn
import spora.dataset as ds
from spora.dataset import NumpySlicesDataset, load_fashion_mnist, vision
from spora.train import History, LossMonitor, Model

TARGET_ACCURACY = 0.89


class LeNet(nn.Cell):
    """conv 32 -> pool -> conv 64 -> pool -> dense 128 -> 10."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, pad_mode="same", has_bias=True)
        self.conv2 = nn.Conv2d(32, 64, 3, pad_mode="same", has_bias=True)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(64 * 7 * 7, 128, activation="relu")
        self.fc2 = nn.Dense(128, num_classes)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc2(self.fc1(self.flatten(x)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--data-dir", default=None, help="IDX files (default: the Debian package's directory)")
    p.add_argument("--out-dir", default="fashion_mnist_out")
    p.add_argument("--limit", type=int, default=0, help="train on the first N images only (smoke runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu",
                   help='where to train and run: "cpu", "sim:0", "cuda", ... (spora.devices() lists them)')
    return p.parse_args()


# -- the exported model through the C API -------------------------------------------

def find_run_model():
    """The spora_run_model C program (examples/c), if it was built."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("SPORA_RUN_MODEL", ""),
                  os.path.join(here, "..", "build", "bin", "spora_run_model"),
                  shutil.which("spora_run_model") or ""]
    pkg = os.path.dirname(spora.__file__)
    candidates.append(os.path.join(pkg, "..", "..", "bin", "spora_run_model"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def find_libspora():
    pkg = os.path.dirname(os.path.abspath(spora.__file__))
    for c in (os.path.join(pkg, "lib", "libspora.so"), os.path.join(pkg, "..", "..", "lib", "libspora.so")):
        if os.path.exists(c):
            return os.path.abspath(c)
    raise FileNotFoundError("libspora.so not found next to the spora package")


def run_with_ctypes(model_path, x, device):
    """spora_model_load + spora_model_run on libspora.so through ctypes, on
    `device` ("cpu", "sim:0")."""
    lib = ctypes.CDLL(find_libspora())
    lib.spora_last_error.restype = ctypes.c_char_p
    vp = ctypes.c_void_p

    def ok(status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {lib.spora_last_error().decode()}")
    ctx, dev, model, inp = vp(), vp(), vp(), vp()
    ok(lib.spora_context_create(ctypes.byref(ctx)), "spora_context_create")
    ok(lib.spora_device_find(ctx, device.encode(), ctypes.byref(dev)), "spora_device_find")
    ok(lib.spora_model_load(model_path.encode(), dev, ctypes.byref(model)), "spora_model_load")
    x = np.ascontiguousarray(x, np.float32)
    dims = (ctypes.c_int64 * x.ndim)(*x.shape)
    ok(lib.spora_tensor_create(dev, 1, dims, x.ndim, x.ctypes.data_as(vp), ctypes.c_size_t(x.nbytes),
                               ctypes.byref(inp)), "spora_tensor_create")
    out = vp()
    ok(lib.spora_model_run(model, ctypes.byref(inp), ctypes.c_size_t(1), ctypes.byref(out), ctypes.c_size_t(1)),
       "spora_model_run")
    y = np.empty((x.shape[0], 10), np.float32)
    ok(lib.spora_tensor_read(out, y.ctypes.data_as(vp), ctypes.c_size_t(y.nbytes)), "spora_tensor_read")
    for t in (out, inp):
        lib.spora_tensor_free(t)
    lib.spora_model_free(model)
    lib.spora_context_free(ctx)
    return y


def run_with_program(program, model_path, x, work_dir, device):
    """spora_run_model MODEL DEVICE INPUT.bin --out PREFIX (examples/c/run_model.c):
    raw little-endian tensors in and out."""
    inp = os.path.join(work_dir, "c_input.bin")
    prefix = os.path.join(work_dir, "c_output")
    np.ascontiguousarray(x, "<f4").tofile(inp)
    subprocess.run([program, model_path, device, inp, "--out", prefix], check=True, stdout=subprocess.DEVNULL)
    return np.fromfile(prefix + "0.bin", "<f4").reshape(x.shape[0], -1)


# -- main ---------------------------------------------------------------------------

def plot_curves(history, path, device):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = list(range(1, len(history) + 1))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot(epochs, [h["loss"] for h in history], "o-", label="train")
    a1.plot(epochs, [h["eval_loss"] for h in history], "s-", label="test")
    for ax in (a1, a2):
        ax.set_xticks(epochs)
    a1.set_xlabel("epoch")
    a1.set_ylabel("cross-entropy loss")
    a1.legend()
    a1.grid(alpha=0.3)
    a2.plot(epochs, [100 * h["eval_accuracy"] for h in history], "s-", color="tab:green", label="test")
    a2.axhline(100 * TARGET_ACCURACY, color="gray", ls="--", label=f"target {100 * TARGET_ACCURACY:.0f}%")
    a2.set_xlabel("epoch")
    a2.set_ylabel("accuracy (%)")
    a2.legend()
    a2.grid(alpha=0.3)
    fig.suptitle(f"Spora: LeNet on Fashion-MNIST (graph mode, {device})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    args = parse_args()
    t_start = time.perf_counter()
    os.makedirs(args.out_dir, exist_ok=True)
    spora.set_context(mode=spora.GRAPH_MODE, device_target=args.device)
    device = spora.get_device()  # the resolved name: "sim" -> "sim:0", "GPU" -> "cuda:0"
    nn.init.set_seed(args.seed)

    # The training data flows through spora.dataset's C++ pipeline: IDX
    # decode, a new order each epoch, rescale to [0, 1] and HWC -> CHW on two
    # workers, batching, prefetch. The test images are also kept as arrays
    # for the checkpoint and C API checks below.
    x_test, y_test = load_fashion_mnist("test", root=args.data_dir)
    ds.config.set_seed(args.seed)
    to_net = [vision.Rescale(1.0 / 255.0, 0.0), vision.HWC2CHW()]
    if args.limit:
        x_train, y_train = load_fashion_mnist("train", root=args.data_dir)
        train = NumpySlicesDataset((x_train[:args.limit], y_train[:args.limit]), shuffle=True,
                                   seed=args.seed).batch(args.batch_size)
        n_train = min(args.limit, len(x_train))
    else:
        train = ds.FashionMnistDataset(args.data_dir, usage="train", shuffle=True)
        n_train = train.get_dataset_size()
        train = train.map(to_net, input_columns="image", num_parallel_workers=2).batch(args.batch_size)
    test = ds.FashionMnistDataset(args.data_dir, usage="test", shuffle=False)
    test = test.map(to_net, input_columns="image", num_parallel_workers=2).batch(1000)
    print(f"Fashion-MNIST: {n_train} training and {len(x_test)} test images; device {device}")

    net = LeNet()
    steps = args.epochs * len(train)
    schedule = nn.CosineDecayLR(args.lr * 0.05, args.lr, decay_steps=steps)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=schedule)
    model = Model(net, nn.CrossEntropyLoss(), optimizer, metrics={"accuracy", "loss"})
    history = History()
    t0 = time.perf_counter()
    model.train(args.epochs, train, callbacks=[LossMonitor(), history], valid_dataset=test)
    train_time = time.perf_counter() - t0
    per_epoch = history.history
    accuracy = per_epoch["eval_accuracy"][-1]
    samples = args.epochs * n_train
    print(f"training: {train_time:.1f} s, {samples / train_time:,.0f} samples/s "
          f"(including {args.epochs} test passes)")
    print(f"test accuracy: {100 * accuracy:.2f}% (target {100 * TARGET_ACCURACY:.0f}%)")

    # checkpoint: save, then load into a fresh network and check it predicts the same
    ckpt = os.path.join(args.out_dir, "fashion_mnist.ckpt")
    spora.save_checkpoint(net, ckpt)
    fresh = LeNet()
    spora.load_param_into_net(fresh, spora.load_checkpoint(ckpt))
    probe = spora.Tensor(x_test[:256])
    same = np.array_equal(fresh.set_train(False)(probe).asnumpy(), net.set_train(False)(probe).asnumpy())
    print(f"checkpoint: {ckpt} ({os.path.getsize(ckpt) / 1e6:.2f} MB), reloads identically: {same}")

    # export, then run the file through the C API on a few test images
    images = x_test[:8]
    model_file = spora.export(net, spora.Tensor(images), file_name=os.path.join(args.out_dir, "fashion_mnist.spora"))
    py_logits = net(spora.Tensor(images)).asnumpy()
    program = find_run_model()
    if program:
        c_logits = run_with_program(program, model_file, images, args.out_dir, device)
        how = os.path.basename(program)
    else:
        c_logits = run_with_ctypes(model_file, images, device)
        how = "ctypes on libspora.so"
    c_match = c_logits.shape == py_logits.shape and np.allclose(c_logits, py_logits, rtol=1e-5, atol=1e-5)
    print(f"exported model: {model_file}; through the C API ({how}) on {device}: predictions "
          f"{c_logits.argmax(1).tolist()} (labels {y_test[:8].tolist()}), "
          f"max |C - Python| = {np.abs(c_logits - py_logits).max():.2e}: {'match' if c_match else 'MISMATCH'}")

    png = os.path.join(args.out_dir, "fashion_mnist_curves.png")
    plot_curves([{k: v[i] for k, v in per_epoch.items()} for i in range(len(history.epoch))], png, device)
    print(f"curves: {png}")
    print(f"total time: {time.perf_counter() - t_start:.1f} s")

    failures = []
    if args.limit:
        # A smoke run on a subset cannot reach the full run's target; say so
        # instead of failing (or passing) on it. The other checks still count.
        print(f"accuracy target not checked: --limit {args.limit} trains on a subset "
              f"(the {100 * TARGET_ACCURACY:.0f}% target is for the full training set)")
    elif accuracy < TARGET_ACCURACY:
        failures.append(f"test accuracy {100 * accuracy:.2f}% is below {100 * TARGET_ACCURACY:.0f}%")
    if not same:
        failures.append("the reloaded checkpoint predicts differently")
    if not c_match:
        failures.append("the C API's outputs differ from Python's")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
