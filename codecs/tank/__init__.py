"""Sans-I/O codec for the TANK 4.0 protocol (docs/tank.md; "spec §N" in this
package's docstrings means its section N) and the TANK bundle record format.

No sockets, no clock, no files, no trio, no storage. Modules, lowest first (each imports only those above it):

- `varint`: TANK's varuint32 (unsigned LEB128, at most 5 bytes, bounded).
- `message_set`: the bundle layout (spec §7), `parse_bundle_header`, `wrap`, and the message-set walk.
- `bundle`: `encode_bundle`, `decode_bundle`, `choose_codec`, and `TankFormat`, the storage adapter for topics
  stored as `varint bundle_len | bundle` entries. Snappy comes from the shared `logway.codecs.compression`.
- `chunk`: Consume chunks as a client reads them — `iter_chunk`, the header-only `count_messages`, and
  `decode_chunk` (seqs and filtering as the C++ client).
- `messages`: request/response dataclasses, message type ids, error codes, config and topic-name rules.
- `wire`: the bounded payload reader, pack helpers, the frame header; `schema`: declarative little-endian
  layouts; `requests` / `responses`: every payload layout, declared once and both parsed and built from it.
- `connection`: framing; `TankServerConnection` (broker side) and `TankClientConnection` (client side), in the
  codec contract of `logway.codecs` (`receive_data`, `next_event`, `send`).

Sequence numbers are TANK's (the first message of a partition is seq 1); logway offsets are `seq - 1`.
"""

from .bundle import (
    CODEC_NONE,
    CODEC_SNAPPY,
    MAX_KEY_BYTES,
    BundleHeader,
    TankFormat,
    choose_codec,
    decode_bundle,
    encode_bundle,
    parse_bundle_header,
    wrap,
)
from .chunk import ChunkCount, ChunkEntry, DecodedChunk, count_messages, decode_chunk, iter_chunk
from .connection import CLOSED, MAX_FRAME_BYTES, NEED_DATA, PING_FRAME, TankClientConnection, TankServerConnection
from .messages import (
    ConsumeFlags,
    ConsumePartition,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    CreateTopicError,
    CreateTopicRequest,
    CreateTopicResponse,
    DiscoverPartitionsRequest,
    DiscoverPartitionsResponse,
    DiscoverTopicsRequest,
    DiscoverTopicsResponse,
    DiscoverTopologyRequest,
    DiscoverTopologyResponse,
    Endpoint,
    MsgType,
    PartitionBounds,
    PartitionReason,
    PingEvent,
    ProduceEntry,
    ProduceError,
    ProduceRequest,
    ProduceResponse,
    ProduceResult,
    ReloadConfError,
    ReloadConfRequest,
    ReloadConfResponse,
    StatusRequest,
    StatusResponse,
    TopicInfo,
    TopologyNode,
    parse_topic_config,
    valid_topic_name,
)
from .varint import decode_varint, encode_varint

__all__ = [
    # bundles and storage
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "MAX_KEY_BYTES",
    "BundleHeader",
    "TankFormat",
    "choose_codec",
    "decode_bundle",
    "encode_bundle",
    "parse_bundle_header",
    "wrap",
    "ChunkCount",
    "ChunkEntry",
    "DecodedChunk",
    "count_messages",
    "decode_chunk",
    "iter_chunk",
    "encode_varint",
    "decode_varint",
    # connections
    "CLOSED",
    "NEED_DATA",
    "MAX_FRAME_BYTES",
    "PING_FRAME",
    "TankServerConnection",
    "TankClientConnection",
    # messages
    "MsgType",
    "ProduceError",
    "ConsumeFlags",
    "CreateTopicError",
    "ReloadConfError",
    "PartitionReason",
    "Endpoint",
    "parse_topic_config",
    "valid_topic_name",
    "ProduceEntry",
    "ProduceRequest",
    "ProduceResult",
    "ProduceResponse",
    "ConsumePartition",
    "ConsumeTopic",
    "ConsumeRequest",
    "ConsumePartitionResult",
    "ConsumeTopicResult",
    "ConsumeResponse",
    "PingEvent",
    "DiscoverPartitionsRequest",
    "DiscoverPartitionsResponse",
    "PartitionBounds",
    "CreateTopicRequest",
    "CreateTopicResponse",
    "ReloadConfRequest",
    "ReloadConfResponse",
    "StatusRequest",
    "StatusResponse",
    "DiscoverTopicsRequest",
    "DiscoverTopicsResponse",
    "TopicInfo",
    "DiscoverTopologyRequest",
    "DiscoverTopologyResponse",
    "TopologyNode",
]
