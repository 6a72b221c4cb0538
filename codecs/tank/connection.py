"""TANK's sans-I/O connections: framing over the shared receive buffer (`codecs.stream`), and the role's encoders.

Both classes follow the codec contract of `logway.codecs` (`receive_data`, `next_event`, `send`). Every frame
is `msg_type u8 | length u32 LE | payload` (`wire.FRAME_HEADER`); the payloads are laid out in `requests` and
`responses`. `TankServerConnection` (the broker side) yields request dataclasses and sends responses, and its
greeting: `send(PingEvent())` is the 5-byte Ping a broker writes right after accept. `TankClientConnection` is
the reverse: it sends requests and parses responses, skipping the broker's Pings; it remembers pending Produce
requests, because a Produce response is matched to its request by position.

Errors split by blame. The peer's bytes: `RemoteProtocolError(fatal=True)` for a length over `max_frame`
(256 MiB, as TANK), an unknown type (including 0x04 RegReplica and 0x09 ConsumePeer for a standalone
broker), a malformed or truncated payload, or EOF inside a frame — TANK closes the connection in all these
cases, and the connection stays broken. Our misuse: `LocalProtocolError` (an event this end cannot send, a
value the wire cannot carry).
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import LocalProtocolError, RemoteProtocolError
from ..stream import CLOSED, NEED_DATA, ReceiveBuffer
from .messages import ConsumeResponse, MsgType, PingEvent, ProduceRequest
from .requests import REQUEST_TYPES, encode_request, parse_request
from .responses import RESPONSE_TYPES, encode_consume_response, encode_response, parse_response
from .wire import FRAME_HEADER

__all__ = ["NEED_DATA", "CLOSED", "MAX_FRAME_BYTES", "PING_FRAME", "TankServerConnection", "TankClientConnection"]

#: TANK refuses (and disconnects) a frame whose length is over 256 MiB; checked before the body is buffered.
MAX_FRAME_BYTES = 256 * 1024 * 1024
_HEADER_SIZE = FRAME_HEADER.size
_U32_MAX = 0xFFFFFFFF
#: Up to this many payload pieces, their lengths are summed first so header and payload are joined in one copy
#: (a Produce request of a few hundred big bundles); beyond it, summing costs more than copying the (then
#: many small) pieces twice.
_SINGLE_COPY_PIECES = 1024
#: The broker's greeting: a Ping with an empty payload, written as soon as a connection is accepted.
PING_FRAME = FRAME_HEADER.pack(MsgType.PING, 0)


class _Framing(ReceiveBuffer):
    """`msg_type u8 | length u32` framing over the shared receive buffer, for both roles."""

    _accepted: frozenset = frozenset()
    _what = "frame"

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        if type(max_frame) is not int or not 0 < max_frame <= _U32_MAX:
            raise ValueError(f"max_frame must be an int in 1..{_U32_MAX}, not {max_frame!r}")
        super().__init__()
        self.max_frame = max_frame

    def _next_frame(self) -> tuple[int, bytes] | Any:
        """(msg_type, payload) of the next whole frame, NEED_DATA or CLOSED."""
        if self._error is not None:
            raise self._broken()
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < _HEADER_SIZE:
            return self._short_header(available, _HEADER_SIZE)
        msg_type, length = FRAME_HEADER.unpack_from(buf, pos)
        if msg_type not in self._accepted:  # refused before the body is waited for
            raise self._fatal(f"unknown {self._what} type {msg_type:#04x}")
        if length > self.max_frame:
            raise self._fatal(f"frame of {length} bytes exceeds {self.max_frame}")
        end = pos + _HEADER_SIZE + length
        if len(buf) < end:
            return self._short_body(available - _HEADER_SIZE, length)
        return msg_type, self._take(pos + _HEADER_SIZE, end)

    #: A request's decoded form: bundles stay bytes; the other requests' arrays are small.
    decode_factor = 2

    def next_frame_size(self) -> int:
        """The whole size (header included) the frame at the read position declares, once its header is in; 0
        before, and for a frame the codec refuses (unknown type, over `max_frame`)."""
        if len(self._buf) - self._pos < _HEADER_SIZE:
            return 0
        msg_type, length = FRAME_HEADER.unpack_from(self._buf, self._pos)
        return _HEADER_SIZE + length if msg_type in self._accepted and length <= self.max_frame else 0

    def _parse(self, fn, *args) -> Any:
        try:
            return fn(*args)
        except RemoteProtocolError as exc:
            if exc.fatal:
                raise self._fatal(exc.message) from None
            raise

    @staticmethod
    def _frame(msg_type: int, pieces: list) -> bytes:
        """Header and payload pieces joined; a Produce request of big bundles is copied a single time."""
        try:
            if len(pieces) <= _SINGLE_COPY_PIECES:
                length = sum(map(len, pieces))  # bytes, bytearray, byte memoryviews (anything else: see below)
                if length <= _U32_MAX:
                    frame = b"".join([FRAME_HEADER.pack(msg_type, length), *pieces])
                    if len(frame) == _HEADER_SIZE + length:
                        return frame
            payload = b"".join(pieces)  # many small pieces, or a memoryview of wider items (len() counted items)
        except TypeError as exc:
            raise LocalProtocolError(f"unencodable payload piece: {exc}") from None
        if len(payload) > _U32_MAX:
            raise LocalProtocolError(f"payload of {len(payload)} bytes does not fit a frame")
        return FRAME_HEADER.pack(msg_type, len(payload)) + payload


def _encoding(fn, *args):
    """Run an encoder, turning out-of-range values (struct.error, ValueError) into LocalProtocolError."""
    try:
        return fn(*args)
    except (struct.error, ValueError, OverflowError, TypeError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode {type(args[0]).__name__}: {exc}") from None


class TankServerConnection(_Framing):
    """The broker's end of a TANK connection, in the codec contract of `logway.codecs`.

    - `receive_data(data)`; `next_event()` -> a request dataclass of `messages` (`ProduceRequest`,
      `ConsumeRequest`, `DiscoverPartitionsRequest`, `CreateTopicRequest`, `ReloadConfRequest`, `StatusRequest`,
      `DiscoverTopicsRequest`, `DiscoverTopologyRequest`, or `PingEvent` for a client's Ping: drop it),
      `NEED_DATA` or `CLOSED`.
    - `send(PingEvent())` -> `PING_FRAME`, the greeting to write right after accept (TankGo and the Java client
      wait for it); `send(response)` -> `bytes`, except for a `ConsumeResponse` whose frame is more than one
      piece: then the `list` of pieces, its chunks placed where they belong (deferred file ranges, and in-memory
      chunks over `responses.COALESCE_LIMIT`, which are passed through uncopied).
    """

    _accepted = REQUEST_TYPES
    _what = "request"

    def next_event(self) -> Any:
        """The next request dataclass (a `PingEvent` for a client's Ping: drop it), NEED_DATA or CLOSED."""
        frame = self._next_frame()
        if frame is NEED_DATA or frame is CLOSED:
            return frame
        return self._parse(parse_request, *frame)

    def send(self, event: Any) -> bytes | list:
        """One frame: bytes, or a Consume response's pieces (see the class docstring)."""
        if isinstance(event, ConsumeResponse):
            pieces = _encoding(encode_consume_response, event)
            if len(pieces) == 1 and isinstance(pieces[0], bytes):
                return pieces[0]
            return pieces
        if type(event) is PingEvent:
            return PING_FRAME
        msg_type, pieces = _encoding(encode_response, event)
        return self._frame(msg_type, pieces)


class TankClientConnection(_Framing):
    """A client's end of a TANK connection, in the codec contract of `logway.codecs`.

    - `send(request)` -> `bytes`: a request dataclass of `messages`, or `PingEvent()`. A `ProduceRequest` is
      remembered until its response arrives (`forget(request_id)` drops it).
    - `receive_data(data)`; `next_event()` -> a response dataclass (`ProduceResponse`, `ConsumeResponse`,
      `DiscoverPartitionsResponse`, `CreateTopicResponse`, `ReloadConfResponse`, `StatusResponse`,
      `DiscoverTopicsResponse`, `DiscoverTopologyResponse`), `NEED_DATA` or `CLOSED`; the broker's Pings are
      counted in `pings_received` and skipped. A Produce response for no pending request raises a non-fatal
      `RemoteProtocolError`.
    """

    _accepted = RESPONSE_TYPES
    _what = "response"

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        super().__init__(max_frame)
        self.pings_received = 0
        self._pending_produce: dict[int, list[tuple[str, int]]] = {}

    def send(self, request: Any) -> bytes:
        """One request frame. A Produce request is remembered until its response arrives."""
        msg_type, pieces = _encoding(encode_request, request)
        frame = self._frame(msg_type, pieces)
        if isinstance(request, ProduceRequest):
            self._pending_produce[request.request_id] = [(e.topic, e.partition) for e in request.entries]
        return frame

    def next_event(self) -> Any:
        """The next response dataclass, NEED_DATA or CLOSED; Ping frames are counted and skipped."""
        while True:
            frame = self._next_frame()
            if frame is NEED_DATA or frame is CLOSED:
                return frame
            msg_type, payload = frame
            if msg_type == MsgType.PING:
                self.pings_received += 1
                continue
            return self._parse(parse_response, msg_type, payload, self._take_pending)

    def _take_pending(self, request_id: int) -> list[tuple[str, int]] | None:
        return self._pending_produce.pop(request_id, None)

    def forget(self, request_id: int) -> None:
        """Drop a pending Produce request (e.g. after a client-side timeout)."""
        self._pending_produce.pop(request_id, None)
