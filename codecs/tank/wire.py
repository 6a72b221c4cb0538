"""Primitive TANK wire encodings: a bounded payload `Reader`, the matching pack helpers, and `runs`.

All integers are little-endian; `str8` is a u8 length and the bytes; an endpoint is 4 address bytes in
network order and a little-endian u16 port. Every read is checked against the bytes left in the payload, and
every count against the smallest size its items can take, before anything is sliced or allocated: a peer's
bytes that do not fit raise `RemoteProtocolError(fatal=True)` — TANK closes the connection on a malformed
payload. Pack helpers raise `LocalProtocolError` for values the wire cannot carry (our bug, not the peer's).
The message layouts built from these primitives are declared in `requests` / `responses` (see `schema`).
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

from ..errors import LocalProtocolError, RemoteProtocolError, RecordFormatError
from .messages import Endpoint
from .varint import decode_varint

__all__ = ["Reader", "FRAME_HEADER", "ENDPOINT_STRUCT", "pack_str8", "pack_endpoint", "malformed", "runs"]

#: Every frame: msg_type u8, payload length u32 (the connection frames with it; the Consume encoder writes it too).
FRAME_HEADER = struct.Struct("<BI")

#: An endpoint: 4 IPv4 address bytes (network order) and a little-endian u16 port.
ENDPOINT_STRUCT = struct.Struct("<4sH")


def malformed(message: str) -> RemoteProtocolError:
    """The error for a payload that breaks the protocol: TANK drops such a connection."""
    return RemoteProtocolError(message, fatal=True)


class Reader:
    """Reads one frame payload front to back; every read is bounded by the payload's end."""

    __slots__ = ("buf", "view", "pos", "end", "what")

    def __init__(self, payload: bytes, what: str) -> None:
        self.buf = payload
        self.view = memoryview(payload)
        self.pos = 0
        self.end = len(payload)
        self.what = what

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, field: str) -> None:
        if self.end - self.pos < n:
            raise malformed(f"{self.what}: {field} needs {n} bytes, {self.end - self.pos} left")

    def count(self, n: int, min_item: int, field: str) -> int:
        """Check that `n` items of at least `min_item` bytes each can still fit; return `n`."""
        if n * min_item > self.end - self.pos:
            raise malformed(f"{self.what}: {n} {field} cannot fit in the {self.end - self.pos} bytes left")
        return n

    def take(self, n: int, field: str) -> memoryview:
        self.need(n, field)
        pos = self.pos
        self.pos = pos + n
        return self.view[pos:pos + n]

    def varint(self, field: str) -> int:
        try:
            value, self.pos = decode_varint(self.buf, self.pos, self.end)
        except RecordFormatError as exc:
            raise malformed(f"{self.what}: {field}: {exc}") from None
        return value


def pack_str8(name, field: str) -> bytes:
    raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else bytes(name)
    if len(raw) > 255:
        raise LocalProtocolError(f"{field} is {len(raw)} bytes; a str8 holds at most 255")
    return bytes((len(raw),)) + raw


def pack_endpoint(ep: Endpoint | None, field: str) -> bytes:
    if ep is None:
        raise LocalProtocolError(f"{field} needs an endpoint")
    try:
        return ENDPOINT_STRUCT.pack(ipaddress.IPv4Address(ep[0]).packed, ep[1])
    except (ValueError, struct.error) as exc:
        raise LocalProtocolError(f"{field}: bad endpoint {ep!r}: {exc}") from None


def runs(items, key) -> list[tuple[Any, list]]:
    """Consecutive runs of items with the same key (the wire groups Produce partitions by topic this way)."""
    out: list[tuple[Any, list]] = []
    for item in items:
        k = key(item)
        if out and out[-1][0] == k:
            out[-1][1].append(item)
        else:
            out.append((k, [item]))
    return out
