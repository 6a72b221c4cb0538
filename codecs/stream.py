"""The receive buffer and error state every framed codec shares.

`ReceiveBuffer` is the base of every sans-I/O connection (native, Kafka, TANK) and implements the receiving half
of the codec contract (`receive_data`, `trailing_data`, `buffered_bytes`; see `logway.codecs`). It holds the
received bytes, the read position, whether the peer sent EOF, and the sticky fatal error. The codec itself only
parses its header out of `_buf` at `_pos` (with local-variable copies: `next_event` is a hot path), then calls
`_consume(end)` once a frame is taken, `_short_header()` / `_short_body()` when the frame is not complete yet,
and raises `_fatal()` when the stream can no longer be framed. After a fatal error the buffer is dropped,
nothing more is buffered, and every later `next_event` raises `_broken()`: a copy of the same error.

`NEED_DATA` and `CLOSED` are the sentinels `next_event` returns; every codec re-exports these same objects.
"""

from __future__ import annotations

from typing import Any

from .errors import LocalProtocolError, RemoteProtocolError

__all__ = ["NEED_DATA", "CLOSED", "COMPACT_AT", "ReceiveBuffer"]

#: Once the read position passes this many consumed bytes the receive buffer is compacted (not after every
#: frame, so a burst of small frames does not shift the buffer once per frame).
COMPACT_AT = 64 * 1024
#: A frame at least this large is handed out as a read-only view of the receive buffer instead of a copy
#: (the buffer then belongs to the frame and a new one starts with the bytes after it): big produce frames
#: are not copied again between the socket and the log.
ZERO_COPY_AT = 128 * 1024


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Any = _Sentinel("NEED_DATA")  # more bytes are needed before the next event
CLOSED: Any = _Sentinel("CLOSED")  # the peer sent EOF and every complete frame has been returned


def _fatal_error(message: str, code: int | None, info: dict[str, Any]) -> RemoteProtocolError:
    exc = RemoteProtocolError(message, code=code, fatal=True)
    for name, value in info.items():
        setattr(exc, name, value)
    return exc


class ReceiveBuffer:
    """Received bytes not yet framed, EOF, and the error that broke the stream (see the module docstring).

    Subclasses add `next_event()` and `send(event)` as the codec contract of `logway.codecs` describes."""

    #: The messages `_short_header` / `_short_body` raise at EOF inside a frame; formatted with `what` (the
    #: codec's `_what`), `got` (bytes received) and `need` (bytes the header or body needs).
    _truncated_header = "truncated frame: EOF after {got} of {need} header bytes"
    _truncated_body = "truncated frame: EOF after {got} of {need} payload bytes"
    _what = "frame"

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # read position in _buf; bytes before it are consumed and dropped on compaction
        self._eof = False
        self._error: RemoteProtocolError | None = None  # set by a fatal error; every later call re-raises

    @property
    def trailing_data(self) -> tuple[bytes, bool]:
        """(unconsumed received bytes, whether EOF was received), as in h11."""
        return bytes(self._buf[self._pos:]), self._eof

    @property
    def buffered_bytes(self) -> int:
        """How many received bytes wait for the rest of their frame (0 between frames); no copy."""
        return len(self._buf) - self._pos

    #: How much memory a frame's decoded form may take, as a multiple of its size (measured per codec with
    #: tracemalloc on the worst frames the wire allows: arrays of the smallest items). See `decode_cost`.
    decode_factor = 1

    def next_frame_size(self) -> int:
        """The whole size the frame at the read position declares once its header is in — 0 before, and for a
        frame the codec will refuse (too large, unknown type): what a caller may budget for before the rest
        arrives. Each codec reads its own header."""
        return 0

    def decode_cost(self, size: int) -> int:
        """The memory the frame at the read position, of `size` bytes, may take while it is decoded and handled."""
        return size * self.decode_factor

    def receive_data(self, data: bytes) -> None:
        """Add bytes from the peer; b"" means the peer closed its side (EOF)."""
        if self._error is not None:
            return  # the stream is already unframeable: do not buffer what a broken peer keeps sending
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("received data after EOF")
        self._buf += data

    def _consume(self, end: int) -> None:
        """The frame ending at `end` (an index in `_buf`) is taken: advance, compacting now and then."""
        buf = self._buf
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end >= COMPACT_AT:
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end

    def _take(self, start: int, end: int) -> bytes | memoryview:
        """The bytes [start, end) of `_buf` (a whole frame's payload), consuming through `end`."""
        buf = self._buf
        if end - start < ZERO_COPY_AT:
            payload = bytes(buf[start:end])
            self._consume(end)
            return payload
        self._buf = buf[end:]  # the (at most one receive's worth of) bytes after the frame
        self._pos = 0
        return memoryview(buf).toreadonly()[start:end]

    def _short_header(self, available: int, header_size: int) -> Any:
        """Fewer than `header_size` bytes buffered: NEED_DATA, CLOSED at a clean EOF, or fatal at EOF."""
        if not self._eof:
            return NEED_DATA
        if available == 0:
            return CLOSED
        raise self._fatal(self._truncated_header.format(what=self._what, got=available, need=header_size))

    def _short_body(self, got: int, length: int) -> Any:
        """The header is in but only `got` of the `length` body bytes: NEED_DATA, or fatal at EOF."""
        if not self._eof:
            return NEED_DATA
        raise self._fatal(self._truncated_body.format(what=self._what, got=got, need=length))

    def _fatal(self, message: str, code: int | None = None, **info: Any) -> RemoteProtocolError:
        """Break the stream for good: the error to raise (fatal, `code`, `info` as attributes)."""
        self._error = _fatal_error(message, code, info)
        self._buf = bytearray()
        self._pos = 0
        return _fatal_error(message, code, info)

    def _broken(self) -> RemoteProtocolError:
        """A fresh copy of the error that broke the stream, for every call after it (only once `_error` is set)."""
        err = self._error
        exc = RemoteProtocolError(err.message, code=err.code, fatal=True)
        exc.__dict__.update(err.__dict__)
        return exc
