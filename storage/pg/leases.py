"""Several gateways over one database (`storage.postgres.cluster`): their leases, and the slots that decide which of
them writes each partition — the database's side of the gateways' cluster membership (`logway.gateway.cluster.leases`
is the gateway's).

- **Members.** A gateway in cluster mode has a row of `members`: its member id (the lowest free one: Kafka's node
  id), its writer id (its row of `writers`), what it listens on (`addresses`: what the others tell clients), and a
  lease (`lease_until`, the database's clock), renewed every tick. A member whose lease passed is dead to the
  others; its row goes `GONE_AFTER` leases later.
- **Slots.** Partition p of topic t belongs to slot `slot_of(t, p)` (one of `SLOTS`, a function the gateway gives:
  the ownership rule stays the gateway's); each slot has a holder (a writer id, or none) and an epoch. The holder
  of a slot is the only writer of its partitions; the holder of slot 0 also writes the committed offsets and the
  coordinators' states. Every tick a member takes the slots that are its own among the live members (slot s is
  the (s mod n)-th live member's, by member id: consecutive slots on different members) — claiming them when free
  (no holder, or a holder whose lease passed: the epoch moves on) — and gives back those that are another's now
  (after committing what it had pending of them), so a new member gets its share from the others within a tick or
  two, and a dead one's slots are taken once its lease passed.
- **Fencing.** Every commit (`PgEngine._write`) first touches the rows of the slots it writes, checking this member
  still holds them at the epoch it claimed them with (`fence`) — for a partition's rows, the epoch its log was
  opened under: a member that lost a slot — its lease passed while it was cut off, and another took the slot —
  cannot commit a row of its partitions any more, not even after taking the slot back (a new epoch, a new log);
  the row lock makes a claim wait for a commit under way, so the new holder reads the partition's end only after
  the old holder's last commit.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

import psycopg
from psycopg.types.json import Jsonb

from ..errors import DatabaseInUse

__all__ = ["GONE_AFTER", "Leases", "Peer", "SLOTS", "View", "target"]

log = logging.getLogger("logway.storage.pg")

#: How many slots the partitions are spread over (the most members that can hold a share; schema version 2).
SLOTS = 64
#: A member whose lease passed this many leases ago (and at least `GONE_AFTER_MIN_MS`) loses its row (its member id
#: can be taken again).
GONE_AFTER = 10
GONE_AFTER_MIN_MS = 60_000

_LIVE = "lease_until > clock_timestamp()"


@dataclass(frozen=True, slots=True)
class Peer:
    """A live member: its id, its writer id and its addresses (listener or relay name → "host:port")."""

    member_id: int
    writer_id: uuid.UUID
    addresses: dict = field(hash=False)


@dataclass(frozen=True, slots=True)
class View:
    """What one tick saw: this member's id, the live members by id, and each slot's live holder (a member id, or -1:
    none yet)."""

    me: int
    members: tuple[Peer, ...]
    holders: tuple[int, ...]


def target(slot: int, members: list[int]) -> int:
    """The member that should hold `slot` among the live `members` (their ids, in order): every n-th slot, so
    consecutive slots — a topic's consecutive partitions — go to different members."""
    return members[slot % len(members)]


class Leases:
    """This gateway's member row and slots (see the module docstring). `slot_of(topic, partition)` is the slot of a
    partition; `lease_ms` how long a lease lasts without a renewal."""

    def __init__(self, slot_of: Callable[[str, int], int], lease_ms: int, cluster_name: str = "") -> None:
        """`cluster_name`: this gateway's cluster; a database another cluster's gateways use is refused ("": any)."""
        self.slot_of = slot_of
        self.lease_ms = lease_ms
        self.cluster_name = cluster_name
        self.member_id: int | None = None
        self.writer_id: uuid.UUID | None = None
        #: The slots this member holds, with the epoch it claimed each with (what its commits are fenced by).
        self.epochs: dict[int, int] = {}
        self.addresses: dict[str, str] = {}
        #: The cluster's secret (64 hex digits, in `meta`, made by its first member): what the members show each
        #: other on their relay connections — only who can read the database knows it.
        self.secret: str | None = None

    # -- joining and leaving ---------------------------------------------------------------------------------
    def join(self, conn: psycopg.Connection, writer_id: uuid.UUID, started_ms: int, where: str = "") -> int:
        """Add this gateway's row of `members` (in the caller's transaction); its member id. DatabaseInUse when the
        database (`where`) belongs to another cluster than `cluster_name` (the first named gateway names it)."""
        if self.cluster_name:
            conn.execute("INSERT INTO meta (key, value) VALUES ('cluster_name', %s) ON CONFLICT (key) DO NOTHING",
                         (self.cluster_name,))
            theirs = conn.execute("SELECT value FROM meta WHERE key = 'cluster_name'").fetchone()[0]
            if theirs != self.cluster_name:
                raise DatabaseInUse(f"database {where} belongs to logway cluster {theirs!r}, and this gateway is "
                                    f"configured for cluster {self.cluster_name!r} (storage.postgres.cluster_name): "
                                    f"give it its own database or schema (storage.postgres.schema)")
        gone_ms = max(GONE_AFTER * self.lease_ms, GONE_AFTER_MIN_MS)
        conn.execute("DELETE FROM writers w USING members m WHERE m.writer_id = w.writer_id AND m.lease_until < "
                     "clock_timestamp() - make_interval(secs => %s)", (gone_ms / 1000,))
        conn.execute("DELETE FROM members WHERE lease_until < clock_timestamp() - make_interval(secs => %s)",
                     (gone_ms / 1000,))
        conn.execute("LOCK TABLE members IN SHARE ROW EXCLUSIVE MODE")  # (two members joining at once)
        taken = {row[0] for row in conn.execute("SELECT member_id FROM members")}
        member_id = next(i for i in range(len(taken) + 1) if i not in taken)
        conn.execute("INSERT INTO members (member_id, writer_id, host, pid, addresses, started_ms, lease_until) "
                     "VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp() + make_interval(secs => %s))",
                     (member_id, writer_id, socket.gethostname(), os.getpid(), Jsonb(self.addresses), started_ms,
                      self.lease_ms / 1000))
        conn.execute("INSERT INTO meta (key, value) VALUES ('cluster_secret', %s) ON CONFLICT (key) DO NOTHING",
                     (secrets.token_hex(32),))
        self.secret = conn.execute("SELECT value FROM meta WHERE key = 'cluster_secret'").fetchone()[0]
        self.member_id, self.writer_id = member_id, writer_id
        return member_id

    def leave(self, conn: psycopg.Connection) -> None:
        """Give every slot back and remove this member's row (its commits are done)."""
        with conn.transaction():
            conn.execute("UPDATE slots SET holder = NULL WHERE holder = %s", (self.writer_id,))
            conn.execute("DELETE FROM members WHERE writer_id = %s", (self.writer_id,))
        self.epochs = {}

    # -- every tick ------------------------------------------------------------------------------------------
    def renew(self, conn: psycopg.Connection) -> tuple[View, set[int], set[int]]:
        """Renew the lease and look at the slots: (the view, the slots to take — free now, within this member's
        share —, the slots to give back — beyond it). Slots this member held and lost (another took them) leave
        `epochs` at once. One transaction."""
        with conn.transaction():
            row = conn.execute("UPDATE members SET lease_until = clock_timestamp() + make_interval(secs => %s), "
                               "addresses = %s WHERE writer_id = %s RETURNING member_id",
                               (self.lease_ms / 1000, Jsonb(self.addresses), self.writer_id)).fetchone()
            if row is None:  # gone for long (the others removed the row): join again, as a new member
                log.warning("cluster: this gateway's membership had lapsed for long: joining again")
                self.join(conn, self.writer_id, 0)
            live = [Peer(m, w, a) for m, w, a in conn.execute(
                f"SELECT member_id, writer_id, addresses FROM members WHERE {_LIVE} ORDER BY member_id")]
            slots = conn.execute("SELECT slot, holder, epoch FROM slots ORDER BY slot").fetchall()
        by_writer = {p.writer_id: p.member_id for p in live}
        holders = tuple(by_writer.get(holder, -1) for _, holder, _ in slots)
        lost = [slot for slot, holder, epoch in slots
                if slot in self.epochs and (holder != self.writer_id or epoch != self.epochs[slot])]
        if lost:
            log.warning("cluster: %d slot(s) taken over by another member (%s): their partitions are not ours now",
                        len(lost), ", ".join(map(str, lost)))
            for slot in lost:
                del self.epochs[slot]
        ids = [p.member_id for p in live] or [self.member_id]
        give = {slot for slot in self.epochs if target(slot, ids) != self.member_id}
        take = {slot for slot, holder, _ in slots
                if (holder is None or holder not in by_writer) and target(slot, ids) == self.member_id}
        return View(self.member_id, tuple(live), holders), take, give

    def claim(self, conn: psycopg.Connection, slots: Iterable[int]) -> dict[int, int]:
        """Take the slots that are still free (slot → its new epoch); one transaction."""
        with conn.transaction():
            got = conn.execute(
                f"UPDATE slots SET holder = %s, epoch = epoch + 1 WHERE slot = ANY(%s) AND (holder IS NULL OR holder "
                f"NOT IN (SELECT writer_id FROM members WHERE {_LIVE})) RETURNING slot, epoch",
                (self.writer_id, sorted(slots))).fetchall()
        return dict(got)

    def give_back(self, conn: psycopg.Connection, slots: Iterable[int]) -> None:
        slots = sorted(slots)
        with conn.transaction():
            conn.execute("UPDATE slots SET holder = NULL WHERE slot = ANY(%s) AND holder = %s",
                         (slots, self.writer_id))
        for slot in slots:
            self.epochs.pop(slot, None)

    def fence(self, cur: psycopg.Cursor, claims: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Of `claims` — (slot, the epoch a write was prepared under) —, those this member still holds at that epoch,
        their rows locked until the caller's transaction ends (see the module docstring); an epoch None is not
        held."""
        mine = sorted({(slot, epoch) for slot, epoch in claims if epoch is not None})
        if not mine:
            return set()
        cur.execute("UPDATE slots s SET epoch = s.epoch FROM unnest(%s::int4[], %s::int8[]) AS f(slot, epoch) "
                    "WHERE s.slot = f.slot AND s.epoch = f.epoch AND s.holder = %s RETURNING s.slot, s.epoch",
                    ([s for s, _ in mine], [e for _, e in mine], self.writer_id))
        return {(slot, epoch) for slot, epoch in cur.fetchall()}
