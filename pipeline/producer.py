"""An idempotent producer on `logway.clients.KafkaClient`: records batched per partition, sequence-numbered, acks=all.

The producer asks the gateway for a producer id (InitProducerId) before its first batch. Every batch carries
(producer id, epoch, base sequence), sequences counting records per partition from 0. When a connection breaks
mid-request the client re-sends the *same bytes*; if the gateway had appended them already, it recognises the
sequence numbers and answers with the original offset instead of appending again. So a retried request never
duplicates records. (A Spark task that fails and is re-run is a new producer: its rows are written again,
at-least-once, as with Spark's Kafka sink; there are no transactions to make a task attempt atomic.)

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

__all__ = ["Producer", "murmur2", "partition_for_key"]

_SEQUENCE_MODULUS = 2**31  # Kafka sequences are int32 and wrap to 0
#: Per-record overhead estimate (length, attributes, deltas, lengths) used to size batches before encoding.
_RECORD_OVERHEAD = 8


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
    """Batches records per (topic, partition) and sends them as an idempotent producer (see the module doc)."""

    def __init__(self, client: KafkaClient, *, batch_bytes: int = 1024 * 1024, compression: int = 0,
                 clock=time.time, name: str | None = None) -> None:
        """`name` makes the producer replayable: the gateway gives every producer of that name the same id,
        and key-less records go to the same partitions in the same batches, so running the same writes again
        under the same name (a retried task) appends nothing twice."""
        self.client = client
        self.name = name
        self._random = random.Random(name) if name is not None else random
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
            sticky = self._sticky[topic] = self._random.randrange(self.partitions(topic))
        return sticky

    # -- sending -------------------------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None, key: bytes | None = None, *, partition: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] = (), timestamp: int | None = None) -> None:
        """Queue one record (timestamp in ms; None = now); full batches are sent at once."""
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
        """Send every queued record and wait for the gateway's acknowledgements."""
        for tp in list(self._buffers):
            self._send_partition(tp)

    def _send_partition(self, tp: tuple[str, int]) -> None:
        records, _ = self._buffers.pop(tp, ([], None))
        if not records:
            return
        if self.producer_id is None:
            self.producer_id, self.producer_epoch = self.client.init_producer_id(self.name)
        sequence = self._sequences.get(tp, 0)
        batch = encode_batch(records, default_timestamp=int(self.clock() * 1000), compression=self.compression,
                             producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                             base_sequence=sequence)
        self.client.produce(tp[0], tp[1], batch, acks=-1)  # re-sent unchanged on a broken connection
        self._sequences[tp] = (sequence + len(records)) % _SEQUENCE_MODULUS
        self.records_sent += len(records)
        self.batches_sent += 1
        if self._sticky.get(tp[0]) == tp[1]:  # a key-less batch went out: the next one goes elsewhere
            count = self.partitions(tp[0])
            if count > 1:
                self._sticky[tp[0]] = (tp[1] + 1 + self._random.randrange(count - 1)) % count
