"""Membership: who the members of the cluster are, how to reach each, and how this one learns what the others changed
in the shared catalog of topics — the one thing the rest of the cluster seam (`ownership.py`, `seam.py`) reads.

A membership source subclasses `Membership`. Today's is the supervisor's workers (`workers.WorkerRole`: members
0..N-1 of one host, told by the supervisor over a control socket); a second source — leases in a shared database,
each live gateway a member (issue 36) — is another subclass: it keeps `members()` current, catches up with the
catalog (`look_up`, `refresh`) and calls `on_topic_gone`; ownership, routing and the protocols do not change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

import trio

from logway.storage import StorageError

from .ownership import Ownership

log = logging.getLogger("logway.cluster")

__all__ = ["Member", "Membership", "REFRESH_MIN"]

#: An on-demand look at every topic happens at most every REFRESH_MIN seconds (besides being told of each change,
#: and a look every `worker_refresh_ms`).
REFRESH_MIN = 0.05


@dataclass(frozen=True, slots=True)
class Member:
    """One member: its id (Kafka's node id), its Kafka listener's advertised address, and the sockets where the
    others relay native and TANK requests to it and hand it connections (None where it has none)."""

    id: int
    kafka: tuple[str, int] | None = None
    native_relay: str | None = None
    tank_relay: str | None = None
    handover: str | None = None


class Membership:
    """A source of members (see the module docstring). `me` is this member's id, `count` how many members the
    ownership spreads partitions over. The gateway runs it (`join` once its listeners are bound, `run` for its life);
    a source over local processes may also hand storage a directory `share` and listening sockets (`entries`,
    `relay_fds`: listener name -> file descriptor)."""

    me: int
    count: int
    #: Whether connections can be handed over to other members (a Unix-domain socket: members of one host).
    hands_over = True
    #: Whether members come and go while this one runs (leases: yes; the workers: a fixed count).
    dynamic = False
    #: Members on several hosts relay over TCP, showing each other this secret (None: the workers' Unix sockets).
    relay_secret: str | None = None
    _ownership: Ownership | None = None
    share = None
    entries: dict[str, int] = {}
    relay_fds: dict[str, int] = {}

    #: How this member is named in the log ("worker 1", "member 3").
    name = "member"

    def __init__(self) -> None:
        self._refreshed_at = -float("inf")
        self._refreshing: trio.Event | None = None
        #: Called with the name of each topic another member deleted (the Kafka producers' state forgets it).
        self.on_topic_gone: list[Callable[[str], None]] = []
        #: Called when this member becomes the coordinator (a source whose coordinator can move: the transaction
        #: coordinator takes the states over).
        self.on_coordinating: list[Callable[[], None]] = []

    @property
    def ownership(self) -> Ownership:
        """Who owns what (made once: `me` and `count` do not change for this source)."""
        if self._ownership is None:
            self._ownership = Ownership(self.me, self.count)
        return self._ownership

    async def join(self, gateway) -> None:
        """Learn the other members, once this gateway's listeners are bound (its addresses are known)."""

    async def run(self, gateway) -> None:
        """Background work for the gateway's life (keeping the membership current)."""

    def relaying_at(self, host: str, port: int) -> None:
        """(`relay_secret` set) This member's TCP relay socket is bound there: tell the others."""

    def members(self) -> list[Member]:
        """Every member by id (only this one, or none, until the others are known)."""
        raise NotImplementedError

    def addresses(self, kind: str) -> list[str | None]:
        """Every member's socket of `kind` ("native_relay", "tank_relay", "handover") by id."""
        return [getattr(member, kind) for member in self.members()]

    async def look_up(self, engine, names: Iterable[str]) -> None:
        """Read the named topics of the shared catalog again now (a request named them and this member does not know
        them, or not all their partitions), whatever the last refresh saw: one another member created or grew a
        moment ago is found even if a refresh ran since (or is running, having listed the topics before)."""
        names = list(names)
        try:
            gone = await trio.to_thread.run_sync(engine.refresh, names)
        except (StorageError, OSError) as exc:
            log.warning("%s: cannot read topics %s of the shared catalog: %s", self.name, names, exc)
            return
        self.topics_gone(gone)

    async def refresh(self, engine, max_age: float = REFRESH_MIN) -> None:
        """Catch up with every topic the others changed (the engine's `refresh`, in a thread), unless done less than
        `max_age` seconds ago; concurrent callers share one refresh."""
        if self._refreshing is not None:
            await self._refreshing.wait()
            return
        if trio.current_time() - self._refreshed_at < max_age:
            return
        self._refreshing = done = trio.Event()
        try:
            gone = await trio.to_thread.run_sync(engine.refresh)
        except (StorageError, OSError) as exc:
            log.warning("%s: cannot read the shared catalog of topics: %s", self.name, exc)
            gone = []
        finally:
            self._refreshed_at = trio.current_time()
            self._refreshing = None
            done.set()
        self.topics_gone(gone)

    async def look_up_unknown(self, engine, names) -> None:
        """`look_up` the topics of `names` — the (topic, partition) pairs a request names, partition None for a
        topic alone — that this member does not know, or not that partition of."""
        topics = engine.topics_by_name
        unknown = {t for t, p in names if t not in topics or p is not None and not 0 <= p < len(topics[t].partitions)}
        if unknown:
            await self.look_up(engine, unknown)

    def topics_gone(self, gone: Iterable[str]) -> None:
        for name in gone:
            log.info("%s: topic %s was deleted by another member", self.name, name)
            for callback in self.on_topic_gone:
                callback(name)
