"""spora.train: Model (the training loop), callbacks and metrics."""
from .callbacks import (Callback, CallbackParams, CheckpointConfig, EarlyStopping, History, LossMonitor,
                        ModelCheckpoint, RunContext, TimeMonitor)
from .metrics import Accuracy, Loss, Metric
from .model import Model

__all__ = ["Model", "Callback", "CallbackParams", "RunContext", "LossMonitor", "TimeMonitor",
           "ModelCheckpoint", "CheckpointConfig", "EarlyStopping", "History", "Metric", "Accuracy", "Loss"]
