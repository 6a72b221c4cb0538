"""Live connections: the limit on how many, their read timeouts, and what graceful shutdown needs to know about
each one.

The limits are fair: `max_connections_per_ip` bounds one client address, and when the total (`max_connections`) is
reached, a client of another address is admitted by closing one connection of the address that holds the most —
one that has not authenticated yet, else the one idle the longest (`_shed_for`): no address can lock the others out
by holding connections it does not use. Busy connections are never closed for another's sake.

A `Connection` is idle (waiting for the next request: safe to cancel) or busy (requests are being served:
let them finish). `drain()` cancels idle connections at once and asks busy ones to close after their
current response. The registry counts connections accepted and refused per protocol (`logway_connections_*`).
With `workers: N`, the connections other workers open to relay their clients' requests (`cluster/relays.py`) are
`internal`: drained and timed out like the others, but outside the limits and the client connection metrics
(those clients were admitted, and counted, by the worker that relays them; `logway_relay_connections_open`). A
client connection another worker hands over (`cluster/handover.py`) is admitted under the limits as if it had just been
accepted (refused, it stays where it is), and is a client connection of this worker from then on.

Deadlines: while the pump waits for bytes it sets `read_deadline` (and `waiting_for`, the reason a timeout
gives: "idle" or "request not complete in time"); while an answer waits for the client to take it, `write_deadline`
(moved on whenever the client takes some: `limits.request_timeout_ms` without progress); until a connection to a
listener that requires authentication has authenticated, `auth_deadline` (`limits.auth_timeout_ms` from its
accept). `enforce_timeouts()`, one task for the whole gateway, closes the connections whose deadline passed,
checking a few times per timeout period. A cancel scope per wait would cost every request a scope and two updates
of trio's deadline heap; a float per wait costs nothing.

`memory` is what the connection holds of the gateway's memory budget (`memory.py`); the pump gives it back when
the connection ends, whatever it was doing.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import trio

log = logging.getLogger("logway.gateway")

#: How often `enforce_timeouts` looks, as a fraction of the shorter timeout (bounds: 10 ms, 1 s).
CHECKS_PER_TIMEOUT = 10


@dataclass(eq=False)
class Connection:
    protocol: str
    peer: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    inflight: int = 0  # requests being served (TANK may have several parked long-polls)
    draining: bool = False
    client_id: str | None = None  # as the client names itself (Kafka request header)
    client_software: str | None = None  # "name/version" of its library, when it says (Kafka's ApiVersions v3+)
    address: str = ""  # the client's IP address
    read_deadline: float = math.inf  # trio time by which the awaited bytes must arrive (inf: none awaited)
    waiting_for: str = "idle"  # what the pump waits for, named when the deadline closes the connection
    internal: bool = False  # another worker's relay connection (see the module docstring)
    write_deadline: float = math.inf  # trio time by which the client must have taken more of its answer
    auth_deadline: float = math.inf  # trio time by which it must have authenticated (inf: done, or not needed)
    memory: int = 0  # bytes it holds of the memory budget
    principal: str = ""  # who it is (`security.principals`): its login, its client certificate, or its listener's

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
    def __init__(self, limit: int, per_address: int | None = None) -> None:
        self.limit = limit
        self.per_address = per_address or limit
        self._by_address: dict[str, int] = {}
        self._live: set[Connection] = set()
        self._internal = 0  # of `_live`
        self._changed = trio.Event()
        self._draining = False
        self.accepted: dict[str, int] = {}  # per protocol (listener): connections admitted ...
        self.refused: dict[str, int] = {}  # ... and refused (a limit, or shutdown), for the metrics
        self.shed: dict[str, int] = {}  # ... and closed to make room for another address's (`_shed_for`)

    @property
    def count(self) -> int:
        """Live connections, internal ones included."""
        return len(self._live)

    @property
    def clients(self) -> int:
        """Live client connections (what `limit` bounds)."""
        return len(self._live) - self._internal

    def open_by_protocol(self, internal: bool = False) -> dict[str, int]:
        """Live client connections per protocol — or with `internal`, relay connections (the metrics' gauges;
        counted when asked, off the hot path)."""
        out: dict[str, int] = {}
        for conn in self._live:
            if conn.internal is internal:
                out[conn.protocol] = out.get(conn.protocol, 0) + 1
        return out

    def client_software(self) -> dict[tuple[str, str], int]:
        """Live client connections per (protocol, client software) of those that named it (a metric's gauge)."""
        out: dict[tuple[str, str], int] = {}
        for conn in self._live:
            if conn.client_software is not None and not conn.internal:
                key = (conn.protocol, conn.client_software)
                out[key] = out.get(key, 0) + 1
        return out

    def admit(self, protocol: str, stream: trio.abc.Stream) -> Connection | None:
        """A new connection, or None when a limit (total, per client address) or shutdown refuses it. A stream
        without a socket (an in-memory connection) counts as from "memory"."""
        conn = self.admit_handed(protocol, stream)
        counts = self.refused if conn is None else self.accepted
        counts[protocol] = counts.get(protocol, 0) + 1
        return conn

    def admit_handed(self, protocol: str, stream: trio.abc.Stream) -> Connection | None:
        """`admit` without counting the connection as accepted or refused: a client's connection another worker
        handed over (`cluster/handover.py`), a client of this worker from now on. Refused (None), it stays with the
        worker that accepted it (which relays its requests), so no worker serves more clients than its limits allow."""
        try:
            host, port = stream.socket.getpeername()[:2]
        except AttributeError:
            host, port = "memory", 0
        except OSError:
            host, port = "?", 0
        if self._draining or self._by_address.get(host, 0) >= self.per_address:
            return None
        if self.clients >= self.limit and not self._shed_for(host):
            return None
        conn = Connection(protocol, f"{host}:{port}")
        conn.address = host
        self._live.add(conn)
        self._by_address[host] = self._by_address.get(host, 0) + 1
        return conn

    def _shed_for(self, host: str) -> bool:
        """At the total limit, make room for a client of `host`: close one connection of the address holding the
        most (more than `host` holds, and more than one) — one that has not authenticated yet, else the one idle
        the longest. False when there is none to close: the new connection is refused."""
        held = self._by_address.get(host, 0)
        most, address = max((count, address) for address, count in self._by_address.items())
        if most <= max(held + 1, 1):
            return False
        victim = None
        for conn in self._live:
            if conn.address != address or conn.internal or conn.scope.cancel_called:
                continue
            if conn.auth_deadline != math.inf:  # not authenticated yet: first to go
                victim = conn
                break
            if (not conn.busy and conn.waiting_for == "idle" and conn.read_deadline != math.inf  # waiting, idle
                    and (victim is None or conn.read_deadline < victim.read_deadline)):
                victim = conn  # idle the longest (its idle deadline is the earliest)
        if victim is None:
            return False
        log.info("%s: closing to make room for a client of %s (%d connections: the limit; %s holds %d)",
                 victim.peer, host, self.clients, address, most)
        self.shed[victim.protocol] = self.shed.get(victim.protocol, 0) + 1
        victim.scope.cancel()
        return True

    def admit_internal(self, protocol: str) -> Connection | None:
        """Another worker's new relay connection to `protocol`, or None when shutting down."""
        if self._draining:
            return None
        conn = Connection(protocol, f"worker relay ({protocol})", internal=True)
        self._live.add(conn)
        self._internal += 1
        return conn

    def release(self, conn: Connection) -> None:
        if conn in self._live:
            self._live.discard(conn)
            if conn.internal:
                self._internal -= 1
            elif left := self._by_address.get(conn.address, 1) - 1:
                self._by_address[conn.address] = left
            else:
                self._by_address.pop(conn.address, None)
        self._changed.set()
        self._changed = trio.Event()

    async def enforce_timeouts(self, shortest: float) -> None:
        """Close every connection whose `read_deadline` has passed, forever (a background task); `shortest` is the
        shortest timeout in seconds (it sets how often to look)."""
        tick = min(max(shortest / CHECKS_PER_TIMEOUT, 0.01), 1.0)
        while True:
            await trio.sleep(tick)
            now = trio.current_time()
            for conn in self._live:
                if conn.read_deadline <= now:
                    why = conn.waiting_for
                elif conn.write_deadline <= now:
                    why = "the client did not take its answer in time"
                elif conn.auth_deadline <= now:
                    why = "not authenticated in time"
                else:
                    continue
                log.info("%s: closing (%s)", conn.peer, why)
                conn.read_deadline = conn.write_deadline = conn.auth_deadline = math.inf
                conn.scope.cancel()

    async def changed(self) -> None:
        await self._changed.wait()

    def drain(self) -> None:
        self._draining = True
        for conn in list(self._live):
            conn.draining = True
            if not conn.busy:
                conn.scope.cancel()
