"""BatchNorm1d, BatchNorm2d, LayerNorm."""
from ... import Parameter
from ...ops import raw
from .. import _util
from ..cell import Cell
from ..init import initializer


class _BatchNorm(Cell):
    """Batch normalisation over every dim but the channel dim (dim 1).

    Training: normalises by the batch statistics and moves the moving ones:
    moving = momentum * moving + (1 - momentum) * batch (MindSpore's
    convention: momentum 0.9 is PyTorch's 0.1), the variance unbiased.
    Eval: normalises by the moving statistics. use_batch_statistics True /
    False forces one behaviour regardless of set_train. Parameters: gamma,
    beta (trainable when affine), moving_mean, moving_variance (not trainable).
    """

    _ranks = ()
    _layout = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, dtype=None):
        super().__init__()
        self.num_features = int(num_features)
        if self.num_features <= 0:
            raise ValueError(f"[{type(self).__name__}] num_features must be positive, got {num_features}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"[{type(self).__name__}] momentum must be in [0, 1], got {momentum}")
        self.eps, self.momentum, self.affine = float(eps), float(momentum), affine
        self.use_batch_statistics = use_batch_statistics
        c = (self.num_features,)
        self.gamma = Parameter(initializer(gamma_init, c, dtype), requires_grad=affine)
        self.beta = Parameter(initializer(beta_init, c, dtype), requires_grad=affine)
        self.moving_mean = Parameter(initializer(moving_mean_init, c, dtype), requires_grad=False)
        self.moving_variance = Parameter(initializer(moving_var_init, c, dtype), requires_grad=False)

    def construct(self, x):
        name = type(self).__name__
        if len(x.shape) not in self._ranks or x.shape[1] != self.num_features:
            raise ValueError(f"[{name}] expects input {self._layout} with C = {self.num_features}, got shape "
                             f"{tuple(x.shape)}{_util._C_location()}")
        training = self.training if self.use_batch_statistics is None else bool(self.use_batch_statistics)
        y, _, _, new_mean, new_var = raw.batch_norm(
            x, self.gamma, self.beta, self.moving_mean, self.moving_variance,
            training=training, momentum=1.0 - self.momentum, eps=self.eps)
        if training:
            self.moving_mean.assign_value(new_mean)
            self.moving_variance.assign_value(new_var)
        return y

    def extend_repr(self):
        return f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(_BatchNorm):
    """Input (N, C) or (N, C, L)."""
    _ranks = (2, 3)
    _layout = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Input (N, C, H, W)."""
    _ranks = (4,)
    _layout = "(N, C, H, W)"


class LayerNorm(Cell):
    """Normalises over the trailing dims given by normalized_shape, then
    gamma * x_hat + beta (parameters of normalized_shape)."""

    def __init__(self, normalized_shape, gamma_init="ones", beta_init="zeros", epsilon=1e-5, eps=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        if not self.normalized_shape or min(self.normalized_shape) <= 0:
            raise ValueError(f"[LayerNorm] normalized_shape must be non-empty and positive, got {normalized_shape}")
        self.epsilon = float(eps if eps is not None else epsilon)
        self.gamma = Parameter(initializer(gamma_init, self.normalized_shape, dtype))
        self.beta = Parameter(initializer(beta_init, self.normalized_shape, dtype))

    def construct(self, x):
        nd = len(self.normalized_shape)
        if tuple(x.shape[len(x.shape) - nd:]) != self.normalized_shape or len(x.shape) < nd:
            raise ValueError(f"[LayerNorm] expects input ending in {self.normalized_shape}, got shape "
                             f"{tuple(x.shape)}{_util._C_location()}")
        return raw.layer_norm(x, self.gamma, self.beta, normalized_ndim=nd, eps=self.epsilon)[0]

    def extend_repr(self):
        return f"normalized_shape={self.normalized_shape}, epsilon={self.epsilon}"
