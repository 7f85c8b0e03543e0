"""Samplers of random-access sources (mindspore.dataset samplers): which
indices an epoch reads, in which order. Random ones draw from (seed,
epoch), so an epoch's order is reproducible and equal on every shard.

Also accepted where a sampler is: any iterable of indices (a list, a
range), read again each epoch.
"""
import numpy as np


def epoch_rng(seed, epoch, salt):
    return np.random.default_rng([int(seed), int(epoch), salt])


def _check_count(num_samples, who):
    if num_samples is None:
        return None
    num_samples = int(num_samples)
    if num_samples < 0:
        raise ValueError(f"[dataset {who}] num_samples must be >= 0, got {num_samples}")
    return num_samples or None  # MindSpore: 0 means all


def shard_order(order, num_shards, shard_id):
    """Positions shard_id, shard_id + num_shards, ... of `order`, wrapping
    around so every shard has ceil(n / num_shards) (as the C++ sampler)."""
    n = len(order)
    if num_shards == 1 or n == 0:
        return order
    per = -(-n // num_shards)
    return order[(np.arange(per) * num_shards + shard_id) % n]


class Sampler:
    def indices(self, n, epoch, seed):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, start_index=None, num_samples=None):
        self.start = int(start_index or 0)
        self.num_samples = _check_count(num_samples, "SequentialSampler")

    def indices(self, n, epoch, seed):
        if self.start >= max(n, 1) or self.start < 0:
            raise ValueError(f"[dataset SequentialSampler] start_index {self.start} is outside [0, {n})")
        out = np.arange(self.start, n)
        return out[:self.num_samples] if self.num_samples else out


class RandomSampler(Sampler):
    def __init__(self, replacement=False, num_samples=None):
        self.replacement = bool(replacement)
        self.num_samples = _check_count(num_samples, "RandomSampler")

    def indices(self, n, epoch, seed):
        rng = epoch_rng(seed, epoch, 0x5253)
        k = self.num_samples or n
        if self.replacement:
            return rng.integers(0, n, k) if n else np.arange(0)
        return rng.permutation(n)[:k]


class DistributedSampler(Sampler):
    """Shard shard_id of num_shards (shuffled alike on every process)."""

    def __init__(self, num_shards, shard_id, shuffle=True, num_samples=None, offset=-1):
        self.num_shards, self.shard_id = int(num_shards), int(shard_id)
        if self.num_shards < 1 or not 0 <= self.shard_id < self.num_shards:
            raise ValueError(f"[dataset DistributedSampler] shard_id {shard_id} is not in [0, {num_shards})")
        if offset not in (-1, None):
            raise ValueError("[dataset DistributedSampler] offset is not supported")
        self.shuffle = bool(shuffle)
        self.num_samples = _check_count(num_samples, "DistributedSampler")

    def indices(self, n, epoch, seed):
        order = epoch_rng(seed, epoch, 0x4453).permutation(n) if self.shuffle else np.arange(n)
        out = shard_order(order, self.num_shards, self.shard_id)
        return out[:self.num_samples] if self.num_samples else out


class SubsetSampler(Sampler):
    """The given indices, in order."""

    def __init__(self, indices, num_samples=None):
        self.subset = np.asarray(list(indices), dtype=np.int64)
        self.num_samples = _check_count(num_samples, type(self).__name__)

    def indices(self, n, epoch, seed):
        out = self._order(epoch, seed)
        return out[:self.num_samples] if self.num_samples else out

    def _order(self, epoch, seed):
        return self.subset


class SubsetRandomSampler(SubsetSampler):
    """The given indices, in a new random order each epoch."""

    def _order(self, epoch, seed):
        return self.subset[epoch_rng(seed, epoch, 0x5352).permutation(len(self.subset))]


class IterableSampler(Sampler):
    """A user's iterable of indices (list, range, object with __iter__)."""

    def __init__(self, it):
        self.it = it

    def indices(self, n, epoch, seed):
        return np.asarray([int(i) for i in self.it], dtype=np.int64)


def as_sampler(sampler):
    if sampler is None or isinstance(sampler, Sampler):
        return sampler
    if hasattr(sampler, "__iter__"):
        return IterableSampler(sampler)
    raise TypeError(f"[dataset] sampler must be a spora.dataset sampler or an iterable of indices, "
                    f"got {type(sampler).__name__}")


__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "DistributedSampler", "SubsetSampler",
           "SubsetRandomSampler"]
