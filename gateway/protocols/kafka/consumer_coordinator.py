"""The coordinator of KIP-848 consumer groups (`group.protocol=consumer`): members send only heartbeats, the broker
assigns partitions (`assignors`) and reconciles each member towards its target one step at a time. Plain
arguments in, small results and Kafka error codes out; `consumer_groups` converts the wire types.

The model, as Kafka's `GroupMetadataManager` keeps it:

- The **group epoch** grows whenever what the assignment depends on changes: a member joins or leaves, changes
  its subscription (topic names or a regex) or its preferred server assignor, or a subscribed topic appears,
  disappears or gains partitions. A new group epoch computes a new **target assignment** at once (the assignment
  epoch catches up with the group epoch).
- Each member has a **member epoch** and its current assignment, and is reconciled towards its target when it
  heartbeats (Kafka's CurrentAssignmentBuilder): partitions it must give up are **revoked first** — it keeps its
  epoch and is sent its assignment without them (UNREVOKED_PARTITIONS) until a heartbeat no longer reports them
  owned; then it moves to the target epoch and is given its new partitions, except those another member has not
  released yet (UNRELEASED_PARTITIONS: given when they are free). Revocation is incremental: a member never stops
  consuming partitions it keeps.
- A heartbeat carries the member epoch: 0 joins (or rejoins after being fenced), -1 leaves, -2 leaves a static
  member's place for now. An epoch ahead of the coordinator's, or behind it other than the epoch just before with
  no partition it does not own (a lost answer), is FENCED_MEMBER_EPOCH: the member gives up its partitions and
  rejoins with 0.
- **Static membership** (`group.instance.id`): a member that leaves with -2 keeps its place and assignment until
  its session expires; a member joining with that instance id takes it over (with its partitions). Another member
  joining with an instance id in use gets UNRELEASED_INSTANCE_ID; an old member id with it FENCED_INSTANCE_ID.
- **Timeouts**: a member silent for the session timeout (`kafka.group_consumer_session_timeout_ms`) is removed;
  one that has not revoked its partitions within its rebalance timeout (the client's max.poll.interval.ms) too.
  Members are told to heartbeat every `kafka.group_consumer_heartbeat_interval_ms`.
- **State** (ConsumerGroupDescribe, ListGroups): Empty (no member), Assigning (a target is being computed:
  not observable here, computed at once), Reconciling (a member is not at the target epoch yet), Stable.

Committed offsets are the offset store's; OffsetCommit v9+ sends the member epoch where classic members send the
generation (`validate_commit`). Timers: one `run()` task over `coordinator.Timers`, as the classic coordinator.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

import trio

from logway.codecs.kafka.error_codes import ErrorCode as E

from .assignors import ASSIGNORS, Assignment
from .coordinator import Timers
from .group_types import CONSUMER, GroupView, MemberView, partitions_by_name

log = logging.getLogger("logway.gateway.kafka.groups")

__all__ = ["ConsumerCoordinator", "ConsumerGroup", "ConsumerMember", "MemberState", "HeartbeatResult",
           "GroupError", "JOIN_EPOCH", "LEAVE_EPOCH", "STATIC_LEAVE_EPOCH"]

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
#: Longest subscription regex accepted (a client's pattern is compiled once per change; bounded like any string).
MAX_REGEX_CHARS = 1024
#: Most members of one consumer group (Kafka's group.consumer.max.size default): the assignors' work grows with it.
MAX_GROUP_SIZE = 1000

#: topic id -> partitions
Partitions = dict[uuid.UUID, set[int]]


class MemberState(StrEnum):
    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"


class GroupError(Exception):
    """A heartbeat refused: the Kafka error code and a message for the client."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(eq=False, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: list[str] = field(default_factory=list)
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    epoch: int
    assignment: Partitions | None  # None: unchanged, not sent


def _copy(parts: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in parts.items() if ps}


def _flat(parts: Partitions) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in parts.items() for p in ps}


class ConsumerGroup:
    """One consumer group: members, epochs, the target assignment and who owns which partition now."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0  # the group epoch
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.target: Assignment = {}
        self.subscribed: dict[str, tuple[uuid.UUID, int]] = {}  # topic name -> (id, partitions), last computed
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> the member assigned it or revoking it
        self.assignor = ""

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values() if m.epoch != STATIC_LEAVE_EPOCH):
            return "Reconciling"
        return "Stable"

    def set_assignment(self, member: ConsumerMember, assigned: Partitions, pending: Partitions) -> None:
        for tp in _flat(member.assigned) | _flat(member.pending_revocation):
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]
        member.assigned, member.pending_revocation = _copy(assigned), _copy(pending)
        for tp in _flat(member.assigned) | _flat(member.pending_revocation):
            self.owners[tp] = member.member_id

    def remove(self, member: ConsumerMember) -> None:
        self.set_assignment(member, {}, {})
        self.members.pop(member.member_id, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == member.member_id:
            del self.static[member.instance_id]
        self.target.pop(member.member_id, None)


class ConsumerCoordinator:
    """Every consumer group of this broker. `topics()` gives the topics of the cluster now: name -> (id, partitions)
    (read at each heartbeat: a topic created, grown or deleted changes the assignment). All methods run in the
    gateway's event loop; `run()` fires the timers."""

    def __init__(self, topics: Callable[[], dict[str, tuple[uuid.UUID, int]]], *, session_timeout_ms: int = 45_000,
                 heartbeat_interval_ms: int = 5_000, assignors: tuple[str, ...] = ("uniform", "range"),
                 clock: Callable[[], float] = trio.current_time) -> None:
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if not assignors or unknown:
            raise ValueError(f"unknown assignor(s) {unknown} (known: {sorted(ASSIGNORS)})")
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignors = tuple(assignors)
        self._clock = clock
        self.groups: dict[str, ConsumerGroup] = {}
        self._deadlines = Timers(clock)
        self.closed = False
        self._regexes: dict[str, re.Pattern] = {}

    # -- the directory's questions (group_types) ------------------------------------------------------------
    def summaries(self) -> list[tuple[str, str, str]]:
        return [(g.group_id, "consumer", g.state) for g in self.groups.values()]

    def holds(self, group_id: str) -> bool | None:
        group = self.groups.get(group_id)
        return None if group is None else bool(group.members)

    def views(self, wanted: set[str] | None) -> list[GroupView]:
        names = {tid: name for name, (tid, _) in self.topics().items()}
        return [GroupView(g.group_id, CONSUMER, "consumer", g.state, [
            MemberView(m.member_id, m.client_id, m.client_host, m.instance_id, partitions_by_name(m.assigned, names))
            for m in g.members.values()]) for g in self.groups.values() if wanted is None or g.group_id in wanted]

    def forget_if_empty(self, group_id: str) -> bool:
        """Forget an empty group (another protocol takes the id over, or DeleteGroups); False if it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return True
        if group.members:
            return False
        del self.groups[group_id]
        return True

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, epoch: int, *, instance_id: str | None, rack_id: str | None,
                  rebalance_timeout_ms: int, subscribed_names: list[str] | None, subscribed_regex: str | None,
                  server_assignor: str | None, owned: Partitions | None, client_id: str,
                  client_host: str) -> HeartbeatResult:
        """One heartbeat; raises GroupError (see the module docstring for the rules)."""
        if self.closed:
            raise GroupError(E.COORDINATOR_NOT_AVAILABLE, "the coordinator is shutting down")
        if not group_id:
            raise GroupError(E.INVALID_GROUP_ID, "GroupId can't be empty.")
        if not member_id:
            raise GroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
        if server_assignor is not None and server_assignor not in self.assignors:
            raise GroupError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported. "
                                                     f"Supported assignors: {', '.join(self.assignors)}.")
        if subscribed_regex is not None:
            self._regex(subscribed_regex)  # refused now rather than at each assignment
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group_id, member_id, epoch, instance_id)
        if epoch == JOIN_EPOCH:
            if rebalance_timeout_ms <= 0:
                raise GroupError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if subscribed_names is None and subscribed_regex is None:
                raise GroupError(E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in "
                                                    "first request.")
            if owned:
                raise GroupError(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        elif epoch < 0:
            raise GroupError(E.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid.")
        group = self.groups.get(group_id)
        if group is None:
            if epoch != JOIN_EPOCH:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self.groups[group_id] = ConsumerGroup(group_id)
        member, bump = self._member(group, member_id, epoch, instance_id, owned)
        old_assigned = _copy(member.assigned)
        if bump and len(group.members) >= MAX_GROUP_SIZE:
            raise GroupError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                                                       f"{MAX_GROUP_SIZE} members.")
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member.member_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed_names is not None and sorted(subscribed_names) != member.subscribed_names:
            member.subscribed_names, bump = sorted(subscribed_names), True
        if subscribed_regex is not None and (subscribed_regex or None) != member.subscribed_regex:
            member.subscribed_regex, bump = subscribed_regex or None, True  # ("": no regex any more)
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor, bump = server_assignor, True
        member.client_id, member.client_host = client_id, client_host
        subscribed = self._subscribed_topics(group)
        if subscribed != group.subscribed:
            group.subscribed, bump = subscribed, True
        if bump:
            group.epoch += 1
            log.info("group %r: epoch %d (member %s: %d topic(s) subscribed)", group_id, group.epoch,
                     member.member_id, len(group.subscribed))
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        self._reconcile(group, member, owned)
        self._deadlines.schedule(("session", group_id, member.member_id), self.session_timeout_ms / 1000)
        full = epoch == JOIN_EPOCH or (rebalance_timeout_ms != -1 and subscribed_names is not None
                                       and owned is not None)
        send = full or _copy(member.assigned) != old_assigned
        return HeartbeatResult(member.member_id, member.epoch, _copy(member.assigned) if send else None)

    def _member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                owned: Partitions | None) -> tuple[ConsumerMember, bool]:
        """(the member this heartbeat is from, whether it is new to the group), after Kafka's checks. A member that
        rejoins with epoch 0 under its own id (after FENCED_MEMBER_EPOCH: it gave up its partitions) starts over
        from epoch 0, as a new member would."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if epoch != JOIN_EPOCH:
                    raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                          f"{group.group_id}.")
                return ConsumerMember(member_id), True
            if epoch == JOIN_EPOCH:
                self._restart(group, member)
            self._check_epoch(member, epoch, owned)
            return member, False
        current_id = group.static.get(instance_id)
        current = group.members.get(current_id) if current_id is not None else None
        if epoch == JOIN_EPOCH:
            if current is None:
                return ConsumerMember(member_id, instance_id=instance_id), True
            if current.member_id == member_id:
                self._restart(group, current)
                return current, False
            if current.epoch != STATIC_LEAVE_EPOCH:
                raise GroupError(E.UNRELEASED_INSTANCE_ID, f"Static member {current.member_id} with instance id "
                                                           f"{instance_id} is not released yet.")
            return self._replace(group, current, member_id), False
        if current is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if current.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                   f"was fenced by member {current.member_id}.")
        self._check_epoch(current, epoch, owned)
        return current, False

    def _restart(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.epoch, member.previous_epoch, member.state = JOIN_EPOCH, -1, MemberState.STABLE
        group.set_assignment(member, member.assigned, {})
        self._deadlines.cancel(("revocation", group.group_id, member.member_id))

    def _replace(self, group: ConsumerGroup, current: ConsumerMember, member_id: str) -> ConsumerMember:
        """A new incarnation of a static member that left for now takes its place: its subscription, assignment
        and target, under a new member id (no new group epoch: the group's membership did not change)."""
        assigned, target = _copy(current.assigned), group.target.get(current.member_id, {})
        group.remove(current)
        self._deadlines.cancel(("session", group.group_id, current.member_id))
        self._deadlines.cancel(("revocation", group.group_id, current.member_id))
        replacement = ConsumerMember(member_id, instance_id=current.instance_id, rack_id=current.rack_id,
                                     rebalance_timeout_ms=current.rebalance_timeout_ms,
                                     subscribed_names=current.subscribed_names,
                                     subscribed_regex=current.subscribed_regex,
                                     server_assignor=current.server_assignor)
        group.set_assignment(replacement, assigned, {})
        group.target[member_id] = target
        log.info("group %r: static member %s takes over instance %s from %s", group.group_id, member_id,
                 current.instance_id, current.member_id)
        return replacement

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Partitions | None) -> None:
        if epoch > member.epoch:
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({epoch}) "
                                                    f"than the one known by the group coordinator ({member.epoch}). "
                                                    "The member must abandon all its partitions and rejoin.")
        if epoch < member.epoch and (epoch != member.previous_epoch or owned is None
                                     or not _flat(owned) <= _flat(member.assigned)):
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                                    f"({epoch}) than the one known by the group coordinator "
                                                    f"({member.epoch}). The member must abandon all its partitions "
                                                    "and rejoin.")

    def _leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None) -> HeartbeatResult:
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            current_id = group.static.get(instance_id)
            member = group.members.get(current_id) if current_id is not None else None
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                       f"was fenced by member {member.member_id}.")
            if epoch == STATIC_LEAVE_EPOCH:  # keeps its place (and partitions) until its session expires
                group.set_assignment(member, member.assigned, {})
                member.epoch, member.state = STATIC_LEAVE_EPOCH, MemberState.STABLE
                self._deadlines.cancel(("revocation", group_id, member_id))
                log.info("group %r: static member %s (instance %s) left for now", group_id, member_id, instance_id)
                return HeartbeatResult(member_id, STATIC_LEAVE_EPOCH, None)
        log.info("group %r: member %s left", group_id, member_id)
        self._remove_member(group, member)
        return HeartbeatResult(member_id, LEAVE_EPOCH, None)

    # -- assignment and reconciliation ----------------------------------------------------------------------
    def _regex(self, pattern: str) -> re.Pattern:
        compiled = self._regexes.get(pattern)
        if compiled is None:
            if len(pattern) > MAX_REGEX_CHARS:
                raise GroupError(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is longer than "
                                                               f"{MAX_REGEX_CHARS} characters.")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise GroupError(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {pattern!r} is not a valid "
                                                               f"regular expression: {exc}.") from None
            if len(self._regexes) >= MAX_GROUP_SIZE:
                self._regexes.clear()
            self._regexes[pattern] = compiled
        return compiled

    def _member_topics(self, member: ConsumerMember, all_topics: dict) -> set[str]:
        names = {n for n in member.subscribed_names if n in all_topics}
        if member.subscribed_regex:
            pattern = self._regex(member.subscribed_regex)
            names.update(n for n in all_topics if pattern.fullmatch(n))  # (Kafka's RE2J patterns match whole)
        return names

    def _subscribed_topics(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        all_topics = self.topics()
        names: set[str] = set()
        for member in group.members.values():
            names |= self._member_topics(member, all_topics)
        return {n: all_topics[n] for n in sorted(names)}

    def _assign(self, group: ConsumerGroup) -> None:
        all_topics = self.topics()
        subscriptions = {m.member_id: self._member_topics(m, all_topics) for m in group.members.values()}
        preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
        # the most popular preference (ties: the configured order), else the first configured
        name = max(self.assignors, key=lambda a: (preferred.count(a), -self.assignors.index(a))) if preferred \
            else self.assignors[0]
        group.assignor = name
        group.target = ASSIGNORS[name](subscriptions, group.subscribed, group.target)
        group.assignment_epoch = group.epoch

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None) -> None:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target (module docstring)."""
        target_epoch = group.assignment_epoch
        if member.state is MemberState.STABLE:
            if member.epoch == target_epoch:
                return
            self._next(group, member, member.epoch, owned)
        elif member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _flat(owned) & _flat(member.pending_revocation):
                return  # still owns (or did not say) partitions it must revoke
            self._next(group, member, member.epoch + 1, owned)
        else:  # UNRELEASED_PARTITIONS: the partitions it waits for may be free now
            self._next(group, member, member.epoch, owned)

    def _next(self, group: ConsumerGroup, member: ConsumerMember, epoch: int, owned: Partitions | None) -> None:
        target = group.target.get(member.member_id, {})
        kept: Partitions = {}
        revoke: Partitions = {}
        assign: Partitions = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            want, have = target.get(topic_id, set()), member.assigned.get(topic_id, set())
            kept[topic_id] = have & want
            revoke[topic_id] = have - want
            free = set()
            for p in want - have:
                owner = group.owners.get((topic_id, p))
                if owner is None or owner == member.member_id:
                    free.add(p)
                else:
                    unreleased = True
            assign[topic_id] = free
        revoke, assign = _copy(revoke), _copy(assign)
        owns_revoked = owned is None or bool(_flat(owned) & _flat(revoke))
        previous = member.epoch
        if revoke and owns_revoked:
            group.set_assignment(member, kept, revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.epoch = epoch
            self._deadlines.schedule(("revocation", group.group_id, member.member_id),
                                     member.rebalance_timeout_ms / 1000)
        else:
            for topic_id, ps in assign.items():
                kept.setdefault(topic_id, set()).update(ps)
            group.set_assignment(member, kept, {})
            member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            member.epoch = group.assignment_epoch
            self._deadlines.cancel(("revocation", group.group_id, member.member_id))
        if member.epoch != previous:
            member.previous_epoch = previous

    def _remove_member(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        group.remove(member)
        self._deadlines.cancel(("session", group.group_id, member.member_id))
        self._deadlines.cancel(("revocation", group.group_id, member.member_id))
        group.subscribed = self._subscribed_topics(group)
        group.epoch += 1
        if group.members:
            self._assign(group)
        else:
            group.target, group.assignment_epoch = {}, group.epoch

    # -- offsets ---------------------------------------------------------------------------------------------
    def validate_commit(self, group_id: str, member_id: str, epoch: int, version: int) -> int:
        """May this OffsetCommit (or TxnOffsetCommit) be written? Epoch -1: a commit from outside the group, allowed
        while it has no members; else the member must exist and send its current epoch (OffsetCommit v9+)."""
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE if epoch < 0 else E.ILLEGAL_GENERATION
        if epoch < 0 and not group.members:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if version < 9:
            return E.UNSUPPORTED_VERSION  # (Kafka: members of the consumer protocol commit with v9+)
        if epoch > member.epoch:
            return E.FENCED_MEMBER_EPOCH
        if epoch < member.epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int:
        """OffsetFetch v9+ of a member (KIP-848): it must exist and send its current epoch."""
        if member_id is None and epoch < 0:
            return E.NONE
        group = self.groups.get(group_id)
        member = group.members.get(member_id or "") if group is not None else None
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE if epoch == member.epoch else E.STALE_MEMBER_EPOCH

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        """The topics the members of a group subscribe to (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC)."""
        group = self.groups.get(group_id)
        return frozenset(group.subscribed) if group is not None else frozenset()

    # -- timers ----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Fire session and revocation deadlines until `close()`."""
        try:
            while not self.closed:
                await self._deadlines.sleep()
                self._fire_due()
        finally:
            self.close()

    def _fire_due(self) -> None:
        while not self.closed:
            key = self._deadlines.pop()
            if key is None:
                return
            kind, group_id, member_id = key
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                continue
            if kind == "revocation" and member.state is not MemberState.UNREVOKED_PARTITIONS:
                continue
            try:
                log.info("group %r: member %s %s: removed", group_id, member_id,
                         "did not revoke its partitions in time" if kind == "revocation" else "timed out")
                self._remove_member(group, member)
            except Exception:  # a bug in one group must not take the gateway's nursery down
                log.exception("group %r: %s deadline failed", group_id, kind)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.groups.clear()
        self._deadlines.clear()
        self._deadlines.wake()
