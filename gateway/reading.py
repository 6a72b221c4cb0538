"""Reading requests off a connection: the codec loop and the two timeouts every pump needs.

- idle: a connection with nothing buffered that sends nothing for `limits.idle_timeout_ms` is closed;
- request: once the first byte of a frame arrived, the whole frame must arrive within
  `limits.request_timeout_ms`, however slowly the bytes trickle in (a slow-loris client is dropped).
While the connection has requests in flight (TANK long-polls) the idle timeout does not apply. The reader only
states the deadline on the `Connection` while it waits; `ConnectionRegistry.enforce_timeouts` closes connections
whose deadline passed.

A request already buffered (a client that pipelines) is handed out after a checkpoint, so one connection's burst
cannot keep the others waiting: every request costs at least one scheduler pass, none costs more.
"""

from __future__ import annotations

import math

import trio

from logway.codecs.stream import CLOSED, NEED_DATA

#: Bytes asked of the socket per receive: large enough for big produce frames, small enough to stay fair.
RECEIVE_CHUNK = 256 * 1024


class RequestReader:
    def __init__(self, transport, codec, conn, limits) -> None:
        self.transport = transport
        self.codec = codec
        self.conn = conn
        self.idle = limits.idle_timeout_ms / 1000
        self.request_timeout = limits.request_timeout_ms / 1000
        self._frame_deadline: float | None = None

    async def next(self, eager: bool = False):
        """The next event, or None at EOF. A malformed request raises the codec's RemoteProtocolError: the caller
        answers it or closes (after a fatal one the codec stays broken). `eager`: the caller has just waited in a
        scheduler pass of its own (for a turn): no checkpoint, and the socket is read before waiting for it."""
        codec = self.codec
        event = codec.next_event()
        if event is not NEED_DATA:
            if not eager:
                await trio.lowlevel.checkpoint()  # a pipelined request: let the others run first
        else:
            while event is NEED_DATA:
                await self.feed(eager)
                eager = False
                event = codec.next_event()
        return None if event is CLOSED else event

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
