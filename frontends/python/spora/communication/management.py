"""MindSpore's older path mindspore.communication.management: the same
functions as spora.communication (`from spora.communication.management
import init, get_rank, get_group_size` works as in MindSpore 1.x code)."""
from . import (GlobalComm, ReduceOp, get_group_size, get_local_rank, get_rank, init, is_initialized,  # noqa: F401
               release)

__all__ = ["init", "release", "is_initialized", "get_rank", "get_group_size", "get_local_rank", "ReduceOp",
           "GlobalComm"]
