"""The Kafka consumer-group coordinator: plain arguments in, small dataclasses and Kafka error codes (the codec's
one table) out. The group handlers (`groups.py`) convert wire types to these calls and the results back.

Behaviour follows Kafka's `GroupCoordinator` (the broker side of JoinGroup / SyncGroup / Heartbeat / LeaveGroup /
DescribeGroups / ListGroups, plus the member check of OffsetCommit):

- JoinGroup v4+ with an empty member id: the coordinator makes up `client_id-uuid4`, records it as *pending* and
  answers MEMBER_ID_REQUIRED at once; the client must re-join with that id within its session timeout. A pending
  id holds back the completion of a rebalance (so a handshake in flight joins the generation being formed).
- A join moves the group to PreparingRebalance. The rebalance completes as soon as every member re-joined and no
  pending id is outstanding, or when the rebalance timeout (the largest among members) expires; dynamic members
  that did not re-join are then removed. The first rebalance out of Empty waits `initial_rebalance_delay_ms`,
  extended while members keep arriving (up to the rebalance timeout); with 0 a lone consumer completes at once.
- Completion: generation + 1, a protocol every member supports (most votes), the leader kept if it re-joined;
  every parked JoinGroup is answered (the leader gets the member list) and the group is CompletingRebalance.
  The leader's SyncGroup carries the assignments; every parked SyncGroup gets its share; the group is Stable.
- Heartbeat refreshes the session deadline; in PreparingRebalance it answers REBALANCE_IN_PROGRESS, which is how
  members learn to re-join. A member silent for `session_timeout_ms` is removed and the group rebalances.
  Members parked in JoinGroup or SyncGroup are kept alive meanwhile (they cannot heartbeat on that connection).
- Static membership (group_instance_id): a join with a known instance id and no member id replaces the old member
  id. When the group is Stable and the chosen protocol would not change, this happens *without* a rebalance (Kafka's
  path): the join is answered with the current generation and the old leader id, and the following SyncGroup
  returns the member's stored assignment. Requests that still carry the old member id with that instance id get
  FENCED_INSTANCE_ID. Otherwise the replacement rebalances.

Timers: one `run()` task sleeps until the earliest deadline (session expiry, pending-id expiry, rebalance timeout,
initial delay, empty-group retention) and is woken early only when a new deadline becomes the earliest; a heartbeat
that pushes a deadline later costs one dict write. Nothing polls on an interval. Without `run()` no timer fires.

Parked callers wait on a `trio.Event`. A cancelled JoinGroup caller (dropped connection) is treated like a response
lost on the wire: the member still counts as joined, the rebalance goes on, and if the client never comes back its
session timeout evicts it. A cancelled SyncGroup caller just stops being parked (its session clock restarts).
`close()` answers every parked caller with COORDINATOR_NOT_AVAILABLE (clients then look for the coordinator again).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import struct
import uuid
from dataclasses import dataclass, field
from typing import Callable, Hashable

import trio

from logway.codecs.kafka.error_codes import ErrorCode as E

from .group_state import Group, GroupState, JoinMember, Member

log = logging.getLogger("logway.gateway.kafka.groups")

__all__ = ["Deadlines", "Timers", "GroupCoordinator", "GroupDescription", "JoinResult", "JoinMember",
           "MemberDescription", "SyncResult"]


_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE


# -- results ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)  # the leader's answer only
    protocol_type: str = ""  # JoinGroup v7+ carries it; harmless before


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None  # SyncGroup v5+
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # empty unless the group is Stable (as Kafka)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: int
    group_id: str
    state: str  # "Empty", "PreparingRebalance", "CompletingRebalance", "Stable" or "Dead" (unknown group)
    protocol_type: str
    protocol_name: str  # empty unless Stable (as Kafka)
    members: list[MemberDescription]


# -- plumbing -----------------------------------------------------------------------------------------------
class _Waiter:
    """One parked JoinGroup or SyncGroup caller: an event and the answer it wakes to."""

    __slots__ = ("_event", "result", "group", "member")

    def __init__(self, group: Group, member: Member | None) -> None:
        self._event = trio.Event()
        self.result: JoinResult | SyncResult | None = None
        self.group = group
        self.member = member

    @property
    def answered(self) -> bool:
        return self.result is not None

    def answer(self, result: JoinResult | SyncResult) -> None:
        if self.result is None:
            self.result = result
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


class Deadlines:
    """Deadlines by key, earliest first, for a coordinator's `run()` loop (the consumer and share group
    coordinators use it too).

    `set` moving a deadline later only rewrites the dict (heartbeats do this all the time); the heap entry
    filed earlier is re-filed when it comes due. Only a deadline earlier than the key's filed one is pushed.
    """

    def __init__(self) -> None:
        self._due: dict[Hashable, float] = {}
        self._filed: dict[Hashable, float] = {}  # the earliest heap entry of each key
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()

    def set(self, key: Hashable, at: float) -> bool:
        """Record `key` due at `at`; True when that is now the earliest entry (the run loop must wake)."""
        self._due[key] = at
        filed = self._filed.get(key)
        if filed is not None and filed <= at:
            return False
        self._filed[key] = at
        entry = (at, next(self._seq), key)
        heapq.heappush(self._heap, entry)
        return self._heap[0] is entry

    def cancel(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def next_at(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def pop_due(self, now: float) -> Hashable | None:
        """The next key whose deadline has passed, or None; stale and cancelled entries are skipped."""
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            if self._filed.get(key) != at:
                continue  # superseded by an earlier entry for the same key
            del self._filed[key]
            due = self._due.get(key)
            if due is None:
                continue  # cancelled
            if due > now:  # pushed later since it was filed
                self._filed[key] = due
                heapq.heappush(self._heap, (due, next(self._seq), key))
                continue
            del self._due[key]
            return key
        return None

    def clear(self) -> None:
        self._due.clear()
        self._filed.clear()
        self._heap.clear()


class Timers(Deadlines):
    """Deadlines on a trio clock, with the wake-up of the `run()` loop that fires them (every group
    coordinator's): `schedule` files a deadline and wakes the loop when it is the new earliest, `sleep` waits for
    the earliest (or a wake-up), `pop` answers the next key that came due."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self._wakeup = trio.Event()

    def schedule_at(self, key: Hashable, at: float) -> None:
        if self.set(key, at):
            self._wakeup.set()  # a new earliest deadline: the run loop must recompute its sleep

    def schedule(self, key: Hashable, delay_s: float) -> None:
        self.schedule_at(key, self.clock() + delay_s)

    def wake(self) -> None:
        self._wakeup.set()

    async def sleep(self) -> None:
        self._wakeup = trio.Event()
        with trio.move_on_at(self.next_at()):
            await self._wakeup.wait()

    def pop(self) -> Hashable | None:
        return self.pop_due(self.clock())


def _error_join(code: int, member_id: str = "") -> JoinResult:
    return JoinResult(error_code=code, member_id=member_id)


# -- the coordinator ----------------------------------------------------------------------------------------
class GroupCoordinator:
    """Every consumer group of this gateway. All methods run in the one trio event loop of the gateway.

    `empty_group_retention_ms`: a group that has had generations and is now Empty is kept (describe says "Empty",
    generation ids keep counting) for this long, then forgotten; a group that never completed a rebalance is
    forgotten as soon as it holds nobody. Committed offsets live in the offset store, not here.
    `clock` must tell trio time (deadlines are slept on with trio); it exists for tests with trio's MockClock.
    """

    def __init__(self, *, initial_rebalance_delay_ms: int = 0, min_session_timeout_ms: int = 1000,
                 max_session_timeout_ms: int = 1_800_000, empty_group_retention_ms: int = 600_000,
                 clock: Callable[[], float] = trio.current_time) -> None:
        if initial_rebalance_delay_ms < 0 or min_session_timeout_ms < 0 or empty_group_retention_ms < 0:
            raise ValueError("delays and timeouts must not be negative")
        if max_session_timeout_ms < min_session_timeout_ms:
            raise ValueError("max_session_timeout_ms < min_session_timeout_ms")
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.empty_group_retention_ms = empty_group_retention_ms
        self._clock = clock
        self._groups: dict[str, Group] = {}
        self._deadlines = Timers(clock)
        self._running = False
        self.closed = False

    # -- background timers --------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Fire deadlines until `close()`. Start it in the gateway's nursery; cancelling it closes the coordinator."""
        if self._running:
            raise RuntimeError("GroupCoordinator.run() is already running")
        self._running = True
        task_status.started()
        try:
            while not self.closed:
                await self._deadlines.sleep()
                self._fire_due()
        finally:
            self._running = False
            self.close()

    def _fire_due(self) -> None:
        while not self.closed:
            key = self._deadlines.pop()
            if key is None:
                return
            kind, group_id, *rest = key
            group = self._groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                continue
            try:
                if kind == "session":
                    self._on_session_expired(group, rest[0])
                elif kind == "pending":
                    self._on_pending_expired(group, rest[0])
                elif kind == "join":
                    self._on_join_deadline(group)
                elif kind == "empty":
                    if group.is_(GroupState.EMPTY) and not group.members and not group.pending_members:
                        self._forget(group)
            except Exception:  # a bug in one group must not take the gateway's nursery (every connection) down
                log.exception("group %r: %s deadline failed", group_id, kind)

    def _touch(self, group: Group, member: Member) -> None:
        """Restart a member's session clock (Kafka: completeAndScheduleNextHeartbeatExpiration)."""
        self._deadlines.schedule(("session", group.group_id, member.member_id), member.session_timeout_ms / 1000)

    def _on_session_expired(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.rejoined or member.sync_waiter is not None:
            self._touch(group, member)  # parked in JoinGroup/SyncGroup: alive by definition
            return
        log.info("group %r: session of %s expired", group.group_id, member_id)
        self._remove_member_and_update_group(group, member)
        self._maybe_forget(group)

    def _on_pending_expired(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.is_(_PREPARING):
                self._try_complete_join(group)
            self._maybe_forget(group)

    def _on_join_deadline(self, group: Group) -> None:
        if not group.is_(_PREPARING):
            return
        now = self._clock()
        if group.initial_delay and group.new_member_added and now < group.rebalance_deadline:
            group.new_member_added = False  # someone arrived during the delay: wait once more for company
            self._deadlines.schedule_at(("join", group.group_id),
                              min(now + self.initial_rebalance_delay_ms / 1000, group.rebalance_deadline))
            return
        self._complete_join(group)

    # -- JoinGroup ----------------------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                         client_id: str, client_host: str, require_known_member_id: bool) -> JoinResult:
        """JoinGroup. `rebalance_timeout_ms` <= 0 (JoinGroup v0 has none) means the session timeout;
        `require_known_member_id` is True for JoinGroup v4+. Parks until the rebalance completes."""
        waiter = self._join(group_id, member_id or "", group_instance_id or None, protocol_type,
                            [(name, bytes(md)) for name, md in protocols], session_timeout_ms,
                            rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
                            client_id, client_host, require_known_member_id)
        if not waiter.answered:
            try:
                await waiter.wait()
            except BaseException:
                member = waiter.member
                if member is not None and member.join_waiter is waiter:
                    member.join_waiter = None  # answer lost: the member still counts as joined
                raise
        assert isinstance(waiter.result, JoinResult)
        return waiter.result

    def _join(self, group_id, member_id, group_instance_id, protocol_type, protocols, session_timeout_ms,
              rebalance_timeout_ms, client_id, client_host, require_known_member_id) -> _Waiter:
        group = self._groups.get(group_id)
        waiter = _Waiter(group, None)  # type: ignore[arg-type]
        if self.closed:
            waiter.answer(_error_join(E.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group_id:
            waiter.answer(_error_join(E.INVALID_GROUP_ID, member_id))
        elif not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            waiter.answer(_error_join(E.INVALID_SESSION_TIMEOUT, member_id))
        elif group is None and member_id:
            waiter.answer(_error_join(E.UNKNOWN_MEMBER_ID, member_id))
        else:
            if group is None:
                group = self._groups[group_id] = Group(group_id)
            waiter.group = group
            args = (group, waiter, group_instance_id, protocol_type, protocols, session_timeout_ms,
                    rebalance_timeout_ms, client_id, client_host)
            if not member_id:
                self._join_new_member(*args, require_known_member_id)
            else:
                self._join_current_member(*args, member_id)
            if group.is_(_PREPARING):
                self._try_complete_join(group)
            self._maybe_forget(group)
        return waiter

    def _join_new_member(self, group: Group, waiter: _Waiter, instance_id, protocol_type, protocols,
                         session_timeout_ms, rebalance_timeout_ms, client_id, client_host,
                         require_known_member_id: bool) -> None:
        if group.is_(GroupState.DEAD):
            return waiter.answer(_error_join(E.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return waiter.answer(_error_join(E.INCONSISTENT_GROUP_PROTOCOL))
        new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None:  # static members skip the E.MEMBER_ID_REQUIRED round trip (as Kafka)
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._replace_static_member(group, waiter, instance_id, old_id, new_id, protocols,
                                                   session_timeout_ms, rebalance_timeout_ms, client_id,
                                                   client_host)
        elif require_known_member_id:
            group.pending_members.add(new_id)
            self._deadlines.schedule(("pending", group.group_id, new_id), session_timeout_ms / 1000)
            return waiter.answer(_error_join(E.MEMBER_ID_REQUIRED, new_id))
        member = Member(new_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols)
        self._add_member_and_rebalance(group, member, waiter)

    def _join_current_member(self, group: Group, waiter: _Waiter, instance_id, protocol_type, protocols,
                             session_timeout_ms, rebalance_timeout_ms, client_id, client_host,
                             member_id: str) -> None:
        if group.is_(GroupState.DEAD):
            return waiter.answer(_error_join(E.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return waiter.answer(_error_join(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_members:
            member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                            session_timeout_ms, protocol_type, protocols)
            self._deadlines.cancel(("pending", group.group_id, member_id))
            return self._add_member_and_rebalance(group, member, waiter)
        if group.is_static_member_fenced(instance_id, member_id):
            return waiter.answer(_error_join(E.FENCED_INSTANCE_ID, member_id))
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and group.static_member_id(instance_id) is None):
            return waiter.answer(_error_join(E.UNKNOWN_MEMBER_ID, member_id))
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        state = group.state
        if state is _PREPARING:
            self._update_member_and_rebalance(group, member, protocols, waiter)
        elif state is _COMPLETING or state is GroupState.STABLE:
            rejoin_is_noop = member.matches(protocols) and (
                state is _COMPLETING or not group.is_leader(member_id))
            if rejoin_is_noop:
                # The member lost its JoinGroup answer, or a follower re-joins without change: answer with the
                # current generation and let it SyncGroup. (A leader re-join in Stable is its way to ask for a
                # rebalance, e.g. after topic metadata changed, so it rebalances.)
                members = group.current_member_metadata() if group.is_leader(member_id) else []
                waiter.answer(self._join_answer(group, member, members))
                self._touch(group, member)
            else:
                self._update_member_and_rebalance(group, member, protocols, waiter)
        else:  # Empty: no member can be known
            waiter.answer(_error_join(E.UNKNOWN_MEMBER_ID, member_id))

    def _join_answer(self, group: Group, member: Member, members: list[JoinMember],
                     leader: str | None = None) -> JoinResult:
        return JoinResult(error_code=E.NONE, generation_id=group.generation_id,
                          protocol_name=group.protocol_name or "", leader=leader or group.leader_id or "",
                          member_id=member.member_id, members=members, protocol_type=group.protocol_type or "")

    def _park_join(self, member: Member, waiter: _Waiter) -> None:
        old = member.join_waiter
        if old is not None and old is not waiter:
            # The same member joined again from elsewhere (client retry on a new connection): the newer request
            # gets the real answer, the older one is told to re-join.
            old.answer(_error_join(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = waiter
        waiter.member = member
        member.rejoined = True

    def _add_member_and_rebalance(self, group: Group, member: Member, waiter: _Waiter) -> None:
        self._park_join(member, waiter)
        if group.is_(_PREPARING) and group.initial_delay:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, protocols, waiter: _Waiter) -> None:
        member.protocols = protocols
        self._park_join(member, waiter)
        self._maybe_prepare_rebalance(group)

    def _replace_static_member(self, group: Group, waiter: _Waiter, instance_id: str, old_id: str, new_id: str,
                               protocols, session_timeout_ms, rebalance_timeout_ms, client_id,
                               client_host) -> None:
        old_leader = group.leader_id
        member = group.members[old_id]
        # Fence the previous incarnation at once if it is parked.
        if member.join_waiter is not None:
            member.join_waiter.answer(_error_join(E.FENCED_INSTANCE_ID, old_id))
            member.join_waiter = None
        if member.sync_waiter is not None:
            member.sync_waiter.answer(SyncResult(E.FENCED_INSTANCE_ID))
            member.sync_waiter = None
        self._deadlines.cancel(("session", group.group_id, old_id))
        group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self._touch(group, member)
        member.protocols = protocols
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            # No rebalance: answer with the current generation and the *old* leader id, so that a replaced
            # leader does not believe it leads (its new assignment would not be broadcast by a Stable group);
            # its SyncGroup then returns the stored assignment.
            waiter.member = member
            waiter.answer(self._join_answer(group, member, [], leader=old_leader))
            return
        # Stable with a protocol change, or CompletingRebalance: rebalance. PreparingRebalance: just wait with
        # everyone else (the replacement counts as this member's re-join).
        self._park_join(member, waiter)
        self._maybe_prepare_rebalance(group)

    # -- rebalance ----------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.is_(_COMPLETING):  # parked SyncGroups must re-join
            self._reset_assignments(group, E.REBALANCE_IN_PROGRESS)
        was_empty = group.is_(GroupState.EMPTY)
        log.info("group %r: preparing to rebalance from %s, generation %d, %d member(s)", group.group_id,
                 group.state, group.generation_id, len(group.members))
        group.transition_to(_PREPARING)
        self._deadlines.cancel(("empty", group.group_id))
        now = self._clock()
        timeout = group.rebalance_timeout_ms() / 1000
        delay = self.initial_rebalance_delay_ms / 1000
        group.initial_delay = was_empty and delay > 0
        group.new_member_added = False
        if group.initial_delay:
            group.rebalance_deadline = now + max(timeout, delay)
            self._deadlines.schedule(("join", group.group_id), delay)
        else:
            group.rebalance_deadline = now + timeout
            self._deadlines.schedule(("join", group.group_id), timeout)
            self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(_PREPARING) and not group.initial_delay and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop silent dynamic members, pick the leader, open the next generation."""
        for member in group.not_yet_rejoined():
            if not member.is_static:  # a silent static member stays until its session times out
                log.info("group %r: removing %s, which did not re-join in time", group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.members and not group.maybe_elect_joined_leader():
            # Only silent static members are left: give them another rebalance timeout.
            group.initial_delay = False
            group.rebalance_deadline = self._clock() + group.rebalance_timeout_ms() / 1000
            self._deadlines.schedule(("join", group.group_id), group.rebalance_timeout_ms() / 1000)
            return
        self._deadlines.cancel(("join", group.group_id))
        group.initial_delay = group.new_member_added = False
        group.init_next_generation()
        log.info("group %r: generation %d, %s, %d member(s), leader %s", group.group_id, group.generation_id,
                 group.state, len(group.members), group.leader_id)
        if group.is_(GroupState.EMPTY):
            self._maybe_forget(group)
            return
        leader_view = group.current_member_metadata()
        for member in group.members.values():
            waiter = member.join_waiter
            member.join_waiter = None
            member.rejoined = False
            if waiter is not None:
                waiter.answer(self._join_answer(group, member,
                                                leader_view if group.is_leader(member.member_id) else []))
            self._touch(group, member)

    def _reset_assignments(self, group: Group, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            waiter = member.sync_waiter
            if waiter is not None:
                member.sync_waiter = None
                waiter.answer(SyncResult(code))
                self._touch(group, member)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Drop a member, answering what it has parked (Kafka answers E.UNKNOWN_MEMBER_ID so a live client re-joins)."""
        if member.join_waiter is not None:
            member.join_waiter.answer(_error_join(E.UNKNOWN_MEMBER_ID))
            member.join_waiter = None
        if member.sync_waiter is not None:
            member.sync_waiter.answer(SyncResult(E.UNKNOWN_MEMBER_ID))
            member.sync_waiter = None
        member.rejoined = False
        group.remove(member.member_id)
        self._deadlines.cancel(("session", group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, _COMPLETING):
            self._maybe_prepare_rebalance(group)
        elif group.is_(_PREPARING):
            self._try_complete_join(group)

    def _maybe_forget(self, group: Group) -> None:
        """An Empty group holding nobody: forget it now if it never had a generation, else after the retention."""
        if not group.is_(GroupState.EMPTY) or group.members or group.pending_members:
            return
        if group.generation_id == 0 or self.empty_group_retention_ms == 0:
            self._forget(group)
        else:
            self._deadlines.schedule(("empty", group.group_id), self.empty_group_retention_ms / 1000)

    def _forget(self, group: Group) -> None:
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        self._deadlines.cancel(("join", group.group_id))
        self._deadlines.cancel(("empty", group.group_id))
        group.transition_to(GroupState.DEAD)

    # -- SyncGroup ----------------------------------------------------------------------------------
    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         assignments: list[tuple[str, bytes]], protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        """SyncGroup. The leader brings `assignments` (member id, bytes); followers park until it does.
        `protocol_type`/`protocol_name` are checked when given (SyncGroup v5+)."""
        waiter = self._sync(group_id, generation_id, member_id, group_instance_id or None, assignments,
                            protocol_type, protocol_name)
        if not waiter.answered:
            try:
                await waiter.wait()
            except BaseException:
                member = waiter.member
                if member is not None and member.sync_waiter is waiter:
                    member.sync_waiter = None
                    if waiter.group.members.get(member.member_id) is member:
                        self._touch(waiter.group, member)
                raise
        assert isinstance(waiter.result, SyncResult)
        return waiter.result

    def _sync(self, group_id, generation_id, member_id, instance_id, assignments, protocol_type,
              protocol_name) -> _Waiter:
        group = self._groups.get(group_id)
        waiter = _Waiter(group, None)  # type: ignore[arg-type]
        if self.closed:
            code = E.COORDINATOR_NOT_AVAILABLE
        elif not group_id:
            code = E.INVALID_GROUP_ID
        elif group is None:
            code = E.UNKNOWN_MEMBER_ID
        elif group.is_(GroupState.DEAD):
            code = E.COORDINATOR_NOT_AVAILABLE
        else:
            code = self._validate_current_member(group, member_id, instance_id)
            if code == E.NONE:
                if generation_id != group.generation_id:
                    code = E.ILLEGAL_GENERATION
                elif protocol_type is not None and protocol_type != group.protocol_type:
                    code = E.INCONSISTENT_GROUP_PROTOCOL
                elif protocol_name is not None and protocol_name != group.protocol_name:
                    code = E.INCONSISTENT_GROUP_PROTOCOL
                elif group.is_(GroupState.EMPTY):
                    code = E.UNKNOWN_MEMBER_ID
                elif group.is_(_PREPARING):
                    code = E.REBALANCE_IN_PROGRESS
        if code != E.NONE:
            waiter.answer(SyncResult(code))
            return waiter
        member = group.members[member_id]
        if group.is_(GroupState.STABLE):  # already distributed: hand back the stored assignment
            waiter.answer(self._sync_answer(group, member))
            self._touch(group, member)
            return waiter
        # CompletingRebalance: park, and if this is the leader, distribute.
        old = member.sync_waiter
        if old is not None:
            old.answer(SyncResult(E.REBALANCE_IN_PROGRESS))  # superseded by this newer request
        member.sync_waiter = waiter
        waiter.member = member
        if group.is_leader(member_id):
            by_member = {mid: bytes(data) for mid, data in assignments}
            for mid, m in group.members.items():  # members the leader left out get an empty assignment
                m.assignment = by_member.get(mid, b"")
            group.transition_to(GroupState.STABLE)
            for m in group.members.values():
                parked = m.sync_waiter
                if parked is not None:
                    m.sync_waiter = None
                    parked.answer(self._sync_answer(group, m))
                    self._touch(group, m)
        return waiter

    @staticmethod
    def _sync_answer(group: Group, member: Member) -> SyncResult:
        return SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name)

    @staticmethod
    def _validate_current_member(group: Group, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateCurrentMember: the instance id (when given) must map to this member id, which must exist."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
        return E.NONE if group.has(member_id) else E.UNKNOWN_MEMBER_ID

    # -- Heartbeat, LeaveGroup, OffsetCommit --------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if self.closed:
            return E.COORDINATOR_NOT_AVAILABLE
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id or None, member_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._touch(group, member)
        return E.REBALANCE_IN_PROGRESS if group.is_(_PREPARING) else E.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup: (top-level code, one code per member). v3+ sends a member list; for v0–v2 (one member,
        no list) answer with the member's code. An empty member id with an instance id removes that static
        member (the admin path)."""
        if self.closed:
            return E.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return E.INVALID_GROUP_ID, []
        group = self._groups.get(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        codes = []
        for member_id, instance_id in members:
            instance_id = instance_id or None
            if not member_id:
                current = group.static_member_id(instance_id)
                if current is None:
                    codes.append(E.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_member_and_update_group(group, group.members[current])
            elif member_id in group.pending_members:
                group.remove(member_id)
                self._deadlines.cancel(("pending", group.group_id, member_id))
                if group.is_(_PREPARING):
                    self._try_complete_join(group)
            else:
                code = self._validate_current_member(group, member_id, instance_id)
                if code != E.NONE:
                    codes.append(code)
                    continue
                self._remove_member_and_update_group(group, group.members[member_id])
            codes.append(E.NONE)
        self._maybe_forget(group)
        return E.NONE, codes

    def validate_commit(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None) -> int:
        """May this OffsetCommit be written? Generation -1 with no member id is a standalone commit (a consumer
        with a group id but manual assignment): allowed while the group has no members. Otherwise the member
        and generation must be current; CompletingRebalance answers E.REBALANCE_IN_PROGRESS. A successful member
        commit counts as a heartbeat (as Kafka)."""
        if self.closed:
            return E.COORDINATOR_NOT_AVAILABLE
        group = self._groups.get(group_id)
        instance_id = group_instance_id or None
        if group is None:
            # Kafka: no group in memory and a generation means a member of a generation we no longer know.
            return E.NONE if generation_id < 0 else E.ILLEGAL_GENERATION
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or instance_id is not None:
            code = self._validate_current_member(group, member_id, instance_id)
            if code != E.NONE:
                return code
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
            if group.is_(_COMPLETING):
                return E.REBALANCE_IN_PROGRESS
            self._touch(group, group.members[member_id])
            return E.NONE
        return E.NONE if group.is_(GroupState.EMPTY) else E.UNKNOWN_MEMBER_ID

    # -- DescribeGroups, ListGroups ------------------------------------------------------------------
    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        """One description per id; an unknown group is state "Dead" with no error (DescribeGroups v0–v5)."""
        out = []
        for group_id in group_ids:
            if self.closed:
                out.append(GroupDescription(E.COORDINATOR_NOT_AVAILABLE, group_id, "Dead", "", "", []))
                continue
            group = self._groups.get(group_id)
            if group is None:
                out.append(GroupDescription(E.NONE, group_id, GroupState.DEAD.value, "", "", []))
                continue
            stable = group.is_(GroupState.STABLE)
            members = [MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"") for m in group.members.values()]
            out.append(GroupDescription(E.NONE, group_id, group.state.value, group.protocol_type or "",
                                        (group.protocol_name or "") if stable else "", members))
        return out

    def active_groups(self) -> set[str]:
        """The groups with members, or members joining (every state but Empty and Dead)."""
        if self.closed:
            return set()
        return {g.group_id for g in self._groups.values()
                if g.members or g.pending_members or not (g.is_(GroupState.EMPTY) or g.is_(GroupState.DEAD))}

    def summaries(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group in memory, Empty ones included (ListGroups v4+)."""
        if self.closed:
            return []
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self._groups.values()]

    def forget_if_empty(self, group_id: str) -> bool:
        """Forget an Empty group (a group of another type takes its id over); False if it is in use."""
        return self.delete_group(group_id) in (E.NONE, E.GROUP_ID_NOT_FOUND)

    def holds(self, group_id: str) -> bool | None:
        """None when no group of this id is held; else whether it is in use (members, or joining)."""
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return None
        return bool(group.members or group.pending_members) or not group.is_(GroupState.EMPTY)

    # -- DeleteGroups, OffsetDelete (the admin side; offsets live in the offset store) ---------------------------
    def delete_group(self, group_id: str) -> int:
        """DeleteGroups' part here: an Empty group's state is forgotten (E.NONE; the caller then deletes its
        offsets). E.NON_EMPTY_GROUP while it has members (or a rebalance under way), E.GROUP_ID_NOT_FOUND when no
        state is held for it (it may still have committed offsets: the caller decides), E.COORDINATOR_NOT_AVAILABLE
        once closed."""
        if self.closed:
            return E.COORDINATOR_NOT_AVAILABLE
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND
        if group.members or group.pending_members or not group.is_(GroupState.EMPTY):
            return E.NON_EMPTY_GROUP
        self._forget(group)
        return E.NONE

    def offset_delete_status(self, group_id: str) -> tuple[int, frozenset[str] | None]:
        """OffsetDelete's check: (error, the topics the group's members subscribe to). (E.NONE, empty set) for an
        Empty group; for an active consumer group the union of its members' subscriptions (None when one cannot
        be read: every topic counts as subscribed, as Kafka); E.NON_EMPTY_GROUP for an active group of another
        protocol type; E.GROUP_ID_NOT_FOUND without state (it may still have committed offsets: the caller
        decides); E.COORDINATOR_NOT_AVAILABLE once closed."""
        if self.closed:
            return E.COORDINATOR_NOT_AVAILABLE, None
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND, frozenset()
        if group.is_(GroupState.EMPTY) and not group.members and not group.pending_members:
            return E.NONE, frozenset()
        if group.protocol_type != "consumer":
            return E.NON_EMPTY_GROUP, None
        topics: set[str] = set()
        for member in group.members.values():
            chosen = [(n, md) for n, md in member.protocols if n == group.protocol_name] or member.protocols
            for _, metadata in chosen:
                subscribed = consumer_subscription(metadata)
                if subscribed is None:
                    return E.NONE, None
                topics.update(subscribed)
        return E.NONE, frozenset(topics)

    # -- shutdown -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Answer every parked caller with E.COORDINATOR_NOT_AVAILABLE, stop the timers; later calls get the same."""
        if self.closed:
            return
        self.closed = True
        for group in self._groups.values():
            for member in group.members.values():
                if member.join_waiter is not None:
                    member.join_waiter.answer(_error_join(E.COORDINATOR_NOT_AVAILABLE, member.member_id))
                    member.join_waiter = None
                if member.sync_waiter is not None:
                    member.sync_waiter.answer(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
                    member.sync_waiter = None
            group.transition_to(GroupState.DEAD)
        self._groups.clear()
        self._deadlines.clear()
        self._deadlines.wake()


def consumer_subscription(metadata: bytes) -> list[str] | None:
    """The topics of a "consumer" member's metadata (Kafka's ConsumerProtocolSubscription: int16 version, then an
    array of int16-length strings; what follows is not needed), or None when it cannot be read."""
    data = bytes(metadata)
    try:
        version, count = struct.unpack_from(">hi", data, 0)
        if version < 0 or count < 0 or count > len(data):
            return None
        pos, topics = 6, []
        for _ in range(count):
            (size,) = struct.unpack_from(">h", data, pos)
            if size < 0 or pos + 2 + size > len(data):
                return None
            topics.append(data[pos + 2:pos + 2 + size].decode("utf-8"))
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
