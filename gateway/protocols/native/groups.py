"""The native protocol's consumer-group admin: `ListGroups`, `DescribeGroup`, `ResetGroupOffsets` (what
`logway groups list|describe|reset-offsets` sends).

Why here and not a Kafka client in the CLI: committed offsets live in the engine's one offset store, shared by
every protocol (a native consumer's group has offsets but no Kafka membership), and the gateway's Kafka ListGroups
knows only the groups its coordinator holds in memory. The native listener sees both: the offset store through the
engine, and membership through the Kafka protocol's group directory (`gateway.protocols["kafka"].groups`, every
group type — classic, consumer (KIP-848), share (KIP-932) — read at request time through `kafka_groups()`; None
when the Kafka listener is disabled: every group is then "Empty", of no type). Only the directory's read-only
`views` is used. A reset checks the group's state and commits in one step of the trio thread, so no member can
join between the check and the commit (the same guarantee Kafka gives: its coordinator refuses a member-less
OffsetCommit for a non-Empty group).

With `workers: N` (on worker 0, where the offsets live), the bounds of another worker's partitions — the log end a
description shows, the earliest/latest a reset moves to — are asked of their owner (a DescribeTopic with
`details` through `forward`, one per topic and owner: its `last_stable_offset` is the end, as for this worker's
partitions, below the high watermark while a transaction is open), and for a reset to a timestamp the offset the
owner found for it in its segments (DescribeTopic's `at_timestamp`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

import orjson

from logway.codecs.native import MAX_FRAME_BYTES
from logway.codecs.native import events as nev

from ...steps import ForeignPartition

#: Kafka group states in which the offsets may be reset (kafka-consumer-groups: "the group must be inactive").
INACTIVE = ("Empty", "Dead")
#: A ListGroups entry's JSON beside its group id: its keys, the longest state and protocol type, a member count.
_GROUP_SUMMARY_BYTES = 128


class GroupAdmin:
    def __init__(self, steps, kafka_groups: Callable[[], object | None] = lambda: None, forward=None, *,
                 max_frame: int = MAX_FRAME_BYTES) -> None:
        """`forward`: a `NativeForwarder` (worker 0 of several), or None; `max_frame`: the native frame limit
        (a ListGroups page fills at most half of it)."""
        self.page_bytes = max_frame // 2
        self.steps = steps
        self.topics = steps.topics
        self.kafka_groups = kafka_groups
        self.forward = forward

    # -- membership, from the Kafka group directory when there is one ----------------------------------------
    def _views(self, group_ids: list[str] | None) -> dict[str, object]:
        """group id -> `GroupView` of the live Kafka groups (those of `group_ids`; every one for None)."""
        directory = self.kafka_groups()
        if directory is None or group_ids == []:
            return {}
        return {v.group_id: v for v in directory.views(group_ids)}

    # -- requests --------------------------------------------------------------------------------------------
    async def list_groups(self, ev: nev.ListGroupsRequest):
        """A page of the groups after `ev.after`: as many as fit half a frame (`next` names the last when more
        follow), so that no number of groups, nor their ids' lengths, makes the answer too large to send."""
        live = self._views(None)
        ids = sorted(set(self.steps.offset_groups()) | set(live))
        if ev.after is not None:
            ids = ids[bisect_right(ids, ev.after):]
        room = self.page_bytes
        groups = []
        for group_id in ids:
            room -= len(orjson.dumps(group_id)) + _GROUP_SUMMARY_BYTES
            if room < 0 and groups:
                break
            v = live.get(group_id)
            groups.append(nev.GroupSummary(group_id, "Empty", "", 0) if v is None else
                          nev.GroupSummary(group_id, v.state, v.protocol_type, len(v.members), v.type))
        return nev.ListGroupsResponse(groups, groups[-1].group_id if len(groups) < len(ids) else None)

    async def describe_group(self, ev: nev.DescribeGroupRequest):
        committed = self.steps.committed_group(ev.group_id)
        v = self._views([ev.group_id]).get(ev.group_id)
        if v is None and not committed:  # as Kafka's DescribeGroups: an unknown group is "Dead", not an error
            return nev.DescribeGroupResponse(ev.group_id, "Dead", "", [], [])
        members = []
        keys = set(committed)
        for m in (v.members if v is not None else ()):
            members.append(nev.GroupMember(m.member_id, m.client_id, m.client_host, m.partitions))
            keys.update(m.partitions)
        partitions = []
        foreign = await self._foreign_bounds(keys)
        for topic, partition in sorted(keys):
            c = committed.get((topic, partition))
            end = foreign[(topic, partition)][1] if (topic, partition) in foreign else self._log_end(topic, partition)
            partitions.append(nev.GroupPartition(topic, partition, None if c is None else c.offset, end,
                                                 "" if c is None else c.metadata))
        if v is None:
            return nev.DescribeGroupResponse(ev.group_id, "Empty", "", members, partitions)
        return nev.DescribeGroupResponse(ev.group_id, v.state, v.protocol_type, members, partitions, v.type)

    async def reset_offsets(self, ev: nev.ResetGroupOffsetsRequest):
        refused = self._active(ev.group_id)
        if refused is not None:
            return refused
        committed = self.steps.committed_group(ev.group_id)
        targets = self._targets(ev, committed)
        if isinstance(targets, nev.ErrorResponse):
            return targets
        foreign = await self._foreign_bounds(targets, ev.value if ev.to == "timestamp" else None)
        missing = [key for key in targets if self._is_foreign(*key)
                   and (key not in foreign or ev.to == "timestamp" and foreign[key][2] is None)]
        if missing:
            return nev.ErrorResponse(f"storage error: the worker serving partition {missing[0][1]} of topic "
                                     f"{missing[0][0]!r} did not answer")
        plan = await self._plan(ev, targets, foreign)
        offsets = [nev.GroupOffsetReset(t, p, None if committed.get((t, p)) is None else committed[(t, p)].offset,
                                        new) for (t, p), new in zip(targets, plan)]
        if ev.validate_only:
            return nev.ResetGroupOffsetsResponse(ev.group_id, offsets, False)
        refused = self._active(ev.group_id)  # again: members may have joined while the plan was made
        if refused is not None:
            return refused
        try:
            await self.steps.commit_offsets(ev.group_id, [(r.topic, r.partition, r.offset, "") for r in offsets])
        except ValueError as exc:  # what the offset store refuses (an empty or overlong group id)
            return nev.ErrorResponse(f"invalid request: {exc}")
        return nev.ResetGroupOffsetsResponse(ev.group_id, offsets, True)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _active(self, group_id: str) -> nev.ErrorResponse | None:
        v = self._views([group_id]).get(group_id)
        if v is None or v.state in INACTIVE:
            return None
        return nev.ErrorResponse(f"group has active members: {group_id!r} is {v.state} with {len(v.members)} "
                                 f"member(s); its offsets can be reset only while it is inactive (stop its consumers)")

    def _log_end(self, topic: str, partition: int) -> int | None:
        t = self.topics.get(topic)
        if t is None or partition >= len(t.partitions) or type(t.partitions[partition]) is ForeignPartition:
            return None  # (another worker's partition whose owner did not answer)
        return self.steps.marks(t.partitions[partition]).last_stable

    def _is_foreign(self, topic: str, partition: int) -> bool:
        t = self.topics.get(topic)
        return t is not None and partition < len(t.partitions) and type(t.partitions[partition]) is ForeignPartition

    async def _foreign_bounds(self, keys, at_timestamp: int | None = None) -> dict[tuple[str, int], tuple]:
        """(log start, last stable offset, offset at `at_timestamp` or None) of the other workers' partitions among
        `keys`, asked of their owners (one DescribeTopic per topic and owner); a partition whose owner does not
        answer is left out."""
        if self.forward is None:
            return {}
        asks: dict[tuple[int, str], set[int]] = {}
        for topic, partition in keys:
            if self._is_foreign(topic, partition):
                owner = self.topics.names[topic].partitions[partition].owner
                asks.setdefault((owner, topic), set()).add(partition)
        out = {}
        for (owner, topic), wanted in sorted(asks.items()):
            ask = nev.DescribeTopicRequest(topic, details=True, partitions=sorted(wanted), at_timestamp=at_timestamp)
            answer = await self.forward.call_decoded(owner, ask)
            if type(answer) is nev.DescribeTopicResponse:
                out.update({(topic, s.partition): (s.log_start_offset, s.last_stable_offset, s.timestamp_offset)
                            for s in answer.partitions if s.partition in wanted and s.last_stable_offset is not None})
        return out

    def _targets(self, ev: nev.ResetGroupOffsetsRequest, committed) -> list[tuple[str, int]] | nev.ErrorResponse:
        """The (topic, partition) pairs to reset, in order; an error for an unknown topic or partition."""
        topics = self.topics.names
        if ev.topics is None:
            pairs = sorted((t, p) for t, p in committed if t in topics and p < len(topics[t].partitions))
            if not pairs:
                return nev.ErrorResponse(f"invalid request: group {ev.group_id!r} has no committed offsets on "
                                         f"existing topics: name the topics to reset")
            return pairs
        pairs: dict[tuple[str, int], None] = {}  # ordered, without repeats
        for name, partitions in ev.topics:
            topic = topics.get(name)
            if topic is None:
                return nev.ErrorResponse(f"topic not found: {name}")
            count = len(topic.partitions)
            for p in (range(count) if partitions is None else partitions):
                if p >= count:
                    return nev.ErrorResponse(f"partition not found: topic={name}, partition={p}")
                pairs[(name, p)] = None
        return list(pairs)

    async def _plan(self, ev: nev.ResetGroupOffsetsRequest, targets: list[tuple[str, int]],
                    foreign: dict) -> list[int]:
        steps = self.steps
        own = [steps.partition(topic, partition) for topic, partition in targets if (topic, partition) not in foreign]
        found = iter(await steps.offsets_for_timestamp(own, ev.value) if ev.to == "timestamp" else ())
        out = []
        for topic, partition in targets:
            if (topic, partition) in foreign:  # another worker's: what its owner answered
                earliest, latest, at_time = foreign[(topic, partition)]
                out.append(earliest if ev.to == "earliest" else latest if ev.to == "latest"
                           else min(at_time, latest) if ev.to == "timestamp"  # (the owner's "none": its end)
                           else min(max(ev.value, earliest), latest))
                continue
            earliest, latest, _ = steps.marks(steps.partition(topic, partition))
            if ev.to == "earliest":
                new = earliest
            elif ev.to == "latest":
                new = latest
            elif ev.to == "offset":  # as kafka-consumer-groups: moved into the partition's range
                new = min(max(ev.value, earliest), latest)
            else:
                at = next(found)
                new = latest if at is None else max(at, earliest)
            out.append(new)
        return out

