"""Record formats as objects: what each storage format stores and what each reader asks for.

A storage format (`KAFKA`, `TANK`) is the codecs' storage adapter (scan / validate / stamp, which the log engine
uses) plus how records go into it (`encode`, for a produce from another protocol) and come out of it (`decode`).
A reader asks a read for a format: `KAFKA` or `TANK` (the protocol's own bytes), `NATIVE` (the records of a native
Fetch answer, encoded as its JSON items), `RECORDS` (decoded records), or `KafkaMessageSet(magic)` (Kafka fetches
before v4). The read step hands out the stored bytes untouched when the
reader asks for the stored format and transcodes otherwise (`encode_read`) — one rule, no `format == "…"`
branches anywhere. What a format cannot carry (headers or a null value in a TANK bundle, a key over 255 bytes)
raises `RecordFormatError`, which callers answer with their protocol's error: never dropped.
"""

from __future__ import annotations

from typing import Sequence

from logway.codecs.kafka import legacy
from logway.codecs.kafka.records import KafkaFormat, decode_records, encode_batch, encode_control_batch
from logway.codecs.native import EncodedRecords, encode_fetched
from logway.codecs.records import Record
from logway.codecs.tank import TankFormat, decode_chunk, encode_bundle, wrap

__all__ = ["KAFKA", "TANK", "RECORDS", "NATIVE", "MESSAGE_SET_V0", "MESSAGE_SET_V1", "STORAGE_FORMATS",
           "KafkaMessageSet", "ReadFormat", "StorageFormat"]

#: Per-record overhead assumed when splitting records into batches of at most max_batch_bytes.
_RECORD_OVERHEAD = 32
_BATCH_OVERHEAD = 128


class ReadFormat:
    """A format a reader asks for: `encode_read(records)` builds its answer from decoded records."""

    name = ""
    #: Whether a part encoded on its own (`encode_part`) must say that it does not follow the previous part's
    #: offsets (TANK: such a bundle is sparse); else a part reads the same wherever it stands.
    gap_sensitive = False
    #: The bytes of an answer in this format per stored byte it comes from (what a transcoded read holds of the
    #: memory budget beside the stored bytes, `steps.py`).
    expansion = 1

    def encode_read(self, records: Sequence[Record]):
        raise NotImplementedError

    def encode_part(self, records: Sequence[Record], after_gap: bool):
        """One stored batch's records as a part of a read (`transcoded.py`); `after_gap`: the part's first record
        does not follow the previous part's last (only asked of a `gap_sensitive` format)."""
        return self.encode_read(records)

    def join(self, parts: list):
        """The read made of `parts` (`encode_part`'s), in order."""
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __repr__(self) -> str:
        return f"<format {self.name}>"


class StorageFormat(ReadFormat):
    """A storage format: the log engine's batch adapter (a subclass's base) plus records in and out."""

    def make_batch(self, records: Sequence[Record], now_ms: int) -> bytes:
        raise NotImplementedError

    def transaction_marker(self, producer_id: int, epoch: int, committed: bool, now_ms: int) -> bytes | None:
        """The batch that ends a transaction in this format's log (a Kafka control batch), or None when the format
        has none (the partition's transaction index alone records the end)."""
        return None

    def decode(self, data, *, first_offset: int, min_offset: int) -> list[Record]:
        """Every record of the whole stored batches in `data` whose offset is >= min_offset; `first_offset` is
        the offset of the first batch (a format that does not record it, TANK, needs it)."""
        raise NotImplementedError

    def encode(self, records: Sequence[Record], *, now_ms: int, max_batch_bytes: int) -> bytes:
        """Records as one or more whole stored batches, each under max_batch_bytes (appends from other protocols)."""
        budget = max_batch_bytes - _BATCH_OVERHEAD
        out = []
        start = size = 0
        for i, rec in enumerate(records):
            rsize = _RECORD_OVERHEAD + len(rec.value or b"") + len(rec.key or b"") + sum(
                len(k) + len(v or b"") + 8 for k, v in rec.headers)
            if size + rsize > budget and i > start:
                out.append(self.make_batch(records[start:i], now_ms))
                start, size = i, 0
            size += rsize
        out.append(self.make_batch(records[start:], now_ms))
        return out[0] if len(out) == 1 else b"".join(out)


class _Kafka(KafkaFormat, StorageFormat):
    """`kafka` topics: RecordBatch v2, as Kafka producers send them."""

    def make_batch(self, records, now_ms):
        return encode_batch(records, default_timestamp=now_ms)

    def transaction_marker(self, producer_id, epoch, committed, now_ms):
        """A COMMIT or ABORT control batch, as Kafka's transaction coordinator writes (consumers skip it)."""
        return encode_control_batch(producer_id, epoch, committed=committed, timestamp_ms=now_ms)

    def decode(self, data, *, first_offset, min_offset):
        return decode_records(data, min_offset=min_offset)

    def encode_read(self, records):
        """RecordBatches that keep the records' own offsets: one batch per run of consecutive offsets."""
        return b"".join(encode_batch(run, base_offset=run[0].offset, default_timestamp=run[0].timestamp or 0)
                        for run in _runs(records))


class _Tank(TankFormat, StorageFormat):
    """`tank` topics: TANK bundles, as TANK producers send them."""

    gap_sensitive = True  # a bundle that does not follow the previous one must be sparse

    def make_batch(self, records, now_ms):
        return wrap(encode_bundle(records, default_timestamp=now_ms))

    def decode(self, data, *, first_offset, min_offset):
        return decode_chunk(data, first_offset + 1, min_seq=min_offset + 1).records

    def encode_read(self, records):
        """`varint len | bundle` entries: a plain bundle per run of consecutive offsets, a sparse one where a run
        does not follow the previous one (seq = offset + 1). TANK messages have no headers and no null value: a
        TANK reader sees a Kafka record's key, value (a tombstone as empty) and timestamp; the stored record
        keeps everything for Kafka readers."""
        return self._bundles(records, None)

    def encode_part(self, records, after_gap):
        return self._bundles(records, -1 if after_gap else None)  # after a gap even the first run is sparse

    @staticmethod
    def _bundles(records, prev_end):
        out = []
        records = [r if not r.headers and r.value is not None else
                   Record(r.value or b"", r.key, r.timestamp, (), r.offset) for r in records]
        for run in _runs(records):
            sparse = None if prev_end is None or run[0].offset == prev_end else [r.offset + 1 for r in run]
            out.append(wrap(encode_bundle(run, sparse_seqs=sparse, default_timestamp=0)))
            prev_end = run[-1].offset + 1
        return b"".join(out)


class _Records(ReadFormat):
    """Decoded records, as a tuple (the admin console's message browser)."""

    name = "records"
    expansion = 2  # a `Record` object per record beside its bytes

    def encode_read(self, records):
        return tuple(records)

    def join(self, parts):
        return parts[0] if len(parts) == 1 else tuple(r for part in parts for r in part)


class _Native(ReadFormat):
    """A native Fetch answer's records, each encoded once as its JSON item (`codecs.native.EncodedRecords`): what
    readers that ask for the same slice share (`transcoded.py`) is bytes, not records to encode again."""

    name = "native"
    expansion = 4  # a byte of a payload is a JSON number and a comma: 2 to 4 characters

    def encode_read(self, records):
        return encode_fetched(records)

    def join(self, parts):
        return EncodedRecords.join(parts)


class KafkaMessageSet(ReadFormat):
    """A legacy MessageSet of `magic` 0 or 1 (Kafka Fetch v0–v3); headers cannot be carried and are dropped, as
    Kafka's own down-conversion does."""

    def __init__(self, magic: int) -> None:
        self.magic = magic
        self.name = f"messageset-v{magic}"

    def encode_read(self, records):
        return legacy.encode_message_set(records, self.magic, drop_headers=True)


KAFKA = _Kafka()
TANK = _Tank()
RECORDS = _Records()
NATIVE = _Native()
MESSAGE_SET_V0 = KafkaMessageSet(0)
MESSAGE_SET_V1 = KafkaMessageSet(1)
#: Every storage format by name: what the log engine is opened with, so a partition's `fmt` is one of these.
STORAGE_FORMATS: dict[str, StorageFormat] = {f.name: f for f in (KAFKA, TANK)}


def _runs(records: Sequence[Record]):
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].offset != records[i - 1].offset + 1:
            yield records[start:i]
            start = i
