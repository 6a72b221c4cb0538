"""Live connections: the limit on how many, and what graceful shutdown needs to know about each one.

A `Connection` is idle (waiting for the next request: safe to cancel) or busy (requests are being served:
let them finish). `drain()` cancels idle connections at once and asks busy ones to close after their
current response.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio


@dataclass(eq=False)
class Connection:
    protocol: str
    peer: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    inflight: int = 0  # requests being served (TANK may have several parked long-polls)
    draining: bool = False
    client_id: str | None = None  # as the client names itself (Kafka request header)

    @property
    def busy(self) -> bool:
        return self.inflight > 0

    def start_request(self) -> None:
        self.inflight += 1

    def end_request(self) -> bool:
        """Mark a request answered; False when the connection should now close (shutdown, nothing in flight)."""
        self.inflight -= 1
        if self.draining and not self.inflight:
            self.scope.cancel()
            return False
        return not self.draining


class ConnectionRegistry:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._live: set[Connection] = set()
        self._changed = trio.Event()
        self._draining = False

    @property
    def count(self) -> int:
        return len(self._live)

    def admit(self, protocol: str, stream: trio.SocketStream) -> Connection | None:
        if self._draining or len(self._live) >= self.limit:
            return None
        try:
            peer = "%s:%d" % stream.socket.getpeername()[:2]
        except OSError:
            peer = "?"
        conn = Connection(protocol, peer)
        self._live.add(conn)
        return conn

    def release(self, conn: Connection) -> None:
        self._live.discard(conn)
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    def drain(self) -> None:
        self._draining = True
        for conn in list(self._live):
            conn.draining = True
            if not conn.busy:
                conn.scope.cancel()
