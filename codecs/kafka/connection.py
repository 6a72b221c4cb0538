"""The Kafka wire protocol's sans-I/O connections: framing, headers, and (key, version) dispatch to the schemas.

Both classes follow the codec contract of `logway.codecs` (`receive_data`, `next_event`, `send`; see the package
docstring). Server side, `KafkaServerConnection.next_event()` yields `KafkaRequest` events and remembers, by
correlation id, the (api_key, api_version, unsupported_version) of every request that expects an answer (a FIFO
per id, so a client that reuses an id while one is pending still works; a Produce with acks=0 is not remembered:
it gets no answer). `send(KafkaResponse(correlation_id=..., body=...))` then frames the body in that request's
version layout and forgets it. Client side, `KafkaClientConnection.send(KafkaRequest(...))` frames a request
(assigning the next correlation id when the event has none) and remembers its (key, version), so `next_event()`
can parse the response (`KafkaResponse`). Responses go out in request order; the gateway keeps that order, the
codec does not reorder.

Framing: `int32 size` + request header + body; `int32 size` + response header + body. Request header v1 is
`api_key int16, api_version int16, correlation_id int32, client_id` (nullable int16 string); flexible versions
(`registry.is_flexible`, KIP-482) use header v2, v1 + a tagged-field section (read and skipped). Response header
v0 is `correlation_id int32`; flexible versions use header v1, v0 + a tagged-field section (written empty) --
except ApiVersions, whose response header is always v0. Both roles pick the headers the same way.

SASL with a v0 SaslHandshake (clients before Kafka 1.0): the tokens that follow travel as raw frames, `int32
size` + token with no header. After answering such a handshake the gateway calls `expect_sasl_token()`: the
next frame is returned as a `SaslToken` event, and `send(SaslToken(data))` frames the answer the same way. The
client side mirrors it: `send(SaslToken(data))`, whose answer comes back as a `SaslToken` event.

Errors split by blame (all `RemoteProtocolError`s are fatal: Kafka closes the connection on a request it cannot
parse or does not implement, and a stream with a bad frame cannot be trusted):

- size < `MIN_REQUEST_SIZE` or > `max_request_bytes`: raised as soon as the 4 size bytes are in, before the body
  is buffered; EOF inside a frame; a header without a client_id;
- an api key or version outside what the server serves (`SUPPORTED`, or the `api_versions` it was given):
  `code=35` (UNSUPPORTED_VERSION) ... except ApiVersions (key 18):
  clients send v3 (librdkafka) or v4 (kafka-python) first, in flexible header v2. We read the fixed header
  prefix and client_id, ignore the rest, and return a `KafkaRequest` with `unsupported_version=True`; its
  answer is then sent in the v0 body layout with error 35 and the key list, and the client retries at a
  version we list (spec §2). Any ApiVersions answer with a non-zero error uses the v0 layout;
- a malformed header v2 tag section or body (truncated, a length or count beyond the frame, invalid UTF-8, a
  varint over 5 bytes, bytes left over after the body — but a client's known quirk, `registry.TOLERATED_TRAILERS`):
  `code=42` (INVALID_REQUEST).

When the header could be read, the error also carries `api_key`, `api_version` and `correlation_id` attributes.
`LocalProtocolError` means we misused the codec: a body of the wrong type, a value out of range, a response to
a correlation id with no pending request, a raw SASL token the peer did not send one for.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import construct as c

from ..errors import LocalProtocolError
from ..stream import CLOSED, NEED_DATA, ReceiveBuffer
from .api import api_versions
from .api.headers import REQUEST_HEADER_PREFIX_SIZE, REQUEST_HEADER_V1, REQUEST_HEADER_V2, RequestHeader
from .api.registry import (SUPPORTED, TOLERATED_TRAILERS, api_versions_response, is_flexible, request_schema,
                           response_schema)
from .error_codes import ErrorCode
from .primitives import (EMPTY_TAGGED_FIELDS, FrameReader, FrameWriter, NullableString, TaggedFields, build_bytes,
                         build_chunks, build_into, parse_from, piece_length)

__all__ = [
    "NEED_DATA",
    "CLOSED",
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "MIN_REQUEST_SIZE",
    "KafkaRequest",
    "KafkaResponse",
    "SaslToken",
    "EncodedBody",
    "encode_body",
    "KafkaServerConnection",
    "KafkaClientConnection",
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
    """One request: its header fields and the body (the request dataclass of `api_key`).

    Parsed by the server (every field set) or sent by our client: there `correlation_id=None` lets the codec
    assign the next id, and `client_id` defaults to "logway".
    `unsupported_version` is True only for an ApiVersions request the server parsed at a version we do not
    implement (v3/v4 from modern clients): `body` is then an empty `ApiVersionsRequest` and the answer is the v0
    fallback.
    """

    api_key: int
    api_version: int
    correlation_id: int | None = None
    client_id: str | None = "logway"
    body: Any = None
    unsupported_version: bool = False

    @property
    def expects_response(self) -> bool:
        """False for a Produce with acks=0: Kafka sends no response at all for those."""
        return _expects_response(self.api_key, self.body)


@dataclass(slots=True)
class KafkaResponse:
    """One response. Our client parses it with the (key, version) of the request it answers and fills every
    field; the server builds it with `correlation_id` and `body` only (the codec remembers the request's key and
    version; when given, they must match)."""

    correlation_id: int
    api_key: int | None = None
    api_version: int | None = None
    body: Any = None


@dataclass(slots=True)
class SaslToken:
    """A raw SASL token frame (after a v0 SaslHandshake): the frame's bytes, no header."""

    data: bytes


class _Pending(NamedTuple):
    """What the server remembers of a request until it is answered: how to lay out the answer."""

    api_key: int
    api_version: int
    unsupported_version: bool


def _expects_response(api_key: int, body: Any) -> bool:
    return not (api_key == 0 and getattr(body, "acks", 1) == 0)


def _response_header_v1(api_key: int, api_version: int) -> bool:
    """Whether a response carries header v1 (a tagged-field section after the correlation id): flexible
    versions, but never ApiVersions (its response header is always v0)."""
    return api_key != _API_VERSIONS_KEY and is_flexible(api_key, api_version)


# ------------------------------------------------------------------------------------------- encoding

@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body already encoded for one (API key, version) by `encode_body`: an answer that never changes,
    built once and sent as it is after each response's header. `error_code` is the body's (what a server counts)."""

    api_key: int
    api_version: int
    data: bytes
    error_code: int = 0


def encode_body(api_key: int, api_version: int, body: Any) -> EncodedBody:
    """`body` (no deferred records) encoded once, to answer requests of that key and version with again and again.
    Raises LocalProtocolError when it cannot be encoded."""
    try:
        data = build_bytes(response_schema(api_key, api_version), body)
    except (KeyError, c.ConstructError, TypeError, ValueError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode {type(body).__name__} for API {api_key} v{api_version}: "
                                 f"{exc}") from exc
    return EncodedBody(api_key, api_version, data, getattr(body, "error_code", 0) or 0)


def _frame_response(correlation_id: int, api_key: int, api_version: int, unsupported_version: bool,
                    body: Any, versions: Mapping[int, tuple[int, int]] = SUPPORTED) -> list[Any]:
    """Frame `body` as the answer to a request (key, version, unsupported_version): [bytes | deferred, ...].

    The int32 size covers the deferred objects' `length`s. Adjacent bytes are coalesced: a Fetch response with
    one deferred record set is [bytes, deferred, bytes] (or [bytes, deferred] when it is the last field).
    For an ApiVersions request at an unsupported version the body is always the v0 layout with
    UNSUPPORTED_VERSION and the key list (`body` may be None; its `api_keys`, when non-empty, are kept; else
    `versions` are listed).
    """
    if type(body) is EncodedBody and not unsupported_version:
        if (body.api_key, body.api_version) != (api_key, api_version):
            raise LocalProtocolError(f"a body encoded for API {body.api_key} v{body.api_version} cannot answer API "
                                     f"{api_key} v{api_version}")
        header = _I32.pack(correlation_id) + (EMPTY_TAGGED_FIELDS if _response_header_v1(api_key, api_version) else b"")
        return [_I32.pack(len(header) + len(body.data)) + header + body.data]
    if unsupported_version:
        keys = getattr(body, "api_keys", None) or api_versions_response(versions=versions).api_keys
        body = api_versions.ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)
        schema = api_versions.RESPONSE_V0
    elif api_key == _API_VERSIONS_KEY and getattr(body, "error_code", 0):
        # Clients read an ApiVersions error in the v0 layout: kafka-python decodes v0 whenever error_code != 0,
        # the Java client retries v0 when the versioned parse fails. So any error answer uses v0.
        schema = api_versions.RESPONSE_V0
    else:
        try:
            schema = response_schema(api_key, api_version)
        except KeyError as exc:
            raise LocalProtocolError(str(exc)) from None
    try:
        header = _I32.pack(0) + _I32.pack(correlation_id)  # size patched below; response header v0
    except struct.error as exc:
        raise LocalProtocolError(f"correlation id {correlation_id!r}: {exc}") from None
    if not unsupported_version and _response_header_v1(api_key, api_version):
        header += EMPTY_TAGGED_FIELDS  # response header v1
    stream = FrameWriter(header)
    try:
        deferred = build_chunks(schema, body, stream)
    except (c.ConstructError, TypeError, ValueError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode {type(body).__name__} as {schema!r:.80}: {exc}") from exc
    size = stream.tell() - 4 + sum(piece_length(obj) for _, obj in deferred)
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


def _raw_token(data: Any) -> bytes:
    """A raw SASL token frame: int32 size + the token, no header."""
    try:
        token = bytes(data)
    except TypeError as exc:
        raise LocalProtocolError(f"a SASL token must be bytes-like: {exc}") from None
    if len(token) > _INT32_MAX:
        raise LocalProtocolError(f"a SASL token of {len(token)} bytes does not fit an int32 size")
    return _I32.pack(len(token)) + token


# ------------------------------------------------------------------------------------------ receiving

class _Receiver(ReceiveBuffer):
    """int32-size framing over the shared receive buffer, for both roles."""

    _truncated_header = "truncated {what}: EOF after {got} of {need} size bytes"
    _truncated_body = "truncated {what}: EOF after {got} of {need} bytes"

    def __init__(self, max_frame: int, min_frame: int, what: str) -> None:
        if type(max_frame) is not int or not min_frame <= max_frame <= _INT32_MAX:
            raise ValueError(f"max frame size must be an int in {min_frame}..{_INT32_MAX}, not {max_frame!r}")
        super().__init__()
        self.max_frame = max_frame  # may be lowered and raised again (a server before authentication)
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
        if size > self.max_frame:  # refused before waiting for (or buffering) the body
            raise self._fatal(f"{self._what} size {size} exceeds the maximum of {self.max_frame}")
        end = pos + 4 + size
        if len(buf) < end:
            return self._short_body(available - 4, size)
        with memoryview(buf) as view:
            frame = bytes(view[pos + 4:end])
        self._consume(end)
        return frame

    def next_frame_size(self) -> int:
        """The whole size (size prefix included) the frame at the read position declares, once its prefix is in;
        0 before, and for a size the codec refuses."""
        if len(self._buf) - self._pos < 4:
            return 0
        (size,) = _I32.unpack_from(self._buf, self._pos)
        return 4 + size if self._min <= size <= self.max_frame else 0


#: A request's decoded form, as a multiple of its size: up to 25 for arrays of the smallest items (a Metadata
#: request of empty topic names, measured with tracemalloc) — but a Produce request keeps its record sets as views
#: of the frame (1).
DECODE_FACTOR = 25
_PRODUCE_KEY = 0


class KafkaServerConnection(_Receiver):
    """The broker end of one Kafka connection, in the codec contract of `logway.codecs`.

    - `receive_data(data)`; `next_event()` -> `KafkaRequest` (or `SaslToken` once `expect_sasl_token()` was
      called), `NEED_DATA` or `CLOSED`; raises `RemoteProtocolError` (always fatal; see the module docstring).
    - `send(KafkaResponse(correlation_id, body=...))` -> `bytes`, or a `list` of pieces when the body holds
      deferred record sets (a Fetch response's file slices); laid out in the version of the pending request
      with that correlation id, which is then forgotten. `send(SaslToken(data))` -> `bytes`, answering the raw
      token received last.

    `api_versions` (key -> (min, max), within `SUPPORTED`; default `SUPPORTED`) is what this server serves: a
    request outside it is refused like an unknown key (fatal, code 35), so a server that handles fewer keys than
    the codec knows passes the ones it advertises.

    Memory: one small tuple per request read and not yet answered; the caller decides how many that is (the
    gateway reads the next request only after answering the previous one).
    """

    def __init__(self, max_request_bytes: int = MAX_REQUEST_BYTES,
                 api_versions: Mapping[int, tuple[int, int]] | None = None) -> None:
        super().__init__(max_request_bytes, MIN_REQUEST_SIZE, "request")
        self.max_request_bytes = max_request_bytes
        if api_versions is None:
            api_versions = SUPPORTED
        for key, (lo, hi) in api_versions.items():
            if key not in SUPPORTED or not SUPPORTED[key][0] <= lo <= hi <= SUPPORTED[key][1]:
                raise ValueError(f"api key {key} versions {lo}-{hi} are not within what the codec supports")
        self.api_versions: Mapping[int, tuple[int, int]] = api_versions
        #: When set, the only api keys a request may have (a connection that has not authenticated yet): any other
        #: key is refused as soon as the frame's first bytes are in, before its body is buffered or parsed.
        self.allowed_keys: frozenset[int] | None = None
        self._raw_token = False
        self._tokens_to_answer = 0  # raw SASL tokens received and not answered yet
        self._pending: dict[int, list[_Pending]] = {}  # correlation id -> requests waiting, oldest first

    @property
    def pending(self) -> int:
        """How many requests read by `next_event` still wait for their response."""
        return sum(len(queue) for queue in self._pending.values())

    def expect_sasl_token(self) -> None:
        """The next frame is a raw SASL token (a v0 SaslHandshake was answered), returned as `SaslToken`."""
        self._raw_token = True

    def next_event(self) -> KafkaRequest | SaslToken | Any:
        """The next request, NEED_DATA, or CLOSED; raises RemoteProtocolError (always fatal) on a bad one."""
        if self._raw_token:
            frame = self._next_frame(min_frame=0)
            if isinstance(frame, bytes):
                self._raw_token = False
                self._tokens_to_answer += 1
                return SaslToken(frame)
            return frame
        if self.allowed_keys is not None:
            self._check_key()
        frame = self._next_frame()
        if frame is NEED_DATA or frame is CLOSED:
            return frame
        request = self._parse_request(frame)
        if _expects_response(request.api_key, request.body):
            pending = _Pending(request.api_key, request.api_version, request.unsupported_version)
            queue = self._pending.get(request.correlation_id)
            if queue is None:
                self._pending[request.correlation_id] = [pending]
            else:
                queue.append(pending)
        return request

    decode_factor = DECODE_FACTOR

    def decode_cost(self, size: int) -> int:
        """See `ReceiveBuffer.decode_cost`: a Produce request costs its size, any other `DECODE_FACTOR` times it."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos >= 6 and _I16.unpack_from(buf, pos + 4)[0] == _PRODUCE_KEY:
            return size
        return size * DECODE_FACTOR

    def _check_key(self) -> None:
        """Refuse (fatal, ILLEGAL_SASL_STATE) a request whose api key is not in `allowed_keys`, once its key is in."""
        if self._error is not None:
            raise self._broken()
        if len(self._buf) - self._pos >= 6:
            (key,) = _I16.unpack_from(self._buf, self._pos + 4)
            if key not in self.allowed_keys:
                raise self._fatal(f"api key {key} is not allowed before authentication", ErrorCode.ILLEGAL_SASL_STATE,
                                  api_key=key)

    def send(self, event: KafkaResponse | SaslToken) -> bytes | list[Any]:
        """Frame a response (or a raw SASL token); see the class docstring. Raises LocalProtocolError on misuse."""
        if type(event) is KafkaResponse:
            return self._send_response(event)
        if type(event) is SaslToken:
            if not self._tokens_to_answer:
                raise LocalProtocolError("no raw SASL token from the client waits for an answer")
            frame = _raw_token(event.data)
            self._tokens_to_answer -= 1
            return frame
        if type(event) is KafkaRequest:
            raise LocalProtocolError("a Kafka server cannot send a KafkaRequest")
        raise LocalProtocolError(f"not a Kafka event: {event!r}")

    def _send_response(self, response: KafkaResponse) -> bytes | list[Any]:
        cid = response.correlation_id
        queue = self._pending.get(cid)
        if not queue:
            raise LocalProtocolError(f"no request with correlation id {cid!r} waits for a response")
        key, version, unsupported = queue[0]
        if (response.api_key is not None and response.api_key != key) or (
                response.api_version is not None and response.api_version != version):
            raise LocalProtocolError(f"correlation id {cid} answers api key {key} v{version}, not "
                                     f"api key {response.api_key} v{response.api_version}")
        chunks = _frame_response(cid, key, version, unsupported, response.body, self.api_versions)
        self._forget(cid)  # only once the answer could be framed: a caller may fix the body and send again
        if len(chunks) == 1:
            return chunks[0]
        return chunks

    def _forget(self, cid: int) -> None:
        queue = self._pending.get(cid)
        if queue:
            del queue[0]
            if not queue:
                del self._pending[cid]

    def _parse_request(self, frame: bytes) -> KafkaRequest:
        key, version, cid = _PREFIX.unpack_from(frame, 0)
        info = {"api_key": key, "api_version": version, "correlation_id": cid}
        reader = FrameReader(frame)
        reader.pos = REQUEST_HEADER_PREFIX_SIZE
        try:
            client_id = parse_from(NullableString, reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed request header: {exc}", ErrorCode.INVALID_REQUEST, **info) from None
        bounds = self.api_versions.get(key)
        if bounds is None or not bounds[0] <= version <= bounds[1]:
            if key == _API_VERSIONS_KEY:
                # Header v2 (flexible): tagged fields follow client_id, then a flexible body. Neither is needed
                # to answer with the v0 fallback, so the rest of the frame is skipped unread.
                return KafkaRequest(key, version, cid, client_id, api_versions.ApiVersionsRequest(),
                                    unsupported_version=True)
            if bounds is not None:
                message = f"api key {key} version {version} is not supported (supported: {bounds[0]}-{bounds[1]})"
            else:
                message = f"api key {key} is not supported"
            raise self._fatal(message, ErrorCode.UNSUPPORTED_VERSION, **info)
        try:
            if is_flexible(key, version):
                parse_from(TaggedFields, reader)  # request header v2: skipped, we know no header tag
            body = parse_from(request_schema(key, version), reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed request body (api key {key} v{version}): {exc}",
                              ErrorCode.INVALID_REQUEST, **info) from None
        left = reader.remaining()
        if left and frame[len(frame) - left:] != TOLERATED_TRAILERS.get(key):
            raise self._fatal(f"{left} bytes left over after the request body (api key {key} v{version})",
                              ErrorCode.INVALID_REQUEST, **info)
        return KafkaRequest(key, version, cid, client_id, body)



class KafkaClientConnection(_Receiver):
    """The client end of one Kafka connection, in the codec contract of `logway.codecs`.

    - `send(KafkaRequest(api_key, api_version, body=...))` -> `bytes`: frames the request (header v1, v2 for a
      flexible version) with its `correlation_id`, or the next one of the connection's counter when it is None,
      and remembers its (key, version) unless no response will come (Produce with acks=0).
      `send(SaslToken(data))` -> `bytes`: a raw token (after a v0 SaslHandshake); its answer comes back as a
      `SaslToken` event.
    - `receive_data(data)`; `next_event()` -> `KafkaResponse` (every field set; the response header v1 of a
      flexible version is read too) or `SaslToken`, `NEED_DATA` or `CLOSED`; raises `RemoteProtocolError`
      (fatal) on a bad response or an unknown correlation id.
    """

    def __init__(self, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        super().__init__(max_response_bytes, MIN_RESPONSE_SIZE, "response")
        self._next_correlation_id = 0
        self._pending: dict[int, list[tuple[int, int]]] = {}  # correlation id -> [(api key, api version)]
        self._raw_tokens = 0  # raw SASL token answers expected before the next response

    @property
    def pending(self) -> int:
        """How many sent requests still wait for their response."""
        return sum(len(queue) for queue in self._pending.values())

    @property
    def next_correlation_id(self) -> int:
        """The id the next `send` of a `KafkaRequest` without one will use."""
        return self._next_correlation_id

    def send(self, event: KafkaRequest | SaslToken) -> bytes:
        """Frame a request or a raw SASL token; see the class docstring. Raises LocalProtocolError on misuse."""
        if type(event) is KafkaRequest:
            return self._send_request(event)
        if type(event) is SaslToken:
            frame = _raw_token(event.data)
            self._raw_tokens += 1
            return frame
        if type(event) is KafkaResponse:
            raise LocalProtocolError("a Kafka client cannot send a KafkaResponse")
        raise LocalProtocolError(f"not a Kafka event: {event!r}")

    def _send_request(self, request: KafkaRequest) -> bytes:
        api_key, api_version, body = request.api_key, request.api_version, request.body
        try:
            schema = request_schema(api_key, api_version)
        except KeyError as exc:
            raise LocalProtocolError(str(exc)) from None
        cid = request.correlation_id
        if cid is None:
            cid = self._next_correlation_id
            advance = True
        elif type(cid) is not int or not -(_INT32_MAX + 1) <= cid <= _INT32_MAX:
            raise LocalProtocolError(f"correlation id {cid!r} is not an int32")
        else:
            advance = False
        stream = FrameWriter(b"\0\0\0\0")  # size patched below
        try:
            header = REQUEST_HEADER_V2 if is_flexible(api_key, api_version) else REQUEST_HEADER_V1
            build_into(header, RequestHeader(api_key, api_version, cid, request.client_id), stream)
            build_into(schema, body, stream)
        except (c.ConstructError, TypeError, ValueError, AttributeError) as exc:
            raise LocalProtocolError(f"cannot encode {type(body).__name__}: {exc}") from exc
        size = stream.tell() - 4
        if size > _INT32_MAX:
            raise LocalProtocolError("request too large for an int32 size")
        stream.patch_int32(0, size)
        if advance:
            self._next_correlation_id = 0 if cid == _INT32_MAX else cid + 1
        if _expects_response(api_key, body):
            self._pending.setdefault(cid, []).append((api_key, api_version))
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
        queue = self._pending.get(cid)
        if not queue:
            raise self._fatal(f"response with unknown correlation id {cid}", correlation_id=cid)
        key, version = queue.pop(0)
        if not queue:
            del self._pending[cid]
        schema = response_schema(key, version)
        if key == _API_VERSIONS_KEY and version > 0 and len(frame) >= 6 and _I16.unpack_from(frame, 4)[0]:
            schema = api_versions.RESPONSE_V0  # an ApiVersions error comes in the v0 layout (see _frame_response)
        reader = FrameReader(frame)
        reader.pos = 4
        try:
            if _response_header_v1(key, version):
                parse_from(TaggedFields, reader)  # response header v1: skipped
            body = parse_from(schema, reader)
        except c.ConstructError as exc:
            raise self._fatal(f"malformed response (api key {key} v{version}): {exc}",
                              correlation_id=cid, api_key=key, api_version=version) from None
        if reader.remaining():
            raise self._fatal(f"{reader.remaining()} bytes left over after the response body "
                              f"(api key {key} v{version})", correlation_id=cid, api_key=key, api_version=version)
        return KafkaResponse(cid, key, version, body)
