"""Every group of this broker whatever its protocol, in one namespace of group ids as Kafka 4 has it: "classic"
groups (JoinGroup/SyncGroup, `coordinator`), "consumer" groups (KIP-848, `consumer_groups`) and "share" groups
(KIP-932, `share_groups`) side by side, their committed offsets in the one offset store.

A group id belongs to one type at a time. A request of another protocol for a group that is in use is refused
(the live group is not migrated between protocols: Kafka's `group.consumer.migration.policy=disabled`); an empty
group gives way, its committed offsets kept. ListGroups sees all of them (`summaries`).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    state)] and `holds(group_id)` -> None (no such group) or whether it is in use."""

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
