"""spora.nn: cells (layers and networks), initializers, losses, optimizers.

    import spora
    from spora import nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(784, 128, activation="relu")
            self.fc2 = nn.Dense(128, 10)

        def construct(self, x):
            return self.fc2(self.fc1(x))

In spora.GRAPH_MODE calling a cell compiles its construct (per input
signature and training phase); in PYNATIVE_MODE it runs op by op.
"""
from . import init, utils
from .cell import Cell, CellList, SequentialCell
from .clip import ClipByGlobalNorm, global_norm
from .distributed import DistributedGradReducer
from .graph_cell import GraphCell
from .pipeline import PipelineCell
from .layer.activation import (GELU, LeakyReLU, LogSoftmax, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus, Tanh,
                               get_activation)
from .layer.basic import Dense, Dropout, Embedding, Flatten, Identity
from .layer.conv import Conv2d, Conv2dTranspose
from .layer.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .layer.pooling import AvgPool2d, MaxPool2d
from .layer.transformer import MultiheadAttention, TransformerEncoderLayer
from .layer.rnns import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .loss import (BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, LossBase, MSELoss, NLLLoss, WithLossCell)
from .loss import SoftmaxCrossEntropyWithLogits
from .wrap import TrainOneStepCell
from .dynamic_lr import (cosine_decay_lr, exponential_decay_lr, inverse_decay_lr, natural_exp_decay_lr,
                         piecewise_constant_lr, polynomial_decay_lr, warmup_lr)
from .optim import (SGD, Adam, AdamW, ConstantLR, CosineDecayLR, LearningRateSchedule, Momentum, Optimizer, StepLR,
                    WarmupLR)

__all__ = [
    "init", "utils", "Cell", "CellList", "SequentialCell", "GraphCell", "DistributedGradReducer", "PipelineCell",
    "Dense", "Dropout", "Embedding", "Flatten", "Identity", "Conv2d", "Conv2dTranspose", "BatchNorm1d", "BatchNorm2d",
    "LayerNorm",
    "MaxPool2d", "AvgPool2d", "MultiheadAttention", "TransformerEncoderLayer",
    "RNN", "GRU", "LSTM", "RNNCell", "GRUCell", "LSTMCell",
    "ReLU", "ReLU6", "GELU", "Sigmoid", "Tanh", "SiLU", "LeakyReLU", "Softmax", "LogSoftmax", "Softplus",
    "get_activation",
    "LossBase", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "WithLossCell",
    "SoftmaxCrossEntropyWithLogits", "TrainOneStepCell",
    "piecewise_constant_lr", "exponential_decay_lr", "natural_exp_decay_lr", "inverse_decay_lr", "cosine_decay_lr",
    "polynomial_decay_lr", "warmup_lr",
    "Optimizer", "SGD", "Momentum", "Adam", "AdamW", "ClipByGlobalNorm", "global_norm",
    "LearningRateSchedule", "ConstantLR", "StepLR", "CosineDecayLR", "WarmupLR",
]
