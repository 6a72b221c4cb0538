"""Reading requests off a connection: the codec loop and the two timeouts every pump needs.

- idle: a connection with nothing buffered that sends nothing for `limits.idle_timeout_ms` is closed;
- request: once the first byte of a frame arrived, the whole frame must arrive within
  `limits.request_timeout_ms`, however slowly the bytes trickle in (a slow-loris client is dropped).
While the connection has requests in flight (TANK long-polls) the idle timeout does not apply.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.stream import CLOSED, NEED_DATA

log = logging.getLogger("logway.gateway")

#: Bytes asked of the socket per receive: large enough for big produce frames, small enough to stay fair.
RECEIVE_CHUNK = 256 * 1024


class RequestReader:
    def __init__(self, stream: trio.abc.ReceiveStream, codec, conn, limits) -> None:
        self.stream = stream
        self.codec = codec
        self.conn = conn
        self.idle = limits.idle_timeout_ms / 1000
        self.request_timeout = limits.request_timeout_ms / 1000
        self._frame_deadline: float | None = None

    async def next(self):
        """The next event, or None when the connection is over (EOF or a timeout). A malformed request raises the
        codec's RemoteProtocolError: the caller answers it or closes (after a fatal one the codec stays broken)."""
        codec = self.codec
        while True:
            event = codec.next_event()
            if event is NEED_DATA:
                if not await self.feed():
                    return None
                continue
            return None if event is CLOSED else event

    async def feed(self) -> bool:
        """Receive more bytes into the codec; False when the connection must be closed (a timeout)."""
        now = trio.current_time()
        if self.codec.buffered_bytes:
            if self._frame_deadline is None:
                self._frame_deadline = now + self.request_timeout
            deadline = self._frame_deadline
            why = "request not complete in time"
        else:
            self._frame_deadline = None
            deadline = now + self.idle if not self.conn.inflight else float("inf")
            why = "idle"
        with trio.move_on_at(deadline):
            data = await self.stream.receive_some(RECEIVE_CHUNK)
            self.codec.receive_data(data)
            if not self.codec.buffered_bytes:
                self._frame_deadline = None
            return True
        log.info("%s: closing (%s)", self.conn.peer, why)
        return False
