"""Fetched Kafka RecordBatches -> Arrow record batches in the data source's schema, mostly in Arrow kernels.

The schema is Spark's Kafka source's: `SPARK_SCHEMA` (Spark DDL) and `ARROW_SCHEMA` (what Spark's Python data
source runner expects for it: microsecond UTC timestamps, list elements named `element`).

`decode_fetch(data, topic, partition, start, end)` turns one fetch answer (whole batches back to back) into one
Arrow batch of the records whose offsets are in [start, end); it is `walk` (batch headers and CRCs only: where
the next fetch starts) followed by `decode`, so a reader can ask for the next range before decoding this one.
Control batches (transaction markers) are never rows; given a read_committed answer's aborted transactions,
`walk` also drops the batches those transactions wrote (Kafka's consumer rule, see `walk`).
Decoding works on a zero-copy uint8 view of the (decompressed) record bytes, in Arrow's C++ kernels:

0. record boundaries: see "record chain" below (Python, or C-speed slicing for runs of equal-size records);
1. varint fields are decoded for all records at once (`take` the bytes at the field positions, then shifts and
   masks; a field may take up to 3 bytes, i.e. lengths and deltas below 2^20);
2. the structure is checked (each record ends with a header count of 0 exactly at its length);
3. keys and values are gathered without Python objects: the boundaries (start_0, end_0, start_1, end_1, ...) are
   an Arrow offsets buffer over the record bytes, which makes every value and every gap between values an
   element of one binary array, and `take` of the even elements copies the values into a fresh binary column;
4. per-batch fields (base offset and timestamp, timestamp type) are expanded with a `take` by batch index.

Records with headers, fields longer than 3 varint bytes, or anything the checks reject take the slow path
(`decode_batch` from the codec, one Python object per record), which also raises the precise
`RecordFormatError` for a corrupt batch. CRCs are always verified.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from logway.codecs.errors import RecordFormatError
from logway.codecs.compression import decompress
from logway.codecs.kafka.records import (BATCH_HEADER, BATCH_HEADER_SIZE, BATCH_OVERHEAD, MAGIC_V2,
                                         MAX_RECORDS_PER_BATCH, MIN_RECORD_SIZE, decode_batch)

__all__ = ["SPARK_SCHEMA", "ARROW_SCHEMA", "HEADERS_TYPE", "Decoded", "walk", "decode", "decode_fetch"]

SPARK_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int, headers array<struct<key string, value binary>>")
HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()), pa.field("headers", HEADERS_TYPE),
])

#: Record bytes decoded per vector pass: binary offsets are int32, and a bounded pass bounds memory.
MAX_CHUNK_BYTES = 256 * 1024 * 1024
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_CRC_START = 21
_CODEC_MASK, _LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x07, 0x08, 0x10, 0x20


@dataclass(slots=True)
class Decoded:
    """One fetch answer decoded: the rows in range, where to fetch next, and what it cost."""

    batch: pa.RecordBatch | None  # rows with start <= offset < end; None when there are none
    next_offset: int  # the offset after the last batch used (control batches and gaps included)
    records: int  # records decoded, in range or not
    done: bool  # a batch at or past `end` was reached: nothing more to fetch


# ------------------------------------------------------------------------------------------- batch walk

@dataclass(slots=True)
class _Batch:
    view: memoryview  # the whole batch
    records: bytes | memoryview  # its (decompressed) record bytes
    base_offset: int
    last_offset: int
    count: int
    base_timestamp: int
    max_timestamp: int
    timestamp_type: int


def walk(data, start: int, end: int,
         aborted: Sequence[tuple[int, int]] = ()) -> tuple[list[_Batch], int, bool]:
    """The data batches overlapping [start, end), the next offset to fetch, and whether `end` was reached.

    `aborted`: (producer id, first offset) of the aborted transactions in a read_committed answer, by first
    offset. As Kafka's consumer does, a producer joins the aborted set at the first batch reaching its first
    offset and leaves it at its next control batch (the abort marker); its transactional batches in between are
    dropped (they still count for the next offset to fetch)."""
    mv = memoryview(data)
    size = len(mv)
    pos = 0
    out: list[_Batch] = []
    next_offset = start
    done = False
    pending = 0  # aborted[:pending] have joined `active`
    active: set[int] = set()
    while size - pos >= BATCH_HEADER_SIZE:
        (base, length, _, magic, crc, attrs, last_delta, base_ts, max_ts, producer_id, _, _, count) = \
            BATCH_HEADER.unpack_from(mv, pos)
        if magic != MAGIC_V2:
            raise RecordFormatError(f"not a RecordBatch v2 at byte {pos}: magic {magic}")
        if length < BATCH_OVERHEAD:
            raise RecordFormatError(f"batchLength {length} at byte {pos} is below the header's {BATCH_OVERHEAD}")
        batch_end = pos + length + _LOG_OVERHEAD
        if batch_end > size:
            break  # a fetch may end inside a batch
        view = mv[pos:batch_end]
        pos = batch_end
        dropped = False
        if pending < len(aborted) or active:
            while pending < len(aborted) and aborted[pending][1] <= base + last_delta:
                active.add(aborted[pending][0])
                pending += 1
            if attrs & _CONTROL:
                active.discard(producer_id)
            elif attrs & _TRANSACTIONAL and producer_id in active:
                dropped = True
        if base + last_delta < start:
            continue
        if base >= end:
            done = True
            break
        next_offset = base + last_delta + 1
        if crc32c(view[_CRC_START:]) != crc:
            raise RecordFormatError(f"CRC-32C mismatch in the batch at offset {base}")
        if attrs & _CONTROL or count == 0 or dropped:
            continue
        if not 0 < count <= MAX_RECORDS_PER_BATCH:
            raise RecordFormatError(f"recordsCount {count} outside 1..{MAX_RECORDS_PER_BATCH} at offset {base}")
        codec = attrs & _CODEC_MASK
        records = view[BATCH_HEADER_SIZE:] if codec == 0 else decompress(codec, view[BATCH_HEADER_SIZE:])
        if count * MIN_RECORD_SIZE > len(records):
            raise RecordFormatError(f"recordsCount {count} cannot fit in {len(records)} bytes at offset {base}")
        out.append(_Batch(view, records, base, base + last_delta, count, base_ts, max_ts,
                          1 if attrs & _LOG_APPEND_TIME else 0))
        if next_offset >= end:
            done = True
            break
    return out, next_offset, done


# --------------------------------------------------------------------------------------- record chain
# Where each record ends depends on every length before it: a chain no vector kernel follows. Two ways along it:
# - the Python loop (`_follow`), about 0.3 µs a record;
# - speculation (`_speculate`): guess that the next k records have the same length prefix as this one, so they
#   start every `size` bytes. Extended slicing (`blob[pos::size]`, C speed) lines up the prefix bytes of all k
#   guessed starts, and `lstrip` counts how many equal the verified first one. A record whose prefix equals the
#   verified previous one has the same length, so by induction every record before the first mismatch is where
#   the guess put it. Batches of equal-size records (or of a few sizes in long runs) cost a few C calls per run;
#   when guesses keep falling short, the Python loop takes over for stretches that double each time.

#: Records a guess must be able to cover before it is tried.
_SPECULATE_MIN = 16
#: Records the Python loop follows after a guess fell short (doubled after each further shortfall).
_LOOP_STRETCH = 64


def _prefix(blob: bytes, pos: int) -> tuple[int, int]:
    """(bytes of the length varint at `pos`, raw value >> 1); ValueError beyond 3 bytes."""
    x = blob[pos]
    if x < 0x80:
        return 1, x >> 1
    y = blob[pos + 1]
    if y < 0x80:
        return 2, ((x & 0x7F) | (y << 7)) >> 1
    z = blob[pos + 2]
    if z < 0x80:
        return 3, ((x & 0x7F) | ((y & 0x7F) << 7) | (z << 14)) >> 1
    raise ValueError("length varint longer than 3 bytes")


def _follow(blob: bytes, pos: int, count: int, append) -> int:
    """The Python loop: follow `count` length prefixes from `pos`, appending each record's size."""
    for _ in range(count):
        x = blob[pos]
        if x < 0x80:
            size = 1 + (x >> 1)
        else:
            y = blob[pos + 1]
            if y < 0x80:
                size = 2 + (((x & 0x7F) | (y << 7)) >> 1)
            else:
                z = blob[pos + 2]
                if z >= 0x80:
                    raise ValueError("length varint longer than 3 bytes")
                size = 3 + (((x & 0x7F) | ((y & 0x7F) << 7) | (z << 14)) >> 1)
        pos += size
        append(size)
    return pos


def _speculate(blob: bytes, pos: int, prefix: int, size: int, k: int) -> int:
    """How many of the k records from `pos` have the same length prefix as the first (so start every `size`)."""
    stop = pos + k * size
    same = k
    for j in range(prefix):
        column = blob[pos + j:stop:size]  # byte j of every guessed record start
        same = min(same, k - len(column.lstrip(blob[pos + j:pos + j + 1])))
    return same


def _record_ends(blob: bytes, batches: list[_Batch]) -> pa.Array | None:
    """End position (in `blob`) of every record as an int64 array; None if the chain is broken.

    Record sizes are collected (a run of equal sizes is one C-level array repetition) and summed up by Arrow.
    A negative (odd zigzag) length is not rejected here: the vector checks catch it and the slow path reports it.
    """
    sizes = array("q")
    pos = seg_end = 0
    try:
        for b in batches:
            seg_end += len(b.records)
            left = b.count
            stretch = _LOOP_STRETCH
            while left:
                prefix, length = _prefix(blob, pos)
                size = prefix + length
                k = min(left, (seg_end - pos) // size)
                taken = _speculate(blob, pos, prefix, size, k) if k >= _SPECULATE_MIN else 0
                if taken:
                    sizes.extend(array("q", (size,)) * taken)
                    pos += size * taken
                    left -= taken
                    if taken >= _SPECULATE_MIN:
                        stretch = _LOOP_STRETCH
                        continue
                n = min(left, stretch)
                pos = _follow(blob, pos, n, sizes.append)
                left -= n
                stretch *= 2
            if pos != seg_end:
                return None
    except (IndexError, ValueError):
        return None
    return pc.cumulative_sum(pa.Array.from_buffers(pa.int64(), len(sizes), [None, pa.py_buffer(sizes)]))


# --------------------------------------------------------------------------------------- vector helpers
# Every kernel argument is an Arrow array or a typed Arrow scalar: a Python int or list makes pyarrow try to
# import pandas and dateutil on each call, which costs a file-system search per call when they are absent.

_SCALARS: dict[int, pa.Scalar] = {}


def _k(value: int) -> pa.Scalar:
    """The int64 scalar `value`, cached: for the module's few constants only."""
    scalar = _SCALARS.get(value)
    if scalar is None:
        scalar = _SCALARS[value] = pa.scalar(value, pa.int64())
    return scalar


def _int64s(values) -> pa.Array:
    """An int64 array from Python ints, through the buffer protocol (no per-call conversion machinery)."""
    arr = array("q", values)
    return pa.Array.from_buffers(pa.int64(), len(arr), [None, pa.py_buffer(arr)])


class _Cache:
    """Index arrays reused across calls, grown by doubling: 0,2,4,... ; 0,1,0,1,... ; 0,0,1,1,... ; zeros."""

    size = 0
    even = parity = half = zeros = None
    no_headers = pa.array([], HEADER_TYPE)

    @classmethod
    def ensure(cls, n: int) -> None:
        if n <= cls.size:
            return
        size = max(n, 2 * cls.size, 65536)
        cls.even = _int64s(range(0, 2 * size, 2))
        cls.parity = _int64s([0, 1] * size)
        cls.half = pc.shift_right(_int64s(range(2 * size)), _k(1))
        cls.zeros = pa.Array.from_buffers(pa.int32(), size + 1, [None, pa.py_buffer(bytes(4 * (size + 1)))])
        cls.size = size


def _varint(u8: pa.Array, pos: pa.Array) -> tuple[pa.Array, pa.Array | None] | None:
    """(zigzag-decoded value, byte size or None for "all 1") of the varint at each position (int64 arrays);
    None when one takes more than 3 bytes."""
    last = pa.scalar(len(u8) - 1, pa.int64())
    b0 = pc.take(u8, pos).cast(pa.int64())
    if pc.max(b0).as_py() < 0x80:
        raw, size = b0, None
    else:
        b1 = pc.take(u8, pc.min_element_wise(pc.add(pos, _k(1)), last)).cast(pa.int64())
        c0 = pc.greater_equal(b0, _k(0x80))
        two = pc.bit_wise_or(pc.bit_wise_and(b0, _k(0x7F)), pc.shift_left(pc.bit_wise_and(b1, _k(0x7F)), _k(7)))
        raw = pc.if_else(c0, two, b0)
        c1 = pc.and_(c0, pc.greater_equal(b1, _k(0x80)))
        size = pc.add(c0.cast(pa.int64()), _k(1))
        if pc.any(c1).as_py():
            b2 = pc.take(u8, pc.min_element_wise(pc.add(pos, _k(2)), last)).cast(pa.int64())
            if pc.any(pc.and_(c1, pc.greater_equal(b2, _k(0x80)))).as_py():
                return None
            raw = pc.if_else(c1, pc.bit_wise_or(raw, pc.shift_left(b2, _k(14))), raw)
            size = pc.add(size, c1.cast(pa.int64()))
    value = pc.bit_wise_xor(pc.shift_right(raw, _k(1)), pc.negate(pc.bit_wise_and(raw, _k(1))))
    return value, size


def _advance(pos: pa.Array, size: pa.Array | None) -> pa.Array:
    return pc.add(pos, _k(1) if size is None else size)


def _gather(blob_buf: pa.Buffer, pos: pa.Array, length: pa.Array, valid: pa.Array | None) -> pa.Array:
    """Binary column of blob[pos[i] : pos[i] + length[i]] (null where `valid` is false), copied in C++."""
    n = len(pos)
    ends = pc.add(pos, length)
    _Cache.ensure(n)
    index = pc.add(pc.multiply(_Cache.parity.slice(0, 2 * n), pa.scalar(n, pa.int64())), _Cache.half.slice(0, 2 * n))
    bounds = pc.take(pa.concat_arrays([pos, ends]), index).cast(pa.int32())  # start_0, end_0, start_1, ...
    pieces = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, bounds.buffers()[1], blob_buf])
    values = pc.take(pieces, _Cache.even.slice(0, n))
    if valid is None:
        return values
    if valid.offset:
        valid = pa.concat_arrays([valid])
    bufs = values.buffers()
    return pa.Array.from_buffers(pa.binary(), n, [valid.buffers()[1], bufs[1], bufs[2]], n - valid.true_count)


class _PerBatch:
    """Expands per-batch values to one value per record (a `take` by each record's batch index)."""

    def __init__(self, batches: list[_Batch]) -> None:
        self.n = sum(b.count for b in batches)
        self.index = None
        if len(batches) > 1:
            index = array("q")
            for i, b in enumerate(batches):
                index.extend(array("q", (i,)) * b.count)
            self.index = pa.Array.from_buffers(pa.int64(), len(index), [None, pa.py_buffer(index)])

    def expand(self, values: list[int]) -> pa.Array:
        """int64 array: values[batch of record i] for every record i."""
        if self.index is None:
            return pa.repeat(pa.scalar(values[0], pa.int64()), self.n)
        return pc.take(_int64s(values), self.index)


# ------------------------------------------------------------------------------------------ fast path

def _fast(blob: bytes, batches: list[_Batch], topic: str, partition: int) -> pa.RecordBatch | None:
    """The vector decoder (see the module docstring); None when the records need the slow path."""
    buf = pa.py_buffer(blob)
    u8 = pa.Array.from_buffers(pa.uint8(), len(blob), [None, buf])
    ends = _record_ends(blob, batches)
    if ends is None:
        return None
    n = len(ends)
    starts = pa.concat_arrays([_int64s([0]), ends.slice(0, n - 1)])
    fields = _varint(u8, starts)  # record length
    if fields is None:
        return None
    length, size = fields
    pos = _advance(starts, size)
    if not pc.all(pc.equal(pc.add(pos, length), ends)).as_py():
        return None
    pos = pc.add(pos, _k(1))  # attributes: unused
    decoded = []
    for _ in range(3):  # timestampDelta, offsetDelta, keyLength
        fields = _varint(u8, pos)
        if fields is None:
            return None
        decoded.append(fields[0])
        pos = _advance(pos, fields[1])
    ts_delta, offset_delta, key_len = decoded
    key_pos = pos
    key_min, key_max = pc.min_max(key_len).values()
    if key_min.as_py() < -1:
        return None
    keyed = key_max.as_py() >= 0
    if keyed:
        key_bytes = pc.max_element_wise(key_len, _k(0))
        pos = pc.add(pos, key_bytes)
    fields = _varint(u8, pos)
    if fields is None:
        return None
    value_len, size = fields
    value_min = pc.min(value_len).as_py()
    if value_min < -1:
        return None
    value_pos = _advance(pos, size)
    value_bytes = pc.max_element_wise(value_len, _k(0)) if value_min < 0 else value_len
    header_pos = pc.add(value_pos, value_bytes)
    # Headers: the fast path takes records without any (a header count of 0 as their last byte).
    if not pc.all(pc.equal(pc.add(header_pos, _k(1)), ends)).as_py():
        return None
    if pc.max(pc.take(u8, header_pos)).as_py() != 0:
        return None

    per_batch = _PerBatch(batches)
    offsets = pc.add(per_batch.expand([b.base_offset for b in batches]), offset_delta)
    timestamps = pc.add(per_batch.expand([b.base_timestamp for b in batches]), ts_delta)
    types = [b.timestamp_type for b in batches]
    if any(types):
        type_column = per_batch.expand(types).cast(pa.int32())
        appended = per_batch.expand([b.max_timestamp for b in batches])
        timestamps = pc.if_else(pc.equal(type_column, pa.scalar(1, pa.int32())), appended, timestamps)
    else:
        type_column = pa.repeat(pa.scalar(0, pa.int32()), n)
    micros = pc.multiply(timestamps, _k(1000))
    values = _gather(buf, value_pos, value_bytes, pc.greater_equal(value_len, _k(0)) if value_min < 0 else None)
    if keyed:
        keys = _gather(buf, key_pos, key_bytes, pc.greater_equal(key_len, _k(0)) if key_min.as_py() < 0 else None)
    else:
        keys = pa.nulls(n, pa.binary())
    _Cache.ensure(n)
    headers = pa.ListArray.from_arrays(_Cache.zeros.slice(0, n + 1), _Cache.no_headers, type=HEADERS_TYPE)
    return pa.RecordBatch.from_arrays([
        keys, values, pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets, micros.view(TIMESTAMP_TYPE), type_column, headers,
    ], schema=ARROW_SCHEMA)


# ------------------------------------------------------------------------------------------ slow path

def _slow(batches: list[_Batch], topic: str, partition: int) -> pa.RecordBatch:
    keys, values, offsets, micros, types, headers = [], [], [], [], [], []
    for b in batches:
        _, records = decode_batch(b.view, verify_crc=False)  # CRC checked in walk
        for r in records:
            keys.append(r.key)
            values.append(r.value)
            offsets.append(r.offset)
            micros.append((r.timestamp if r.timestamp is not None else -1) * 1000)
            types.append(b.timestamp_type)
            headers.append([{"key": k, "value": v} for k, v in r.headers])
    n = len(values)
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n), pa.array(offsets, pa.int64()),
        pa.array(micros, pa.int64()).view(TIMESTAMP_TYPE), pa.array(types, pa.int32()),
        pa.array(headers, HEADERS_TYPE),
    ], schema=ARROW_SCHEMA)


# ---------------------------------------------------------------------------------------------- entry

def _decode_chunk(batches: list[_Batch], topic: str, partition: int) -> pa.RecordBatch:
    blob = b"".join(b.records for b in batches)
    table = _fast(blob, batches, topic, partition)
    return _slow(batches, topic, partition) if table is None else table


def decode(batches: list, topic: str, partition: int, start: int, end: int) -> tuple[pa.RecordBatch | None, int]:
    """Rows of `walk`'s batches with start <= offset < end (None if none), and how many records were decoded."""
    if not batches:
        return None, 0
    chunks, current, size = [], [], 0
    for b in batches:
        if current and size + len(b.records) > MAX_CHUNK_BYTES:
            chunks.append(current)
            current, size = [], 0
        current.append(b)
        size += len(b.records)
    chunks.append(current)
    parts = [_decode_chunk(c, topic, partition) for c in chunks]
    table = parts[0] if len(parts) == 1 else pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
    records = table.num_rows
    if batches[0].base_offset < start or batches[-1].last_offset >= end:
        offsets = table.column(4)
        table = table.filter(pc.and_(pc.greater_equal(offsets, pa.scalar(start, pa.int64())),
                                     pc.less(offsets, pa.scalar(end, pa.int64()))))
    return (table if table.num_rows else None), records


def decode_fetch(data, topic: str, partition: int, start: int, end: int,
                 aborted: Sequence[tuple[int, int]] = ()) -> Decoded:
    """Decode one fetch answer's whole batches into rows with start <= offset < end (see the module doc)."""
    batches, next_offset, done = walk(data, start, end, aborted)
    table, records = decode(batches, topic, partition, start, end)
    return Decoded(table, next_offset, records, done)
