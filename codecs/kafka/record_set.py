"""What Kafka's two record-set formats share: attribute bits, the magic byte, and the bounds on record counts.

`records` (RecordBatch v2, magic 2) and `legacy` (MessageSets, magic 0/1) both build on this module, and `legacy`
builds on `records` (a legacy set is converted into a RecordBatch v2); nothing here imports either of them.
Both formats put the magic byte at offset 16 of their first entry, so `record_set_magic` tells them apart.
"""

from __future__ import annotations

import struct

from ..errors import RecordFormatError

__all__ = [
    "CODEC_MASK",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "CONTROL_BIT",
    "MAGIC_POS",
    "MAX_RECORDS_PER_BATCH",
    "NO_TIMESTAMP",
    "INT32",
    "INT64",
    "record_set_magic",
]

#: attributes: the low three bits are the compression codec (see `logway.codecs.compression`) ...
CODEC_MASK = 0x07
#: ... bit 3 the timestamp type (LogAppendTime) ...
TIMESTAMP_TYPE_BIT = 0x08
#: ... and, RecordBatch v2 only, bit 4 transactional and bit 5 control (transaction markers).
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

#: Byte 16 of both formats' first entry: magic (RecordBatch: after baseOffset, batchLength, partitionLeaderEpoch;
#: legacy message: after offset, size, crc).
MAGIC_POS = 16

#: Bound on records per batch (RecordBatch recordsCount, or the messages of one legacy set). Producers cap a
#: batch at batch.size (16 KiB–1 MiB), i.e. at most tens of thousands of records; each decoded `Record` costs
#: ~150 bytes of Python objects, so a million records (~150 MB) is already far beyond any real batch. Larger
#: claims are rejected before any decoding.
MAX_RECORDS_PER_BATCH = 1_000_000

#: Kafka's "no timestamp" (magic 0 messages; decoded as `Record.timestamp = None`).
NO_TIMESTAMP = -1

INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")


def record_set_magic(buf: bytes | bytearray | memoryview) -> int:
    """The magic of the first entry of a record set (byte 16 for both formats): 0/1 legacy, 2 RecordBatch."""
    if len(buf) <= MAGIC_POS:
        raise RecordFormatError(f"record set of {len(buf)} bytes is too short to carry a magic byte")
    return buf[MAGIC_POS]
