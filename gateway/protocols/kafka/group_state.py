"""Kafka consumer-group metadata: the group state machine and its members, as plain data (no trio, no clock).

The counterpart of Kafka's `GroupMetadata`/`MemberMetadata`. `groups.GroupCoordinator` drives it: it owns the
clock, the timers and the parked callers; this module only holds what a group *is*:

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance ──leader sync──▶ Stable
      ▲                  ▲    │ (no member left)                                │                               │
      └──────────────────┼────┘                                                 │ join/leave/expiry             │
                         └──────────────────────────────────────────────────────┴───────────────────────────────┘
    any state ──coordinator closed / group forgotten──▶ Dead

The client-side assignor is opaque: a member brings `(protocol name, metadata bytes)` pairs in its order of
preference and receives assignment bytes chosen by the leader. Parked callers are stored on a member as opaque
objects (`join_waiter`, `sync_waiter`) that only the coordinator knows how to answer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: Kafka's `GroupState.validPreviousStates`: the only transitions the coordinator may make.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.EMPTY, GroupState.STABLE,
                                               GroupState.COMPLETING_REBALANCE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """The coordinator asked for a transition the state machine forbids: a bug on our side, never the peer's."""


class JoinMember(NamedTuple):
    """One entry of the member list a JoinGroup leader receives (it feeds the client-side assignor)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    #: True from the member's JoinGroup in this rebalance until the rebalance completes (Kafka's
    #: "awaiting join"). A join whose caller went away still counts: like a response lost on the wire.
    rejoined: bool = False
    join_waiter: Any = None  # the parked JoinGroup caller, if any (opaque to this module)
    sync_waiter: Any = None  # the parked SyncGroup caller, if any

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order (a re-join that changes nothing)."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise IllegalGroupTransition(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None  # chosen at each completed rebalance; None while Empty
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order = join order
    static_members: dict[str, str] = field(default_factory=dict)  # group_instance_id -> member_id
    #: Member ids handed out with MEMBER_ID_REQUIRED whose owner has not re-joined yet. They hold back the
    #: completion of a rebalance (Kafka's `hasAllMembersJoined`), so a JoinGroup handshake in flight is not
    #: left out of the generation being formed.
    pending_members: set[str] = field(default_factory=set)
    # Rebalance bookkeeping for the coordinator's timers (plain values, no clock here).
    initial_delay: bool = False  # the first rebalance out of Empty waits `initial_rebalance_delay_ms`
    new_member_added: bool = False  # a member joined during that delay: extend it once more
    rebalance_deadline: float = 0.0  # when the current PreparingRebalance gives up on silent members

    # -- state --------------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupTransition(f"group {self.group_id!r}: {self.state} -> {state}")
        self.state = state

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- membership ---------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """The instance id is known but mapped to another member id: the caller is an older incarnation."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        """Drop a member (or a pending member id); the leader passes to the first remaining member."""
        self.pending_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member its new member id, keeping its place, assignment and leadership."""
        member = self.members[old_member_id]
        member.member_id = new_member_id
        self.members = {(new_member_id if mid == old_member_id else mid): m for mid, m in self.members.items()}
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    # -- rebalance ----------------------------------------------------------------------------------
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.rejoined for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.rejoined]

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names)
        for member in members:
            common.intersection_update(member.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """May a member with these protocols join? (Kafka: an Empty group takes any non-empty offer.)"""
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != self.protocol_type:
            return False
        common = self.candidate_protocols()
        return any(name in common for name in protocol_names)

    def select_protocol(self) -> str:
        """Each member votes for its favourite protocol among those all support; most votes wins (Kafka).
        Ties, which Kafka leaves to hash order, go to the leader's preference, then to join order."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupTransition(f"group {self.group_id!r} has no protocol common to all members")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        order: list[str] = []
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        for member in ([leader] if leader else []) + list(self.members.values()):
            order.extend(n for n in member.protocol_names if n in candidates and n not in order)
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def maybe_elect_joined_leader(self) -> bool:
        """Before completing a rebalance: keep the leader if it re-joined, else promote a member that did.
        False when nobody re-joined (only silent static members are left)."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None:
            return False
        if leader.rejoined:
            return True
        for member_id, member in self.members.items():
            if member.rejoined:
                self.leader_id = member_id
                return True
        return False

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.leader_id = None
            self.transition_to(GroupState.EMPTY)

    def current_member_metadata(self) -> list[JoinMember]:
        """What the leader receives: every member's metadata for the chosen protocol, in join order."""
        assert self.protocol_name is not None
        return [JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]
