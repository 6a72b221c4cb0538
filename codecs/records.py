"""The protocol-neutral record model shared by every codec and record format.

A `Record` is what one protocol hands to another when a batch must be transcoded: the native JSON protocol,
Kafka RecordBatches and TANK bundles all convert to and from it. Timestamps are milliseconds since the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Record:
    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None  # ms since the epoch; None = let the encoder choose (usually "now")
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())
    offset: int = -1  # absolute offset when read from a log; -1 before it is assigned
