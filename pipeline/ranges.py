"""Planning on the driver: which topic partitions a query reads, and which offset range of each.

- `topic_partitions`: the (topic, partition) pairs selected by subscribe / subscribePattern / assign;
- `resolve`: an `OffsetSpec` (earliest, latest, offsets, timestamps) -> concrete offsets, in one or two
  ListOffsets requests whatever the partition count; read_committed, as every read of the data source: "latest"
  is the last stable offset, before any transaction still open (see `fetcher`);
- `batch_ranges`: a batch read's [start, end) per partition, clamped to what the log holds and narrowed by
  filter push-down; `split` cuts ranges into Spark tasks of at most `maxRecordsPerPartition` offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from logway.clients.errors import KafkaError
from logway.clients.kafka import LATEST, READ_COMMITTED, KafkaClient
from logway.codecs.kafka.error_codes import ErrorCode

from .options import OffsetSpec, ReadOptions
from .pushdown import Pushdown

__all__ = ["OffsetRange", "topic_partitions", "resolve", "batch_ranges", "split"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def topic_partitions(client: KafkaClient, opts: ReadOptions, *, strict: bool) -> list[TopicPartition]:
    """Selected partitions, sorted. `strict` (batch reads): a named topic or partition that does not exist is
    an error; otherwise (streaming) it is simply not there yet."""
    if opts.pattern is not None:
        counts = {t: n for t, n in client.partition_counts(None).items() if opts.matches(t)}
        return sorted((t, p) for t, n in counts.items() for p in range(n))
    names = list(opts.subscribe) if opts.subscribe is not None else [t for t, _ in opts.assign]
    counts = client.partition_counts(names)
    if strict:
        missing = [t for t in names if t not in counts]
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the topic does not exist",
                               topic=missing[0], operation="metadata")
    if opts.subscribe is not None:
        return sorted((t, p) for t, n in counts.items() for p in range(n))
    out = []
    for topic, parts in opts.assign:
        for p in parts:
            if p < counts.get(topic, 0):
                out.append((topic, p))
            elif strict:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "assigned partition does not exist",
                                   topic=topic, partition=p, operation="metadata")
    return sorted(out)


def resolve(client: KafkaClient, tps: list[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
    """Concrete offsets for `spec` on every partition: a timestamp with no record that recent resolves to
    the log end (nothing to read), like a consumer seeking past the newest record."""
    out: dict[TopicPartition, int] = {}
    ask: dict[TopicPartition, int] = {}
    for tp in tps:
        kind, value = spec.value_for(*tp)
        if kind == "offset" and value >= 0:
            out[tp] = value
        else:
            ask[tp] = value  # -2 earliest, -1 latest, or a timestamp
    if ask:
        found = client.list_offsets(ask, isolation_level=READ_COMMITTED)
        late = [tp for tp, offset in found.items() if offset < 0]
        if late:
            found.update(client.list_offsets({tp: LATEST for tp in late}, isolation_level=READ_COMMITTED))
        out.update(found)
    return out


def batch_ranges(client: KafkaClient, opts: ReadOptions, pushdown: Pushdown | None = None) -> list[OffsetRange]:
    """The [start, end) of every selected partition for a batch read (empty ranges left out)."""
    pushdown = pushdown or Pushdown()
    tps = [tp for tp in topic_partitions(client, opts, strict=True) if pushdown.keeps_partition(*tp)]
    if not tps:
        return []
    starts = resolve(client, tps, opts.starting)
    ends = resolve(client, tps, opts.ending)
    latest = client.list_offsets({tp: LATEST for tp in tps}, isolation_level=READ_COMMITTED)
    if pushdown.timestamp_min_ms is not None:
        seek = resolve(client, tps, OffsetSpec(("timestamp", pushdown.timestamp_min_ms)))
        starts = {tp: max(starts[tp], seek[tp]) for tp in tps}
    ranges = []
    for tp in tps:
        end = min(ends[tp], latest[tp])
        start, end = pushdown.offset_range(starts[tp], end)
        if end > start:
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return ranges


def split(ranges: list[OffsetRange], max_records: int | None) -> list[OffsetRange]:
    """Cut every range into pieces of at most `max_records` offsets (None: one piece per range)."""
    if not max_records:
        return list(ranges)
    out = []
    for r in ranges:
        for start in range(r.start, r.end, max_records):
            out.append(OffsetRange(r.topic, r.partition, start, min(start + max_records, r.end)))
    return out
