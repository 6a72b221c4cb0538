"""Sans-I/O codec for the native protocol (RustLog-style JSON frames; see /work/shared/specs/native.md).

Holds `events` (one dataclass per request/response), `wire` (the JSON <-> event mapping: decoders, encoders
and their validation) and `connection` (framing, receive buffer, error state).

Wire format: each frame is a u32 big-endian payload length followed by that many bytes of JSON, at most
`MAX_FRAME_BYTES` (10 MiB). The JSON is externally tagged, e.g. `{"Produce": {...}}`. Byte payloads are arrays
of integers 0..255.

Requests (server receives, client sends)::

    {"Produce": {"topic": str, "partition": int, "records": [record, ...]}}
    {"Fetch": {"topic", "partition", "offset", "max_bytes", "group_id": str|null (may be absent),
               "max_wait_ms"?: int, "min_bytes"?: int}}
    {"OffsetCommit": {"topic", "partition", "group_id": str, "offset": int, "metadata"?: str}}
    {"OffsetFetch": {"topic", "partition", "group_id": str}}
    {"CreateTopic": {"topic", "partitions"?: int >= 1}}      {"ListTopics": {}}
    {"DescribeTopic": {"topic"}}                              {"Ping": {}}
    {"DeleteTopic": {"topic"}}                                {"Auth": {"token": str}}

A Produce `record` is either a byte array (the seed's form: payload only) or, as our extension so native
clients can send keys and timestamps, an object `{"payload": [...], "key": [...]|null, "timestamp": int|null}`
where `key`/`timestamp` may be absent and `"value"` is accepted as an alias of `"payload"`. The encoder sends
the bare array whenever a record has no key and no timestamp, so seed brokers understand our frames.

Responses (client receives, server sends)::

    {"Produce": {"offsets": [int, ...]}}
    {"Fetch": {"records": [{"offset", "payload", "key"?, "timestamp"?}, ...], "next_offset": int}}
    {"OffsetCommit": {"success": bool}}      {"OffsetFetch": {"offset": int|null}}
    {"CreateTopic": {"created": bool}}       {"DeleteTopic": {"deleted": bool}}
    {"ListTopics": {"topics": [{"name", "partitions"}, ...]}}
    {"DescribeTopic": {"topic", "partitions": [{"partition", "log_start_offset", "log_end_offset"}, ...]}}
    {"Pong": {}}                             {"Error": {"message": str}}
    {"Auth": {"authenticated": true}}

In fetched records `key` and `timestamp` appear only when set; a record with no value (a Kafka tombstone) has
`"payload": null`; record headers are not carried. Unknown fields inside a known request are ignored.
Integers are never booleans; offsets are 0..2**63-1, partitions 0..2**31-1.

`Auth` is our extension for gateways configured with an access token: it must be the connection's first request;
any other request before it, or a wrong token, is answered with an `Error` and the connection is closed.
"""

from logway.codecs.native.connection import CLOSED, MAX_FRAME_BYTES, NEED_DATA, NativeConnection
from logway.codecs.native.events import (
    AuthRequest,
    AuthResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    DescribeTopicRequest,
    DescribeTopicResponse,
    ErrorResponse,
    FetchRequest,
    FetchResponse,
    ListTopicsRequest,
    ListTopicsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionSummary,
    PingRequest,
    PongResponse,
    ProduceRequest,
    ProduceResponse,
    Request,
    Response,
    TopicSummary,
)

__all__ = [
    "CLOSED",
    "MAX_FRAME_BYTES",
    "NEED_DATA",
    "NativeConnection",
    "Request",
    "Response",
    "ProduceRequest",
    "FetchRequest",
    "OffsetCommitRequest",
    "OffsetFetchRequest",
    "CreateTopicRequest",
    "DeleteTopicRequest",
    "ListTopicsRequest",
    "DescribeTopicRequest",
    "PingRequest",
    "AuthRequest",
    "ProduceResponse",
    "FetchResponse",
    "OffsetCommitResponse",
    "OffsetFetchResponse",
    "CreateTopicResponse",
    "DeleteTopicResponse",
    "ListTopicsResponse",
    "TopicSummary",
    "DescribeTopicResponse",
    "PartitionSummary",
    "PongResponse",
    "AuthResponse",
    "ErrorResponse",
]
