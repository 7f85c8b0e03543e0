"""MindSpore's mindspore.common.initializer: Spora's initializers (defined in
spora.nn.init) under that path.

initializer(init, shape, dtype) returns a Tensor filled now (MindSpore
returns one declared without data that init_data() fills; Spora does that
inside spora.nn.utils.no_init_parameters). Tensor(shape=, dtype=, init=)
declares a tensor without data in both; its init_data() returns the filled
tensor."""
from ..nn.init import (Constant, Dirac, HeNormal, HeUniform, Identity, Initializer, Normal, One,  # noqa: F401
                       Orthogonal, Sparse, TruncatedNormal, Uniform, VarianceScaling, XavierNormal, XavierUniform,
                       Zero, initializer)

__all__ = ["Initializer", "initializer", "Constant", "Dirac", "HeNormal", "HeUniform", "Identity", "Normal", "One",
           "Orthogonal", "Sparse", "TruncatedNormal", "Uniform", "VarianceScaling", "XavierNormal", "XavierUniform",
           "Zero"]
