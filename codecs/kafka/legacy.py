"""Legacy Kafka MessageSets (magic 0/1): what Produce < v3 sends and Fetch < v4 answers with.

Pure functions over bytes, like `records` (RecordBatch v2), on which they build: a legacy set is decoded into
`Record`s, converted into one RecordBatch v2 for storage (`message_set_to_batch`), or encoded back for an old
fetcher (`encode_message_set`). What both formats share, `record_set_magic` included, is in `record_set`.

Legacy message::

    offset int64 | size int32 | crc uint32 (CRC-32 of magic..end) | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | keyLength int32 | key | valueLength int32 | value

A compressed legacy set is one wrapper message whose value is the compressed inner message set (inner offsets
are relative in magic 1: absolute = wrapper offset - last inner offset + inner offset).

Every length read from the wire is checked against the bytes that remain before anything is sliced.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator, Sequence

from ..errors import RecordFormatError
from ..records import Record
from ..compression import decompress
from .record_set import CODEC_MASK as _CODEC_MASK
from .record_set import INT32 as _INT32
from .record_set import INT64 as _INT64
from .record_set import MAX_RECORDS_PER_BATCH, NO_TIMESTAMP, record_set_magic
from .record_set import TIMESTAMP_TYPE_BIT as _TIMESTAMP_TYPE_BIT
from .records import encode_batch

__all__ = [
    "record_set_magic",
    "decode_message_set",
    "message_set_to_batch",
    "encode_message_set",
]

#: offset int64 + size int32 in front of every legacy message.
_LEGACY_LOG_OVERHEAD = 12
#: Smallest legacy message body: crc 4, magic 1, attributes 1, keyLength 4, valueLength 4 (magic 1: + 8).
_MESSAGE_OVERHEAD = {0: 14, 1: 22}
_LEGACY_PREFIX = struct.Struct(">qi")
_LEGACY_HEAD = struct.Struct(">IBb")  # crc, magic, attributes
_MESSAGE_V0_HEAD = struct.Struct(">bbi")  # magic, attributes, keyLength
_MESSAGE_V1_HEAD = struct.Struct(">bbqi")  # magic, attributes, timestamp, keyLength
_MESSAGE_PREFIX = struct.Struct(">qiI")  # offset, size, crc


def _iter_messages(mv: memoryview, allow_partial: bool) -> Iterator[tuple]:
    """Yield (offset, magic, attributes, timestamp, key, value) for each CRC-checked legacy message."""
    end = len(mv)
    pos = 0
    while pos < end:
        if end - pos < _LEGACY_LOG_OVERHEAD:
            if allow_partial:
                return
            raise RecordFormatError(f"truncated message set entry at {pos}")
        offset, size = _LEGACY_PREFIX.unpack_from(mv, pos)
        start = pos + _LEGACY_LOG_OVERHEAD
        if size < _MESSAGE_OVERHEAD[0]:
            raise RecordFormatError(f"message size {size} at {pos} is below the minimum {_MESSAGE_OVERHEAD[0]}")
        if size > end - start:
            if allow_partial:
                return
            raise RecordFormatError(f"message at {pos} declares {size} bytes, {end - start} left")
        msg_end = start + size
        crc, magic, attributes = _LEGACY_HEAD.unpack_from(mv, start)
        if magic not in _MESSAGE_OVERHEAD:
            raise RecordFormatError(f"bad legacy message magic {magic} at {pos} (magic 2 is a RecordBatch)")
        if size < _MESSAGE_OVERHEAD[magic]:
            raise RecordFormatError(f"magic {magic} message of {size} bytes at {pos} is too short")
        actual = zlib.crc32(mv[start + 4 : msg_end])
        if actual != crc:
            raise RecordFormatError(f"message CRC-32 mismatch at {pos}: header {crc:#010x}, computed {actual:#010x}")
        p = start + 6
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(mv, p)
            p += 8
        else:
            timestamp = NO_TIMESTAMP
        (klen,) = _INT32.unpack_from(mv, p)
        p += 4
        if klen == -1:
            key = None
        elif 0 <= klen <= msg_end - p - 4:
            key = bytes(mv[p : p + klen])
            p += klen
        else:
            raise RecordFormatError(f"bad key length {klen} in message at {pos}")
        (vlen,) = _INT32.unpack_from(mv, p)
        p += 4
        if vlen == -1:
            value = None
        elif 0 <= vlen <= msg_end - p:
            value = bytes(mv[p : p + vlen])
            p += vlen
        else:
            raise RecordFormatError(f"bad value length {vlen} in message at {pos}")
        if p != msg_end:
            raise RecordFormatError(f"{msg_end - p} stray bytes after the value of message at {pos}")
        yield offset, magic, attributes, timestamp, key, value
        pos = msg_end


def _ts(timestamp: int) -> int | None:
    return None if timestamp == NO_TIMESTAMP else timestamp


def _decode_message_set(buf, allow_partial: bool) -> tuple[list[Record], int]:
    """Decode a legacy message set; return the records and the codec of the first compressed wrapper (or 0)."""
    records: list[Record] = []
    first_codec = 0
    for offset, magic, attributes, timestamp, key, value in _iter_messages(memoryview(buf), allow_partial):
        codec = attributes & _CODEC_MASK
        if codec == 0:
            records.append(Record(value, key, _ts(timestamp), (), offset))
        else:
            if value is None:
                raise RecordFormatError(f"compressed wrapper message at offset {offset} has no value")
            first_codec = first_codec or codec
            inner = decompress(codec, value, legacy_lz4_checksum=magic == 0)
            log_append_time = magic == 1 and attributes & _TIMESTAMP_TYPE_BIT
            first = len(records)
            for ioffset, imagic, iattributes, itimestamp, ikey, ivalue in _iter_messages(memoryview(inner), False):
                if iattributes & _CODEC_MASK:
                    raise RecordFormatError("nested compression in a legacy wrapper message")
                if imagic != magic:
                    raise RecordFormatError(f"magic {imagic} message inside a magic {magic} wrapper")
                records.append(Record(ivalue, ikey, _ts(timestamp if log_append_time else itimestamp), (), ioffset))
                if len(records) > MAX_RECORDS_PER_BATCH:
                    raise RecordFormatError(f"message set holds more than {MAX_RECORDS_PER_BATCH} messages")
            if magic == 1 and len(records) > first:
                # Inner offsets are relative; the wrapper carries the absolute offset of the last inner message.
                # A producer's wrapper says 0 (the broker has not assigned offsets yet): keep the relative ones,
                # as kafka-python does, rather than going negative.
                base = offset - records[-1].offset
                if base > 0:
                    for r in records[first:]:
                        r.offset += base
        if len(records) > MAX_RECORDS_PER_BATCH:
            raise RecordFormatError(f"message set holds more than {MAX_RECORDS_PER_BATCH} messages")
    return records, first_codec


def decode_message_set(buf: bytes | bytearray | memoryview, *, allow_partial: bool = False) -> list[Record]:
    """Decode a legacy (magic 0/1) message set, unwrapping compressed wrapper messages.

    Records keep the offsets the set carries (absolute for magic 1 inner messages); magic 0 messages and
    timestamps of -1 decode as `timestamp=None`. Legacy messages have no headers. A truncated last message
    raises, unless `allow_partial` (Fetch-style input) is true.
    """
    return _decode_message_set(buf, allow_partial)[0]


def message_set_to_batch(
    buf: bytes | bytearray | memoryview, default_timestamp: int, *, compression: int | None = None
) -> bytes:
    """Convert a legacy message set (Produce v0–v2) into one RecordBatch v2 (b"" for an empty set).

    Offset deltas are renumbered 0..n-1 (the broker assigns offsets); records without a timestamp get
    `default_timestamp`. The batch keeps the codec of the set's first compressed wrapper unless `compression`
    is given.
    """
    records, codec = _decode_message_set(buf, allow_partial=False)
    if not records:
        return b""
    return encode_batch(
        records, default_timestamp=default_timestamp, compression=codec if compression is None else compression
    )


def encode_message_set(records: Sequence[Record], magic: int, *, drop_headers: bool = False) -> bytes:
    """Encode records as an uncompressed legacy message set (for Fetch v0–v3 answers).

    Each message carries `record.offset` (its position in `records` when the offset is -1). Magic 1 writes the
    record timestamp (-1 when None); magic 0 has none. Legacy messages cannot carry headers: a record with
    headers raises ValueError unless `drop_headers` is true (Kafka drops them on down-conversion).
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy message sets are magic 0 or 1, not {magic}")
    parts: list = []
    for i, r in enumerate(records):
        if r.headers and not drop_headers:
            raise ValueError("magic 0/1 messages cannot carry record headers")
        key, value = r.key, r.value
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        if magic == 0:
            head = _MESSAGE_V0_HEAD.pack(0, 0, klen)
        else:
            head = _MESSAGE_V1_HEAD.pack(1, 0, NO_TIMESTAMP if r.timestamp is None else r.timestamp, klen)
        body = b"".join((head, key or b"", _INT32.pack(vlen), value or b""))
        offset = r.offset if r.offset >= 0 else i
        parts += (_MESSAGE_PREFIX.pack(offset, len(body) + 4, zlib.crc32(body)), body)
    return b"".join(parts)
