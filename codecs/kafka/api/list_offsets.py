"""ListOffsets (key 2), versions 0-5: find the offset for a timestamp (-1 = latest/end, -2 = earliest).

Request: replica_id, isolation_level (v2+), topics[name, partitions[partition_index, current_leader_epoch (v4+),
timestamp, max_num_offsets (v0 only)]].

Response: throttle_time_ms (v2+), topics[name, partitions[partition_index, error_code, old_style_offsets (v0 only:
an array of offsets, newest first), timestamp (v1+), offset (v1+), leader_epoch (v4+)]].
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import Array, Int8, Int16, Int32, Int64, String, schema, versioned

__all__ = [
    "API_KEY",
    "ListOffsetsRequest",
    "ListOffsetsTopic",
    "ListOffsetsPartition",
    "ListOffsetsResponse",
    "ListOffsetsTopicResponse",
    "ListOffsetsPartitionResponse",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 2
MAX_VERSION = 5


@dataclass(slots=True)
class ListOffsetsPartition:
    partition_index: int = 0
    current_leader_epoch: int = -1  # v4+
    timestamp: int = 0  # -1 = latest, -2 = earliest, else the first offset with a timestamp >= it
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

def _topics(partition):
    return Array(schema(ListOffsetsTopic, name=String, partitions=Array(partition)))


_PART_V0 = schema(ListOffsetsPartition, partition_index=Int32, timestamp=Int64, max_num_offsets=Int32)
_PART_V1 = schema(ListOffsetsPartition, partition_index=Int32, timestamp=Int64)  # v1 drops max_num_offsets
_PART_V4 = schema(ListOffsetsPartition, partition_index=Int32, current_leader_epoch=Int32, timestamp=Int64)

REQUEST_V0 = schema(ListOffsetsRequest, replica_id=Int32, topics=_topics(_PART_V0))
REQUEST_V1 = schema(ListOffsetsRequest, replica_id=Int32, topics=_topics(_PART_V1))
# v2 adds isolation_level (v3 is the same).
REQUEST_V2 = schema(ListOffsetsRequest, replica_id=Int32, isolation_level=Int8, topics=_topics(_PART_V1))
# v4 adds current_leader_epoch (v5 is the same; its response may carry OFFSET_NOT_AVAILABLE).
REQUEST_V4 = schema(ListOffsetsRequest, replica_id=Int32, isolation_level=Int8, topics=_topics(_PART_V4))
REQUEST_SCHEMAS = versioned(MAX_VERSION, {0: REQUEST_V0, 1: REQUEST_V1, 2: REQUEST_V2, 4: REQUEST_V4})

# --- response -----------------------------------------------------------------------------------------------

def _rtopics(partition):
    return Array(schema(ListOffsetsTopicResponse, name=String, partitions=Array(partition)))


_RPART_V0 = schema(ListOffsetsPartitionResponse, partition_index=Int32, error_code=Int16,
                   old_style_offsets=Array(Int64))
_RPART_V1 = schema(ListOffsetsPartitionResponse, partition_index=Int32, error_code=Int16, timestamp=Int64,
                   offset=Int64)
_RPART_V4 = schema(ListOffsetsPartitionResponse, partition_index=Int32, error_code=Int16, timestamp=Int64,
                   offset=Int64, leader_epoch=Int32)

RESPONSE_V0 = schema(ListOffsetsResponse, topics=_rtopics(_RPART_V0))
RESPONSE_V1 = schema(ListOffsetsResponse, topics=_rtopics(_RPART_V1))
RESPONSE_V2 = schema(ListOffsetsResponse, throttle_time_ms=Int32, topics=_rtopics(_RPART_V1))  # v3 = v2
RESPONSE_V4 = schema(ListOffsetsResponse, throttle_time_ms=Int32, topics=_rtopics(_RPART_V4))  # v5 = v4
RESPONSE_SCHEMAS = versioned(MAX_VERSION, {0: RESPONSE_V0, 1: RESPONSE_V1, 2: RESPONSE_V2, 4: RESPONSE_V4})
