"""ListOffsets (key 2), versions 0-10 (flexible from 6): find the offset for a timestamp. The special timestamps:
-1 latest (the end), -2 earliest, -3 the record with the largest timestamp (v7+, KIP-734), -4 the earliest offset
kept locally (v8+, KIP-405), -5 the latest offset in tiered storage (v9+, KIP-1005); a client uses the version
that names the one it asks for, and brokers answer them whatever the version.

Request: replica_id, isolation_level (v2+), topics[name, partitions[partition_index, current_leader_epoch (v4+),
timestamp, max_num_offsets (v0 only)]], timeout_ms (v10+, for lookups in remote storage).

Response: throttle_time_ms (v2+), topics[name, partitions[partition_index, error_code, old_style_offsets (v0 only:
an array of offsets, newest first), timestamp (v1+), offset (v1+), leader_epoch (v4+)]].
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct, until
from ..primitives import Array, Int8, Int16, Int32, Int64, String

__all__ = [
    "API_KEY",
    "ListOffsetsRequest",
    "ListOffsetsTopic",
    "ListOffsetsPartition",
    "ListOffsetsResponse",
    "ListOffsetsTopicResponse",
    "ListOffsetsPartitionResponse",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 2
MAX_VERSION = 10
FLEXIBLE_SINCE = 6
#: The special timestamps of a request (KIP-79, KIP-734, KIP-405, KIP-1005).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(slots=True)
class ListOffsetsPartition:
    partition_index: int = 0
    current_leader_epoch: int = -1  # v4+
    timestamp: int = 0  # one of the special timestamps above, else the first offset with a timestamp >= it
    max_num_offsets: int = 1  # v0 only


@dataclass(slots=True)
class ListOffsetsTopic:
    name: str = ""
    partitions: list[ListOffsetsPartition] = field(default_factory=list)


@dataclass(slots=True)
class ListOffsetsRequest:
    # Kafka's schema has no default here; -1 (an ordinary consumer, not a follower) is what clients send.
    replica_id: int = -1
    isolation_level: int = 0  # v2+
    topics: list[ListOffsetsTopic] = field(default_factory=list)
    timeout_ms: int = 30000  # v10+


@dataclass(slots=True)
class ListOffsetsPartitionResponse:
    partition_index: int = 0
    error_code: int = 0
    old_style_offsets: list[int] = field(default_factory=list)  # v0 only
    timestamp: int = -1  # v1+
    offset: int = -1  # v1+
    leader_epoch: int = -1  # v4+


@dataclass(slots=True)
class ListOffsetsTopicResponse:
    name: str = ""
    partitions: list[ListOffsetsPartitionResponse] = field(default_factory=list)


@dataclass(slots=True)
class ListOffsetsResponse:
    throttle_time_ms: int = 0  # v2+
    topics: list[ListOffsetsTopicResponse] = field(default_factory=list)


# --- request ------------------------------------------------------------------------------------------------

REQUEST_SCHEMAS = message(
    ListOffsetsRequest, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    replica_id=Int32,
    isolation_level=since(2, Int8),
    topics=Array(struct(
        ListOffsetsTopic, name=String,
        partitions=Array(struct(ListOffsetsPartition, partition_index=Int32,
                                current_leader_epoch=since(4, Int32),  # v5 may answer OFFSET_NOT_AVAILABLE
                                timestamp=Int64,
                                max_num_offsets=until(0, Int32))))),  # v1 drops it: one offset per partition
    timeout_ms=since(10, Int32))

# --- response -----------------------------------------------------------------------------------------------

RESPONSE_SCHEMAS = message(
    ListOffsetsResponse, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=since(2, Int32),
    topics=Array(struct(
        ListOffsetsTopicResponse, name=String,
        partitions=Array(struct(ListOffsetsPartitionResponse, partition_index=Int32, error_code=Int16,
                                old_style_offsets=until(0, Array(Int64)),  # newest first
                                timestamp=since(1, Int64), offset=since(1, Int64),
                                leader_epoch=since(4, Int32))))))
