"""Every group of this broker whatever its protocol, in one namespace of group ids as Kafka 4 has it: "classic"
groups (JoinGroup/SyncGroup, `coordinator`), "consumer" groups (KIP-848, `consumer_groups`) and "share" groups
(KIP-932, `share_groups`) side by side, their committed offsets in the one offset store.

A group id belongs to one type at a time. A request of another protocol for a group that is in use is refused
(the live group is not migrated between protocols: Kafka's `group.consumer.migration.policy=disabled`); an empty
group gives way, its committed offsets kept. ListGroups sees all of them (`summaries`).
"""

from __future__ import annotations

from dataclasses import dataclass

from logway.codecs.kafka.error_codes import ErrorCode as E

__all__ = ["CLASSIC", "CONSUMER", "SHARE", "GroupSummary", "GroupDirectory"]

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    protocol_type: str  # a classic group's protocol type ("consumer", "connect", ...); "consumer"; "share"
    state: str
    type: str  # CLASSIC, CONSUMER or SHARE


class GroupDirectory:
    """The coordinators of each group type, asked in turn. Each has `summaries()` -> [(group id, protocol type,
    state)], `holds(group_id)` -> None (no such group) or whether it is in use, and `forget_if_empty(group_id)`."""

    def __init__(self, **coordinators) -> None:
        self.by_type = coordinators  # type -> coordinator

    def summaries(self) -> list[GroupSummary]:
        return [GroupSummary(group_id, protocol_type, state, kind)
                for kind, coordinator in self.by_type.items()
                for group_id, protocol_type, state in coordinator.summaries()]

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
