"""The native protocol's requests on the shared log: `NativeHandler.handle(event) -> response event`.

Storage failures become the seed's error texts (`partition not found: …`, `offset out of range: …`) through one
table (`_ERRORS`, by `ErrorKind`); a fetch with `max_wait_ms` parks in the shared long-poll step until enough
payload arrived (a `LongPoll` the pump waits for before the next request; the append that brings enough writes it).

With `workers: N`, every worker's handler relays a request for a partition another worker owns (Produce, Fetch,
DeleteRecords) to that worker (`forwarding.NativeForwarder`; a Fetch with `group_id` is first resolved against the
committed offset, which lives on worker 0) — or rather answers `pump.HandOver`, and the pump gives that worker the whole
connection when it can (`handover.py`), relaying only when it cannot — and merges every worker's partitions into
DescribeTopic (asking each owner for its own partitions only: `DescribeTopic.partitions`, so a describe never fans out
twice). On the other workers, the requests on committed offsets and groups (OffsetCommit, OffsetFetch,
DeleteGroupOffsets and the group admin requests) and DeleteTopic (the topic's offsets go with it) are relayed whole to
worker 0, the offset store's and the group coordinator's owner.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import Callable

import trio

from logway.codecs.native import events as nev
from logway.codecs.native import security as sec
from ...errors import FAILURES, ErrorKind, kind_of, running_out_line
from ...formats import NATIVE
from ...pump import HandOver
from ...waiting import LongPoll
from ...steps import ForeignPartition, Steps
from .groups import GroupAdmin
from .security import security_handlers

log = logging.getLogger("logway.gateway.native")
NO_RECORDS = nev.EncodedRecords(b"", (), (), ())
#: A native record's size when deciding whether encoding a Produce's records into the topic's format is large
#: enough for a worker thread (`Steps.convert`): counting their bytes would cost what it saves.
RECORD_SIZE_GUESS = 64
#: `{"Produce":{"offsets":[` and `]}}`, rounded up.
_PRODUCE_ANSWER_OVERHEAD = 32


def _answerable(count: int, next_offset: int, max_frame: int) -> int:
    """How many of `count` records appended at `next_offset` on may go in one Produce: its answer lists every
    offset, and must fit one frame (each offset at most as many digits as the last one, and a comma)."""
    width = len(str(next_offset + count)) + 1
    return max(0, (max_frame - _PRODUCE_ANSWER_OVERHEAD) // width)


def _partition_not_found(exc, ev) -> str:
    return f"partition not found: topic={ev.topic}, partition={getattr(ev, 'partition', 0)}"


def _storage_error(exc, ev) -> str:
    return f"storage error: {exc}"


def _topic_not_found(exc: Exception, ev) -> nev.ErrorResponse:
    """A topic-level admin request's answer to an unknown topic; any other failure goes on (`_failed`)."""
    if kind_of(exc) is not ErrorKind.UNKNOWN_TOPIC:
        raise exc
    return nev.ErrorResponse(f"topic not found: {ev.topic}")


#: ErrorKind -> the answer's text (exc, request) -> str.
_ERRORS = {
    ErrorKind.UNKNOWN_TOPIC: _partition_not_found,
    ErrorKind.UNKNOWN_PARTITION: _partition_not_found,
    ErrorKind.OFFSET_OUT_OF_RANGE: lambda exc, ev: (f"offset out of range: offset={ev.offset}, "
                                                    f"log_start_offset={exc.log_start}, log_end_offset={exc.log_end}"),
    ErrorKind.TOPIC_EXISTS: lambda exc, ev: f"topic already exists: {ev.topic}",
    ErrorKind.INVALID_TOPIC_NAME: lambda exc, ev: f"invalid topic name: {exc}",
    ErrorKind.INVALID_PARTITIONS: lambda exc, ev: f"invalid request: {exc}",
    ErrorKind.LIMIT_REACHED: lambda exc, ev: f"limit reached: {exc}",
    ErrorKind.INVALID_CONFIG: lambda exc, ev: f"invalid request: {exc}",
    ErrorKind.BATCH_TOO_LARGE: lambda exc, ev: f"record too large: {exc}",
    ErrorKind.UNSUPPORTED_RECORD: lambda exc, ev: f"invalid record: {exc}",  # refused, never dropped
    ErrorKind.STORAGE_FAILURE: lambda exc, ev: f"storage error: {exc.strerror or exc}",
}


#: The requests on committed offsets and groups — and DeleteTopic, whose offsets go with the topic, and the changes
#: of ACLs and users: with `workers: N`, answered by worker 0 (`offsets_owner`), as Kafka's DeleteTopics and group
#: APIs are.
_OFFSETS_OWNER_REQUESTS = (nev.OffsetCommitRequest, nev.OffsetFetchRequest, nev.DeleteGroupOffsetsRequest,
                           nev.ListGroupsRequest, nev.DescribeGroupRequest, nev.ResetGroupOffsetsRequest,
                           nev.DeleteTopicRequest,
                           # and the security administration's changes: worker 0 writes the security store
                           sec.CreateAclsRequest, sec.DeleteAclsRequest, sec.AlterUserRequest, sec.AlterQuotasRequest)


async def _unsupported(event) -> nev.ErrorResponse:
    return nev.ErrorResponse(f"unsupported request: {type(event).__name__}")


class NativeHandler:
    def __init__(self, steps: Steps, config, kafka_groups=lambda: None, forward=None, look_up=None,
                 offsets_owner: Callable[[], int | None] | None = None, security_admin=None) -> None:
        """`kafka_groups()`: the Kafka protocol's group directory, or None (membership for the group
        requests, see `groups.py`). With `workers: N`: `forward`, a `NativeForwarder`, or None — a request for
        another worker's partition is then answered with the error naming that worker; `look_up(names)` reads the
        topics of the (topic, partition) pairs another worker may have just created or grown, before a request
        naming one is answered; `offsets_owner()`, the member that holds the committed offsets when it is not
        this one, else None (their requests are relayed to it whole; a cluster's coordinator can move).
        `security_admin`: the gateway's `security.SecurityAdmin` (the ACL, user and quota requests; None: they are
        unsupported)."""
        self.steps = steps
        self.forward = forward
        self.offsets_owner = offsets_owner
        self.look_up = look_up
        self.topics = steps.topics
        self.limits = config.limits
        self.groups = GroupAdmin(steps, kafka_groups, forward, max_frame=config.limits.max_frame_bytes)
        self._handlers = {
            nev.ProduceRequest: self._produce,
            nev.FetchRequest: self._fetch,
            nev.OffsetCommitRequest: self._commit,
            nev.OffsetFetchRequest: self._offset_fetch,
            nev.CreateTopicRequest: self._create_topic,
            nev.DeleteTopicRequest: self._delete_topic,
            nev.ListTopicsRequest: self._list_topics,
            nev.DescribeTopicRequest: self._describe_topic,
            nev.CreatePartitionsRequest: self._create_partitions,
            nev.DeleteRecordsRequest: self._delete_records,
            nev.AlterTopicConfigRequest: self._alter_topic_config,
            nev.DescribeTopicConfigRequest: self._describe_topic_config,
            nev.DeleteGroupOffsetsRequest: self._delete_group_offsets,
            nev.ListGroupsRequest: self.groups.list_groups,
            nev.DescribeGroupRequest: self.groups.describe_group,
            nev.ResetGroupOffsetsRequest: self.groups.reset_offsets,
            nev.PingRequest: self._ping,
        }
        if security_admin is not None:
            self._handlers.update(security_handlers(security_admin))
        if offsets_owner is not None:
            for kind in _OFFSETS_OWNER_REQUESTS:
                self._handlers[kind] = partial(self._to_offsets_owner, self._handlers.get(kind, _unsupported))

    async def handle(self, event):
        """The answer to `event`: a response event, or a `LongPoll` (a fetch that waits for data), whose answer gets
        the same error mapping."""
        handler = self._handlers.get(type(event))
        if handler is None:
            return await _unsupported(event)
        if self.look_up is not None and hasattr(event, "topic"):
            # (workers: N) a topic another worker created or grew a moment ago is read before the request
            await self.look_up([(event.topic, getattr(event, "partition", None))])
        try:
            reply = await handler(event)
        except FAILURES as exc:
            return self._failed(event, exc)
        if type(reply) is LongPoll:
            return reply.rescued(partial(self._failed, event))
        return reply

    def _failed(self, event, exc: Exception) -> nev.ErrorResponse:
        """A storage failure serving `event`, answered as the seed's error texts (anything else raised again)."""
        if not isinstance(exc, FAILURES):
            raise exc
        kind = kind_of(exc)
        if kind is ErrorKind.STORAGE_FAILURE:
            log.error("I/O error serving %s: %s", type(event).__name__, running_out_line(exc, self.topics.data_dir))
        return nev.ErrorResponse(_ERRORS.get(kind, _storage_error)(exc, event))

    async def _relay(self, plog: ForeignPartition, ev):
        """`ev`, wholly for the worker that owns `plog`: a `HandOver` — the pump gives that worker the connection
        or relays `ev` to it."""
        if self.forward is None:
            raise plog.refusal()
        return HandOver(plog.owner, ev, partial(self.forward.call, plog.owner, ev))

    async def _to_offsets_owner(self, here, ev):
        """(one member of several) a request on committed offsets or groups: answered by the offsets' owner (`here`,
        when that is this member)."""
        owner = self.offsets_owner()
        if owner is None:
            return await here(ev)
        return await self.forward.call(owner, ev)

    async def _committed(self, group_id: str, topic: str, partition: int) -> int | None | nev.ErrorResponse:
        """The group's committed offset of the partition (None: none), asked of the offsets' owner if elsewhere."""
        owner = None if self.offsets_owner is None else self.offsets_owner()
        if owner is None:
            committed = self.steps.committed(group_id, topic, partition)
            return None if committed is None else committed.offset
        answer = await self.forward.call_decoded(owner, nev.OffsetFetchRequest(topic, partition, group_id))
        return answer.offset if type(answer) is nev.OffsetFetchResponse else answer

    async def _produce(self, ev: nev.ProduceRequest):
        steps = self.steps
        plog = steps.partition(ev.topic, ev.partition)
        if type(plog) is ForeignPartition:
            return await self._relay(plog, ev)
        if not ev.records:
            return nev.ProduceResponse([])
        count = len(ev.records)
        most = _answerable(count, steps.log_end(plog), self.limits.max_frame_bytes)
        if count > most:  # refused before anything is appended: its answer could not be sent
            return nev.ErrorResponse(f"too many records in one Produce: {count}; the answer's offsets must fit a "
                                     f"frame (limits.max_frame_bytes): send at most {most} per request")
        data = await steps.convert(count * RECORD_SIZE_GUESS, steps.encoder(plog), ev.records)
        cuts = steps.sync_point(plog)
        result = steps.append(plog, data)
        await steps.make_durable(plog, cuts)
        return nev.ProduceResponse(list(range(result.base_offset, result.last_offset + 1)))

    async def _fetch(self, ev: nev.FetchRequest):
        plog = self.steps.partition(ev.topic, ev.partition)
        start = ev.offset
        if ev.group_id is not None:
            committed = await self._committed(ev.group_id, ev.topic, ev.partition)
            if type(committed) is nev.ErrorResponse:
                return committed
            if committed is not None and committed > start:
                start = committed
        if type(plog) is ForeignPartition:  # the committed offset is resolved first (the owner has no group)
            return await self._relay(plog, replace(ev, offset=start, group_id=None))
        high = self.steps.marks(plog).high_watermark
        if start > high:
            return nev.FetchResponse(NO_RECORDS, high)
        max_bytes = min(max(ev.max_bytes, 0), self.limits.max_fetch_bytes)
        wait = min(ev.max_wait_ms, self.limits.max_wait_ms) / 1000
        min_bytes = max(ev.min_bytes, 1)

        async def build(at_once: bool):
            records, next_offset = await self._read_records(plog, start, max_bytes, at_once)
            enough = wait <= 0 or (len(records) > 0 and records.value_bytes >= min_bytes)
            return nev.FetchResponse(records, next_offset), enough

        if wait <= 0:
            return (await build(False))[0]
        key, deadline = (ev.topic, ev.partition), trio.current_time() + wait
        return self.steps.long_poll([key], deadline, build)

    async def _read_records(self, plog, start: int, max_bytes: int, at_once: bool):
        end = self.steps.marks(plog).last_stable  # before the read: a sync in a worker thread may move the watermark
        read = await self.steps.read(plog, start, max_bytes, NATIVE, at_once=at_once)
        if read is None:
            return NO_RECORDS, max(start, end)
        fitting = read.data.fitting(max_bytes)
        records = read.data.head(fitting)  # (shared with other readers: never changed)
        # All of the slice's records: the next fetch starts after the slice (past offsets a compacted topic's cleaner
        # left empty at its end), else after the last record sent.
        return records, read.slice.end_offset if fitting == len(read.data) else records.offsets[-1] + 1

    async def _commit(self, ev: nev.OffsetCommitRequest):
        self.steps.partition(ev.topic, ev.partition)
        try:
            await self.steps.commit_offset(ev.group_id, ev.topic, ev.partition, ev.offset, ev.metadata)
        except ValueError as exc:  # what the offset store refuses to hold (empty or overlong group, metadata)
            return nev.ErrorResponse(f"invalid request: {exc}")
        return nev.OffsetCommitResponse(True)

    async def _offset_fetch(self, ev: nev.OffsetFetchRequest):
        self.steps.partition(ev.topic, ev.partition)
        committed = self.steps.committed(ev.group_id, ev.topic, ev.partition)
        return nev.OffsetFetchResponse(committed.offset if committed is not None else None)

    async def _create_topic(self, ev: nev.CreateTopicRequest):
        await self.topics.create(ev.topic, ev.partitions)
        return nev.CreateTopicResponse(True)

    async def _delete_topic(self, ev: nev.DeleteTopicRequest):
        try:
            await self.topics.delete(ev.topic)
        except FAILURES as exc:
            return _topic_not_found(exc, ev)
        return nev.DeleteTopicResponse(True)

    async def _list_topics(self, ev: nev.ListTopicsRequest):
        return nev.ListTopicsResponse([nev.TopicSummary(t.name, len(t.partitions)) for t in self.topics.all()])

    async def _describe_topic(self, ev: nev.DescribeTopicRequest):
        steps = self.steps
        topic = self.topics.get(ev.topic)
        if topic is None:
            return nev.ErrorResponse(f"topic not found: {ev.topic}")
        count = len(topic.partitions)
        wanted = range(count) if ev.partitions is None else sorted({p for p in ev.partitions if 0 <= p < count})
        mine, owners = [], {}
        for i in wanted:
            p = topic.partitions[i]  # (indexing gives another worker's as a ForeignPartition; iterating skips it)
            if type(p) is ForeignPartition:
                if self.forward is not None:
                    owners.setdefault(p.owner, []).append(i)
            else:
                mine.append(p)
        marks = [steps.marks(p) for p in mine]
        if not ev.details:
            parts = [nev.PartitionSummary(p.partition, m.log_start, m.high_watermark) for p, m in zip(mine, marks)]
        else:
            parts = [nev.PartitionSummary(p.partition, m.log_start, m.high_watermark, *steps.stored_size(p),
                                          last_stable_offset=m.last_stable) for p, m in zip(mine, marks)]
        if ev.at_timestamp is not None and mine:
            found = await steps.offsets_for_timestamp(mine, ev.at_timestamp)
            parts = [replace(s, timestamp_offset=s.log_end_offset if f is None else max(f, s.log_start_offset))
                     for s, f in zip(parts, found)]
        for worker, theirs in sorted(owners.items()):  # (workers: N) each owner's partitions, from it
            answer = await self.forward.call_decoded(worker, replace(ev, partitions=theirs))
            if type(answer) is not nev.DescribeTopicResponse:
                return answer
            parts += answer.partitions
        if owners:
            parts.sort(key=lambda s: s.partition)
        return nev.DescribeTopicResponse(topic.name, parts, topic.format if ev.details else None)

    # -- admin: topic-level requests answer an unknown topic with "topic not found", as DeleteTopic does -----------
    async def _create_partitions(self, ev: nev.CreatePartitionsRequest):
        try:
            topic = await self.topics.create_partitions(ev.topic, ev.partitions, validate_only=ev.validate_only)
        except FAILURES as exc:
            return _topic_not_found(exc, ev)
        return nev.CreatePartitionsResponse(topic.name, len(topic.partitions))

    async def _delete_records(self, ev: nev.DeleteRecordsRequest):
        plog = self.steps.partition(ev.topic, ev.partition)
        if type(plog) is ForeignPartition:
            return await self._relay(plog, ev)
        return nev.DeleteRecordsResponse(await self.topics.delete_records(plog, ev.offset))

    async def _alter_topic_config(self, ev: nev.AlterTopicConfigRequest):
        try:
            await self.topics.alter_config(ev.topic, ev.set, ev.delete, validate_only=ev.validate_only)
        except FAILURES as exc:
            return _topic_not_found(exc, ev)
        return nev.AlterTopicConfigResponse(not ev.validate_only)

    async def _describe_topic_config(self, ev: nev.DescribeTopicConfigRequest):
        try:
            entries = self.topics.config(ev.topic, ev.keys)
        except FAILURES as exc:
            return _topic_not_found(exc, ev)
        return nev.DescribeTopicConfigResponse(ev.topic, [
            nev.TopicConfigEntry(e.name, e.value, e.source, e.default, e.read_only) for e in entries])

    async def _delete_group_offsets(self, ev: nev.DeleteGroupOffsetsRequest):
        try:
            deleted = await self.steps.delete_group_offsets(ev.group_id, ev.partitions)
        except ValueError as exc:  # what the offset store refuses (an empty or overlong group id or topic)
            return nev.ErrorResponse(f"invalid request: {exc}")
        return nev.DeleteGroupOffsetsResponse(deleted)

    async def _ping(self, ev: nev.PingRequest):
        return nev.PongResponse()
