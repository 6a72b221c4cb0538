"""Idempotent Kafka producers: per (partition, producer id) the epoch and the sequence ranges of the last few
batches with the offsets they got, so a retried batch is answered with its original offset instead of being
appended twice, and a gap in sequences is refused (OUT_OF_ORDER_SEQUENCE_NUMBER).

The state lives in memory and is rebuilt from the log: the first time a partition sees an idempotent batch after
a start, the RecordBatch headers of its last `SCAN_BYTES` are read (in a worker thread) to recover every
producer's recent batches. A retry of a batch older than that window cannot be recognised.

A producer's state of a partition is dropped once it wrote nothing there for `kafka.producer_id_expiration_ms`
(Kafka's producer.id.expiration.ms, a day by default; looked at every `EXPIRATION_CHECK_S` at most): without it,
every producer id that ever wrote would stay in memory for the gateway's life — short-lived idempotent producers
get a new id each. A batch of a dropped producer is taken as a new producer's (as after Kafka's expiry: a retry
that late is appended again). A restart counts a rebuilt producer's time from the rebuild: state is never dropped
earlier than the setting says.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable

import trio

from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import BatchHeader, iter_batches, parse_header

from ...steps import Partition, Steps

#: Batches remembered per producer and partition: Kafka's limit of in-flight requests for idempotence.
DUPLICATE_WINDOW = 5
#: Bytes of log tail read to rebuild the state after a restart.
SCAN_BYTES = 64 * 1024 * 1024
#: Bytes read per step while scanning.
SCAN_CHUNK = 1024 * 1024
#: Producers are looked at for expiry at least this often (Kafka's producer.id.expiration.check.interval.ms), and
#: as often as the expiration itself when it is shorter.
EXPIRATION_CHECK_S = 600.0
_SEQ_MODULUS = 2**31  # sequences are int32 and wrap to 0 after 2^31 - 1

log = logging.getLogger("logway.gateway.kafka")


@dataclass(slots=True, frozen=True)
class BatchSeq:
    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int = -1
    last_offset: int = -1

    @classmethod
    def of(cls, header: BatchHeader, base_offset: int = -1) -> "BatchSeq":
        last_seq = (header.base_sequence + header.last_offset_delta) % _SEQ_MODULUS
        return cls(header.producer_id, header.producer_epoch, header.base_sequence, last_seq, base_offset,
                   base_offset + header.last_offset_delta if base_offset >= 0 else -1)


class PartitionProducers:
    """Producer state of one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, tuple[int, deque[BatchSeq]]] = {}
        self._written: dict[int, float] = {}  # producer id -> when its last batch was recorded (time.monotonic)

    def check(self, batch: BatchSeq) -> tuple[int, int | None]:
        """(error code, base offset of the original when this batch is a retry already in the log)."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return ErrorCode.NONE, None  # a new producer (or one whose state aged out): accept its sequence
        epoch, recent = entry
        if batch.epoch < epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if batch.epoch > epoch:
            return (ErrorCode.NONE if batch.first_seq == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), None
        for seen in recent:
            if seen.first_seq == batch.first_seq and seen.last_seq == batch.last_seq:
                return ErrorCode.NONE, seen.base_offset
        last = recent[-1].last_seq
        if batch.first_seq == (last + 1) % _SEQ_MODULUS:
            return ErrorCode.NONE, None
        if batch.last_seq <= last and batch.first_seq <= batch.last_seq:
            # Older than the remembered window but already written (a producer replaying a whole task, as
            # the Spark writer does after a retry): not appended again.
            return ErrorCode.DUPLICATE_SEQUENCE_NUMBER, None
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None

    def record(self, batch: BatchSeq) -> None:
        entry = self._producers.get(batch.producer_id)
        if entry is None or batch.epoch > entry[0]:
            entry = (batch.epoch, deque(maxlen=DUPLICATE_WINDOW))
            self._producers[batch.producer_id] = entry
        entry[1].append(batch)
        self._written[batch.producer_id] = time.monotonic()

    def expire(self, before: float) -> int:
        """Drop the producers whose last batch was recorded before `before` (time.monotonic); how many."""
        idle = [pid for pid, when in self._written.items() if when < before]
        for pid in idle:
            del self._producers[pid], self._written[pid]
        return len(idle)


class ProducerStates:
    """Every partition's producer state, loaded lazily from the log; `run` drops the producers idle for
    `expiration_ms`."""

    def __init__(self, expiration_ms: int = 86_400_000) -> None:
        self.expiration_ms = expiration_ms
        self.expired = 0  # producers' states of a partition dropped so far (a metric)
        self._states: dict[tuple[str, int], PartitionProducers] = {}
        #: The partition log each state was loaded from: a cluster member that leads a partition again (another
        #: member wrote it meanwhile) has a new log, and loads the state again.
        self._logs: dict[tuple[str, int], Partition] = {}
        self._loading: dict[tuple[str, int], trio.Event] = {}

    async def run(self) -> None:
        """Drop idle producers' state, for the gateway's life. (A partition's emptied state stays: loading it
        again would read the log tail and bring back what expired.)"""
        expiration = self.expiration_ms / 1000
        while True:
            await trio.sleep(min(expiration, EXPIRATION_CHECK_S))
            dropped = self.expire(time.monotonic() - expiration)
            if dropped:
                log.debug("dropped the idempotence state of %d producer(s) idle for %d ms", dropped,
                          self.expiration_ms)

    def expire(self, before: float) -> int:
        """Drop every partition's producers whose last batch was recorded before `before`; how many."""
        dropped = sum(state.expire(before) for state in self._states.values())
        self.expired += dropped
        return dropped

    async def get(self, plog: Partition, steps: Steps) -> PartitionProducers:
        key = (plog.topic, plog.partition)
        while True:
            state = self._states.get(key)
            if state is not None and self._logs.get(key) is plog:
                return state
            loading = self._loading.get(key)
            if loading is not None:
                await loading.wait()
                continue
            self._loading[key] = done = trio.Event()
            try:
                state = await trio.to_thread.run_sync(lambda: rebuild(steps.stored_tail(plog, SCAN_BYTES,
                                                                                         SCAN_CHUNK)))
                self._states[key], self._logs[key] = state, plog
                return state
            finally:
                del self._loading[key]
                done.set()

    def forget(self, topic: str) -> None:
        """A topic was deleted: drop its partitions' state."""
        for key in [k for k in self._states if k[0] == topic]:
            del self._states[key]
            self._logs.pop(key, None)

    def forget_partition(self, plog: Partition) -> None:
        """A write recorded in the partition's state was not made durable (a failed sync may have cut it back): the
        state is loaded from the log again when next needed."""
        self._states.pop((plog.topic, plog.partition), None)
        self._logs.pop((plog.topic, plog.partition), None)


def rebuild(chunks: Iterable[bytes]) -> PartitionProducers:
    """Replay every idempotent batch of the log tail (`chunks`: its stored RecordBatches, `Steps.stored_tail`) into
    a fresh state, from their headers."""
    state = PartitionProducers()
    for chunk in chunks:
        for batch in iter_batches(chunk):
            header = parse_header(batch)
            if header.producer_id >= 0 and not header.is_control:  # markers carry no sequence
                state.record(BatchSeq.of(header, header.base_offset))
    return state
