"""The TANK 4.0 client, blocking (`TankClient`) and trio (`AsyncTankClient`), on the codec's client side
(`logway.codecs.tank`; the protocol: docs/tank.md).

It speaks to logway's TANK listener (or to a real TANK broker) the way TANK's C++ client does. One TCP connection
per client; the broker's greeting Ping (`03 00000000`) is read when connecting, so a client that exists is talking
to a TANK broker. Both flavours have the same calls (the async ones are awaited); each typed call is written once,
as an operation generator both flavours drive::

    c = TankClient("127.0.0.1", 11011, timeout=30, client_id=b"c++")
    c.create_topic("events", partitions=2, config={"log.retention.secs": "3600"})   # -> err (0 = created)
    c.produce("events", 0, [b"hello", (b"key", b"value"), Record(b"v", b"k", 1700000000000)])  # -> err
    c.produce("events", 0, bundle_bytes)                      # a prebuilt bundle is sent as it is
    c.produce_many([("events", 0, b1), ("events", 0, b2)])    # one request, several entries -> [err, err]
    c.produce_with_seqnum("events", 1, [b"p", b"q"], 100, seqs=[100, 103])  # 0x05, sparse bundle -> err
    r = c.get("events", 0, 0)                                 # -> GetResult(messages, next_seq, high_water_mark)
    resp = c.consume({"events": [(0, 1, 1 << 20), (1, 0, 1 << 20)]}, max_wait_ms=500, min_bytes=100)
    c.discover_partitions("events")   # [PartitionBounds(first_available, high_water_mark), ...]; [] = unknown
    c.status(); c.discover_topics(); c.discover_topology(); c.reload_conf("events", 0)

    c = await AsyncTankClient.connect("127.0.0.1", 11011)

Errors: calls that return an error code return it as an int (TANK's codes: `ProduceError`, `CreateTopicError`,
`ReloadConfError`); `get` raises `TankError` (and `TankBoundaryError` for err 0x01, carrying the first available
seq and the high-water mark) because it has nothing else to return. A closed connection raises `ConnectionClosed`;
a broker frame that breaks the protocol raises the codec's `RemoteProtocolError`; no answer within `timeout` s
(a long-polling Consume gets its wait on top) raises `TimeoutError`.

Pipelining: `send(request) -> request_id` writes any request dataclass (a fresh request id is assigned) and
`receive(request_id=None)` returns responses; the broker may answer out of order (a long-polling Consume is
answered after requests sent later on the same connection), so `receive(rid)` keeps the responses of other
requests until they are asked for, and `receive()` returns whichever response comes next.
`prepare(request) -> (request_id, frame)` encodes without sending (benchmarks build their frames before timing;
`send_raw(frame)` writes them, `receive(request_id)` collects the answers); `send_raw` also writes hand-made or
hostile bytes, and `closed_by_peer(timeout)` tells whether the broker then hung up.

The blocking client frames responses itself and parses them with the codec's `parse_response`, so that a Consume
response of tens of MiB is received straight into one buffer of its own instead of being accumulated and copied
out by the sans-I/O framing (that copying cost more than the network on a 100 MB read); chunks in its
`ConsumeResponse`s are views into that per-response buffer. The trio client uses the codec's framing. After a
protocol error or a closed connection a client is unusable: close it.

`get` applies the C++ client's rules (`TankClient::process_consume`): messages with a seq below the requested one
(a chunk starts at the bundle holding the seq) or above the high-water mark are dropped; the next seq is the last
delivered + 1 (the same seq when nothing was delivered, or hwm + 1 for a tail request); when the chunk ends
inside a compressed bundle and nothing could be delivered, it asks again with the fetch size that bundle needs.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Generator, Iterable, NamedTuple, Sequence

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.records import Record
from logway.codecs.tank import (
    CLOSED,
    MAX_FRAME_BYTES,
    NEED_DATA,
    ConsumeFlags,
    ConsumePartition,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    CreateTopicRequest,
    DiscoverPartitionsRequest,
    DiscoverTopicsRequest,
    DiscoverTopologyRequest,
    DiscoverTopologyResponse,
    MsgType,
    PartitionBounds,
    ProduceEntry,
    ProduceRequest,
    ReloadConfRequest,
    StatusRequest,
    StatusResponse,
    TankClientConnection,
    TopicInfo,
    decode_chunk,
    encode_bundle,
)
from logway.codecs.tank.responses import RESPONSE_TYPES, parse_response

from .blocking import BlockingClient, BlockingStream
from .blocking import drive as drive_blocking
from .errors import ConnectionClosed, TankBoundaryError, TankError
from .trio_io import TrioClient, TrioStream
from .trio_io import drive as drive_trio

__all__ = ["TankClient", "AsyncTankClient", "TankMessage", "GetResult", "UINT64_MAX", "DEFAULT_FETCH_SIZE",
           "DEFAULT_PORT"]

DEFAULT_PORT = 11011
UINT64_MAX = (1 << 64) - 1
#: `get`'s default byte budget per partition (tank-cli asks for 128 MiB; the broker clamps to 64 MiB).
DEFAULT_FETCH_SIZE = 4 * 1024 * 1024
#: The broker clamps fetch sizes to this; `get` never asks for more when growing its fetch size.
MAX_FETCH_SIZE = 64 * 1024 * 1024
#: A long poll can last up to 1 h (TANK's cap); the timeout of a Consume is max_wait plus this margin.
_LONG_POLL_MARGIN = 5.0
_MAX_WAIT_CAP_MS = 3_600_000
#: recv_into buffer for ordinary reads.
_RECV_BYTES = 256 * 1024
#: A frame at least this large that has not fully arrived is received straight into a buffer of its own.
_DIRECT_BYTES = 256 * 1024
_FRAME_HEADER = struct.Struct("<BI")  # msg_type, payload length
_BYTES_LIKE = (bytes, bytearray, memoryview)
#: `get` grows its fetch size at most this many times before giving up.
_GET_ATTEMPTS = 32


class TankMessage(NamedTuple):
    seq: int
    key: bytes | None
    value: bytes
    timestamp: int  # ms, as the producer stamped it


class GetResult(NamedTuple):
    messages: list[TankMessage]
    next_seq: int  # the seq to ask for next
    high_water_mark: int


# -- building requests -------------------------------------------------------------------------------------------

def _records(items: Iterable[Any]) -> list[Record]:
    """Records from Records, bytes-like values, or (key, value) pairs."""
    out = []
    for item in items:
        if isinstance(item, Record):
            out.append(item)
        elif isinstance(item, _BYTES_LIKE):
            out.append(Record(bytes(item)))
        elif isinstance(item, tuple) and len(item) == 2:
            key, value = item
            out.append(Record(bytes(value), None if key is None else bytes(key)))
        else:
            raise TypeError(f"a message is a Record, bytes or a (key, value) pair, not {item!r}")
    return out


def _config_text(config: dict | str | bytes | None) -> bytes:
    if config is None:
        return b""
    if isinstance(config, (bytes, bytearray)):
        return bytes(config)
    if isinstance(config, str):
        return config.encode()
    return "".join(f"{k}={v}\n" for k, v in config.items()).encode()


def make_bundle(records_or_bundle: Any, *, codec: int | None = None,
                sparse_seqs: Sequence[int] | None = None) -> bytes:
    """A bundle: bytes-like input is taken as a prebuilt bundle; anything else is encoded (the C++ client's rule
    for the codec unless given; records without a timestamp get "now")."""
    if isinstance(records_or_bundle, _BYTES_LIKE):
        return bytes(records_or_bundle)
    return encode_bundle(_records(records_or_bundle), codec=codec, sparse_seqs=sparse_seqs,
                         default_timestamp=time.time_ns() // 1_000_000)


def consume_request(topics: dict[str, Sequence[tuple]], *, max_wait_ms: int = 0, min_bytes: int = 0,
                    client_version: int = 2, flags: int = 0) -> ConsumeRequest:
    """A ConsumeRequest from {topic: [(partition, seq[, fetch_size]), ...]} (request id 0: `send` sets it)."""
    ts = [ConsumeTopic(name, [ConsumePartition(p[0], p[1], p[2] if len(p) > 2 else DEFAULT_FETCH_SIZE)
                              for p in parts]) for name, parts in topics.items()]
    return ConsumeRequest(0, max_wait_ms, min_bytes, ts, client_version, b"", flags)


def _timeout(timeout: float | None, request: Any) -> float | None:
    """A long-polling Consume may be answered only after its wait (capped as TANK caps it), plus a margin."""
    wait = getattr(request, "max_wait_ms", 0) if isinstance(request, ConsumeRequest) else 0
    if timeout is None or not wait:
        return timeout
    return timeout + min(wait, _MAX_WAIT_CAP_MS) / 1000 + _LONG_POLL_MARGIN


# -- operations: written once, driven by both flavours (each yields a request and gets its response) ------------

Operation = Generator[Any, Any, Any]


def _produce_many(entries: Sequence[tuple[str, int, Any]], client_id: bytes) -> Operation:
    req = ProduceRequest(0, [ProduceEntry(t, p, make_bundle(b)) for t, p, b in entries], client_id=client_id)
    return [r.error for r in (yield req).results]


def _produce_with_seqnum(topic: str, partition: int, records: Any, first_seq: int, seqs: Sequence[int] | None,
                         codec: int | None, client_id: bytes) -> Operation:
    if isinstance(records, _BYTES_LIKE):
        bundle = bytes(records)
    else:
        recs = _records(records)
        if seqs is None:
            seqs = range(first_seq, first_seq + len(recs))
        bundle = make_bundle(recs, codec=codec, sparse_seqs=list(seqs))
    req = ProduceRequest(0, [ProduceEntry(topic, partition, bundle, first_seq)], with_seqnum=True,
                         client_id=client_id)
    return (yield req).results[0].error


def _get(topic: str, partition: int, seq: int, fetch_size: int, max_wait_ms: int, min_bytes: int) -> Operation:
    for _ in range(_GET_ATTEMPTS):
        resp = yield consume_request({topic: [(partition, seq, fetch_size)]}, max_wait_ms=max_wait_ms,
                                     min_bytes=min_bytes)
        t = resp.topics[0]
        if t.unknown:
            raise TankError(f"unknown topic {topic!r}", 0xFF, topic, partition)
        p = t.partitions[0]
        if p.error == ConsumeFlags.BOUNDARY:
            raise TankBoundaryError(topic, partition, seq, p.first_available, p.high_water_mark)
        if p.error not in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST):
            raise TankError(f"{topic}/{partition}: error {p.error:#04x}", p.error, topic, partition)
        hwm = p.high_water_mark
        decoded = decode_chunk(p.chunk, p.base_seqnum, min_seq=seq, max_seq=hwm)
        if not decoded.records and decoded.need_bytes > fetch_size and fetch_size < MAX_FETCH_SIZE:
            fetch_size = min(max(decoded.need_bytes, fetch_size * 2), MAX_FETCH_SIZE)
            continue  # a compressed bundle was cut off: ask again for all of it
        messages = [TankMessage(r.offset + 1, None if r.key is None else bytes(r.key), bytes(r.value),
                                r.timestamp) for r in decoded.records]
        if decoded.next_seq is not None:
            next_seq = decoded.next_seq
        else:
            next_seq = hwm + 1 if seq == UINT64_MAX else seq
        return GetResult(messages, next_seq, hwm)
    raise TankError(f"{topic}/{partition}: no whole bundle after growing the fetch size", 0, topic, partition)


def _create_topic(topic: str, partitions: int, config: dict | str | bytes | None) -> Operation:
    return (yield CreateTopicRequest(0, topic, partitions, _config_text(config))).error


def _discover_partitions(topic: str, partitions: Sequence[int] | None) -> Operation:
    return (yield DiscoverPartitionsRequest(0, topic, None if partitions is None else list(partitions))).partitions


def _one(request: Any) -> Operation:
    return (yield request)


def _reload_conf(topic: str, partition: int) -> Operation:
    return (yield ReloadConfRequest(0, topic, partition)).error


class _Requests:
    """The typed calls' arguments, shared by both flavours' signatures (see the module docstring)."""

    client_id: bytes
    bundle = staticmethod(make_bundle)
    consume_request = staticmethod(consume_request)

    def _next_id(self) -> int:
        rid = self._request_id
        self._request_id = rid + 1 if rid < 0xFFFFFFFF else 1
        return rid

    new_request_id = _next_id

    def _number(self, request: Any, keep_id: bool) -> None:
        if not keep_id:
            request.request_id = self._next_id()

    def _stashed(self, request_id: int | None) -> Any:
        """A response kept while waiting for another, or None."""
        if request_id is None:
            return self._stash.pop(next(iter(self._stash))) if self._stash else None
        return self._stash.pop(request_id, None)


# -- blocking ----------------------------------------------------------------------------------------------------

class TankClient(_Requests, BlockingClient):
    """A blocking TANK client over one TCP connection (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, timeout: float | None = 30.0,
                 connect_timeout: float | None = 10.0, client_id: bytes = b"c++", wait_ping: bool = True,
                 ssl_context=None, server_hostname: str | None = None) -> None:
        self.timeout = timeout
        self.client_id = client_id
        self.stream = BlockingStream.connect(host, port, connect_timeout=connect_timeout, timeout=timeout,
                                             ssl_context=ssl_context, server_hostname=server_hostname)
        self.codec = TankClientConnection()  # encodes requests; responses are framed by `_read_frame`
        self._buf = bytearray()  # received bytes not yet returned as frames
        self._rview = memoryview(bytearray(_RECV_BYTES))
        self._big_payload: list | None = None  # [buffer, bytes filled] of a large frame being received
        self._pings = 0
        self._pending_produce: dict[int, list[tuple[str, int]]] = {}
        self._request_id = 1
        self._stash: dict[int, Any] = {}  # responses received while waiting for another request's
        if wait_ping:
            try:
                self._await_ping(self._deadline(None))
            except BaseException:
                self.close()
                raise

    # -- framing ----------------------------------------------------------------------------------------------
    @property
    def pings_received(self) -> int:
        return self._pings

    def _await_ping(self, deadline: float | None) -> None:
        """Read the broker's greeting Ping (TankGo and the Java client require it; so do we)."""
        msg_type, _ = self._read_frame(deadline, ping_ok=True)
        if msg_type != MsgType.PING:
            raise RemoteProtocolError(f"the broker's first frame has type {msg_type:#04x}, not a Ping", fatal=True)

    def _recv_some(self, deadline: float | None) -> None:
        """Append what the socket has (at least one byte) to the receive buffer."""
        n = self.stream.receive_into(self._rview, deadline)
        if not n:
            raise ConnectionClosed("the broker closed the connection")
        self._buf += self._rview[:n]

    def _read_frame(self, deadline: float | None, *, ping_ok: bool = False) -> tuple[int, Any]:
        """(msg_type, payload) of the next frame; Pings are counted and skipped unless `ping_ok`.

        A large frame that has not fully arrived is received straight into a buffer of its own, once (see the
        module docstring). A timeout leaves what was received in place for the next call.
        """
        buf = self._buf
        while True:
            while len(buf) < _FRAME_HEADER.size:
                self._recv_some(deadline)
            msg_type, length = _FRAME_HEADER.unpack_from(buf)
            if msg_type not in RESPONSE_TYPES:
                raise RemoteProtocolError(f"unknown response type {msg_type:#04x}", fatal=True)
            if length > MAX_FRAME_BYTES:
                raise RemoteProtocolError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}", fatal=True)
            end = _FRAME_HEADER.size + length
            if len(buf) < end and length >= _DIRECT_BYTES:
                payload = self._big_payload
                if payload is None:
                    payload = self._big_payload = [bytearray(length), len(buf) - _FRAME_HEADER.size]
                    payload[0][:payload[1]] = buf[_FRAME_HEADER.size:]
                view = memoryview(payload[0])
                while payload[1] < length:
                    n = self.stream.receive_into(view[payload[1]:], deadline)
                    if not n:
                        raise ConnectionClosed("the broker closed the connection inside a frame")
                    payload[1] += n
                self._big_payload = None
                del buf[:]
                body: Any = payload[0]
            else:
                while len(buf) < end:
                    self._recv_some(deadline)
                body = bytes(buf[_FRAME_HEADER.size:end])
                del buf[:end]
            if msg_type == MsgType.PING:
                self._pings += 1
                if not ping_ok:
                    continue
            return msg_type, body

    def next_event(self, deadline: float | None = None) -> Any:
        """The next response (framed here, parsed by the codec); ConnectionClosed at EOF."""
        return self.parse_frame(self._read_frame(deadline))

    def receive_frame(self, *, timeout: float | None = None) -> tuple[int, Any]:
        """The next response frame as (msg_type, payload), unparsed (Pings skipped): a latency benchmark stops its
        clock here and parses later with `parse_frame`."""
        return self._read_frame(self._deadline(timeout))

    def parse_frame(self, frame: tuple[int, Any]) -> Any:
        """The response a frame of `receive_frame` holds."""
        return parse_response(*frame, self._produce_entries)

    def _produce_entries(self, request_id: int) -> list | None:
        """(topic, partition) of each entry of a pending Produce request: its response matches by position."""
        self.codec.forget(request_id)
        return self._pending_produce.pop(request_id, None)

    def _encode(self, request: Any) -> bytes:
        frame = self.codec.send(request)
        if isinstance(request, ProduceRequest):
            self._pending_produce[request.request_id] = [(e.topic, e.partition) for e in request.entries]
        return frame

    # -- low level --------------------------------------------------------------------------------------------
    def prepare(self, request: Any) -> tuple[int, bytes]:
        """Give `request` a fresh id and encode it without sending: (request_id, frame). Send the frame later
        with `send_raw` (benchmarks build their frames before timing); `receive(request_id)` then works."""
        self._number(request, False)
        return request.request_id, self._encode(request)

    def send(self, request: Any, *, keep_id: bool = False) -> int:
        """Write one request dataclass; returns its request id (a fresh one unless `keep_id`)."""
        self._number(request, keep_id)
        self.stream.send_all(self._encode(request))
        return request.request_id

    def receive(self, request_id: int | None = None, *, timeout: float | None = None) -> Any:
        """The response to `request_id` (responses to other requests are kept for later), or with no id the
        next response, kept ones first. `timeout` in seconds (default: the client's)."""
        kept = self._stashed(request_id)
        if kept is not None:
            return kept
        deadline = self._deadline(timeout)
        while True:
            event = self.next_event(deadline)
            if request_id is None or event.request_id == request_id:
                return event
            self._stash[event.request_id] = event

    def request(self, request: Any, *, timeout: float | None = None) -> Any:
        """Send one request and wait for its response (a long-polling Consume's wait is added to `timeout`)."""
        return self.receive(self.send(request), timeout=_timeout(self.timeout if timeout is None else timeout,
                                                                 request))

    def _run(self, operation: Operation) -> Any:
        return drive_blocking(operation, self.request)

    # -- requests ---------------------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records_or_bundle: Any, *, codec: int | None = None) -> int:
        """Append one bundle (messages, or a prebuilt bundle as bytes) to topic/partition; returns the error
        code (0 = appended)."""
        return self.produce_many([(topic, partition, make_bundle(records_or_bundle, codec=codec))])[0]

    def produce_many(self, entries: Sequence[tuple[str, int, Any]]) -> list[int]:
        """One Produce request with an entry per (topic, partition, bundle bytes), in order (the same partition
        may repeat); returns the error code of each entry."""
        return self._run(_produce_many(entries, self.client_id))

    def produce_with_seqnum(self, topic: str, partition: int, records: Any, first_seq: int, *,
                            seqs: Sequence[int] | None = None, codec: int | None = None) -> int:
        """ProduceWithSeqnum (0x05) as the C++ client sends it: a SPARSE bundle whose messages have `seqs`
        (default first_seq, first_seq + 1, ...), with base_seqnum = first_seq. A bytes-like `records` is sent
        as a prebuilt bundle. Returns the error code (0x0a: a seq at or below the high-water mark)."""
        return self._run(_produce_with_seqnum(topic, partition, records, first_seq, seqs, codec, self.client_id))

    def consume(self, topics: dict[str, Sequence[tuple]], *, max_wait_ms: int = 0, min_bytes: int = 0,
                client_version: int = 2, flags: int = 0, timeout: float | None = None) -> ConsumeResponse:
        """One Consume request; {topic: [(partition, seq, fetch_size), ...]}. Returns the raw response (chunks
        as bytes-like; walk them with `iter_chunk`/`count_messages`/`decode_chunk`)."""
        return self.request(consume_request(topics, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                            client_version=client_version, flags=flags), timeout=timeout)

    def get(self, topic: str, partition: int, seq: int, fetch_size: int = DEFAULT_FETCH_SIZE, *,
            max_wait_ms: int = 0, min_bytes: int = 0) -> GetResult:
        """Messages of topic/partition from `seq` (0 = first available, 2**64-1 = tail), filtered as the C++
        client does; raises TankError / TankBoundaryError for an error answer."""
        return self._run(_get(topic, partition, seq, fetch_size, max_wait_ms, min_bytes))

    def create_topic(self, topic: str, partitions: int = 1, config: dict | str | bytes | None = None) -> int:
        """CreateTopic; returns the error code (0 created, 1 exists, 4 invalid config, 10 invalid request)."""
        return self._run(_create_topic(topic, partitions, config))

    def discover_partitions(self, topic: str, partitions: Sequence[int] | None = None) -> list[PartitionBounds]:
        """(first_available, high_water_mark) of each partition; an empty list for an unknown topic."""
        return self._run(_discover_partitions(topic, partitions))

    def status(self) -> StatusResponse:
        return self._run(_one(StatusRequest(0)))

    def discover_topics(self) -> list[TopicInfo]:
        return self._run(_one(DiscoverTopicsRequest(0))).topics

    def discover_topology(self) -> DiscoverTopologyResponse:
        """`nodes is None` means a standalone broker (n = 0xffff on the wire)."""
        return self._run(_one(DiscoverTopologyRequest(0)))

    def reload_conf(self, topic: str, partition: int) -> int:
        """ReloadConf; returns the error code (0 ok, 2 no config file, 10 unknown partition, 11 unknown topic)."""
        return self._run(_reload_conf(topic, partition))


# -- trio --------------------------------------------------------------------------------------------------------

class AsyncTankClient(_Requests, TrioClient):
    """The trio twin of `TankClient`: the same calls, awaited. `timeout` defaults to None (use cancel scopes)."""

    def __init__(self, stream, *, timeout: float | None = None, client_id: bytes = b"c++") -> None:
        """Over an open trio stream whose greeting Ping was not read yet (`connect` reads it)."""
        self.transport = stream if isinstance(stream, TrioStream) else TrioStream(stream)
        self.timeout = timeout
        self.client_id = client_id
        self.codec = TankClientConnection()
        self._request_id = 1
        self._stash: dict[int, Any] = {}

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, timeout: float | None = None,
                      connect_timeout: float | None = 10.0, client_id: bytes = b"c++", wait_ping: bool = True,
                      ssl_context=None, server_hostname: str | None = None) -> "AsyncTankClient":
        transport = await TrioStream.connect(host, port, connect_timeout=connect_timeout, ssl_context=ssl_context,
                                             server_hostname=server_hostname)
        client = cls(transport, timeout=timeout, client_id=client_id)
        if wait_ping:
            try:
                await client.await_ping(timeout=connect_timeout)
            except BaseException:
                await client.aclose()
                raise
        return client

    @property
    def pings_received(self) -> int:
        return self.codec.pings_received

    async def await_ping(self, *, timeout: float | None = None) -> None:
        """Read the broker's greeting Ping."""
        codec = self.codec
        deadline = self._deadline(timeout)
        while not codec.pings_received:
            event = codec.next_event()  # counts and skips Pings
            if event is NEED_DATA:
                if not codec.pings_received:
                    codec.receive_data(await self.transport.receive_some(self.receive_bytes, deadline))
            elif event is CLOSED:
                raise ConnectionClosed("the broker closed the connection before its greeting Ping")
            else:
                raise RemoteProtocolError(f"a {type(event).__name__} before the greeting Ping", fatal=True)

    # -- low level --------------------------------------------------------------------------------------------
    def prepare(self, request: Any) -> tuple[int, bytes]:
        self._number(request, False)
        return request.request_id, self.codec.send(request)

    async def send(self, request: Any, *, keep_id: bool = False) -> int:
        self._number(request, keep_id)
        await self.transport.send_all(self.codec.send(request))
        return request.request_id

    async def receive(self, request_id: int | None = None, *, timeout: float | None = None) -> Any:
        kept = self._stashed(request_id)
        if kept is not None:
            return kept
        deadline = self._deadline(timeout)
        while True:
            event = await self.next_event(deadline)
            if event is CLOSED:
                raise ConnectionClosed("the broker closed the connection")
            if request_id is None or event.request_id == request_id:
                return event
            self._stash[event.request_id] = event

    async def request(self, request: Any, *, timeout: float | None = None) -> Any:
        rid = await self.send(request)
        return await self.receive(rid, timeout=_timeout(self.timeout if timeout is None else timeout, request))

    async def _run(self, operation: Operation) -> Any:
        return await drive_trio(operation, self.request)

    # -- requests ---------------------------------------------------------------------------------------------
    async def produce(self, topic: str, partition: int, records_or_bundle: Any, *, codec: int | None = None) -> int:
        return (await self.produce_many([(topic, partition, make_bundle(records_or_bundle, codec=codec))]))[0]

    async def produce_many(self, entries: Sequence[tuple[str, int, Any]]) -> list[int]:
        return await self._run(_produce_many(entries, self.client_id))

    async def produce_with_seqnum(self, topic: str, partition: int, records: Any, first_seq: int, *,
                                  seqs: Sequence[int] | None = None, codec: int | None = None) -> int:
        return await self._run(_produce_with_seqnum(topic, partition, records, first_seq, seqs, codec,
                                                    self.client_id))

    async def consume(self, topics: dict[str, Sequence[tuple]], *, max_wait_ms: int = 0, min_bytes: int = 0,
                      client_version: int = 2, flags: int = 0, timeout: float | None = None) -> ConsumeResponse:
        return await self.request(consume_request(topics, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                                  client_version=client_version, flags=flags), timeout=timeout)

    async def get(self, topic: str, partition: int, seq: int, fetch_size: int = DEFAULT_FETCH_SIZE, *,
                  max_wait_ms: int = 0, min_bytes: int = 0) -> GetResult:
        return await self._run(_get(topic, partition, seq, fetch_size, max_wait_ms, min_bytes))

    async def create_topic(self, topic: str, partitions: int = 1, config: dict | str | bytes | None = None) -> int:
        return await self._run(_create_topic(topic, partitions, config))

    async def discover_partitions(self, topic: str,
                                  partitions: Sequence[int] | None = None) -> list[PartitionBounds]:
        return await self._run(_discover_partitions(topic, partitions))

    async def status(self) -> StatusResponse:
        return await self._run(_one(StatusRequest(0)))

    async def discover_topics(self) -> list[TopicInfo]:
        return (await self._run(_one(DiscoverTopicsRequest(0)))).topics

    async def discover_topology(self) -> DiscoverTopologyResponse:
        return await self._run(_one(DiscoverTopologyRequest(0)))

    async def reload_conf(self, topic: str, partition: int) -> int:
        return await self._run(_reload_conf(topic, partition))
