"""Optimizers (one fused update op per parameter group) and LR schedules."""
from .adam import Adam, AdamW
from .lr_schedule import ConstantLR, CosineDecayLR, LearningRateSchedule, StepLR, WarmupLR
from .optimizer import Optimizer
from .sgd import SGD, Momentum

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "LearningRateSchedule", "ConstantLR", "StepLR",
           "CosineDecayLR", "WarmupLR"]
