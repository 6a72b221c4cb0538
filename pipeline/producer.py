"""A producer on `logway.clients.KafkaClient`: records batched per partition, sequence-numbered, acks=all;
idempotent, and transactional when given a transactional id.

Idempotent: the producer asks the gateway for a producer id (InitProducerId) before its first batch. Every batch
carries (producer id, epoch, base sequence), sequences counting records per partition from 0. When a connection
breaks mid-request the client re-sends the *same bytes*; if the gateway had appended them already, it recognises
the sequence numbers and answers with the original offset instead of appending again. So a retried request never
duplicates records.

Transactional (`Producer(client, transactional_id="...")`), Kafka's transactions::

    p = Producer(client, transactional_id="orders-writer-3")
    p.init()                     # InitProducerId(tid): fences every older producer of the id (its open
                                 # transaction is aborted); implied by the first begin()
    p.begin()
    p.send("orders", b"...")     # batches are transactional; each new partition is added (AddPartitionsToTxn)
    p.send_offsets("group", {("orders", 0): 42})   # AddOffsetsToTxn + TxnOffsetCommit
    p.commit()                   # flush, then EndTxn(commit): the records and offsets become visible at once
    # or p.abort()               # queued records are dropped, EndTxn(abort): nothing of it is ever visible

Records of an aborted (or never committed) transaction stay in the log but read_committed Kafka readers, native
and TANK readers never see them; the committed offsets of `send_offsets` take effect only if it commits. A
producer fenced by a newer one fails with `KafkaError` PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH).

Partitioning follows Kafka's default so keyed records land where Java and kafka-python producers put them:
murmur2(key) mod partitions; records without a key stick to one partition per topic until its batch is sent.
Errors from the gateway raise `KafkaError` (topic, partition, code and the gateway's message).
"""

from __future__ import annotations

import random
import time
from typing import Sequence

from logway.clients.errors import KafkaError
from logway.clients.kafka import KafkaClient
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import MAX_RECORDS_PER_BATCH, encode_batch
from logway.codecs.records import Record

from .errors import PipelineError

__all__ = ["Producer", "murmur2", "partition_for_key"]

_SEQUENCE_MODULUS = 2**31  # Kafka sequences are int32 and wrap to 0
#: Per-record overhead estimate (length, attributes, deltas, lengths) used to size batches before encoding.
_RECORD_OVERHEAD = 8
#: Times a transaction request is retried while the gateway completes the previous transaction.
_CONCURRENT_RETRIES = 10


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), as an unsigned 32-bit int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    extra = length & 3
    if extra == 3:
        h ^= data[n4 + 2] << 16
    if extra >= 2:
        h ^= data[n4 + 1] << 8
    if extra >= 1:
        h ^= data[n4]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partition for a keyed record: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Producer:
    """Batches records per (topic, partition) and sends them as an idempotent or transactional producer (see the
    module doc)."""

    def __init__(self, client: KafkaClient, *, batch_bytes: int = 1024 * 1024, compression: int = 0,
                 clock=time.time, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000) -> None:
        """`transactional_id` makes a transactional producer: records are sent only between `begin()` and
        `commit()` / `abort()`; the gateway aborts a transaction left open longer than `transaction_timeout_ms`."""
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.batch_bytes = batch_bytes
        self.compression = compression
        self.clock = clock
        self.producer_id: int | None = None
        self.producer_epoch = 0
        self._sequences: dict[tuple[str, int], int] = {}
        self._buffers: dict[tuple[str, int], tuple[list[Record], list[int]]] = {}
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self.records_sent = 0
        self.batches_sent = 0
        self.in_transaction = False
        self._txn_partitions: set[tuple[str, int]] = set()
        self._txn_groups: set[str] = set()

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    # -- transactions --------------------------------------------------------------------------------------
    def init(self) -> tuple[int, int]:
        """Get the producer id and epoch (InitProducerId). For a transactional producer this fences every older
        producer of the transactional id (the gateway aborts the transaction it had open) and starts its
        sequences anew."""
        if self.in_transaction:
            raise PipelineError("init() inside a transaction: commit() or abort() it first")
        self.producer_id, self.producer_epoch = self._retrying(
            self.client.init_producer_id, self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms)
        self._sequences.clear()
        return self.producer_id, self.producer_epoch

    def begin(self) -> None:
        """Begin a transaction (the gateway hears of it with the first partition or group added)."""
        if not self.transactional:
            raise PipelineError("begin() needs a transactional producer: Producer(..., transactional_id=...)")
        if self.in_transaction:
            raise PipelineError("a transaction is already open")
        if self.producer_id is None:
            self.init()
        self.in_transaction = True
        self._txn_partitions.clear()
        self._txn_groups.clear()

    def send_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit `offsets` {(topic, partition): offset} for consumer `group` as part of the transaction
        (AddOffsetsToTxn, then TxnOffsetCommit): they take effect if, and when, it commits."""
        self._require_transaction("send_offsets()")
        if group not in self._txn_groups:
            self._retrying(self.client.add_offsets_to_txn, self.transactional_id, self.producer_id,
                           self.producer_epoch, group)
            self._txn_groups.add(group)
        self._retrying(self.client.txn_offset_commit, self.transactional_id, group, self.producer_id,
                       self.producer_epoch, dict(offsets))

    def commit(self) -> None:
        """Send what is queued, then commit the transaction: its records and offsets become visible at once."""
        self._require_transaction("commit()")
        self.flush()
        self._end(True)

    def abort(self) -> None:
        """Abort the transaction: queued records are dropped, and what was sent is never visible to committed
        readers."""
        self._require_transaction("abort()")
        self._buffers.clear()
        self._end(False)

    def _end(self, committed: bool) -> None:
        if self._txn_partitions or self._txn_groups:  # the gateway knows of the transaction: end it there
            self._retrying(self.client.end_txn, self.transactional_id, self.producer_id, self.producer_epoch,
                           committed)
        self.in_transaction = False
        self._txn_partitions.clear()
        self._txn_groups.clear()

    def _require_transaction(self, what: str) -> None:
        if not self.in_transaction:
            raise PipelineError(f"{what} without a transaction: begin() one first")

    def _add_partitions(self, tps) -> None:
        new = sorted(set(tps) - self._txn_partitions)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        self._retrying(self.client.add_partitions_to_txn, self.transactional_id, self.producer_id,
                       self.producer_epoch, by_topic)
        self._txn_partitions.update(new)

    @staticmethod
    def _retrying(call, *args, **kwargs):
        """`call`, again after a short pause while the gateway still completes the previous transaction
        (CONCURRENT_TRANSACTIONS), as Kafka's producers do."""
        delay = 0.02
        for _ in range(_CONCURRENT_RETRIES):
            try:
                return call(*args, **kwargs)
            except KafkaError as exc:
                if exc.code != ErrorCode.CONCURRENT_TRANSACTIONS:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        return call(*args, **kwargs)

    # -- partitioning --------------------------------------------------------------------------------------
    def partitions(self, topic: str) -> int:
        """Partition count of `topic` (cached; the gateway may auto-create the topic, as for any producer)."""
        count = self._partition_counts.get(topic)
        if count is None:
            counts = self.client.partition_counts([topic], auto_create=True)
            if topic not in counts:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the topic does not exist", topic=topic,
                                   operation="produce")
            count = self._partition_counts[topic] = counts[topic]
        return count

    def choose_partition(self, topic: str, key: bytes | None) -> int:
        if key is not None:
            return partition_for_key(key, self.partitions(topic))
        sticky = self._sticky.get(topic)
        if sticky is None:
            sticky = self._sticky[topic] = random.randrange(self.partitions(topic))
        return sticky

    # -- sending -------------------------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None, key: bytes | None = None, *, partition: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] = (), timestamp: int | None = None) -> None:
        """Queue one record (timestamp in ms; None = now); full batches are sent at once."""
        if self.transactional and not self.in_transaction:
            raise PipelineError("a transactional producer sends inside a transaction: begin() one first")
        if partition is None:
            partition = self.choose_partition(topic, key)
        tp = (topic, partition)
        buf = self._buffers.get(tp)
        if buf is None:
            buf = self._buffers[tp] = ([], [0])
        records, size = buf
        records.append(Record(value, key, timestamp, tuple(headers)))
        size[0] += _RECORD_OVERHEAD + (len(value) if value else 0) + (len(key) if key else 0) + sum(
            len(k) + len(v or b"") + 2 for k, v in headers)
        if size[0] >= self.batch_bytes or len(records) >= MAX_RECORDS_PER_BATCH:
            self._send_partition(tp)

    def flush(self) -> None:
        """Send every queued record and wait for the gateway's acknowledgements (for a transactional producer,
        the records stay invisible to committed readers until `commit()`)."""
        if self.transactional and self._buffers:
            self._add_partitions(tp for tp, (records, _) in self._buffers.items() if records)
        for tp in list(self._buffers):
            self._send_partition(tp)

    def _send_partition(self, tp: tuple[str, int]) -> None:
        records, _ = self._buffers.pop(tp, ([], None))
        if not records:
            return
        if self.producer_id is None:
            self.init()
        if self.transactional:
            self._add_partitions([tp])
        sequence = self._sequences.get(tp, 0)
        batch = encode_batch(records, default_timestamp=int(self.clock() * 1000), compression=self.compression,
                             producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                             base_sequence=sequence, transactional=self.transactional)
        # re-sent unchanged on a broken connection
        self.client.produce(tp[0], tp[1], batch, acks=-1, transactional_id=self.transactional_id)
        self._sequences[tp] = (sequence + len(records)) % _SEQUENCE_MODULUS
        self.records_sent += len(records)
        self.batches_sent += 1
        if self._sticky.get(tp[0]) == tp[1]:  # a key-less batch went out: the next one goes elsewhere
            count = self.partitions(tp[0])
            if count > 1:
                self._sticky[tp[0]] = (tp[1] + 1 + random.randrange(count - 1)) % count
