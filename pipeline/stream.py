"""The streaming reader: micro-batches over offsets `{"topic": {"partition": next_offset}}`.

Spark keeps these offsets in the query's checkpoint, so a restarted query resumes where it stopped. On every
micro-batch `latestOffset(start, limit)`:

- looks the partitions up again, so partitions added to a topic, and new topics matching `subscribePattern`,
  join the stream (they are read from their earliest offset, as Spark's Kafka source does);
- asks the gateway for every partition's end offset (one ListOffsets request, read_committed: the last stable
  offset, so a micro-batch never waits on a transaction still open);
- admits at most `limit` records (`ReadMaxRows`, from `maxRecordsPerTrigger`), split across partitions in
  proportion to their backlog; `ReadAllAvailable` admits everything.

`Trigger.AvailableNow` is supported (`SupportsTriggerAvailableNow`): `prepareForTriggerAvailableNow` records the
end offsets of that moment, and later micro-batches never go past them; with `maxRecordsPerTrigger` the backlog
is still split into several micro-batches.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from logway.clients.kafka import EARLIEST, LATEST, READ_COMMITTED, KafkaClient

from .fetcher import ReadStats
from .options import ReadOptions
from .ranges import OffsetRange, resolve, split, topic_partitions
from .source import RangePartition, read_partition

__all__ = ["LogwayStreamReader", "admit", "to_json_offsets", "from_json_offsets"]

TopicPartition = tuple[str, int]


def to_json_offsets(positions: dict[TopicPartition, int]) -> dict:
    """{(topic, partition): offset} -> {"topic": {"partition": offset}}, in one canonical order (Spark compares
    offsets by their JSON text)."""
    out: dict = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_offsets(offsets: dict | None) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in (offsets or {}).items() for p, o in parts.items()}


def admit(backlog: dict[TopicPartition, int], max_rows: int) -> dict[TopicPartition, int]:
    """How many of each partition's `backlog` records to take so the total is at most `max_rows`, split in
    proportion to the backlogs (the remainder goes to the largest leftovers, so the total is exact)."""
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(backlog)
    take = {tp: n * max_rows // total for tp, n in backlog.items()}
    left = max_rows - sum(take.values())
    for tp in sorted(backlog, key=lambda tp: (take[tp] - backlog[tp], tp)):
        if left <= 0:
            break
        if take[tp] < backlog[tp]:
            take[tp] += 1
            left -= 1
    return take


class LogwayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming reads of logway topics (see the module docstring)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._client: KafkaClient | None = None
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict | None = None
        self.stats = ReadStats()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.opts.client)
        return self._client

    # -- offsets (driver) -----------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = topic_partitions(self.client, self.opts, strict=False)
        return to_json_offsets(resolve(self.client, tps, self.opts.starting))

    def _ends(self) -> dict[TopicPartition, int]:
        tps = topic_partitions(self.client, self.opts, strict=False)
        return self.client.list_offsets({tp: LATEST for tp in tps}, isolation_level=READ_COMMITTED) if tps else {}

    def _starts(self, start: dict, partitions) -> dict[TopicPartition, int]:
        """`start` plus the earliest offset of partitions it does not know yet."""
        positions = from_json_offsets(start)
        new = [tp for tp in partitions if tp not in positions]
        if new:
            positions.update(self.client.list_offsets({tp: EARLIEST for tp in new}))
        return positions

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def getDefaultReadLimit(self):
        limit = self.opts.max_records_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        ends = dict(self._target) if self._target is not None else self._ends()
        self._latest = to_json_offsets(ends)
        starts = self._starts(start, ends)
        backlog = {tp: max(0, end - starts[tp]) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            backlog = admit(backlog, limit.max_rows)
        result = dict(starts)  # partitions that vanished keep their offset
        for tp, n in backlog.items():
            result[tp] = starts[tp] + n
        return to_json_offsets(result)

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        ends = from_json_offsets(end)
        starts = self._starts(start, ends)
        ranges = [OffsetRange(t, p, starts[(t, p)], e) for (t, p), e in sorted(ends.items()) if e > starts[(t, p)]]
        return [RangePartition(r) for r in split(ranges, self.opts.max_records_per_partition)]

    def commit(self, end: dict) -> None:
        """Nothing to do: the gateway keeps no state for this reader (Spark's checkpoint has the offsets)."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- reading (executors) --------------------------------------------------------------------------------
    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self.stats)
