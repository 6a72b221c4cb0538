"""Ownership: which member leads each partition, coordinates each consumer group and transactional id, keeps the
committed offsets and acts as the controller — a pure function of the membership's `count`, so every member computes
the same answer without asking.

Storage is handed `Ownership.leader` as its ownership predicate (`storage.engine.Share.owner`): a member's engine
opens, recovers, appends to and trims only the partitions it leads. A source whose members come and go (leases in a
database) would decide leadership itself; what it hands storage and routing is the same two questions: who leads
this partition, and is it me.
"""

from __future__ import annotations

import zlib
from functools import partial
from typing import Callable

__all__ = ["Ownership", "partition_leader", "leaders", "COORDINATOR", "CONTROLLER"]

#: The member that coordinates every group and transactional id, keeps the committed offsets and is the controller
#: (topic deletion, ACLs, credentials, quotas): one member, so that state has one writer.
COORDINATOR = CONTROLLER = 0


def partition_leader(topic: str, partition: int, members: int) -> int:
    """The member that leads partition `partition` of `topic` among `members`: consecutive partitions on consecutive
    members, starting at one chosen by the topic's name (CRC-32), so one-partition topics spread too. Stable: it
    depends on the name, the partition and `members` only."""
    return (zlib.crc32(topic.encode("utf-8")) + partition) % members


def leaders(members: int) -> Callable[[str, int], int]:
    """`partition_leader` among `members`: the ownership predicate storage is handed (`storage.engine.Share.owner`)."""
    return partial(partition_leader, members=members)


class Ownership:
    """Who owns what among `count` members, as seen by member `me`."""

    __slots__ = ("me", "count")

    def __init__(self, me: int, count: int) -> None:
        self.me, self.count = me, count

    def leader(self, topic: str, partition: int) -> int:
        return partition_leader(topic, partition, self.count)

    def leads(self, topic: str, partition: int) -> bool:
        return self.leader(topic, partition) == self.me

    def coordinator(self, key: str | None = None) -> int:
        """The member coordinating consumer group or transactional id `key` (every one: `COORDINATOR`)."""
        return COORDINATOR

    @property
    def controller(self) -> int:
        return CONTROLLER

    @property
    def is_coordinator(self) -> bool:
        """Whether this member coordinates the groups and transactions and keeps the committed offsets."""
        return self.me == COORDINATOR
