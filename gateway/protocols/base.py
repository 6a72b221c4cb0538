"""The interface between the server and a wire protocol (`Protocol`); each protocol package subclasses it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    from ..connections import Connection
    from ..context import Context
    from ..pump import Session

__all__ = ["Protocol", "INFO", "WARNING"]


class Protocol:
    """One wire protocol as the gateway serves it (one instance per gateway, made once storage is open, given the
    gateway's `context.Context`)."""

    name: ClassVar[str]
    #: Long-polls one connection may have parked at once while later requests are answered (out of order);
    #: 0 answers every request in order.
    max_parked: ClassVar[int] = 0
    #: The request types (`admin.stats.request_name`) that read or write the log: they take turns (`turns.py`).
    data_requests: ClassVar[frozenset[str]] = frozenset()
    #: (workers: N) The `handover.HandOvers` that gives this protocol's connections to the worker owning their
    #: partitions (the pump uses it when a handler answers `pump.HandOver`), or None: they are never handed over.
    hand_over = None

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.steps = ctx.steps

    def codec(self):
        """A fresh server-side codec for one connection."""
        raise NotImplementedError

    def session(self, conn: "Connection", codec) -> "Session":
        """The per-connection state and request handler."""
        raise NotImplementedError

    async def run(self) -> None:
        """Background work for the gateway's life (the Kafka group coordinator's timers); nothing by default."""

    def listening(self, address: tuple[str, int]) -> None:
        """The listener is bound to `address` (the Kafka protocol advertises it)."""

    def security_notes(self) -> list[tuple[int, str]]:
        """(log level, message) pairs to log when the listener starts: who may use it."""
        return []

    def close(self) -> None:
        """Shutdown has begun: answer whatever waits inside the protocol (parked group joins)."""


#: Levels for `Protocol.security_notes`.
INFO, WARNING = logging.INFO, logging.WARNING
