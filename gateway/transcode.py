"""Records in and out of each storage format, for protocols that do not speak the topic's own format.

Produce from another protocol encodes `Record`s into the topic's format (`encode`); a fetch from another
protocol decodes stored batches back into `Record`s (`decode`) and, where needed, re-encodes them in the
reader's format (`encode_kafka`, `encode_tank_chunk`). The per-format functions live with the codecs; this
module only picks them by format name. What a format cannot carry (headers or a null value in a TANK bundle, a
key over 255 bytes) raises `RecordFormatError`, which callers answer with their protocol's error: never dropped.
"""

from __future__ import annotations

from typing import Sequence

from logway.codecs.errors import RecordFormatError
from logway.codecs.kafka import records as kafka_records
from logway.codecs.records import Record
from logway.codecs.tank import decode_chunk, encode_bundle, wrap

__all__ = ["RecordFormatError", "decode", "encode", "encode_kafka", "encode_tank_chunk"]

#: Per-record overhead assumed when splitting records into batches of at most max_batch_bytes.
_RECORD_OVERHEAD = 32
_BATCH_OVERHEAD = 128


def encode(fmt: str, records: Sequence[Record], *, now_ms: int, max_batch_bytes: int) -> bytes:
    """Encode records into one or more whole stored batches of format `fmt`, each under max_batch_bytes."""
    if fmt == "kafka":
        make = lambda run: kafka_records.encode_batch(run, default_timestamp=now_ms)  # noqa: E731
    elif fmt == "tank":
        make = lambda run: wrap(encode_bundle(run, default_timestamp=now_ms))  # noqa: E731
    else:
        raise ValueError(f"cannot encode records into storage format {fmt!r}")
    budget = max_batch_bytes - _BATCH_OVERHEAD
    out = []
    start = size = 0
    for i, rec in enumerate(records):
        rsize = _RECORD_OVERHEAD + len(rec.value or b"") + len(rec.key or b"") + sum(
            len(k) + len(v or b"") + 8 for k, v in rec.headers)
        if size + rsize > budget and i > start:
            out.append(make(records[start:i]))
            start, size = i, 0
        size += rsize
    out.append(make(records[start:]))
    return out[0] if len(out) == 1 else b"".join(out)


def decode(fmt: str, data: bytes | memoryview, *, first_offset: int, min_offset: int) -> list[Record]:
    """Every record of the whole stored batches in `data` whose offset is >= min_offset.

    `first_offset` is the offset of the first batch in `data` (TANK bundles do not record it themselves).
    """
    if fmt == "kafka":
        return kafka_records.decode_records(data, min_offset=min_offset)
    if fmt == "tank":
        return decode_chunk(data, first_offset + 1, min_seq=min_offset + 1).records
    raise ValueError(f"cannot decode storage format {fmt!r}")


def encode_kafka(records: Sequence[Record]) -> bytes:
    """RecordBatches that keep the records' own offsets (a Kafka fetch of another format's topic): one batch
    per run of consecutive offsets."""
    return b"".join(kafka_records.encode_batch(run, base_offset=run[0].offset,
                                               default_timestamp=run[0].timestamp or 0)
                    for run in _runs(records))


def encode_tank_chunk(records: Sequence[Record]) -> bytes:
    """`varint len | bundle` entries for a TANK consume of another format's topic: a plain bundle per run of
    consecutive offsets, a sparse one where a run does not follow the previous one (seq = offset + 1).

    TANK messages have no headers and no null value: a TANK reader sees a Kafka record's key, value (a
    tombstone as empty) and timestamp; the stored record itself keeps everything for Kafka readers."""
    out = []
    prev_end = None
    records = [r if not r.headers and r.value is not None else
               Record(r.value or b"", r.key, r.timestamp, (), r.offset) for r in records]
    for run in _runs(records):
        sparse = None if prev_end is None or run[0].offset == prev_end else [r.offset + 1 for r in run]
        out.append(wrap(encode_bundle(run, sparse_seqs=sparse, default_timestamp=0)))
        prev_end = run[-1].offset + 1
    return b"".join(out)


def _runs(records: Sequence[Record]):
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].offset != records[i - 1].offset + 1:
            yield records[start:i]
            start = i
