"""Every group of this broker whatever its protocol, in one namespace of group ids as Kafka 4 has it: "classic"
groups (JoinGroup/SyncGroup, `coordinator`), "consumer" groups (KIP-848, `consumer_groups`) and "share" groups
(KIP-932, `share_groups`) side by side, their committed offsets in the one offset store.

`views()` describes them alike for the operator's tools (the admin API, metrics, console, `logway groups`): type,
state, members and the partitions each holds, by topic name.

A group id belongs to one type at a time. A request of another protocol for a group that is in use is refused
(the live group is not migrated between protocols: Kafka's `group.consumer.migration.policy=disabled`); an empty
group gives way, its committed offsets kept. ListGroups sees all of them (`summaries`).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from logway.codecs.kafka.error_codes import ErrorCode as E

__all__ = ["CLASSIC", "CONSUMER", "SHARE", "GroupSummary", "GroupDirectory", "GroupView", "MemberView",
           "consumer_assignment", "partitions_by_name"]

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    protocol_type: str  # a classic group's protocol type ("consumer", "connect", ...); "consumer"; "share"
    state: str
    type: str  # CLASSIC, CONSUMER or SHARE


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    partitions: list[tuple[str, int]] = field(default_factory=list)  # assigned now (a classic member: readable
    # when its group's protocol type is "consumer" and it is Stable)


@dataclass(frozen=True, slots=True)
class GroupView:
    """A live group as the operator's tools show it."""

    group_id: str
    type: str  # CLASSIC, CONSUMER or SHARE
    protocol_type: str
    state: str
    members: list[MemberView]


class GroupDirectory:
    """The coordinators of each group type, asked in turn. Each has `summaries()` -> [(group id, protocol type,
    state)], `holds(group_id)` -> None (no such group) or whether it is in use, and `forget_if_empty(group_id)`."""

    def __init__(self, **coordinators) -> None:
        self.by_type = coordinators  # type -> coordinator

    def summaries(self) -> list[GroupSummary]:
        return [GroupSummary(group_id, protocol_type, state, kind)
                for kind, coordinator in self.by_type.items()
                for group_id, protocol_type, state in coordinator.summaries()]

    def views(self, group_ids: list[str] | None = None) -> list[GroupView]:
        """Every group held now (or those of `group_ids` that are), of every type; not the "Dead" ones."""
        wanted = None if group_ids is None else set(group_ids)
        out = []
        for kind, coordinator in self.by_type.items():
            if kind == CLASSIC:
                ids = [g for g, _, _ in coordinator.summaries() if wanted is None or g in wanted]
                out.extend(GroupView(d.group_id, CLASSIC, d.protocol_type, d.state, [
                    MemberView(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                               consumer_assignment(m.assignment) if d.protocol_type == "consumer" else [])
                    for m in d.members]) for d in coordinator.describe_groups(ids) if d.state != "Dead")
            else:
                out.extend(coordinator.views(wanted))
        return out

    def type_of(self, group_id: str) -> str | None:
        """The type of the group of this id held now, or None."""
        for kind, coordinator in self.by_type.items():
            if coordinator.holds(group_id) is not None:
                return kind
        return None

    def conflict(self, group_id: str, wanted: str) -> str | None:
        """The type of a group in use with this id that is not `wanted` (the request must be refused), or None."""
        for kind, coordinator in self.by_type.items():
            if kind != wanted and coordinator.holds(group_id):
                return kind
        return None

    def claim(self, group_id: str, wanted: str) -> str | None:
        """Before a group of type `wanted` is made or used: the type of a group in use with this id (refuse), else
        None, every empty group of another type with this id forgotten (its offsets stay in the store)."""
        conflict = self.conflict(group_id, wanted)
        if conflict is None:
            for kind, coordinator in self.by_type.items():
                if kind != wanted:
                    coordinator.forget_if_empty(group_id)
        return conflict

    def active(self) -> set[str]:
        """The group ids of every type with members (their offsets are kept: `offset_retention`)."""
        return {group_id for coordinator in self.by_type.values() for group_id, _, _ in coordinator.summaries()
                if coordinator.holds(group_id)}

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None, version: int,
                        *, transactional: bool = False) -> int:
        """May a member commit offsets of this group (OffsetCommit, TxnOffsetCommit)? Its generation (a classic
        group) or member epoch (a consumer group's member, OffsetCommit v9+) is checked by the group's coordinator."""
        if not group_id:
            return E.INVALID_GROUP_ID
        consumer = self.by_type.get(CONSUMER)
        if consumer is not None and group_id in consumer.groups:
            return consumer.validate_commit(group_id, member_id, generation, 9 if transactional else version)
        return self.by_type[CLASSIC].validate_commit(group_id, generation, member_id, instance_id)


def partitions_by_name(assigned: dict[uuid.UUID, set[int]], names: dict[uuid.UUID, str]) -> list[tuple[str, int]]:
    """A consumer or share group member's assignment (topic id -> partitions) by topic name, sorted; a topic
    deleted meanwhile is left out."""
    return sorted((names[t], p) for t, ps in assigned.items() if t in names for p in ps)


def consumer_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a classic "consumer" member's assignment (Kafka's ConsumerProtocolAssignment: int16
    version, an array of (int16-length topic, array of int32 partitions), user data); [] when it cannot be read."""
    data = bytes(data)
    try:
        version, count = struct.unpack_from(">hi", data, 0)
        if version < 0 or count < 0 or count > len(data):
            return []
        pos, out = 6, []
        for _ in range(count):
            (size,) = struct.unpack_from(">h", data, pos)
            if size < 0:
                return []
            topic = data[pos + 2:pos + 2 + size].decode("utf-8")
            pos += 2 + size
            (n,) = struct.unpack_from(">i", data, pos)
            if n < 0 or pos + 4 + 4 * n > len(data):
                return []
            out.extend((topic, p) for p in struct.unpack_from(f">{n}i", data, pos + 4))
            pos += 4 + 4 * n
        return out
    except (struct.error, UnicodeDecodeError):
        return []
