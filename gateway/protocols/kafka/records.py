"""The Kafka APIs that move records: Produce, Fetch and ListOffsets.

Produce: a `kafka`-format topic stores the client's RecordBatches as sent (CRC checked by the storage adapter,
base offset stamped), legacy MessageSets (Produce v0–v2) are converted up, other formats get the records
re-encoded; idempotent producers' retries are answered with their original offset (`producers`). Fetch reads
through the shared read step (the stored bytes sent as they lie when the topic is `kafka` and the version ≥ 4)
and parks in the shared long-poll step until `min_bytes` arrived or `max_wait_ms` passed: a Fetch that may wait
is a `LongPoll` the pump waits for in request order, and the append that brings enough data writes its answer.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from logway.codecs.errors import RecordFormatError
from logway.codecs.kafka import legacy
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import BATCH_HEADER_SIZE, iter_batches, parse_header

from ...errors import FAILURES, running_out_line
from ...formats import KAFKA, MESSAGE_SET_V0, MESSAGE_SET_V1
from ...steps import ForeignPartition, Isolation, Partition
from ...transactions import PeerUnavailable, TxnError
from .errors import PRODUCE_ERRORS, error_code
from .producers import BatchSeq
from .topic_ids import unknown_id_code
from .transactions import txn_error_code

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")

__all__ = ["produce", "fetch", "list_offsets", "NO_OFFSET"]

#: Kafka's "no offset" / "no timestamp".
NO_OFFSET = -1
#: Fetch bounds applied to client values (a client may ask for up to 2 GiB).
MAX_FETCH_WAIT_MS = 60_000


# -- Produce ---------------------------------------------------------------------------------------------
async def produce(broker: "BrokerState", body, version, conn):
    if body.acks not in (0, 1, -1):
        return _produce_errors(body, E.INVALID_REQUIRED_ACKS)
    durable = body.acks == -1 or broker.steps.leader_acks_wait
    responses = []
    for td in body.topic_data:
        parts = []
        for pd in td.partition_data:
            part = await _produce_partition(broker, td.name, pd.index, pd.records, durable)
            part.error_code = unknown_id_code(P.API_KEY, version, td.name, part.error_code)
            parts.append(part)
        responses.append(P.TopicProduceResponse(name=td.name, partition_responses=parts, topic_id=td.topic_id))
    if body.acks == 0:
        return None
    return P.ProduceResponse(responses=responses, throttle_time_ms=0)


def _produce_errors(body, code):
    if body.acks == 0:
        return None
    return P.ProduceResponse(throttle_time_ms=0, responses=[
        P.TopicProduceResponse(name=td.name, topic_id=td.topic_id, partition_responses=[
            P.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=NO_OFFSET,
                                       log_append_time_ms=-1, log_start_offset=-1)
            for pd in td.partition_data])
        for td in body.topic_data])


async def _produce_partition(broker: "BrokerState", topic: str, partition: int, records, durable: bool):
    def answer(code, base=NO_OFFSET, start=-1, message=None):
        return P.PartitionProduceResponse(index=partition, error_code=code, base_offset=base,
                                          log_append_time_ms=-1, log_start_offset=start, error_message=message)

    steps = broker.steps
    try:
        plog = steps.partition(topic, partition)
    except FAILURES as exc:
        return answer(error_code(exc))
    if type(plog) is ForeignPartition:  # (a cluster: the partition moved to another member after routing)
        return answer(E.NOT_LEADER_OR_FOLLOWER)
    if not records:
        return answer(E.CORRUPT_MESSAGE, message="empty record set")
    data = bytes(records) if not isinstance(records, bytes) else records
    try:
        if len(data) > 16 and data[16] < 2:  # legacy MessageSet (magic 0/1, Produce < 3): convert up
            data = legacy.message_set_to_batch(data, int(time.time() * 1000))
            if not data:
                return answer(E.CORRUPT_MESSAGE, message="empty message set")
        headers = [parse_header(b) for b in iter_batches(data) if len(b) >= BATCH_HEADER_SIZE]
    except RecordFormatError as exc:
        return answer(E.CORRUPT_MESSAGE, message=str(exc))
    idempotent = [h for h in headers if h.producer_id >= 0]
    producer = None
    if any(h.is_transactional for h in headers):
        first = headers[0]
        if any(not h.is_transactional or h.is_control or (h.producer_id, h.producer_epoch) !=
               (first.producer_id, first.producer_epoch) for h in headers):
            return answer(E.INVALID_RECORD, message="a transactional request mixes producers or plain batches")
        producer = (first.producer_id, first.producer_epoch)
    elif any(h.is_control for h in headers):  # markers are the coordinator's to write
        return answer(E.INVALID_RECORD, message="control batches cannot be produced")
    stored, parsed = data, headers  # a Kafka topic's storage takes the headers as parsed here
    if plog.fmt is not KAFKA:  # e.g. a TANK topic: the records re-encoded; headers refused, never dropped
        try:  # (before the checks below: nothing may wait between them and the append)
            stored, parsed = await steps.convert(len(data), _reencoded, steps.encoder(plog), data), None
        except FAILURES as exc:
            return _refused(answer, plog, exc, steps)
    if producer is not None and broker.transactions.peers is not None:  # (workers: N) heard of at the coordinator?
        try:
            await broker.transactions.learn(producer[0], producer[1], topic, partition)
        except PeerUnavailable as exc:  # retriable for every client (Kafka answers KIP-890's checks so too)
            return answer(E.NOT_ENOUGH_REPLICAS, message=str(exc))
    state = await broker.producers.get(plog, steps) if idempotent else None
    if state is not None:
        code, original = state.check(BatchSeq.of(idempotent[0]))
        if code != E.NONE:
            return answer(code, start=steps.marks(plog).log_start)
        if original is not None:  # a retry of a batch already in the log: its original offset, no append
            return answer(E.NONE, base=original, start=steps.marks(plog).log_start)
    if producer is not None:  # checked here, with no await before the append: the transaction cannot end between
        try:
            broker.transactions.check_produce(producer[0], producer[1], topic, partition)
        except TxnError as exc:
            return answer(txn_error_code(exc, knows_fenced=False), message=str(exc))
    cuts = steps.sync_point(plog)
    try:
        result = steps.append(plog, stored, producer=producer, headers=parsed)
    except FAILURES as exc:
        return _refused(answer, plog, exc, steps)
    if state is not None:  # recorded before any wait, so a retry arriving meanwhile is recognised
        offset = result.base_offset
        for h in headers:
            if h.producer_id >= 0:
                state.record(BatchSeq.of(h, offset))
            offset += h.last_offset_delta + 1
    if durable:
        try:
            await steps.make_durable(plog, cuts)
        except FAILURES as exc:  # not durable (or, cluster: the partition moved): nothing acknowledged (a retry
            # must not pass for a duplicate of it)
            if state is not None:
                broker.producers.forget_partition(plog)
            return _refused(answer, plog, exc, steps)
    return answer(E.NONE, base=result.base_offset, start=steps.marks(plog).log_start)


def _reencoded(encode, data: bytes) -> bytes:
    """Kafka batches as whole batches of the partition's own storage format (`encode`: `Steps.encoder`'s)."""
    return encode(KAFKA.decode(data, first_offset=0, min_offset=0))


def _refused(answer, plog: Partition, exc: Exception, steps):
    """The partition's answer to an append (or its conversion) that failed with `exc`."""
    code = error_code(exc, PRODUCE_ERRORS)
    if code == E.KAFKA_STORAGE_ERROR:  # e.g. disk full: nothing was appended, the client may retry
        log.error("append to %s-%d failed: %s", plog.topic, plog.partition,
                  running_out_line(exc, steps.topics.data_dir))
        return answer(code, message=f"storage error: {exc.strerror or exc}")
    if code == E.INVALID_RECORD:
        return answer(code, message=f"topic {plog.topic} ({plog.fmt.name} format): {exc}")
    return answer(code, message=str(exc))


# -- Fetch -----------------------------------------------------------------------------------------------
async def fetch(broker: "BrokerState", body, version, conn):
    limits = broker.config.limits
    wait = min(max(body.max_wait_ms, 0), limits.max_wait_ms, MAX_FETCH_WAIT_MS) / 1000
    min_bytes = max(body.min_bytes, 0)
    max_bytes = body.max_bytes if version >= 3 and body.max_bytes > 0 else limits.max_fetch_bytes
    max_bytes = min(max_bytes, limits.max_fetch_bytes)
    as_ = KAFKA if version >= 4 else MESSAGE_SET_V1 if version >= 2 else MESSAGE_SET_V0
    committed = version >= 4 and body.isolation_level == F.READ_COMMITTED

    async def build(at_once: bool):
        responses, total = await _fetch_once(broker, body, version, max_bytes, as_, committed, at_once)
        answer = F.FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=responses)
        return answer, total >= min_bytes or wait <= 0 or total < 0

    if wait <= 0:
        return (await build(False))[0]
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    deadline = trio.current_time() + wait
    return broker.steps.long_poll(keys, deadline, build)


async def _fetch_once(broker: "BrokerState", body, version, max_bytes, as_, committed: bool, at_once: bool):
    """Build the per-partition answers; total = record bytes included (-1 when an error must go out now).
    `at_once`: reads that never wait (`Steps.read`), for an answer built by the appending task.
    `committed` (read_committed): up to the last stable offset; the stored RecordBatches go out with the list of
    aborted transactions in them (the client drops those batches), transcoded reads drop aborted records here."""
    steps = broker.steps
    responses = []
    total = 0
    errors = False
    for t in body.topics:
        parts = []
        for p in t.partitions:
            pd = F.PartitionData(partition_index=p.partition, error_code=E.NONE, high_watermark=-1,
                                 last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                                 preferred_read_replica=-1, records=b"")
            parts.append(pd)
            try:  # (cluster: a partition may move to another gateway while a long-poll waits: NOT_LEADER)
                plog = steps.partition(t.topic, p.partition)
                pd.log_start_offset, pd.last_stable_offset, pd.high_watermark = steps.marks(plog)
            except FAILURES as exc:
                pd.error_code = unknown_id_code(F.API_KEY, version, t.topic, error_code(exc))
                errors = True
                continue
            if not committed:
                isolation = Isolation.UNCOMMITTED
            else:  # the stored bytes with the aborted list, or (transcoded) aborted records dropped here
                isolation = Isolation.RAW_COMMITTED if as_ is plog.fmt else Isolation.COMMITTED
            pd.aborted_transactions = [] if version >= 4 else None
            budget = min(p.partition_max_bytes, max_bytes - total)
            if budget <= 0 and total > 0:
                continue
            try:
                read = await steps.read(plog, p.fetch_offset, max(budget, 1), as_, isolation, at_once=at_once)
            except FAILURES as exc:  # out of range, or stored records this answer cannot be built from
                if isinstance(exc, RecordFormatError):
                    log.warning("fetch %s-%d at %d: cannot convert the stored records: %s", t.topic,
                                p.partition, p.fetch_offset, exc)
                pd.error_code = error_code(exc)
                errors = True
                continue
            if read is None:
                continue
            if read.slice.length > budget and total > 0:
                continue  # only the first partition with data may exceed the limits (KIP-74)
            pd.records = read.data  # a file range (sent with os.sendfile) or transcoded bytes
            total += read.size
            if isolation is Isolation.RAW_COMMITTED:
                pd.aborted_transactions = [F.AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first)
                                           for txn in steps.aborted(plog, p.fetch_offset, read.slice.end_offset)]
        responses.append(F.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
    return responses, (-1 if errors else total)


# -- ListOffsets -----------------------------------------------------------------------------------------
async def list_offsets(broker: "BrokerState", body, version, conn):
    """Kafka's answers (as `Partition.fetchOffsetForTimestamp`): latest is the high watermark (read_committed: the
    last stable offset); earliest and earliest-local (-4; no tiered storage, so the same) the log start offset;
    latest-tiered (-5) offset -1 (nothing is tiered); max-timestamp (-3) the first record with the largest
    timestamp; a timestamp the first record at or after it. A found record must lie below what the reader may
    fetch (the high watermark or, read_committed, the last stable offset), else the answer is offset -1."""
    committed = version >= 2 and body.isolation_level == F.READ_COMMITTED
    steps = broker.steps
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            r = L.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=E.NONE,
                                               timestamp=-1, offset=NO_OFFSET, leader_epoch=0,
                                               old_style_offsets=[])
            parts.append(r)
            try:
                plog = steps.partition(t.name, p.partition_index)
                marks = steps.marks(plog)
                fetchable = marks.last_stable if committed else marks.high_watermark
                if p.timestamp == L.LATEST_TIMESTAMP:
                    offset = fetchable
                elif p.timestamp in (L.EARLIEST_TIMESTAMP, L.EARLIEST_LOCAL_TIMESTAMP):
                    offset = marks.log_start
                elif p.timestamp == L.LATEST_TIERED_TIMESTAMP:
                    offset, r.leader_epoch = NO_OFFSET, -1
                else:  # (MAX_TIMESTAMP: the first record with the partition's largest timestamp)
                    found = await steps.record_at_timestamp(
                        plog, None if p.timestamp == L.MAX_TIMESTAMP else p.timestamp)
                    if found is not None and found[0] < fetchable:
                        offset, r.timestamp = found
                    else:
                        offset = NO_OFFSET
            except FAILURES as exc:
                if isinstance(exc, RecordFormatError):
                    log.warning("ListOffsets %s-%d: cannot decode the stored records: %s", t.name,
                                p.partition_index, exc)
                r.error_code = error_code(exc)
                continue
            r.offset = offset
            r.old_style_offsets = [offset] if offset >= 0 else []
        topics.append(L.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return L.ListOffsetsResponse(throttle_time_ms=0, topics=topics)

