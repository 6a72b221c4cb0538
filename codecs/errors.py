"""Errors raised by every codec, split by blame (the h11 habit).

- `RemoteProtocolError`: the peer sent bytes that break the protocol. It carries the protocol's own error
  (`code`, `message`) to send back, and `fatal`: when true the stream cannot be resynchronised and the
  connection must be closed after the error answer (if any).
- `LocalProtocolError`: we misused the codec API (e.g. sent an event the role cannot send). A bug on our side.
- `RecordFormatError`: a record batch (Kafka RecordBatch, TANK bundle) is malformed or fails its checksum.
  It subclasses `ValueError` so storage can catch it without importing the codecs.
"""

from __future__ import annotations


class RemoteProtocolError(Exception):
    """The peer broke the protocol; `code`/`message` are what to answer, `fatal` says close afterwards."""

    def __init__(self, message: str, *, code: int | None = None, fatal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.fatal = fatal


class LocalProtocolError(Exception):
    """We used the codec wrongly (a bug in the caller, never the peer's fault)."""


class RecordFormatError(ValueError):
    """A record batch is malformed, truncated or fails its checksum."""
