"""Records in and out of each storage format, for protocols that do not speak the topic's own format.

Produce from another protocol encodes `Record`s into the topic's batch format; a fetch from another protocol
decodes stored batches back into `Record`s. The per-format functions live with the codecs; this module only
picks the right ones by format name.
"""

from __future__ import annotations

from typing import Sequence

from logway.codecs.kafka import records as kafka_records
from logway.codecs.records import Record

#: Per-record overhead assumed when splitting records into batches of at most max_batch_bytes.
_RECORD_OVERHEAD = 32
_BATCH_OVERHEAD = 128


def encode(fmt: str, records: Sequence[Record], *, now_ms: int, max_batch_bytes: int) -> bytes:
    """Encode records into one or more whole batches of format `fmt`, each under max_batch_bytes."""
    if fmt != "kafka":
        raise ValueError(f"cannot encode records into storage format {fmt!r}")
    budget = max_batch_bytes - _BATCH_OVERHEAD
    out = []
    start = 0
    size = 0
    for i, rec in enumerate(records):
        rsize = _RECORD_OVERHEAD + len(rec.value or b"") + len(rec.key or b"") + sum(
            len(k) + len(v or b"") + 8 for k, v in rec.headers)
        if size + rsize > budget and i > start:
            out.append(kafka_records.encode_batch(records[start:i], default_timestamp=now_ms))
            start, size = i, 0
        size += rsize
    out.append(kafka_records.encode_batch(records[start:], default_timestamp=now_ms))
    return out[0] if len(out) == 1 else b"".join(out)


def encode_kafka(records: Sequence[Record]) -> bytes:
    """RecordBatches that keep the records' own offsets (for a Kafka fetch of another format's topic): one batch
    per run of consecutive offsets."""
    out = []
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].offset != records[i - 1].offset + 1:
            run = records[start:i]
            out.append(kafka_records.encode_batch(run, base_offset=run[0].offset,
                                                  default_timestamp=run[0].timestamp or 0))
            start = i
    return b"".join(out)


def decode(fmt: str, data: bytes | memoryview, *, min_offset: int) -> list[Record]:
    """Every record of the whole batches in `data` whose offset is >= min_offset."""
    if fmt != "kafka":
        raise ValueError(f"cannot decode storage format {fmt!r}")
    return kafka_records.decode_records(data, min_offset=min_offset)
