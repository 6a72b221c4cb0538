"""Sans-I/O codec for the TANK 4.0 protocol (see /work/shared/specs/tank.md) and the TANK bundle record format.

No sockets, no clock, no files, no trio, no storage. Modules:

- `varint`: TANK's varuint32 (unsigned LEB128, at most 5 bytes, bounded).
- `bundle`: bundles (spec §7) — `encode_bundle`, `decode_bundle`, `choose_codec`, `wrap`, `parse_bundle_header`
  — and `TankFormat`, the storage adapter for topics stored as `varint bundle_len | bundle` entries.
- `chunk`: Consume chunks as a client reads them — `iter_chunk`, the header-only `count_messages`, and
  `decode_chunk` (seqs and filtering as the C++ client).
- `messages`: request/response dataclasses, message type ids, error codes, config and topic-name rules.
- `wire`: the bounded payload reader and pack helpers; `requests` / `responses`: every payload layout.
- `connection`: framing; `TankServerConnection` (broker side) and `TankClientConnection` (client side).

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
