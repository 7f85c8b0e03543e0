"""Pipeline-wide settings, as mindspore.dataset.config has them.

The seed keys every random choice of a pipeline built afterwards (source
shuffling, shuffle(), random transforms); with the same seed, an epoch's
output is the same whatever num_parallel_workers is.
"""

_config = {"seed": 0, "prefetch_size": 4, "num_parallel_workers": 1, "python_op_timeout": 300.0,
           "device_queue_size": 1}


def set_seed(seed):
    """Seed for pipelines created from now on (an int >= 0)."""
    seed = int(seed)
    if seed < 0 or seed >= 2 ** 64:
        raise ValueError(f"[dataset] seed must be in [0, 2**64), got {seed}")
    _config["seed"] = seed


def get_seed():
    return _config["seed"]


def set_prefetch_size(size):
    """How many finished rows (batches) an iterator keeps ready ahead of the caller."""
    size = int(size)
    if not 1 <= size <= 1024:
        raise ValueError(f"[dataset] prefetch_size must be in [1, 1024], got {size}")
    _config["prefetch_size"] = size


def get_prefetch_size():
    return _config["prefetch_size"]


def set_num_parallel_workers(n):
    """Default worker count of map() when num_parallel_workers is not given."""
    n = int(n)
    if not 1 <= n <= 256:
        raise ValueError(f"[dataset] num_parallel_workers must be in [1, 256], got {n}")
    _config["num_parallel_workers"] = n


def get_num_parallel_workers():
    return _config["num_parallel_workers"]


def set_python_op_timeout(seconds):
    """How long (seconds, default 300) a Python function of the pipeline (a
    map operation, a GeneratorDataset source's __getitem__ or next()) may
    take for one row before iteration raises TimeoutError naming it. 0
    waits forever. Spora's own setting: MindSpore only logs a warning
    (set_multiprocessing_timeout_interval)."""
    seconds = float(seconds)
    if not seconds >= 0:
        raise ValueError(f"[dataset] python_op_timeout must be >= 0 seconds, got {seconds}")
    _config["python_op_timeout"] = seconds


def get_python_op_timeout():
    return _config["python_op_timeout"]


def set_device_queue_size(size):
    """How many batches are copied to the training device ahead of the one
    handed out (default 1: the next batch's host->device copy overlaps the
    current step); 0 copies each batch when it is taken. Devices with
    their own memory only (not cpu). Spora's own setting: MindSpore feeds
    the device through dataset_sink_mode instead."""
    size = int(size)
    if not 0 <= size <= 64:
        raise ValueError(f"[dataset] device_queue_size must be in [0, 64], got {size}")
    _config["device_queue_size"] = size


def get_device_queue_size():
    return _config["device_queue_size"]
