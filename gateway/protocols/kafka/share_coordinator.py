"""Share groups (KIP-932, queues for Kafka): membership and assignment (ShareGroupHeartbeat), share sessions, and
each share-partition's records in flight (`share_partitions`), made durable in the engine's share-state store.

- **Membership**: a member joins with epoch 0 (its own member id), heartbeats every
  `kafka.group_share_heartbeat_interval_ms`, leaves with -1, and is removed after
  `kafka.group_share_session_timeout_ms` of silence. A new group epoch (a member joins or leaves, a subscription
  or a subscribed topic changes) computes the target assignment at once, and each member takes its target at its
  next heartbeat — nothing to revoke first: several members may share a partition, records (not partitions) are
  what is handed out. The assignment (Kafka's "simple" assignor): per topic, its partitions spread over the
  members subscribed to it, and when they outnumber the partitions, each member given one (a partition then
  shared). States: Empty, Stable.
- **Share sessions**: a member's ShareFetch with session epoch 0 opens (or replaces) its session on this broker,
  naming partitions; each later ShareFetch or ShareAcknowledge brings the next epoch (INVALID_SHARE_SESSION_EPOCH
  otherwise, SHARE_SESSION_NOT_FOUND without a session) and may add or forget partitions; -1 closes it, releasing
  what the member held. At most `MAX_SHARE_SESSIONS` sessions (SHARE_SESSION_LIMIT_REACHED).
- **Share-partitions** (a group's view of a topic partition) start where the group's `share.auto.offset.reset`
  says (`latest`, Kafka's default, or `earliest`; a group config, `kafka.share_auto_offset_reset` by default).
  Records are acquired under locks of `share.record.lock.duration.ms` (group config; default
  `kafka.group_share_record_lock_duration_ms`), at most `kafka.group_share_partition_max_record_locks` at once
  per share-partition, delivered at most `kafka.group_share_delivery_count_limit` times.
- **Durability**: every change of a share-partition is written to the store before the request that made it is
  answered; acknowledgements are synced (an acknowledged record is never delivered again, whatever happens),
  acquisitions are written but not synced (a kill keeps them: delivery counts survive; a power cut may lose the
  count of a delivery, never an acknowledgement). Acquired records are saved as available: after a restart they are
  delivered again, their locks having died with the process. State is loaded when a share-partition is first used.
  Store keys: "p\\0<group>\\0<topic id hex>\\0<partition>" (a topic made again under the same name is another topic)
  and "g\\0<group>" (the group's configuration).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import trio

from logway.codecs.kafka.error_codes import ErrorCode as E

from ...steps import Marks
from .consumer_coordinator import GroupError
from .coordinator import Timers
from .group_types import SHARE, GroupView, MemberView, partitions_by_name
from .share_partitions import SharePartition

log = logging.getLogger("logway.gateway.kafka.groups")

__all__ = ["ShareCoordinator", "ShareGroup", "ShareMember", "ShareSession", "GROUP_CONFIGS", "MAX_SHARE_SESSIONS"]

#: Share sessions this broker holds at most (Kafka's group.share.max.share.sessions default): each names partitions.
MAX_SHARE_SESSIONS = 2000
#: Most members of one share group (Kafka's group.share.max.size default).
MAX_GROUP_SIZE = 200
#: A share-partition's window: records from its start offset to its end offset at most (what its in-flight state
#: holds in memory and in its stored state; a record stuck unacknowledged holds the start back until it is archived).
MAX_IN_FLIGHT = 20_000
#: The group configs share groups have (IncrementalAlterConfigs on a GROUP resource) and what they accept.
GROUP_CONFIGS = {"share.auto.offset.reset": ("latest", "earliest"), "share.record.lock.duration.ms": None}
#: Bounds of share.record.lock.duration.ms (Kafka's group.share.min/max.record.lock.duration.ms).
MIN_LOCK_MS, MAX_LOCK_MS = 1000, 3_600_000

Partitions = dict[uuid.UUID, set[int]]


@dataclass(eq=False, slots=True)
class ShareMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed: list[str] = field(default_factory=list)
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Partitions = field(default_factory=dict)


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Partitions] = {}
        self.subscribed: dict[str, tuple[uuid.UUID, int]] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(eq=False, slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must bring
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


def assign(members: dict[str, set[str]], topics: dict[str, tuple[uuid.UUID, int]]) -> dict[str, Partitions]:
    """Kafka's simple share assignor: per topic, its partitions over the members subscribed to it (round robin in
    member-id order), each member one partition when they outnumber the partitions."""
    out: dict[str, Partitions] = {m: {} for m in members}
    for name in sorted(topics):
        topic_id, count = topics[name]
        subscribed = sorted(m for m, names in members.items() if name in names)
        if not subscribed or not count:
            continue
        if len(subscribed) <= count:
            for p in range(count):
                out[subscribed[p % len(subscribed)]].setdefault(topic_id, set()).add(p)
        else:
            for i, member in enumerate(subscribed):
                out[member].setdefault(topic_id, set()).add(i % count)
    return out


class ShareCoordinator:
    """Every share group of this broker. `topics()` is the topics now (name -> (id, partitions)); `store` the
    engine's share-state store (blocking: `in_thread` runs its calls)."""

    def __init__(self, topics: Callable[[], dict[str, tuple[uuid.UUID, int]]], store,
                 in_thread: Callable, *, session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 5_000,
                 lock_duration_ms: int = 30_000, delivery_count_limit: int = 5, max_record_locks: int = 2000,
                 auto_offset_reset: str = "latest", clock: Callable[[], float] = trio.current_time) -> None:
        self.topics = topics
        self.store = store
        self.in_thread = in_thread
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.auto_offset_reset = auto_offset_reset
        self._clock = clock
        self.groups: dict[str, ShareGroup] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._locks: dict[tuple[str, uuid.UUID, int], trio.Lock] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self._deadlines = Timers(clock)
        self.closed = False
        for key, state in store.items():
            if key.startswith("g\0"):
                self.configs[key[2:]] = dict(state)

    # -- the directory's questions (group_types) ---------------------------------------------------------------
    def summaries(self) -> list[tuple[str, str, str]]:
        return [(g.group_id, "share", g.state) for g in self.groups.values()]

    def holds(self, group_id: str) -> bool | None:
        group = self.groups.get(group_id)
        return None if group is None else bool(group.members)

    def views(self, wanted: set[str] | None) -> list[GroupView]:
        names = {tid: name for name, (tid, _) in self.topics().items()}
        return [GroupView(g.group_id, SHARE, "share", g.state, [
            MemberView(m.member_id, m.client_id, m.client_host, None, partitions_by_name(m.assigned, names))
            for m in g.members.values()]) for g in self.groups.values() if wanted is None or g.group_id in wanted]

    def forget_if_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return False
        self.groups.pop(group_id, None)
        return True

    # -- group configs -------------------------------------------------------------------------------------------
    def config(self, group_id: str) -> dict[str, Any]:
        """The group's share configs: its own, else the gateway's defaults."""
        own = self.configs.get(group_id, {})
        return {"share.auto.offset.reset": own.get("share.auto.offset.reset", self.auto_offset_reset),
                "share.record.lock.duration.ms": own.get("share.record.lock.duration.ms", self.lock_duration_ms)}

    async def set_config(self, group_id: str, values: dict[str, Any]) -> None:
        """Replace the group's own configs (durably); None values fall back to the defaults."""
        own = {k: v for k, v in values.items() if v is not None}
        await self.in_thread(self.store.put, f"g\0{group_id}", own or None)
        if own:
            self.configs[group_id] = own
        else:
            self.configs.pop(group_id, None)

    # -- ShareGroupHeartbeat -------------------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, epoch: int, *, rack_id: str | None,
                  subscribed_names: list[str] | None, client_id: str,
                  client_host: str) -> tuple[str, int, Partitions | None]:
        """(member id, epoch, the assignment when it changed or the member joins); raises GroupError. Releasing
        what a leaving member held is `leave`'s (async: it persists)."""
        if self.closed:
            raise GroupError(E.COORDINATOR_NOT_AVAILABLE, "the coordinator is shutting down")
        if not group_id:
            raise GroupError(E.INVALID_GROUP_ID, "GroupId can't be empty.")
        if not member_id:
            raise GroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch == 0 and not subscribed_names:
            raise GroupError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if epoch < 0:
            raise GroupError(E.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid.")
        group = self.groups.get(group_id)
        if group is None:
            if epoch != 0:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        bump = False
        if member is None:
            if epoch != 0:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= MAX_GROUP_SIZE:
                raise GroupError(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of "
                                                           f"{MAX_GROUP_SIZE} members.")
            member = group.members[member_id] = ShareMember(member_id)
            bump = True
        elif epoch > member.epoch or (epoch < member.epoch and epoch not in (0, member.previous_epoch)):
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"The share group member has epoch {epoch}, the group "
                                                    f"coordinator {member.epoch}. The member must rejoin.")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_names is not None and sorted(subscribed_names) != member.subscribed:
            member.subscribed, bump = sorted(subscribed_names), True
        topics = self.topics()
        subscribed = {n: topics[n] for n in sorted({n for m in group.members.values() for n in m.subscribed})
                      if n in topics}
        if subscribed != group.subscribed:
            group.subscribed, bump = subscribed, True
        if bump:
            group.epoch += 1
            log.info("share group %r: epoch %d (member %s)", group_id, group.epoch, member_id)
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        old = member.assigned
        target = group.target.get(member_id, {})
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        member.assigned = {t: set(ps) for t, ps in target.items()}
        self._deadlines.schedule(("session", group_id, member_id), self.session_timeout_ms / 1000)
        changed = epoch == 0 or member.assigned != old
        return member_id, member.epoch, dict(member.assigned) if changed else None

    def _assign(self, group: ShareGroup) -> None:
        group.target = assign({m.member_id: set(m.subscribed) for m in group.members.values()}, group.subscribed)
        group.assignment_epoch = group.epoch

    async def leave(self, group_id: str, member_id: str) -> None:
        """The member leaves (epoch -1, or its session expired): its sessions close, what it held is released."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if member_id not in group.members:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        del group.members[member_id]
        group.target.pop(member_id, None)
        self._deadlines.cancel(("session", group_id, member_id))
        group.epoch += 1
        self._assign(group)
        self.sessions.pop((group_id, member_id), None)
        await self.release_member(group_id, member_id)
        log.info("share group %r: member %s left", group_id, member_id)

    def is_member(self, group_id: str, member_id: str | None) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    # -- share sessions ------------------------------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a ShareFetch or ShareAcknowledge of this epoch belongs to: opened (replacing an older one)
        for epoch 0; raises GroupError (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
        SHARE_SESSION_LIMIT_REACHED). Epoch -1 (closing) answers the session as it is."""
        key = (group_id, member_id)
        current = self.sessions.get(key)
        if epoch == 0:
            if current is None and len(self.sessions) >= MAX_SHARE_SESSIONS:
                raise GroupError(E.SHARE_SESSION_LIMIT_REACHED, f"this broker holds {MAX_SHARE_SESSIONS} share "
                                                                f"sessions already")
            session = self.sessions[key] = ShareSession(group_id, member_id, 0)
            return session
        if current is None:
            raise GroupError(E.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        if epoch != -1 and epoch != current.epoch:
            raise GroupError(E.INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch}, expected {current.epoch}")
        return current

    def advance(self, session: ShareSession) -> None:
        """A request of the session succeeded: the next one brings the next epoch (after 2^31-1 comes 1)."""
        session.epoch = 1 if session.epoch >= 2**31 - 1 else session.epoch + 1

    async def close_session(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
        await self.release_member(session.group_id, session.member_id, session.partitions)

    # -- share-partitions ----------------------------------------------------------------------------------------
    def lock(self, group_id: str, topic_id: uuid.UUID, partition: int) -> trio.Lock:
        key = (group_id, topic_id, partition)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = trio.Lock()
        return lock

    async def partition(self, group_id: str, topic_id: uuid.UUID, partition: int, topic: str,
                        marks: Callable[[], Marks]) -> SharePartition:
        """The share-partition (held under `lock`): loaded from the store, or begun where the group's
        share.auto.offset.reset says; its start moved up to the log's start (`marks`: the log's positions now)."""
        key = (group_id, topic_id, partition)
        part = self.partitions.get(key)
        if part is None:
            stored = await self.in_thread(self.store.get, _key(*key))
            if stored is not None:
                try:
                    part = SharePartition.restore(stored, self.delivery_count_limit)
                except (KeyError, TypeError, ValueError) as exc:
                    log.error("share group %r: unreadable state of %s-%d (%s): starting over", group_id,
                              topic, partition, exc)
            if part is None:
                earliest = self.config(group_id)["share.auto.offset.reset"] == "earliest"
                now = marks()
                part = SharePartition(now.log_start if earliest else now.high_watermark,
                                      self.delivery_count_limit)
            self.partitions[key] = part
        part.move_start(marks().log_start)
        part.expire(self._clock())
        return part

    async def save(self, group_id: str, topic_id: uuid.UUID, partition: int, part: SharePartition, *,
                   sync: bool) -> None:
        """Write the share-partition's state (under its lock); `sync`: durable when this returns."""
        await self.in_thread(lambda: self.store.put(_key(group_id, topic_id, partition), part.snapshot(), sync=sync))

    def lock_deadline(self, group_id: str) -> float:
        return self._clock() + self.config(group_id)["share.record.lock.duration.ms"] / 1000

    def can_acquire(self, part: SharePartition) -> int:
        """How many more records the share-partition may hand out now (its record locks, its window)."""
        return max(0, min(self.max_record_locks - part.acquired, MAX_IN_FLIGHT - (part.end - part.start)))

    async def release_member(self, group_id: str, member_id: str,
                             only: set[tuple[uuid.UUID, int]] | None = None) -> None:
        """Release what the member holds in the group's share-partitions loaded here (or in `only` of them)."""
        for (group, topic_id, partition), part in list(self.partitions.items()):
            if group != group_id or (only is not None and (topic_id, partition) not in only):
                continue
            async with self.lock(group, topic_id, partition):
                if part.release_member(member_id):
                    await self.save(group, topic_id, partition, part, sync=False)

    def has_state(self, group_id: str) -> bool:
        """Whether the group has share-partition state or configs (in the store, or loaded)."""
        return group_id in self.configs or bool(self.stored_partitions(group_id))

    def stored_partitions(self, group_id: str) -> list[tuple[uuid.UUID, int]]:
        """The (topic id, partition)s the group has state for, in the store or loaded."""
        prefix = f"p\0{group_id}\0"
        keys = {(t, p) for (g, t, p) in self.partitions if g == group_id}
        for key, _ in self.store.items():
            if key.startswith(prefix):
                topic_hex, partition = key[len(prefix):].split("\0")
                keys.add((uuid.UUID(hex=topic_hex), int(partition)))
        return sorted(keys, key=lambda k: (k[0].bytes, k[1]))

    async def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The share-partition start offset (-1: the group never used it)."""
        part = self.partitions.get((group_id, topic_id, partition))
        if part is not None:
            return part.start
        stored = await self.in_thread(self.store.get, _key(group_id, topic_id, partition))
        return int(stored["start"]) if stored is not None else -1

    async def reset(self, group_id: str, topic_id: uuid.UUID, partition: int, start: int | None) -> None:
        """AlterShareGroupOffsets (start) / DeleteShareGroupOffsets (None): durably."""
        async with self.lock(group_id, topic_id, partition):
            key = (group_id, topic_id, partition)
            if start is None:
                self.partitions.pop(key, None)
                await self.in_thread(self.store.put, _key(*key), None)
                return
            part = self.partitions.get(key)
            if part is None:
                part = self.partitions[key] = SharePartition(start, self.delivery_count_limit)
            part.reset(start)
            await self.save(group_id, topic_id, partition, part, sync=True)

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group: its state and configs go."""
        for topic_id, partition in self.stored_partitions(group_id):
            await self.reset(group_id, topic_id, partition, None)
        if group_id in self.configs:
            await self.set_config(group_id, {})
        self.groups.pop(group_id, None)

    # -- timers --------------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Expire silent members until `close()`."""
        try:
            while not self.closed:
                await self._deadlines.sleep()
                while not self.closed:
                    key = self._deadlines.pop()
                    if key is None:
                        break
                    _, group_id, member_id = key
                    if self.is_member(group_id, member_id):
                        log.info("share group %r: member %s timed out: removed", group_id, member_id)
                        try:
                            await self.leave(group_id, member_id)
                        except Exception:  # a bug in one group must not take the gateway's nursery down
                            log.exception("share group %r: removing %s failed", group_id, member_id)
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._deadlines.clear()
        self._deadlines.wake()


def _key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"p\0{group_id}\0{topic_id.hex}\0{partition}"
