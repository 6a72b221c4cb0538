"""The Kafka APIs of committed offsets: OffsetCommit (checked against the group's generation and member — or, for a
KIP-848 consumer group, the member epoch —, written to the shared offset store, synced with `flush: always`) and
OffsetFetch."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...errors import FAILURES, ErrorKind, kind_of
from ...steps import MAX_METADATA_BYTES
from .errors import error_code
from .records import NO_OFFSET

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")


async def offset_commit(broker: "BrokerState", body, version, conn):
    generation = body.generation_id_or_member_epoch if version >= 1 else -1
    code = broker.groups.validate_commit(body.group_id, generation, body.member_id, body.group_instance_id, version)
    steps = broker.steps
    topics = []
    wrote = False
    for t in body.topics:
        parts = []
        for p in t.partitions:
            err = code
            if err == E.NONE:
                try:
                    steps.partition(t.name, p.partition_index)
                    steps.write_offset(body.group_id, t.name, p.partition_index, p.committed_offset,
                                       p.committed_metadata or "")
                    wrote = True
                except ValueError:  # what the offset store refuses to hold
                    if len((p.committed_metadata or "").encode("utf-8", "replace")) > MAX_METADATA_BYTES:
                        err = E.OFFSET_METADATA_TOO_LARGE
                    else:
                        err = E.INVALID_COMMIT_OFFSET_SIZE if p.committed_offset >= 0 else E.INVALID_REQUEST
                except FAILURES as exc:
                    if kind_of(exc) in (ErrorKind.UNKNOWN_TOPIC, ErrorKind.UNKNOWN_PARTITION):
                        err = error_code(exc)
                    else:  # e.g. a full disk: not stored, retriable
                        log.error("offset commit for group %r failed: %s", body.group_id, exc)
                        err = E.COORDINATOR_NOT_AVAILABLE
            parts.append(O.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err))
        topics.append(O.OffsetCommitResponseTopic(name=t.name, partitions=parts))
    if wrote:
        try:
            await steps.sync_offsets()
        except FAILURES as exc:  # not durable, or (cluster) another gateway coordinates now: none is acknowledged
            code = E.NOT_COORDINATOR if kind_of(exc) is ErrorKind.NOT_HERE else E.COORDINATOR_NOT_AVAILABLE
            for t in topics:
                for p in t.partitions:
                    if p.error_code == E.NONE:
                        p.error_code = code
    return O.OffsetCommitResponse(throttle_time_ms=0, topics=topics)


async def offset_fetch(broker: "BrokerState", body, version, conn):
    """One group (v0-v7) or several (v8+). With require_stable (v7+; librdkafka sets it for read_committed
    consumers) a partition with an offset a transaction still has to commit answers UNSTABLE_OFFSET_COMMIT, which
    the client retries, rather than an offset the transaction is about to replace."""
    stable = version >= 7 and body.require_stable
    if version < 8:
        topics, code = _fetch_group(broker, body.group_id, body.topics, stable)
        return O.OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=code)
    groups = []
    for g in body.groups:
        code = E.NONE
        if version >= 9 and g.group_id in broker.consumer_groups.groups:  # KIP-848: a member checks its epoch
            code = broker.consumer_groups.validate_fetch(g.group_id, g.member_id, g.member_epoch)
        if code != E.NONE:
            groups.append(O.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code))
            continue
        topics, code = _fetch_group(broker, g.group_id, g.topics, stable)
        groups.append(O.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=code))
    return O.OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def _fetch_group(broker: "BrokerState", group_id: str, wanted_topics, stable: bool):
    """(topics, group error) of one group's committed offsets: those asked for, or (None) all of the group's."""
    steps = broker.steps
    if wanted_topics is None:
        by_topic: dict[str, list] = {}
        for (topic, partition), c in sorted(steps.committed_group(group_id).items()):
            by_topic.setdefault(topic, []).append(partition)
        wanted = sorted(by_topic.items())
    else:
        wanted = [(t.name, t.partition_indexes) for t in wanted_topics]
    pending = broker.transactions.pending_offsets(group_id) if stable else frozenset()
    topics = []
    for name, partitions in wanted:
        parts = []
        for p in partitions:
            if (name, p) in pending:
                parts.append(O.OffsetFetchResponsePartition(partition_index=p, committed_offset=NO_OFFSET,
                                                            metadata="", error_code=E.UNSTABLE_OFFSET_COMMIT))
                continue
            c = steps.committed(group_id, name, p)
            parts.append(O.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=c.offset if c else NO_OFFSET, committed_leader_epoch=-1,
                metadata=c.metadata if c else "", error_code=E.NONE))
        topics.append(O.OffsetFetchResponseTopic(name=name, partitions=parts))
    return topics, E.NONE
