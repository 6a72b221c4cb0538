"""The one connection pump: socket bytes → codec events → the protocol's session → codec → socket, for every
protocol. A protocol plugs in with a `Session` (one per connection) and three small hooks:

- `greeting()`: events sent as soon as the connection is accepted (TANK's Ping);
- `handle(event)` -> an event to send, `None` (nothing to send: Kafka acks=0, a client's Ping), `Close(event)`
  (send it, then close: failed authentication), or an answer that comes later (`waiting.py`): a `LongPoll` (a
  request parked at the log end), which the pump hands to the steps' one waiter with `Outbox.send_now` — the task
  whose append brings enough data writes the answer itself through it —, or a `Park` (`await wait()`). For a
  protocol whose answers may go out of order (`max_parked` > 0: TANK) the pump waits for it in the connection's
  nursery and goes on reading; its answer goes out when ready, under a send lock — past `max_parked` parked, the
  pump answers its `now()` instead. For the others (Kafka, native: answers in request order) the pump waits for it
  before it reads the next request;
- `protocol_error(exc)` -> the answer to a malformed request (the native protocol answers and keeps reading unless
  the stream can no longer be framed), or `None`: close (Kafka and TANK close on a bad request).

With `workers: N`, `handle` may also answer `HandOver(worker, event, relay)`: the request is wholly for another
worker's partitions. The pump then gives the whole connection to that worker (the protocol's `hand_over`, a
`cluster.handover.HandOvers`) when it can — plain TCP, nothing else in flight, not shutting down, not a relay
connection, and never handed over or tried before — and stops serving it there: the owner answers the request and serves
the connection from then on (`serve_connection(..., resumed=Resumed(state, data))`: no greeting, the session's state
restored — `Session.handover_state()` / `resume(state)` — and the codec fed the request and the bytes after it first).
Otherwise, or when the owner does not take it, the pump awaits `relay()` and goes on as with any answer.

Requests that read or write the log (the protocol's `data_requests`) take turns with the gateway's other
connections (`turns.py`: at most `limits.data_requests_per_pass` start per scheduler pass, fewer while passes run
long) before they are handled; other requests are handled at once.

Authentication is the session's business: it answers or closes before it lets a request through (and keeps the
codec's frame limit low until then). Requests are read one at a time (`reading.RequestReader`: idle and
slow-request timeouts), so a client that does not read its answers is not read from either (back-pressure);
graceful shutdown drains through `Connection.end_request()`.

Memory (`memory.py`, the gateway's budget): a large request holds its share from its header on until it is handled
(`reading.py`; one costing more than `MAX_REQUEST_SHARE` of the whole budget is refused as malformed, with the
protocol's answer to one); a large answer holds its bytes from its encoding until the client took them (`Outbox`);
while the budget is past its soft limit, a data request of an address holding more than its fair share waits
before it is handled. Whatever a connection holds is given back when it ends.

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

from .admin.stats import CURRENT, RequestStats
from .connections import Connection
from .memory import LEASE, SMALL_FRAME_BYTES
from .reading import RequestReader
from .transport import transport_for
from .waiting import LongPoll, Park

log = logging.getLogger("logway.gateway")

__all__ = ["Close", "HandOver", "LATER", "MAX_REQUEST_SHARE", "Resumed", "Session", "serve_connection"]

#: The largest share of the memory budget one request may take (its frame's decode cost): one client's request
#: never takes the whole of it from the others.
MAX_REQUEST_SHARE = 0.25
_BYTES = (bytes, bytearray, memoryview)
#: The answers that come later (`waiting.py`).
LATER = (LongPoll, Park)


@dataclass(slots=True)
class Close:
    """Send `event` (if any) and close the connection."""

    event: Any = None


@dataclass(slots=True)
class HandOver:
    """`event` is wholly for worker `worker`'s partitions: give it the connection, or `await relay()` for the answer
    (see the module docstring). `event` is what the owner is to answer (re-encoded for it)."""

    worker: int
    event: Any
    relay: Callable[[], Awaitable[Any]]


@dataclass(slots=True)
class Resumed:
    """A connection another worker handed over: the session's `state` (`Session.handover_state()`) and the bytes
    the codec is fed before the socket's (the request to answer, then what the giver had received after it)."""

    state: dict
    data: bytes


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

    def handover_state(self) -> dict:
        """What the worker this connection is handed to needs of the session (JSON-ready)."""
        return {}

    def resume(self, state: dict) -> None:
        """Take up a connection handed over with `state` (from `handover_state`)."""


class _WriteLock:
    """One writer at a time on a connection, handed over in arrival order. trio.Lock does the same with owner
    checks and parking-lot breaker bookkeeping (an `inspect` call and dictionary updates per acquire and release)
    that this lock, taken for every answer of a TANK connection, does not need."""

    __slots__ = ("held", "_waiting")

    def __init__(self) -> None:
        self.held = False
        self._waiting = trio.lowlevel.ParkingLot()

    def locked(self) -> bool:
        return self.held

    def try_acquire(self) -> bool:
        if self.held:
            return False
        self.held = True
        return True

    async def acquire(self) -> None:
        if not self.held:
            self.held = True
            return
        await self._waiting.park()  # woken by `release`, which passes the lock on to us

    def release(self) -> None:
        if self._waiting:
            self._waiting.unpark()  # the longest waiter now holds it
        else:
            self.held = False


class Outbox:
    """Encodes events and writes them whole through the connection's transport. With `shared` (answers of parked
    requests may interleave with the pump's), one at a time under a lock; otherwise only the pump writes and no
    lock is needed. `send_now` writes an answer without waiting — from another task (the appending one, for a
    parked long-poll) — when nothing else is being written; what the socket did not take then goes out first on
    the next `send` or `flush`."""

    def __init__(self, transport, codec, *, shared: bool, memory=None, conn=None) -> None:
        self.transport = transport
        self.codec = codec
        self._lock = _WriteLock() if shared else None
        self._rest = None  # what `send_now` could not write yet
        self._rest_held = 0  # what it holds of the memory budget
        self.memory = memory  # the gateway's `memory.MemoryBudget` (None: answers are not counted)
        self.conn = conn

    def _held(self, pieces) -> int:
        """Take the memory budget's share of an encoded answer, if large: the bytes it holds (not file ranges)."""
        if self.memory is None:
            return 0
        if type(pieces) is bytes:
            size = len(pieces)
        else:
            size = sum(len(p) for p in pieces if isinstance(p, _BYTES))
        if size <= SMALL_FRAME_BYTES:
            return 0
        self.memory.take(self.conn, size)
        return size

    def ready_now(self) -> bool:
        """Whether `send_now` would write now: no other write is under way."""
        return self._rest is None and (self._lock is None or not self._lock.locked())

    def send_now(self, event) -> bool:
        """Encode and write `event` now if no other write is under way; False (nothing done) if one is."""
        if not self.ready_now():
            return False
        pieces = self.codec.send(event)
        rest = self.transport.send_now(pieces)
        if rest is not None:
            self._rest_held = self._held(pieces)
        self._rest = rest
        return True

    async def send(self, event) -> None:
        await self._locked(self.codec.send, event)

    async def flush(self) -> None:
        """Write what `send_now` left."""
        await self._locked(None, None)

    async def _locked(self, encode, event) -> None:
        lock = self._lock
        if lock is not None and not lock.try_acquire():  # uncontended (the usual case): no scheduler pass
            await lock.acquire()
        held = 0
        try:
            if self._rest is not None:
                rest, self._rest = self._rest, None
                held, self._rest_held = self._rest_held, 0
                await self.transport.send(rest)
                self._release(held)
                held = 0
            if encode is not None:
                pieces = encode(event)
                held = self._held(pieces)
                await self.transport.send(pieces)
        finally:
            self._release(held)
            if lock is not None:
                lock.release()

    def _release(self, held: int) -> None:
        if held:
            self.memory.release(self.conn, held)


async def serve_connection(stream: trio.abc.Stream, conn: Connection, protocol, limits,
                           resumed: Resumed | None = None) -> None:
    """Serve one connection of `protocol` (a `logway.gateway.protocols.Protocol`) until it closes — or until it is
    handed over to another worker; `resumed`: a connection another worker handed over to this one."""
    ctx = protocol.ctx
    stats = ctx.stats(protocol.name)
    CURRENT.set(stats)  # this connection's task (and its parked answers): the steps count records for `stats`
    codec = protocol.codec()
    session = protocol.session(conn, codec)
    transport = transport_for(stream, stats, conn, limits.request_timeout_ms / 1000)
    memory = ctx.memory
    if memory is not None:
        LEASE.set((memory, conn))  # (the steps take large reads' share of the budget through it)
    reader = RequestReader(transport, codec, conn, limits, memory,
                           None if memory is None else int(memory.limit * MAX_REQUEST_SHARE), ctx.steps.heavy)
    max_parked = protocol.max_parked
    out = Outbox(transport, codec, shared=max_parked > 0, memory=memory, conn=conn)
    turns = ctx.turns
    data_requests = protocol.data_requests if turns is not None or memory is not None else ()

    waiter = ctx.steps.waiter

    async def wait_for(later: LongPoll | Park) -> tuple[Any, bool]:
        """The answer that comes later, and whether it is out already (written by the task that woke it)."""
        if type(later) is Park:
            return await later.wait(), False
        # (`out.send_now` is called by the appending task, in this task's context: see notify.py)
        reply, sent = await waiter.answer(later, out)
        if sent:
            await out.flush()
        return reply, sent

    async def answer_later(park: LongPoll | Park, request: RequestStats, started: float) -> None:
        try:
            reply, sent = await wait_for(park)
            if not sent:
                await out.send(reply)
            request.answered(started, reply)
        finally:
            conn.end_request()

    if resumed is None:
        for event in session.greeting():
            await out.send(event)
    else:
        session.resume(resumed.state)
        codec.receive_data(resumed.data)
    hand_over = protocol.hand_over

    async def serve_requests(parked: trio.Nursery | None) -> None:
        """Read, handle and answer requests until the connection ends (`parked`: where parked requests wait, when
        `max_parked` lets them)."""
        # At most one try per connection, and none for one handed over already: it does not bounce between workers.
        may_hand_over = (hand_over is not None and resumed is None and not conn.internal
                         and type(stream) is trio.SocketStream)
        # The connection's task has just started (a scheduler pass of its own), and its first request is most likely
        # in already: a client that speaks first sends it right after connecting, and a connection handed over
        # starts with its request buffered. The first read takes it without another pass (nothing there: one failed
        # read, then the wait it would have had anyway).
        fresh = True
        streak = 0  # data requests in a row, up to the last one
        while True:
            # Saturated, and this connection's last requests were data requests: its next one most likely is
            # too, and would wait for a turn once read. Wait for it first, then read without waiting for the
            # socket (the request is there already in a closed loop): one scheduler pass per deferred request
            # instead of two. (A control request read with it went through the queue too: one that follows two
            # data requests or more on a connection waits one turn; a client that alternates them — a
            # transactional producer's Produce and EndTxn — does not.)
            eager = streak > 1 and turns is not None and turns.waiting > 0
            if eager:
                await turns.take()
            try:
                event = await reader.next(eager or fresh)
            except RemoteProtocolError as exc:
                reader.release()
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
            fresh = False
            conn.start_request()
            request = stats.request(event)
            started = perf_counter()
            if request.name in data_requests:
                streak += 1
                if turns is not None and not eager and not turns.take_now():
                    await turns.take()
                if memory is not None and memory.used > memory.soft:
                    await memory.wait_below(conn)  # its answer may be large: past the soft limit, fair shares
            else:
                streak = 0
            try:
                reply = await session.handle(event)
            except Exception:
                request.observe(perf_counter() - started, True)
                raise
            finally:
                reader.release()
            if type(reply) is HandOver:
                if may_hand_over and conn.inflight == 1 and not conn.draining:
                    may_hand_over = False
                    if await hand_over.give(reply, stream, codec, session):
                        conn.end_request()  # answered (and counted) by the owner
                        return
                reply = await reply.relay()
            sent = False
            if type(reply) in LATER:
                if not max_parked:  # answers go out in request order: this one is awaited here
                    reply, sent = await wait_for(reply)
                elif conn.inflight <= max_parked:
                    parked.start_soon(answer_later, reply, request, started)
                    continue
                elif type(reply) is Park:
                    reply = await reply.now()
                else:
                    reply = await waiter.at_once(reply)
            closing = type(reply) is Close
            if closing:
                reply = reply.event
            if reply is not None and not sent:
                await out.send(reply)
            request.answered(started, reply, closing)
            # Nothing of this request and its answer stays with the connection while it waits for the next: a
            # read's file slice would keep a segment that retention deletes meanwhile (and its disk space).
            event = reply = None
            if not conn.end_request() or closing:
                return

    try:
        if max_parked:  # parked requests are answered by tasks of their own, beside the loop
            async with trio.open_nursery() as parked:
                try:
                    await serve_requests(parked)
                finally:
                    parked.cancel_scope.cancel()
        else:  # answers in request order: nothing runs beside the loop, no nursery needed
            await serve_requests(None)
    finally:  # (after the parked answers ended) whatever the connection was doing, it gives back what it held
        if memory is not None and conn.memory:
            memory.release(conn, conn.memory)
