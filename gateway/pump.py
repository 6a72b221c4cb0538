"""The one connection pump: socket bytes → codec events → the protocol's session → codec → socket, for every
protocol. A protocol plugs in with a `Session` (one per connection) and three small hooks:

- `greeting()`: events sent as soon as the connection is accepted (TANK's Ping);
- `handle(event)` -> an event to send, `None` (nothing to send: Kafka acks=0, a client's Ping), `Close(event)`
  (send it, then close: failed authentication), or `Park(wait, now)`: an answer that comes later (a TANK long-poll
  at the log end). The pump runs `wait()` in the connection's nursery and goes on reading; its answer goes out
  when ready — out of order, under a send lock. Past the protocol's `max_parked` the pump answers `now()` instead;
- `protocol_error(exc)` -> the answer to a malformed request (the native protocol answers and keeps reading unless
  the stream can no longer be framed), or `None`: close (Kafka and TANK close on a bad request).

Authentication is the session's business: it answers or closes before it lets a request through. Requests are
read one at a time (`reading.RequestReader`: idle and slow-request timeouts), so a client that does not read its
answers is not read from either (back-pressure); graceful shutdown drains through `Connection.end_request()`.

The pump is also the one place where requests are counted (`admin.stats.ProtocolStats` of the protocol, served as
Prometheus metrics by `admin.metrics`): per request type the requests, the failed ones (the handler raised, the
answer closes the connection or reports a request-level error: `admin.stats.answer_failed`) and the time from the
request read to its answer written (a parked request's included); bytes received and sent; malformed requests as
the request type "malformed". A connection's task carries its protocol's stats in `admin.stats.CURRENT`, where the
storage steps count records in and out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Awaitable, Callable

import trio

from logway.codecs.errors import RemoteProtocolError

from .admin.stats import CURRENT, ProtocolStats, RequestStats
from .connections import Connection
from .reading import RequestReader
from .sendfile import send_pieces

log = logging.getLogger("logway.gateway")

__all__ = ["Close", "Park", "Session", "serve_connection"]


@dataclass(slots=True)
class Close:
    """Send `event` (if any) and close the connection."""

    event: Any = None


@dataclass(slots=True)
class Park:
    """An answer that comes later: `wait()` produces it (in the connection's nursery); `now()` is the answer to
    give at once instead when the connection has too many parked already."""

    wait: Callable[[], Awaitable[Any]]
    now: Callable[[], Any]


class Session:
    """One connection's state in a protocol (see the module docstring). `conn` is the live `Connection`, `codec`
    the connection's server-side codec."""

    def __init__(self, conn: Connection, codec) -> None:
        self.conn = conn
        self.codec = codec

    def greeting(self) -> list:
        return []

    async def handle(self, event) -> Any:
        raise NotImplementedError

    def protocol_error(self, exc: RemoteProtocolError) -> Any:
        return None


class Outbox:
    """Encodes events and writes them whole, counting the bytes. With `shared` (answers of parked requests may
    interleave with the pump's), one at a time under a lock; otherwise only the pump writes and no lock is
    needed."""

    def __init__(self, stream: trio.abc.SendStream, codec, stats: ProtocolStats, *, shared: bool) -> None:
        self.stream = stream
        self.codec = codec
        self.stats = stats
        self._lock = trio.Lock() if shared else None

    async def send(self, event) -> None:
        lock = self._lock
        if lock is None:
            await self._send(event)
            return
        try:
            lock.acquire_nowait()  # the usual case, uncontended: no scheduler pass (`async with` would take one)
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._send(event)
        finally:
            lock.release()

    async def _send(self, event) -> None:
        pieces = self.codec.send(event)
        if isinstance(pieces, (bytes, bytearray, memoryview)):
            self.stats.bytes_out += len(pieces)
        else:
            size = 0
            for piece in pieces:
                size += len(piece) if isinstance(piece, (bytes, bytearray, memoryview)) else piece.length
            self.stats.bytes_out += size
        await send_pieces(self.stream, pieces)


class _CountedReceive:
    """The receiving side of a connection, counting the bytes received."""

    __slots__ = ("stats", "stream")

    def __init__(self, stream: trio.abc.ReceiveStream, stats: ProtocolStats) -> None:
        self.stream = stream
        self.stats = stats

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.stream.receive_some(max_bytes)
        self.stats.bytes_in += len(data)
        return data


def protocol_stats(protocol) -> ProtocolStats:
    """The counters of `protocol` in its gateway's metrics (throwaway ones for a protocol without a gateway)."""
    metrics = getattr(getattr(protocol, "gateway", None), "metrics", None)
    return metrics.protocol(protocol.name) if metrics is not None else ProtocolStats(protocol.name)


async def serve_connection(stream: trio.abc.Stream, conn: Connection, protocol, limits) -> None:
    """Serve one connection of `protocol` (a `logway.gateway.protocols.Protocol`) until it closes."""
    stats = protocol_stats(protocol)
    CURRENT.set(stats)  # this connection's task (and its parked answers): the steps count records for `stats`
    codec = protocol.codec()
    session = protocol.session(conn, codec)
    reader = RequestReader(_CountedReceive(stream, stats), codec, conn, limits)
    max_parked = protocol.max_parked
    out = Outbox(stream, codec, stats, shared=max_parked > 0)

    async def answer_later(park: Park, request: RequestStats, started: float) -> None:
        try:
            reply = await park.wait()
            await out.send(reply)
            request.answered(started, reply)
        finally:
            conn.end_request()

    for event in session.greeting():
        await out.send(event)
    async with trio.open_nursery() as parked:
        try:
            while True:
                try:
                    event = await reader.next()
                except RemoteProtocolError as exc:
                    stats.named("malformed").observe(0.0, True)
                    answer = session.protocol_error(exc)
                    if answer is None:
                        log.info("%s: closing: %s", conn.peer, exc.message)
                        return
                    log.debug("%s: protocol error: %s", conn.peer, exc.message)
                    await out.send(answer)
                    if exc.fatal:
                        return
                    continue
                if event is None:
                    return
                conn.start_request()
                request = stats.request(event)
                started = perf_counter()
                try:
                    reply = await session.handle(event)
                except Exception:
                    request.observe(perf_counter() - started, True)
                    raise
                if type(reply) is Park:
                    if conn.inflight <= max_parked:
                        parked.start_soon(answer_later, reply, request, started)
                        continue
                    reply = reply.now()
                closing = type(reply) is Close
                if closing:
                    reply = reply.event
                if reply is not None:
                    await out.send(reply)
                request.answered(started, reply, closing)
                if not conn.end_request() or closing:
                    return
        finally:
            parked.cancel_scope.cancel()
