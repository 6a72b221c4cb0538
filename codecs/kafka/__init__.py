"""Kafka for logway: record formats (and, beside them, the wire protocol codec), sans-I/O.

- `records`: RecordBatch v2 encode/decode, transaction markers (`encode_control_batch`, `parse_control_marker`)
  and `KafkaFormat`, the storage adapter for topics stored as Kafka batches (validate + stamp, no record
  decoding).
- `legacy`: legacy MessageSets (magic 0/1; Produce < v3, Fetch < v4): decode, conversion to a RecordBatch v2,
  and encode for old fetchers. It builds on `records`; what both formats share is in `record_set`.
- Compression (codec ids 0–4: none, gzip, snappy raw/xerial, lz4 frame, zstd; bounded decompression) is shared
  with TANK in `logway.codecs.compression`; `CODEC_NAMES`, `compress`, ... are re-exported here.
- `connection`: the wire protocol in the codec contract of `logway.codecs` (`receive_data`, `next_event`,
  `send`): `KafkaServerConnection` (bytes in, `KafkaRequest` events out, `send(KafkaResponse)` frames the answer
  in the remembered request's version, deferred record sets included), `KafkaClientConnection` (our client).
- `api`: one dataclass per request/response body and nested struct, one schema per (key, version) layout, and
  `api.registry` (`API_KEYS`, `SUPPORTED`: every key from version 0 to its highest implemented version;
  `is_flexible`: flexible versions, KIP-482, are supported per API where declared).
- `primitives`: Kafka's wire types as bounded `construct` constructs (the compact forms and tagged fields of
  flexible versions included), and `schema()` / `flexible()`, which declare a layout.
- `error_codes`: `ErrorCode`, the one table of protocol error codes.

No sockets, no clock, no files: callers pass bytes in and get bytes or plain objects back.
"""

from __future__ import annotations

from ..compression import CODEC_NAMES, MAX_DECOMPRESSED_SIZE, compress, decompress
from .records import (
    BATCH_HEADER_SIZE,
    MAX_RECORDS_PER_BATCH,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    KafkaFormat,
    decode_batch,
    decode_records,
    encode_batch,
    encode_control_batch,
    iter_batches,
    parse_control_marker,
    parse_header,
)
from .legacy import decode_message_set, encode_message_set, message_set_to_batch, record_set_magic

__all__ = [
    "BATCH_HEADER_SIZE",
    "MAX_RECORDS_PER_BATCH",
    "BatchHeader",
    "KafkaFormat",
    "parse_header",
    "encode_batch",
    "encode_control_batch",
    "parse_control_marker",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
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

# --- the wire protocol codec (requests/responses); the message dataclasses are in `.api` -----------------------
from .error_codes import ErrorCode  # noqa: E402
from .api.registry import API_KEYS, SUPPORTED, api_versions_response  # noqa: E402
from .connection import (  # noqa: E402
    CLOSED,
    MAX_REQUEST_BYTES,
    NEED_DATA,
    KafkaClientConnection,
    KafkaRequest,
    KafkaResponse,
    KafkaServerConnection,
)

__all__ += [
    "ErrorCode",
    "API_KEYS",
    "SUPPORTED",
    "api_versions_response",
    "NEED_DATA",
    "CLOSED",
    "MAX_REQUEST_BYTES",
    "KafkaRequest",
    "KafkaResponse",
    "KafkaServerConnection",
    "KafkaClientConnection",
]
