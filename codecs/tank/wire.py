"""Primitive TANK wire encodings: a bounded payload `Reader` and the matching pack helpers.

All integers are little-endian; `str8` is a u8 length and the bytes; an endpoint is 4 address bytes in
network order and a little-endian u16 port. Every read is checked against the bytes left in the payload, and
every count against the smallest size its items can take, before anything is sliced or allocated: a peer's
bytes that do not fit raise `RemoteProtocolError(fatal=True)` — TANK closes the connection on a malformed
payload. Pack helpers raise `LocalProtocolError` for values the wire cannot carry (our bug, not the peer's).
"""

from __future__ import annotations

import ipaddress
import struct

from ..errors import LocalProtocolError, RemoteProtocolError, RecordFormatError
from .messages import Endpoint
from .varint import decode_varint

__all__ = ["Reader", "U8", "U16", "U32", "U64", "pack_str8", "pack_endpoint", "malformed"]

U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
_ENDPOINT = struct.Struct("<4sH")


def malformed(message: str) -> RemoteProtocolError:
    """The error for a payload that breaks the protocol: TANK drops such a connection."""
    return RemoteProtocolError(message, fatal=True)


def _decode_name(raw) -> str:
    return bytes(raw).decode("utf-8", "surrogateescape")


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

    def _fixed(self, s: struct.Struct, field: str) -> int:
        pos = self.pos
        if self.end - pos < s.size:
            raise malformed(f"{self.what}: {field} needs {s.size} bytes, {self.end - pos} left")
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)[0]

    def u8(self, field: str) -> int:
        return self._fixed(U8, field)

    def u16(self, field: str) -> int:
        return self._fixed(U16, field)

    def u32(self, field: str) -> int:
        return self._fixed(U32, field)

    def u64(self, field: str) -> int:
        return self._fixed(U64, field)

    def take(self, n: int, field: str) -> memoryview:
        self.need(n, field)
        pos = self.pos
        self.pos = pos + n
        return self.view[pos:pos + n]

    def bytes8(self, field: str) -> bytes:
        n = self.u8(field)
        return bytes(self.take(n, field))

    def str8(self, field: str) -> str:
        return _decode_name(self.take(self.u8(field), field))

    def varint(self, field: str) -> int:
        try:
            value, self.pos = decode_varint(self.buf, self.pos, self.end)
        except RecordFormatError as exc:
            raise malformed(f"{self.what}: {field}: {exc}") from None
        return value

    def endpoint(self, field: str) -> Endpoint:
        self.need(_ENDPOINT.size, field)
        addr, port = _ENDPOINT.unpack_from(self.buf, self.pos)
        self.pos += _ENDPOINT.size
        return Endpoint(str(ipaddress.IPv4Address(addr)), port)


def pack_str8(name, field: str) -> bytes:
    raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else bytes(name)
    if len(raw) > 255:
        raise LocalProtocolError(f"{field} is {len(raw)} bytes; a str8 holds at most 255")
    return bytes((len(raw),)) + raw


def pack_endpoint(ep: Endpoint | None, field: str) -> bytes:
    if ep is None:
        raise LocalProtocolError(f"{field} needs an endpoint")
    try:
        return _ENDPOINT.pack(ipaddress.IPv4Address(ep[0]).packed, ep[1])
    except (ValueError, struct.error) as exc:
        raise LocalProtocolError(f"{field}: bad endpoint {ep!r}: {exc}") from None
