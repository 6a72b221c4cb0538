"""The Kafka wire protocol's sans-I/O connections: framing, headers, and (key, version) dispatch to the schemas.

Server side, `KafkaServerConnection` is fed bytes with `receive_data()` (b"" = EOF) and yields `KafkaRequest`
events from `next_event()` (or `NEED_DATA`, or `CLOSED` after a clean EOF); `encode_response(request, body)`
frames the answer in the layout of the request's version. Client side, `KafkaClientConnection.send_request()`
frames a request and remembers its (key, version) by correlation id, so `next_event()` can parse the response
(`KafkaResponse`). Responses go out in request order; the gateway keeps that order, the codec does not reorder.

Framing: `int32 size` + request header v1 (`api_key int16, api_version int16, correlation_id int32, client_id`
nullable int16 string) + body; responses are `int32 size` + `correlation_id int32` (header v0) + body. Every
version we implement is non-flexible, so no tagged fields anywhere.

SASL with a v0 SaslHandshake (clients before Kafka 1.0): the tokens that follow travel as raw frames, `int32
size` + token with no header. After answering such a handshake the gateway calls `expect_sasl_token()`: the
next frame is returned as a `SaslToken` event, and `encode_sasl_token()` frames the answer the same way. The
client side mirrors it with `send_sasl_token()`.

Errors split by blame (all `RemoteProtocolError`s are fatal: Kafka closes the connection on a request it cannot
parse or does not implement, and a stream with a bad frame cannot be trusted):

- size < `MIN_REQUEST_SIZE` or > `max_request_bytes`: raised as soon as the 4 size bytes are in, before the body
  is buffered; EOF inside a frame; a header without a client_id;
- an api key or version outside `SUPPORTED`: `code=35` (UNSUPPORTED_VERSION) ... except ApiVersions (key 18):
  clients send v3 (librdkafka) or v4 (kafka-python) first, in flexible header v2. We read the fixed header
  prefix and client_id, ignore the rest, and return a `KafkaRequest` with `unsupported_version=True`;
  `encode_response` then answers in the v0 body layout with error 35 and the full key list, and the client
  retries at a version we list (spec §2). Any ApiVersions answer with a non-zero error uses the v0 layout;
- a malformed body (truncated, a length or count beyond the frame, invalid UTF-8, bytes left over after the
  body): `code=42` (INVALID_REQUEST).

When the header could be read, the error also carries `api_key`, `api_version` and `correlation_id` attributes.
`LocalProtocolError` means we misused the codec (a body of the wrong type, a value out of range).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import construct as c

from ..errors import LocalProtocolError
from ..stream import CLOSED, NEED_DATA, ReceiveBuffer
from .api import api_versions
from .api.headers import REQUEST_HEADER_PREFIX_SIZE, REQUEST_HEADER_V1, RequestHeader
from .api.registry import SUPPORTED, api_versions_response, is_supported, request_schema, response_schema
from .error_codes import ErrorCode
from .primitives import FrameReader, FrameWriter, NullableString, build_chunks

__all__ = [
    "NEED_DATA",
    "CLOSED",
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "MIN_REQUEST_SIZE",
    "KafkaRequest",
    "KafkaResponse",
    "SaslToken",
    "KafkaServerConnection",
    "KafkaClientConnection",
    "encode_response",
    "encode_response_bytes",
]

# --------------------------------------------------------------------------------------------- bounds

#: Kafka's `socket.request.max.bytes` default (100 MiB): the largest request a broker accepts. The size prefix
#: arrives before the body, so without a bound 4 bytes could make us buffer up to 2 GiB per connection; real
#: producers stay far below it (max.request.size defaults to 1 MiB). Configurable per connection.
MAX_REQUEST_BYTES = 100 * 1024 * 1024
#: Largest response our client accepts: librdkafka's `receive.message.max.bytes` default (100 MB) rounded up to
#: 100 MiB; a Fetch response is bounded by the request's max_bytes, which clients keep at 50 MiB by default.
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
#: api_key + api_version + correlation_id: below this we cannot even tell whom to answer. (A full header v1 needs
#: 10 bytes: a frame of 8 or 9 bytes then fails as a malformed header.)
MIN_REQUEST_SIZE = REQUEST_HEADER_PREFIX_SIZE
#: A response holds at least its correlation id.
MIN_RESPONSE_SIZE = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT32_MAX = 2**31 - 1
_API_VERSIONS_KEY = api_versions.API_KEY


# --------------------------------------------------------------------------------------------- events

@dataclass(slots=True)
class KafkaRequest:
    """One request: its header fields and the parsed body (the request dataclass of `api_key`).

    `unsupported_version` is True only for an ApiVersions request at a version we do not implement (v3/v4 from
    modern clients): `body` is then an empty `ApiVersionsRequest` and the answer is the v0 fallback.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    unsupported_version: bool = False

    @property
    def expects_response(self) -> bool:
        """False for a Produce with acks=0: Kafka sends no response at all for those."""
        return not (self.api_key == 0 and getattr(self.body, "acks", 1) == 0)


@dataclass(slots=True)
class KafkaResponse:
    """One response as our client sees it: parsed with the (key, version) of the request it answers."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any


@dataclass(slots=True)
class SaslToken:
    """A raw SASL token frame (after a v0 SaslHandshake): the frame's bytes, no header."""

    data: bytes


# ------------------------------------------------------------------------------------------- encoding

def encode_response(request: KafkaRequest, body: Any) -> list[Any]:
    """Frame `body` as the response to `request`: [bytes | deferred, ...] to send in order.

    The int32 size covers the deferred objects' `length`s. Adjacent bytes are coalesced: a Fetch response with
    one deferred record set is [bytes, deferred, bytes] (or [bytes, deferred] when it is the last field).
    For an ApiVersions request at an unsupported version the body is always the v0 layout with
    UNSUPPORTED_VERSION and the full key list (`body` may be None; its `api_keys`, when non-empty, are kept).
    """
    if request.unsupported_version:
        keys = getattr(body, "api_keys", None) or api_versions_response().api_keys
        body = api_versions.ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)
        schema = api_versions.RESPONSE_V0
    elif request.api_key == _API_VERSIONS_KEY and getattr(body, "error_code", 0):
        # Clients read an ApiVersions error in the v0 layout: kafka-python decodes v0 whenever error_code != 0,
        # the Java client retries v0 when the versioned parse fails. So any error answer uses v0.
        schema = api_versions.RESPONSE_V0
    else:
        try:
            schema = response_schema(request.api_key, request.api_version)
        except KeyError as exc:
            raise LocalProtocolError(str(exc)) from None
    stream = FrameWriter(_I32.pack(0) + _I32.pack(request.correlation_id))  # size patched below; header v0
    try:
        deferred = build_chunks(schema, body, stream)
    except (c.ConstructError, TypeError, ValueError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode {type(body).__name__} as {schema!r:.80}: {exc}") from exc
    size = stream.tell() - 4 + sum(obj.length for _, obj in deferred)
    if size > _INT32_MAX:
        raise LocalProtocolError(f"response of {size} bytes does not fit an int32 size")
    stream.patch_int32(0, size)
    data = stream.getvalue()
    if not deferred:
        return [data]
    chunks: list[Any] = []
    start = 0
    for pos, obj in deferred:
        if pos > start:
            chunks.append(data[start:pos])
        chunks.append(obj)
        start = pos
    if start < len(data):
        chunks.append(data[start:])
    return chunks


def encode_response_bytes(request: KafkaRequest, body: Any) -> bytes:
    """Frame `body` as the response to `request`, all in memory (no deferred record sets allowed)."""
    chunks = encode_response(request, body)
    if len(chunks) != 1 or not isinstance(chunks[0], bytes):
        raise LocalProtocolError("response has deferred records: use encode_response()")
    return chunks[0]


# ------------------------------------------------------------------------------------------ receiving

class _Receiver(ReceiveBuffer):
    """int32-size framing over the shared receive buffer, for both roles."""

    _truncated_header = "truncated {what}: EOF after {got} of {need} size bytes"
    _truncated_body = "truncated {what}: EOF after {got} of {need} bytes"

    def __init__(self, max_frame: int, min_frame: int, what: str) -> None:
        if type(max_frame) is not int or not min_frame <= max_frame <= _INT32_MAX:
            raise ValueError(f"max frame size must be an int in {min_frame}..{_INT32_MAX}, not {max_frame!r}")
        super().__init__()
        self._max = max_frame
        self._min = min_frame
        self._what = what

    def _next_frame(self, min_frame: int | None = None) -> bytes | Any:
        """The next complete frame's payload, NEED_DATA or CLOSED; raises on a bad size or EOF mid-frame."""
        if self._error is not None:
            raise self._broken()
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < 4:
            return self._short_header(available, 4)
        (size,) = _I32.unpack_from(buf, pos)
        minimum = self._min if min_frame is None else min_frame
        if size < minimum:
            raise self._fatal(f"{self._what} size {size} is below the minimum of {minimum}")
        if size > self._max:  # refused before waiting for (or buffering) the body
            raise self._fatal(f"{self._what} size {size} exceeds the maximum of {self._max}")
        end = pos + 4 + size
        if len(buf) < end:
            return self._short_body(available - 4, size)
        with memoryview(buf) as view:
            frame = bytes(view[pos + 4:end])
        self._consume(end)
        return frame


class KafkaServerConnection(_Receiver):
    """The broker end of one Kafka connection (see the module docstring)."""

    def __init__(self, max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        super().__init__(max_request_bytes, MIN_REQUEST_SIZE, "request")
        self.max_request_bytes = max_request_bytes
        self._raw_token = False

    def expect_sasl_token(self) -> None:
        """The next frame is a raw SASL token (a v0 SaslHandshake was answered), returned as `SaslToken`."""
        self._raw_token = True

    def next_event(self) -> KafkaRequest | SaslToken | Any:
        """The next request, NEED_DATA, or CLOSED; raises RemoteProtocolError (always fatal) on a bad one."""
        if self._raw_token:
            frame = self._next_frame(min_frame=0)
            if isinstance(frame, bytes):
                self._raw_token = False
                return SaslToken(frame)
            return frame
        frame = self._next_frame()
        if frame is NEED_DATA or frame is CLOSED:
            return frame
        return self._parse_request(frame)

    @staticmethod
    def encode_sasl_token(data: bytes) -> bytes:
        """A raw SASL token frame (the answer to a `SaslToken`)."""
        return _I32.pack(len(data)) + data

    def _parse_request(self, frame: bytes) -> KafkaRequest:
        key, version, cid = _PREFIX.unpack_from(frame, 0)
        info = {"api_key": key, "api_version": version, "correlation_id": cid}
        reader = FrameReader(frame)
        reader.pos = REQUEST_HEADER_PREFIX_SIZE
        try:
            client_id = NullableString.parse_stream(reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed request header: {exc}", ErrorCode.INVALID_REQUEST, **info) from None
        if not is_supported(key, version):
            if key == _API_VERSIONS_KEY:
                # Header v2 (flexible): tagged fields follow client_id, then a flexible body. Neither is needed
                # to answer with the v0 fallback, so the rest of the frame is skipped unread.
                return KafkaRequest(key, version, cid, client_id, api_versions.ApiVersionsRequest(),
                                    unsupported_version=True)
            if key in SUPPORTED:
                lo, hi = SUPPORTED[key]
                message = f"api key {key} version {version} is not supported (supported: {lo}-{hi})"
            else:
                message = f"api key {key} is not supported"
            raise self._fatal(message, ErrorCode.UNSUPPORTED_VERSION, **info)
        try:
            body = request_schema(key, version).parse_stream(reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed request body (api key {key} v{version}): {exc}",
                              ErrorCode.INVALID_REQUEST, **info) from None
        left = reader.remaining()
        if left:
            raise self._fatal(f"{left} bytes left over after the request body (api key {key} v{version})",
                              ErrorCode.INVALID_REQUEST, **info)
        return KafkaRequest(key, version, cid, client_id, body)

    def encode_response(self, request: KafkaRequest, body: Any) -> list[Any]:
        """Same as the module-level `encode_response`."""
        return encode_response(request, body)

    def encode_response_bytes(self, request: KafkaRequest, body: Any) -> bytes:
        """Same as the module-level `encode_response_bytes`."""
        return encode_response_bytes(request, body)


class KafkaClientConnection(_Receiver):
    """The client end of one Kafka connection: frames requests, parses responses by correlation id."""

    def __init__(self, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        super().__init__(max_response_bytes, MIN_RESPONSE_SIZE, "response")
        self._next_correlation_id = 0
        self._pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, api version)
        self._raw_tokens = 0  # raw SASL token answers expected before the next response

    def send_sasl_token(self, data: bytes) -> bytes:
        """Frame a raw SASL token (after a v0 SaslHandshake); its answer comes back as a `SaslToken` event."""
        self._raw_tokens += 1
        return _I32.pack(len(data)) + data

    @property
    def pending(self) -> int:
        """How many sent requests still wait for their response."""
        return len(self._pending)

    def send_request(self, api_key: int, api_version: int, body: Any, *, client_id: str | None = "logway") -> bytes:
        """Frame one request (header v1); remember its (key, version) unless no response will come (acks=0)."""
        try:
            schema = request_schema(api_key, api_version)
        except KeyError as exc:
            raise LocalProtocolError(str(exc)) from None
        cid = self._next_correlation_id
        self._next_correlation_id = 0 if cid == _INT32_MAX else cid + 1
        stream = FrameWriter(b"\0\0\0\0")  # size patched below
        try:
            REQUEST_HEADER_V1.build_stream(RequestHeader(api_key, api_version, cid, client_id), stream)
            schema.build_stream(body, stream)
        except (c.ConstructError, TypeError, ValueError, AttributeError) as exc:
            raise LocalProtocolError(f"cannot encode {type(body).__name__}: {exc}") from exc
        size = stream.tell() - 4
        if size > _INT32_MAX:
            raise LocalProtocolError("request too large for an int32 size")
        stream.patch_int32(0, size)
        if not (api_key == 0 and getattr(body, "acks", 1) == 0):
            self._pending[cid] = (api_key, api_version)
        return stream.getvalue()

    def next_event(self) -> KafkaResponse | SaslToken | Any:
        """The next response, NEED_DATA, or CLOSED; raises RemoteProtocolError (fatal) on a bad one."""
        frame = self._next_frame(min_frame=0 if self._raw_tokens else None)
        if frame is NEED_DATA or frame is CLOSED:
            return frame
        if self._raw_tokens:
            self._raw_tokens -= 1
            return SaslToken(frame)
        (cid,) = _I32.unpack_from(frame, 0)
        try:
            key, version = self._pending.pop(cid)
        except KeyError:
            raise self._fatal(f"response with unknown correlation id {cid}", correlation_id=cid) from None
        schema = response_schema(key, version)
        if key == _API_VERSIONS_KEY and version > 0 and len(frame) >= 6 and _I16.unpack_from(frame, 4)[0]:
            schema = api_versions.RESPONSE_V0  # an ApiVersions error comes in the v0 layout (see encode_response)
        reader = FrameReader(frame)
        reader.pos = 4
        try:
            body = schema.parse_stream(reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed response (api key {key} v{version}): {exc}",
                              correlation_id=cid, api_key=key, api_version=version) from None
        if reader.remaining():
            raise self._fatal(f"{reader.remaining()} bytes left over after the response body "
                              f"(api key {key} v{version})", correlation_id=cid, api_key=key, api_version=version)
        return KafkaResponse(cid, key, version, body)

