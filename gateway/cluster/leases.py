"""Gateways on several hosts over one PostgreSQL database (`storage.postgres.cluster`): the membership source of
leases in that database — each live gateway a member, Kafka node `member_id` — and the ownership it implies.

The database keeps the members, their leases and the slots each holds (`logway.storage.pg.leases`); the engine
(`PgEngine.tick`) renews the lease, takes or gives back slots and opens or lets go of their partitions. This module
runs that tick every third of `storage.postgres.lease_ms`, catches up with the topics the other gateways changed,
and answers the cluster seam's questions from what the last tick saw:

- a partition's leader is the member holding its slot (`slot_of`: the workers' rule over `SLOTS` slots), -1 while
  none does (a dead member's slots before its lease passed, or a moment during a hand-over);
- the group and transaction coordinator and the controller is the member holding slot 0 (it writes the committed
  offsets and the coordinators' and security's states: one writer, fenced like a partition's);
- Kafka clients see the live members as brokers and follow the leaders (NOT_LEADER_OR_FOLLOWER elsewhere).

Native and TANK clients may connect to any member: a request for another member's partitions is relayed to it over
its TCP relay socket (`storage.postgres.relay_host`, `relay_port`; `relays.py`: each connection opens with the
cluster's secret, kept in the database), where a long-poll parks until an append there wakes it; requests on
committed offsets and groups go to the coordinator. Connections are not handed over between hosts. Transactions
work as across workers (`txn_peers.py`: the coordinator ends a transaction in each leader's partitions over their
relays); a member that becomes the coordinator takes the states over from the store (`on_coordinating`).
"""

from __future__ import annotations

import logging

import trio

from logway.storage import StorageError
from logway.storage.engine import ForeignPartition
from logway.storage.pg.leases import SLOTS, Leases, View

from .membership import Member, Membership
from .ownership import partition_leader

__all__ = ["LeaseMembership", "SlotOwnership", "slot_of"]

log = logging.getLogger("logway.cluster")


def slot_of(topic: str, partition: int) -> int:
    """The slot of a partition: the workers' ownership rule over `SLOTS` members."""
    return partition_leader(topic, partition, SLOTS)


class SlotOwnership:
    """Who owns what, as member `me` saw the slots' holders (`holders[slot]`: a member id, or -1) at its last tick."""

    __slots__ = ("me", "holders")

    def __init__(self, me: int, holders: tuple[int, ...]) -> None:
        self.me, self.holders = me, holders

    def leader(self, topic: str, partition: int) -> int:
        return self.holders[slot_of(topic, partition)] if self.holders else -1

    def leads(self, topic: str, partition: int) -> bool:
        return self.leader(topic, partition) == self.me

    def coordinator(self, key: str | None = None) -> int:
        return self.holders[0] if self.holders else -1

    @property
    def controller(self) -> int:
        return self.coordinator()

    @property
    def is_coordinator(self) -> bool:
        return self.coordinator() == self.me


class LeaseMembership(Membership):
    """This gateway as a member of the database's cluster (see the module docstring); `lease_ms` from
    `storage.postgres.lease_ms`. The engine is opened with `leases` (which gives this member its id)."""

    hands_over = False  # (a connection is a descriptor: it cannot be given to another host)
    dynamic = True

    def __init__(self, lease_ms: int, cluster_name: str = "") -> None:
        super().__init__()
        self.name = "cluster member"
        self.lease_ms = lease_ms
        self.leases = Leases(slot_of, lease_ms, cluster_name)
        self.view: View | None = None
        self._ownership = SlotOwnership(-1, ())
        self._ticked = trio.Event()  # set (and replaced) after every tick

    @property
    def me(self) -> int:
        return -1 if self.leases.member_id is None else self.leases.member_id

    @property
    def count(self) -> int:
        return len(self.view.members) if self.view is not None else 1

    @property
    def ownership(self) -> SlotOwnership:
        return self._ownership

    @property
    def relay_secret(self) -> str | None:
        return self.leases.secret

    def relaying_at(self, host: str, port: int) -> None:
        self.leases.addresses["relay"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def members(self) -> list[Member]:
        if self.view is None:
            return []
        return [Member(p.member_id, kafka=_address(p.addresses.get("kafka")), native_relay=p.addresses.get("relay"),
                       tank_relay=p.addresses.get("relay")) for p in self.view.members]

    def addresses(self, kind: str) -> list[str | None]:
        """Every live member's socket of `kind` by member id (None for ids no live member has)."""
        members = self.members()
        out: list[str | None] = [None] * (max((m.id for m in members), default=-1) + 1)
        for m in members:
            out[m.id] = getattr(m, kind)
        return out

    # -- the gateway's life --------------------------------------------------------------------------------------
    async def join(self, gateway) -> None:
        """Tell the others what this gateway listens on, and take its first share of the slots."""
        kafka = gateway.protocols.get("kafka")
        if kafka is not None:
            host, port = kafka.broker.advertised
            self.leases.addresses["kafka"] = f"{host}:{port}"
        await self.tick(gateway)

    async def run(self, gateway) -> None:
        """Every third of the lease: renew it, balance the slots, catch up with the topics and the security store
        the others changed."""
        while True:
            await trio.sleep(self.lease_ms / 3000)
            await self.tick(gateway)
            await self.refresh(gateway.engine, max_age=0)
            try:
                if await trio.to_thread.run_sync(gateway.engine.security.reload):
                    gateway.security.authorizer.reload()
            except (StorageError, OSError) as exc:
                log.warning("cluster: cannot read the security store again: %s", exc)

    async def tick(self, gateway) -> None:
        try:
            view = await trio.to_thread.run_sync(gateway.engine.tick)
        except (StorageError, OSError) as exc:
            log.warning("cluster: cannot renew this gateway's lease (%s): trying again in %.1f s", exc,
                        self.lease_ms / 3000)
            return
        before = self._ownership
        self.view = view
        self._ownership = SlotOwnership(view.me, view.holders)
        self._ticked.set()
        self._ticked = trio.Event()
        if self._ownership.is_coordinator and not before.is_coordinator:
            for callback in self.on_coordinating:
                callback()
        if before.holders != view.holders:
            mine = sum(1 for h in view.holders if h == view.me)
            log.info("cluster: member %d of %d live (%s); it leads %d of %d slots", view.me, len(view.members),
                     ", ".join(str(p.member_id) for p in view.members), mine, SLOTS)

    # -- the catalog ---------------------------------------------------------------------------------------------
    async def look_up_unknown(self, engine, names) -> None:
        """As any source's; then, while a named partition has no live leader (its slot between a member that gave
        it back or died and the one taking it), wait for the next ticks — at most a lease and a half — so that the
        request goes to the new leader instead of failing."""
        names = list(names)
        await super().look_up_unknown(engine, names)
        with trio.move_on_after(self.lease_ms * 1.5 / 1000):
            while _leaderless(engine, names):
                await self._ticked.wait()


def _leaderless(engine, names) -> bool:
    """Whether a partition of `names` ((topic, partition) pairs, partition None: every one of the topic) is another
    member's with no live leader now."""
    topics = engine.topics_by_name
    for name, partition in names:
        topic = topics.get(name)
        if topic is None:
            continue
        parts = topic.partitions
        numbers = range(len(parts)) if partition is None else (partition,) if 0 <= partition < len(parts) else ()
        if any(type(parts[p]) is ForeignPartition and parts[p].owner < 0 for p in numbers):
            return True
    return False


def _address(text: str | None) -> tuple[str, int] | None:
    if not text:
        return None
    host, _, port = text.rpartition(":")
    return host, int(port)
