"""The TANK 4.0 protocol: `TankProtocol` for the registry, the per-connection `TankSession` and
`handler.TankHandler` (the requests on the log).

On accept the broker sends a Ping (the session's greeting). Requests carry ids and answers may go out of order: a
consume whose partitions are all at EOF is parked (answered later by the pump, several at once, up to
`MAX_PARKED_PER_CONNECTION`) while later requests are answered. Malformed frames, 0x04 and unknown message types
close the connection, as TANK does. TANK has no authentication request: a connection's principal is its client
certificate's (mutual TLS) or its listener's (`listeners.tank.principal`), and every request is authorized for it
(`authz.TankAuthz`) and charged to its client quotas (`security.quotas`: an answer past one is delayed). With
`workers: N`, a Produce or Consume wholly for another worker's partitions is answered
`pump.HandOver`: the pump gives that worker the connection when it can (`cluster/handover.py`), else relays.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter

from logway.codecs.tank import (ConsumeRequest, ConsumeResponse, ProduceRequest, TankClientConnection,
                                TankServerConnection)
from logway.codecs.tank.connection import MAX_FRAME_BYTES
from logway.codecs.tank.messages import PingEvent
from logway.codecs.tank.wire import FRAME_HEADER

from ...pump import HandOver, Session
from ...waiting import then
from ...security.quotas import ConnectionQuota
from ..base import INFO, Protocol
from .authz import TankAuthz
from .handler import TankHandler

__all__ = ["TankProtocol", "TankSession", "MAX_PARKED_PER_CONNECTION"]

#: Long-polls one connection may have parked at once; further consumes are answered at once (as a timeout)
#: so a client that never reads its answers cannot make the gateway hold unbounded state for it.
MAX_PARKED_PER_CONNECTION = 256


class TankProtocol(Protocol):
    name = "tank"
    max_parked = MAX_PARKED_PER_CONNECTION
    data_requests = frozenset({"Produce", "Consume"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # One member of several (`ctx.cluster`): what the others lead is relayed to them (`cluster/forwarding.py`),
        # and one-partition connections go to their leader (`cluster/handover.py`).
        cluster = ctx.cluster
        forward = look_up = None
        if cluster is not None:
            forward, look_up = cluster.tank_forwarder(), cluster.look_up_unknown
            self.hand_over = cluster.hand_overs(self.name, _encoded, FRAME_HEADER.size + MAX_FRAME_BYTES)
        self.handler = TankHandler(self.steps, forward, look_up)
        self.authz = TankAuthz(ctx.security.authorizer)

    def codec(self) -> TankServerConnection:
        return TankServerConnection()

    def session(self, conn, codec) -> "TankSession":
        return TankSession(conn, codec, self)

    def security_notes(self):
        lc = self.config.listeners[self.name]
        if self.ctx.security.required and lc.tls_client_auth != "required":
            return [(INFO, f"tank listener: TANK has no login; clients without a client certificate are "
                           f"{lc.principal}, held to its ACLs")]
        return []


def _consumed(answer) -> int:
    """The bytes of bundles a TANK answer carries (a Consume's chunks)."""
    if type(answer) is not ConsumeResponse:
        return 0
    return sum(len(p.chunk) if isinstance(p.chunk, (bytes, bytearray, memoryview)) else p.chunk.length
               for t in answer.topics for p in t.partitions if p.chunk is not None)


def _encoded(request) -> bytes:
    """A request's frame as a client sends it (`cluster/handover.py`)."""
    return TankClientConnection().send(request)


class TankSession(Session):
    def __init__(self, conn, codec, protocol: TankProtocol) -> None:
        super().__init__(conn, codec)
        self.handler = protocol.handler
        self.authz = protocol.authz
        self.quota = ConnectionQuota(protocol.ctx.security.quotas, conn)
        conn.principal = conn.principal or protocol.config.listeners[protocol.name].principal

    def greeting(self) -> list:
        return [PingEvent()]  # TankGo and the Java client wait for it

    def handover_state(self) -> dict:
        return {"principal": self.conn.principal}

    def resume(self, state: dict) -> None:
        if isinstance(state.get("principal"), str) and state["principal"]:
            self.conn.principal = state["principal"]

    async def handle(self, event):
        if isinstance(event, PingEvent):
            return None  # a client's keep-alive: nothing to answer
        served, refused = self.authz.split(event, self.conn)
        if served is None:
            return refused
        quota = self.quota
        if not quota.quotas.active:  # (no quota set: nothing to measure)
            reply = await self._serve(served)
            if refused is None:
                return self.authz.visible(reply, self.conn)
            return await self._with_refused(event, reply, refused)
        await quota.wait()
        started = perf_counter()
        reply = await self._serve(served)
        if refused is None:
            reply = self.authz.visible(reply, self.conn)
        else:
            reply = await self._with_refused(event, reply, refused)
        produced = sum(len(e.bundle) for e in served.entries) if type(served) is ProduceRequest else 0
        if type(reply) is HandOver:  # (answered by another worker, whose quotas it is charged to)
            return reply
        return await quota.answered(reply, perf_counter() - started, produced, _consumed)

    async def _with_refused(self, event, reply, refused):
        """`reply` to the served part of `event` (an answer, one that comes later or a `HandOver`), with the refused
        part's answer merged in."""
        if type(reply) is HandOver:  # (the refused part stays here: relayed, not handed over)
            reply = await reply.relay()
        return then(reply, partial(self.authz.merge, event, refused=refused))

    async def _serve(self, event):
        if isinstance(event, ConsumeRequest):
            await self.handler.known((t.name, p.partition) for t in event.topics for p in t.partitions)
            own, theirs = self.handler.split(event)
            if theirs:  # (workers: N) other workers' partitions in it
                relay = partial(self.handler.consume_relayed, event, own, theirs)
                if own is None and len(theirs) == 1:  # wholly another worker's: it may take the connection
                    return HandOver(next(iter(theirs)), event, relay)
                return await relay()
            response = await self.handler.consume_now(event)
            if response is not None:
                return response
            watched = self.handler.park(event)  # in the same step as the EOF check: no append is missed
            return self.handler.poll(event, watched)
        return await self.handler.handle(event)
