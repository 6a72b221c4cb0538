"""The native protocol's sans-I/O connection: u32 framing over the shared receive buffer (`codecs.stream`).

`NativeConnection(role)` follows the codec contract of `logway.codecs`: it is fed bytes with `receive_data()`,
yields events from `next_event()` (or `NEED_DATA`, or `CLOSED` after a clean EOF) and turns events into frames
with `send()` (always `bytes`). A server parses requests and sends responses; a client does the reverse. The
JSON <-> event mapping it applies to each frame is in `wire`; the wire schema (and our extensions to the seed)
is described in the package docstring, `logway/codecs/native/__init__.py`.

Errors split by blame: `RemoteProtocolError` when the peer's bytes are wrong (`fatal=True` when the stream can
no longer be framed: oversized length, EOF inside a frame; the connection then stays broken), and
`LocalProtocolError` when the caller misuses the API (wrong-role event, unencodable value, frame too large).
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any, Literal

import orjson

from logway.codecs.errors import LocalProtocolError, RemoteProtocolError
from logway.codecs.native.events import EncodedRecords, FetchResponse, RelayedResponse
from logway.codecs.native import security
from logway.codecs.native.wire import _REQUEST_DECODERS as _LOG_REQUEST_DECODERS
from logway.codecs.native.wire import _REQUEST_ENCODERS as _LOG_REQUEST_ENCODERS
from logway.codecs.native.wire import _RESPONSE_DECODERS as _LOG_RESPONSE_DECODERS
from logway.codecs.native.wire import _RESPONSE_ENCODERS as _LOG_RESPONSE_ENCODERS
from logway.codecs.native.wire import MAX_ARRAYS, MAX_PRODUCE_RECORDS, _Invalid, _kind, _obj

# Every request and response: the log's (`wire`) and the security administration's (`security`).
_REQUEST_DECODERS = {**_LOG_REQUEST_DECODERS, **security.REQUEST_DECODERS}
_REQUEST_ENCODERS = {**_LOG_REQUEST_ENCODERS, **security.REQUEST_ENCODERS}
_RESPONSE_DECODERS = {**_LOG_RESPONSE_DECODERS, **security.RESPONSE_DECODERS}
_RESPONSE_ENCODERS = {**_LOG_RESPONSE_ENCODERS, **security.RESPONSE_ENCODERS}
from logway.codecs.stream import CLOSED, NEED_DATA, ReceiveBuffer

# --------------------------------------------------------------------------------------------- bounds

# The seed's MAX_FRAME_SIZE (10 MiB). The length prefix arrives before the body, so without a bound a 4-byte
# header could make us buffer up to 4 GiB per connection; RustLog peers refuse anything larger anyway.
MAX_FRAME_BYTES = 10 * 1024 * 1024

#: A request frame larger than this has its arrays counted before it is parsed (`wire.MAX_ARRAYS`): below it, they
#: cannot be that many.
_COUNT_ARRAYS_FROM = MAX_ARRAYS
#: Encoded Fetch records larger than this go out as a piece of their own, not copied into the frame (`send`).
UNCOPIED_RECORDS_BYTES = 64 * 1024

_HEADER = struct.Struct(">I")
_HEADER_SIZE = _HEADER.size
_MAX_U32 = 2**32 - 1

Role = Literal["server", "client"]

# ----------------------------------------------------------------------------------------- connection


class NativeConnection(ReceiveBuffer):
    """One end of a native-protocol byte stream, in the codec contract of `logway.codecs`.

    - server: `next_event()` -> a request event of `native.events` (`ProduceRequest`, `FetchRequest`, ...,
      `AuthRequest`), `NEED_DATA` or `CLOSED`; `send(response event)` -> `bytes` (one frame).
    - client: `send(request event)` -> `bytes`; `next_event()` -> a response event (`ProduceResponse`, ...,
      `ErrorResponse`).
    A non-fatal `RemoteProtocolError` (bad JSON, unknown type) leaves the stream usable: answer it and go on.
    """

    _truncated_header = "truncated frame: EOF after {got} of {need} length-prefix bytes"

    def __init__(self, role: Role, max_frame: int = MAX_FRAME_BYTES) -> None:
        if role == "server":
            self._decoders, self._what = _REQUEST_DECODERS, "request"
            self._encoders, self._peer_encoders = _RESPONSE_ENCODERS, _REQUEST_ENCODERS
        elif role == "client":
            self._decoders, self._what = _RESPONSE_DECODERS, "response"
            self._encoders, self._peer_encoders = _REQUEST_ENCODERS, _RESPONSE_ENCODERS
        else:
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        if type(max_frame) is not int or not 0 < max_frame <= _MAX_U32:
            raise ValueError(f"max_frame must be an int in 1..{_MAX_U32}, not {max_frame!r}")
        super().__init__()
        self.role: Role = role
        self.max_frame = max_frame

    def next_event(self) -> Any:
        """The next parsed event, NEED_DATA, or CLOSED; raises RemoteProtocolError on a bad frame."""
        payload = self._next_frame()
        if payload is NEED_DATA or payload is CLOSED:
            return payload
        return self._parse(payload)

    def next_payload(self) -> Any:
        """The next frame's JSON payload as bytes, not parsed (a client relaying answers it does not read), or
        NEED_DATA, or CLOSED; raises RemoteProtocolError when the stream cannot be framed."""
        payload = self._next_frame()
        if payload is NEED_DATA or payload is CLOSED:
            return payload
        return bytes(payload)

    def _next_frame(self) -> Any:
        """The next whole frame's payload (a bytearray), NEED_DATA or CLOSED."""
        if self._error is not None:
            raise self._broken()
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < _HEADER_SIZE:
            return self._short_header(available, _HEADER_SIZE)
        (length,) = _HEADER.unpack_from(buf, pos)
        if length > self.max_frame:  # refused before waiting for (or allocating) the body
            raise self._fatal("max frame size exceeded")
        end = pos + _HEADER_SIZE + length
        if len(buf) < end:
            return self._short_body(available - _HEADER_SIZE, length)
        payload = buf[pos + _HEADER_SIZE:end]
        self._consume(end)
        return payload

    #: JSON's decoded form, at its peak (measured with tracemalloc): ~15 times the frame for a Produce of 100-byte
    #: records (orjson's lists of ints, then the records' bytes), less for larger ones; up to ~40 for a Produce of
    #: one-byte records — rare, and bounded by the frame limit — of which half is orjson's own lists.
    decode_factor = 20

    def next_frame_size(self) -> int:
        """The whole size (length prefix included) the frame at the read position declares, once its prefix is
        in; 0 before, and for a length over `max_frame`."""
        if len(self._buf) - self._pos < _HEADER_SIZE:
            return 0
        (length,) = _HEADER.unpack_from(self._buf, self._pos)
        return _HEADER_SIZE + length if length <= self.max_frame else 0

    def send(self, event: Any) -> bytes | list:
        """Encode `event` as one frame (u32 BE length + JSON); raises LocalProtocolError on misuse. A server sends
        a `RelayedResponse`'s payload as it is, and a `FetchResponse` whose records are encoded already
        (`EncodedRecords`) and over `UNCOPIED_RECORDS_BYTES` as a list of three pieces, the records' text uncopied
        between the JSON before and after it."""
        if type(event) is FetchResponse and self.role == "server" and type(event.records) is EncodedRecords \
                and len(event.records.text) > UNCOPIED_RECORDS_BYTES:
            return self._fetch_pieces(event)
        if type(event) is RelayedResponse and self.role == "server":
            if len(event.payload) > self.max_frame:
                raise LocalProtocolError(f"cannot send RelayedResponse: {len(event.payload)}-byte frame exceeds "
                                         f"{self.max_frame}")
            return _HEADER.pack(len(event.payload)) + event.payload
        encoder = self._encoders.get(type(event))
        name = type(event).__name__
        if encoder is None:
            if type(event) in self._peer_encoders:
                raise LocalProtocolError(f"a {self.role} cannot send {name}")
            raise LocalProtocolError(f"not a native protocol event: {event!r}")
        try:
            payload = orjson.dumps(encoder(event))
        except _Invalid as exc:
            raise LocalProtocolError(f"cannot send {name}: {exc}") from None
        except (orjson.JSONEncodeError, TypeError) as exc:
            raise LocalProtocolError(f"cannot send {name}: {exc}") from exc
        if len(payload) > self.max_frame:
            raise LocalProtocolError(f"cannot send {name}: {len(payload)}-byte frame exceeds {self.max_frame}")
        return _HEADER.pack(len(payload)) + payload

    def _fetch_pieces(self, event: FetchResponse) -> list:
        """A Fetch answer as [length + JSON up to its records' "[", their text, "]" and the JSON after it]."""
        try:
            outline = orjson.dumps(_RESPONSE_ENCODERS[FetchResponse](replace(event, records=())))
        except _Invalid as exc:
            raise LocalProtocolError(f"cannot send FetchResponse: {exc}") from None
        text = event.records.text
        cut = outline.index(b"[]") + 1
        length = len(outline) + len(text)
        if length > self.max_frame:
            raise LocalProtocolError(f"cannot send FetchResponse: {length}-byte frame exceeds {self.max_frame}")
        return [_HEADER.pack(length) + outline[:cut], text, outline[cut:]]

    # ---------------------------------------------------------------------------------------- helpers

    def _parse(self, payload: bytearray) -> Any:
        if len(payload) > _COUNT_ARRAYS_FROM and self.role == "server" and payload.count(b"[") > MAX_ARRAYS:
            raise self._bad(f"more than {MAX_ARRAYS} arrays in one request (a Produce carries at most "
                            f"{MAX_PRODUCE_RECORDS} records; send them in several)")
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise self._bad(f"invalid JSON: {exc}") from None
        if type(obj) is not dict or len(obj) != 1:
            shape = f"{len(obj)} keys" if type(obj) is dict else _kind(obj)
            raise self._bad(f"expected an object with exactly one {self._what} type, got {shape}")
        ((tag, body),) = obj.items()
        decoder = self._decoders.get(tag)
        if decoder is None:
            raise RemoteProtocolError(f"unknown {self._what} type: {tag}", fatal=False)
        try:
            return decoder(_obj(body, tag), payload)
        except _Invalid as exc:
            raise self._bad(f"{tag}: {exc}") from None

    def _bad(self, detail: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"failed to parse {self._what}: {detail}", fatal=False)
