"""Dispatch: the one place where codec events meet storage calls, one module per protocol.

`core.Dispatcher` holds the shared storage steps (append with wake-ups and group-commit durability, offset
commits); `native.NativeDispatch` and `kafka.KafkaDispatch` map each protocol's requests onto them.
"""

from .core import Dispatcher
from .native import NativeDispatch

__all__ = ["Dispatcher", "NativeDispatch"]
