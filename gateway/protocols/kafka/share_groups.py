"""The KIP-932 share group APIs — ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and the
offset admin APIs DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets — as calls on the
share coordinator (`share_coordinator.ShareCoordinator`; its docstring has the rules).

ShareFetch, in order: the share session (opened by epoch 0, checked and advanced otherwise, closed by -1), the
acknowledgements it carries (each partition's durable before the answer; an error is that partition's
acknowledge_error_code), then, unless the session closes, records acquired from the session's partitions — released
ones first, then new ones in whole batches from the share-partition's end — up to max_records and max_bytes (a
batch may go past max_records, as Kafka's batch alignment), each partition answered with the batches and the
acquired ranges with their delivery counts. Nothing to acquire: it waits for new records up to max_wait_ms (an
append to one of its partitions wakes it). Records are read as Kafka readers read them (read_uncommitted, the
share-group default); a control batch's offset is acknowledged by the client as a gap. Share groups are served
by a gateway of one worker (with `workers: N` the share APIs are not advertised).
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import TYPE_CHECKING

import trio

from logway.codecs.kafka.api import share_groups as S
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...errors import FAILURES
from ...formats import KAFKA
from ...steps import Isolation
from .consumer_coordinator import GroupError
from .consumer_groups import described_assignment, heartbeat_assignment
from .errors import error_code
from .group_types import SHARE
from .records import MAX_FETCH_WAIT_MS
from .topic_ids import topic_of

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")

__all__ = ["share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
           "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets", "SHARE_KEYS"]

#: The share-group APIs (not advertised by a gateway of several workers).
SHARE_KEYS = frozenset({S.SHARE_GROUP_HEARTBEAT_KEY, S.SHARE_GROUP_DESCRIBE_KEY, S.SHARE_FETCH_KEY,
                        S.SHARE_ACKNOWLEDGE_KEY, S.DESCRIBE_SHARE_GROUP_OFFSETS_KEY, S.ALTER_SHARE_GROUP_OFFSETS_KEY,
                        S.DELETE_SHARE_GROUP_OFFSETS_KEY})
#: A redelivered record's batch is read with this budget (a batch is read whole, whatever the budget).
REDELIVERY_READ_BYTES = 64 * 1024


# -- membership ----------------------------------------------------------------------------------------------------
async def share_group_heartbeat(broker: "BrokerState", body, version, conn):
    shares = broker.share_groups
    conflict = broker.groups.claim(body.group_id, SHARE) if body.group_id else None
    if conflict is not None:
        return S.ShareGroupHeartbeatResponse(error_code=E.GROUP_ID_NOT_FOUND,
                                             error_message=f"Group {body.group_id} is not a share group.")
    try:
        if body.member_epoch == -1:
            await shares.leave(body.group_id, body.member_id)
            return S.ShareGroupHeartbeatResponse(member_id=body.member_id, member_epoch=-1)
        member_id, epoch, assigned = shares.heartbeat(
            body.group_id, body.member_id, body.member_epoch, rack_id=body.rack_id,
            subscribed_names=body.subscribed_topic_names, client_id=conn.client_id or "",
            client_host=conn.peer.rpartition(":")[0])
    except GroupError as exc:
        return S.ShareGroupHeartbeatResponse(error_code=exc.code, error_message=str(exc))
    return S.ShareGroupHeartbeatResponse(
        member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=shares.heartbeat_interval_ms,
        assignment=heartbeat_assignment(assigned))


async def share_group_describe(broker: "BrokerState", body, version, conn):
    shares = broker.share_groups
    out = []
    for group_id in body.group_ids:
        group = shares.groups.get(group_id)
        if group is None:
            message = f"Group {group_id} is not a share group." if broker.groups.type_of(group_id) \
                else f"Group {group_id} not found."
            out.append(S.DescribedShareGroup(error_code=E.GROUP_ID_NOT_FOUND, error_message=message,
                                             group_id=group_id))
            continue
        out.append(S.DescribedShareGroup(
            group_id=group_id, group_state=group.state, group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch, assignor_name="simple",
            members=[S.DescribedShareGroupMember(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                assignment=described_assignment(broker, m.assigned))
                for m in group.members.values()]))
    return S.ShareGroupDescribeResponse(groups=out)


# -- ShareFetch, ShareAcknowledge ----------------------------------------------------------------------------------
class _Answer:
    """The partitions of one ShareFetch/ShareAcknowledge answer, in the order first met."""

    def __init__(self) -> None:
        self.parts: dict[tuple[uuid.UUID, int], S.SharePartitionData] = {}

    def get(self, topic_id: uuid.UUID, partition: int, node_id: int) -> S.SharePartitionData:
        part = self.parts.get((topic_id, partition))
        if part is None:
            part = self.parts[(topic_id, partition)] = S.SharePartitionData(
                partition_index=partition, current_leader=S.LeaderIdAndEpoch(node_id, 0), records=b"")
        return part

    def topics(self) -> list[S.ShareFetchableTopicResponse]:
        by_topic: dict[uuid.UUID, list] = {}
        for (topic_id, _), part in self.parts.items():
            by_topic.setdefault(topic_id, []).append(part)
        return [S.ShareFetchableTopicResponse(topic_id=t.bytes, partitions=parts) for t, parts in by_topic.items()]


def _plog(broker: "BrokerState", topic_id: uuid.UUID, partition: int):
    """(partition log, None) or (None, the error code: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION)."""
    topic = topic_of(broker.steps.topics, topic_id.bytes)
    if topic is None:
        return None, E.UNKNOWN_TOPIC_ID
    try:
        return broker.steps.partition(topic.name, partition), None
    except FAILURES as exc:
        return None, error_code(exc)


async def _acknowledge(broker: "BrokerState", group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                       batches) -> int:
    """Apply a partition's acknowledgement batches, durably; the first error (what came before it applies)."""
    shares = broker.share_groups
    plog, code = _plog(broker, topic_id, partition)
    if plog is None:
        return code
    async with shares.lock(group_id, topic_id, partition):
        part = await shares.partition(group_id, topic_id, partition, plog.topic, partial(broker.steps.marks, plog))
        code = E.NONE
        for batch in batches:
            code = part.acknowledge(member_id, batch.first_offset, batch.last_offset, batch.acknowledge_types)
            if code != E.NONE:
                break
        try:
            await shares.save(group_id, topic_id, partition, part, sync=True)
        except FAILURES as exc:  # not durable: nothing acknowledged here counts (the client retries)
            log.error("share group %r: saving acknowledgements failed: %s", group_id, exc)
            return E.KAFKA_STORAGE_ERROR
    return code


async def _acknowledge_all(broker: "BrokerState", answer: _Answer, group_id: str, member_id: str, topics,
                           refuse: int = E.NONE) -> None:
    for t in topics:
        topic_id = uuid.UUID(bytes=t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            part = answer.get(topic_id, p.partition_index, broker.node_id)
            part.acknowledge_error_code = refuse or await _acknowledge(
                broker, group_id, member_id, topic_id, p.partition_index, p.acknowledgement_batches)


async def _acquire(broker: "BrokerState", answer: _Answer, group_id: str, member_id: str, topic_id: uuid.UUID,
                   partition: int, max_records: int, budget: int) -> tuple[int, int]:
    """Acquire records of one partition for the member into `answer`: (records acquired, bytes used)."""
    shares, steps = broker.share_groups, broker.steps
    plog, code = _plog(broker, topic_id, partition)
    if plog is None:
        answer.get(topic_id, partition, broker.node_id).error_code = code
        return 0, 0
    async with shares.lock(group_id, topic_id, partition):
        part = await shares.partition(group_id, topic_id, partition, plog.topic, partial(broker.steps.marks, plog))
        want = min(max_records, shares.can_acquire(part))
        if want <= 0:
            return 0, 0
        deadline = shares.lock_deadline(group_id)
        ranges = part.acquire_available(member_id, want, deadline)
        taken = sum(last - first + 1 for first, last, _ in ranges)
        chunks: list[bytes] = []
        used = 0
        try:
            cursor = -1
            for first, last, _ in ranges:  # the batches holding released records, each once
                while cursor <= last:
                    read = await steps.read(plog, max(first, cursor), REDELIVERY_READ_BYTES, KAFKA,
                                            Isolation.UNCOMMITTED)
                    if read is None:
                        break
                    data = await _bytes(broker, read)
                    chunks.append(data)
                    used += len(data)
                    cursor = read.slice.end_offset
            end, high = part.end, steps.marks(plog).high_watermark
            if taken < want and end < high and budget - used > 0:
                read = await steps.read(plog, end, budget - used, KAFKA, Isolation.UNCOMMITTED)
                if read is not None:
                    acquired = part.acquire_new(member_id, min(read.slice.end_offset, high), deadline)
                    if acquired is not None:
                        ranges.append(acquired)
                        taken += acquired[1] - acquired[0] + 1
                        data = await _bytes(broker, read)
                        chunks.append(data)
                        used += len(data)
        except FAILURES as exc:  # e.g. stored records that cannot be converted: released again
            part.release_ranges(member_id, ranges)
            answer.get(topic_id, partition, broker.node_id).error_code = error_code(exc)
            return 0, 0
        if not ranges:
            return 0, 0
        try:
            await shares.save(group_id, topic_id, partition, part, sync=False)
        except FAILURES as exc:
            log.error("share group %r: saving acquired records failed: %s", group_id, exc)
            part.release_ranges(member_id, ranges)
            answer.get(topic_id, partition, broker.node_id).error_code = E.KAFKA_STORAGE_ERROR
            return 0, 0
    entry = answer.get(topic_id, partition, broker.node_id)
    entry.records = b"".join(chunks)
    entry.acquired_records = [S.AcquiredRecords(first, last, count) for first, last, count in sorted(ranges)]
    return taken, used


async def _bytes(broker: "BrokerState", read) -> bytes:
    if read.zero_copy:  # a file range: several of them go out in one answer, so as bytes
        return await broker.steps.in_thread(read.slice.read)
    return bytes(read.data)


def _top_error(cls, code: int, message: str):
    return cls(error_code=code, error_message=message)


async def share_fetch(broker: "BrokerState", body, version, conn):
    shares = broker.share_groups
    group_id, member_id = body.group_id or "", body.member_id or ""
    if not shares.is_member(group_id, member_id):
        return _top_error(S.ShareFetchResponse, E.UNKNOWN_MEMBER_ID,
                          f"Member {member_id} is not a member of share group {group_id}.")
    try:
        session = shares.session(group_id, member_id, body.share_session_epoch)
    except GroupError as exc:
        return _top_error(S.ShareFetchResponse, exc.code, str(exc))
    asked = {(uuid.UUID(bytes=t.topic_id), p.partition_index) for t in body.topics for p in t.partitions}
    forgotten = {(uuid.UUID(bytes=t.topic_id), p) for t in body.forgotten_topics_data for p in t.partitions}
    closing = body.share_session_epoch == -1
    answer = _Answer()
    # acknowledgements cannot open a session (Kafka's rule: the client has nothing acquired in a new one)
    await _acknowledge_all(broker, answer, group_id, member_id, body.topics,
                           E.INVALID_SHARE_SESSION_EPOCH if body.share_session_epoch == 0 else E.NONE)
    lock_ms = shares.config(group_id)["share.record.lock.duration.ms"]
    if closing:
        await shares.close_session(session)
        return S.ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=answer.topics())
    session.partitions = (session.partitions | asked) - forgotten
    shares.advance(session)
    partitions = sorted(session.partitions, key=lambda k: (k[0].bytes, k[1]))
    max_records = body.max_records if body.max_records > 0 else 500
    max_bytes = min(body.max_bytes if body.max_bytes > 0 else broker.config.limits.max_fetch_bytes,
                    broker.config.limits.max_fetch_bytes)

    async def build(at_once: bool):
        records_left, bytes_left = max_records, max_bytes
        for topic_id, partition in partitions:
            if records_left <= 0 or bytes_left <= 0:
                break
            taken, used = await _acquire(broker, answer, group_id, member_id, topic_id, partition, records_left,
                                         bytes_left)
            records_left -= taken
            bytes_left -= used
        response = S.ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=answer.topics())
        return response, bool(answer.parts)

    wait = min(max(body.max_wait_ms, 0), broker.config.limits.max_wait_ms, MAX_FETCH_WAIT_MS) / 1000
    if wait <= 0 or answer.parts:
        return (await build(False))[0]
    keys = []
    for topic_id, partition in partitions:
        topic = broker.steps.topics.topic_by_id(topic_id)
        if topic is not None:
            keys.append((topic.name, partition))
    deadline = trio.current_time() + wait
    return broker.steps.long_poll(keys, deadline, build, at_once=False)


async def share_acknowledge(broker: "BrokerState", body, version, conn):
    shares = broker.share_groups
    group_id, member_id = body.group_id or "", body.member_id or ""
    try:
        session = shares.session(group_id, member_id, body.share_session_epoch)
        if body.share_session_epoch == 0:
            raise GroupError(E.INVALID_SHARE_SESSION_EPOCH, "acknowledgements cannot open a share session")
    except GroupError as exc:
        return _top_error(S.ShareAcknowledgeResponse, exc.code, str(exc))
    answer = _Answer()
    await _acknowledge_all(broker, answer, group_id, member_id, body.topics)
    if body.share_session_epoch == -1:
        await shares.close_session(session)
    else:
        shares.advance(session)
    return S.ShareAcknowledgeResponse(responses=[
        S.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=[
            S.ShareAcknowledgePartitionResponse(partition_index=p.partition_index, error_code=p.acknowledge_error_code,
                                                error_message=p.acknowledge_error_message,
                                                current_leader=p.current_leader)
            for p in t.partitions])
        for t in answer.topics()])


# -- the offset admin APIs -----------------------------------------------------------------------------------------
async def describe_share_group_offsets(broker: "BrokerState", body, version, conn):
    """Each share-partition's start offset (-1: never started); topics null = every one the group has state of."""
    shares, topics_ = broker.share_groups, broker.steps.topics
    groups = []
    for g in body.groups:
        if g.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic_id, partition in shares.stored_partitions(g.group_id):
                topic = topics_.topic_by_id(topic_id)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(partition)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, partitions in wanted.items():
            topic = topics_.get(name)
            entry = S.DescribeShareGroupOffsetsResponseTopic(topic_name=name,
                                                             topic_id=topic.topic_id.bytes if topic else bytes(16))
            for p in partitions:
                item = S.DescribeShareGroupOffsetsResponsePartition(partition_index=p)
                if topic is None or not 0 <= p < len(topic.partitions):
                    item.error_code, item.error_message = E.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{p}"
                else:
                    item.start_offset = await shares.start_offset(g.group_id, topic.topic_id, p)
                    item.leader_epoch = 0
                entry.partitions.append(item)
            topics.append(entry)
        groups.append(S.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics))
    return S.DescribeShareGroupOffsetsResponse(groups=groups)


def _empty_check(broker: "BrokerState", group_id: str) -> tuple[int, str | None]:
    if not group_id:
        return E.INVALID_GROUP_ID, "GroupId can't be empty."
    if broker.share_groups.holds(group_id):
        return E.NON_EMPTY_GROUP, f"Share group {group_id} has members: its offsets can only change while it is empty."
    other = broker.groups.type_of(group_id)
    if other is not None and other != SHARE:
        return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    return E.NONE, None


async def alter_share_group_offsets(broker: "BrokerState", body, version, conn):
    """Set share-partition start offsets of an empty share group (nothing in flight after), durably."""
    code, message = _empty_check(broker, body.group_id)
    if code != E.NONE:
        return S.AlterShareGroupOffsetsResponse(error_code=code, error_message=message)
    responses = []
    for t in body.topics:
        topic = broker.steps.topics.get(t.topic_name)
        entry = S.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name,
                                                      topic_id=topic.topic_id.bytes if topic else bytes(16))
        for p in t.partitions:
            result = S.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                result.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                start, _, high = broker.steps.marks(topic.partitions[p.partition_index])
                if not start <= p.start_offset <= high:
                    result.error_code = E.INVALID_REQUEST
                    result.error_message = f"start offset {p.start_offset} is outside {start}..{high}"
                else:
                    await broker.share_groups.reset(body.group_id, topic.topic_id, p.partition_index, p.start_offset)
            entry.partitions.append(result)
        responses.append(entry)
    return S.AlterShareGroupOffsetsResponse(responses=responses)


async def delete_share_group_offsets(broker: "BrokerState", body, version, conn):
    """Forget an empty share group's state of whole topics (it starts over by share.auto.offset.reset)."""
    code, message = _empty_check(broker, body.group_id)
    if code != E.NONE:
        return S.DeleteShareGroupOffsetsResponse(error_code=code, error_message=message)
    stored = broker.share_groups.stored_partitions(body.group_id)
    responses = []
    for t in body.topics:
        topic = broker.steps.topics.get(t.topic_name)
        entry = S.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name,
                                                       topic_id=topic.topic_id.bytes if topic else bytes(16))
        if topic is None:
            entry.error_code, entry.error_message = E.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {t.topic_name}"
        else:
            for topic_id, partition in stored:
                if topic_id == topic.topic_id:
                    await broker.share_groups.reset(body.group_id, topic_id, partition, None)
        responses.append(entry)
    return S.DeleteShareGroupOffsetsResponse(responses=responses)
