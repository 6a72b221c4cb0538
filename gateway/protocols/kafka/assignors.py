"""The server-side assignors of KIP-848 consumer groups (Kafka's `group.consumer.assignors`): the broker, not a
client leader, decides which member consumes which partition.

An assignor takes the members' subscriptions — member id -> the topic names it subscribes to (resolved from names
and regexes) — the subscribed topics — name -> (topic id, partition count) — and the current target assignment, and
returns the new target: member id -> {topic id: set of partitions}. Every partition of a subscribed topic goes to
exactly one member subscribed to it.

- `uniform` (Kafka's default): as even as the subscriptions allow (two members subscribed to the same topics differ
  by one partition at most), and sticky: a partition stays with its member unless balance needs it elsewhere.
  Partitions are first kept where they are (within each member's fair share), the others handed to the least
  loaded member subscribed to their topic, then moved one at a time from the most to the least loaded eligible
  member while that narrows the gap.
- `range`: per topic, the members subscribed to it in member-id order each take a contiguous range of partitions,
  the first ones one more when the count does not divide (Kafka's range: co-partitioned topics are assigned
  alike). Not sticky.

Both are deterministic for a given input.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

__all__ = ["ASSIGNORS", "uniform", "range_assignor", "Assignment"]

#: member id -> {topic id: partitions}
Assignment = dict[str, dict[uuid.UUID, set[int]]]


def range_assignor(subscriptions: Mapping[str, set[str]], topics: Mapping[str, tuple[uuid.UUID, int]],
                   current: Assignment) -> Assignment:
    out: Assignment = {member: {} for member in subscriptions}
    for name in sorted(topics):
        topic_id, count = topics[name]
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = per + (1 if i < extra else 0)
            if size:
                out[member][topic_id] = set(range(start, start + size))
            start += size
    return out


def uniform(subscriptions: Mapping[str, set[str]], topics: Mapping[str, tuple[uuid.UUID, int]],
            current: Assignment) -> Assignment:
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}  # partition -> members subscribed to its topic
    for name, (topic_id, count) in topics.items():
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        if members:
            for p in range(count):
                eligible[(topic_id, p)] = members
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {member: set() for member in subscriptions}
    # Fair shares: as if every partition could go to any member (what balance aims at when subscriptions agree).
    quota = -(-len(eligible) // max(len(subscriptions), 1))
    for member in sorted(current):
        if member not in owned:
            continue
        for topic_id, partitions in current[member].items():
            for p in sorted(partitions):
                tp = (topic_id, p)
                if member in eligible.get(tp, ()) and len(owned[member]) < quota and not _taken(owned, tp):
                    owned[member].add(tp)
    taken = {tp for parts in owned.values() for tp in parts}
    # The rest, the most constrained first: each to the least loaded member that may take it.
    for tp in sorted(set(eligible) - taken, key=lambda tp: (len(eligible[tp]), tp[0].bytes, tp[1])):
        least = min(eligible[tp], key=lambda m: (len(owned[m]), m))
        owned[least].add(tp)
    _balance(owned, eligible)
    out: Assignment = {member: {} for member in subscriptions}
    for member, parts in owned.items():
        for topic_id, p in parts:
            out[member].setdefault(topic_id, set()).add(p)
    return out


def _taken(owned: dict[str, set], tp) -> bool:
    return any(tp in parts for parts in owned.values())


def _balance(owned: dict[str, set[tuple[uuid.UUID, int]]], eligible: dict) -> None:
    """Move single partitions from a member to another that may take it while that narrows their gap by more than
    one; each move lowers the sum of squared loads, so this ends (after at most partitions x members moves)."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[giver], key=lambda tp: (tp[0].bytes, tp[1])):
                taker = min(eligible[tp], key=lambda m: (len(owned[m]), m))
                if len(owned[taker]) + 1 < len(owned[giver]):
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


#: name -> assignor, as clients name them (`group.remote.assignor`).
ASSIGNORS = {"uniform": uniform, "range": range_assignor}
