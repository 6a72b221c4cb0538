"""Kafka for logway: record formats (and, beside them, the wire protocol codec), sans-I/O.

- `records`: RecordBatch v2 encode/decode and `KafkaFormat`, the storage adapter for topics stored as Kafka
  batches (validate + stamp, no record decoding).
- `legacy`: legacy MessageSets (magic 0/1; Produce < v3, Fetch < v4): decode, conversion to a RecordBatch v2,
  and encode for old fetchers.
- `compression`: Kafka codec ids 0–4 (none, gzip, snappy raw/xerial, lz4 frame, zstd), bounded decompression.

No sockets, no clock, no files: callers pass bytes in and get bytes or plain objects back.
"""

from __future__ import annotations

from .compression import CODEC_NAMES, MAX_DECOMPRESSED_SIZE, compress, decompress
from .records import (
    BATCH_HEADER_SIZE,
    MAX_RECORDS_PER_BATCH,
    BatchHeader,
    KafkaFormat,
    decode_batch,
    decode_records,
    encode_batch,
    iter_batches,
    parse_header,
)
from .legacy import decode_message_set, encode_message_set, message_set_to_batch, record_set_magic  # after .records

__all__ = [
    "BATCH_HEADER_SIZE",
    "MAX_RECORDS_PER_BATCH",
    "BatchHeader",
    "KafkaFormat",
    "parse_header",
    "encode_batch",
    "decode_batch",
    "iter_batches",
    "decode_records",
    "record_set_magic",
    "decode_message_set",
    "message_set_to_batch",
    "encode_message_set",
    "CODEC_NAMES",
    "MAX_DECOMPRESSED_SIZE",
    "compress",
    "decompress",
]
