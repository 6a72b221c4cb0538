"""Reading requests off a connection: the codec loop, the two timeouts every pump needs, and the memory a large
request may take.

- idle: a connection with nothing buffered that sends nothing for `limits.idle_timeout_ms` is closed;
- request: once the first byte of a frame arrived, the whole frame must arrive within
  `limits.request_timeout_ms`, however slowly the bytes trickle in (a slow-loris client is dropped).
While the connection has requests in flight (TANK long-polls) the idle timeout does not apply. The reader only
states the deadline on the `Connection` while it waits; `ConnectionRegistry.enforce_timeouts` closes connections
whose deadline passed.

A frame larger than `memory.SMALL_FRAME_BYTES` takes its share of the gateway's memory budget as soon as its
header is in, before its body is buffered (`reserve`; it waits — not reading the connection further — while the
budget has no room for it, under the same request deadline), and gives it back once the request is handled
(`release`). A frame whose decode may take more than `OFFLOAD_COST_BYTES` (its size times the codec's decode
factor) is decoded in a worker thread, so that no request holds the event loop for long.

A request already buffered (a client that pipelines) is handed out after a checkpoint, so one connection's burst
cannot keep the others waiting: every request costs at least one scheduler pass, none costs more.
"""

from __future__ import annotations

import math

import trio

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.stream import CLOSED, NEED_DATA

from .memory import SMALL_FRAME_BYTES

#: Bytes asked of the socket per receive: large enough for big produce frames, small enough to stay fair.
RECEIVE_CHUNK = 256 * 1024
#: A frame whose decoded form may take more than this (its size × the codec's `decode_cost`) is decoded in a worker
#: thread: decoding ~4 MiB of small objects takes tens of milliseconds, the most one request may hold the loop.
OFFLOAD_COST_BYTES = 4 * 1024 * 1024


class RequestReader:
    def __init__(self, transport, codec, conn, limits, memory=None, max_cost: int | None = None,
                 heavy: trio.CapacityLimiter | None = None) -> None:
        self.transport = transport
        self.codec = codec
        self.conn = conn
        self.idle = limits.idle_timeout_ms / 1000
        self.request_timeout = limits.request_timeout_ms / 1000
        self.memory = memory  # the gateway's `memory.MemoryBudget` (None: nothing is counted)
        self.max_cost = max_cost  # the most one request may take of it (None: no bound)
        self.heavy = heavy  # the turns of heavy work an offloaded decode takes (`Steps.heavy`; None: its own)
        self.held = 0  # what the frame being read (or handled) holds of the budget
        self._frame_deadline: float | None = None

    async def next(self, eager: bool = False):
        """The next event, or None at EOF. A malformed request raises the codec's RemoteProtocolError: the caller
        answers it or closes (after a fatal one the codec stays broken). `eager`: the caller has just waited in a
        scheduler pass of its own (for a turn): no checkpoint, and the socket is read before waiting for it."""
        codec = self.codec
        size = codec.next_frame_size()
        if size > SMALL_FRAME_BYTES:
            event = await self._large(size)
            if event is NEED_DATA:
                eager = True  # (`_large` may have waited: the bytes may be there)
        else:
            event = codec.next_event()
        if event is not NEED_DATA:
            if not eager:
                await trio.lowlevel.checkpoint()  # a pipelined request: let the others run first
        else:
            while event is NEED_DATA:
                await self.feed(eager)
                eager = False
                size = codec.next_frame_size()
                event = await self._large(size) if size > SMALL_FRAME_BYTES else codec.next_event()
        return None if event is CLOSED else event

    async def _large(self, size: int):
        """`next_event()` for a large frame of `size` bytes: its memory taken first, decoded in a worker thread
        when its decode is large."""
        codec = self.codec
        cost = codec.decode_cost(size)
        if not self.held and self.memory is not None:
            if self.max_cost is not None and cost > self.max_cost:
                raise RemoteProtocolError(
                    f"a request of {size} bytes would take {cost // 2**20} MiB to decode, more than the "
                    f"{self.max_cost // 2**20} MiB one request may take of the gateway's memory (limits.memory_bytes)",
                    fatal=True)
            await self._reserve(cost)
        if cost > OFFLOAD_COST_BYTES and codec.buffered_bytes >= size:
            return await trio.to_thread.run_sync(codec.next_event, limiter=self.heavy)
        return codec.next_event()

    async def _reserve(self, cost: int) -> None:
        """Take `cost` bytes of the budget for the frame being read, waiting under the frame's deadline."""
        memory, conn = self.memory, self.conn
        if memory.fits(conn.address, cost):
            memory.take(conn, cost)
        else:
            if self._frame_deadline is None:
                self._frame_deadline = trio.current_time() + self.request_timeout
            conn.read_deadline = self._frame_deadline
            conn.waiting_for = "request not complete in time (waiting for memory)"
            try:
                await memory.acquire(conn, cost)
            finally:
                conn.read_deadline = math.inf
        self.held = cost

    def release(self) -> None:
        """The request read last is handled: give its memory back."""
        if self.held:
            self.memory.release(self.conn, self.held)
            self.held = 0

    async def feed(self, eager: bool = False) -> None:
        """Receive more bytes into the codec (b"" at EOF), under the read deadline (`eager`: see `next`)."""
        conn = self.conn
        now = trio.current_time()
        if self.codec.buffered_bytes:
            if self._frame_deadline is None:
                self._frame_deadline = now + self.request_timeout
            conn.read_deadline = self._frame_deadline
            conn.waiting_for = "request not complete in time"
        else:
            self._frame_deadline = None
            conn.read_deadline = now + self.idle if not conn.inflight else math.inf
            conn.waiting_for = "idle"
        try:
            data = await self.transport.receive(RECEIVE_CHUNK, eager)
        finally:
            conn.read_deadline = math.inf
        self.codec.receive_data(data)
        if not self.codec.buffered_bytes:
            self._frame_deadline = None
