"""Fetch (key 1), versions 0-11: read record sets from partitions.

Request: replica_id, max_wait_ms, min_bytes, max_bytes (v3+), isolation_level (v4+), session_id and
session_epoch (v7+), topics[topic, partitions[partition, current_leader_epoch (v9+), fetch_offset,
log_start_offset (v5+), partition_max_bytes]], forgotten_topics_data[topic, partitions[int32]] (v7+),
rack_id (v11+). Fetch sessions (v7+): the gateway answers session_id 0 (sessionless) and accepts full fetches.

Response: throttle_time_ms (v1+), error_code and session_id (v7+), responses[topic, partitions[partition_index,
error_code, high_watermark, last_stable_offset (v4+), log_start_offset (v5+), aborted_transactions (v4+,
nullable), preferred_read_replica (v11+), records]].

`records` (nullable) is bytes when parsed; when building a response it may also be a deferred object with an
integer `length` (a file slice sent with os.sendfile), see `primitives.build_chunks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..primitives import (Array, Int8, Int16, Int32, Int64, NullableArray, Records, String, schema,
                          versioned)

__all__ = [
    "API_KEY",
    "READ_UNCOMMITTED",
    "READ_COMMITTED",
    "FetchRequest",
    "FetchTopic",
    "FetchPartition",
    "ForgottenTopic",
    "FetchResponse",
    "FetchableTopicResponse",
    "PartitionData",
    "AbortedTransaction",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 1
MAX_VERSION = 11
#: Fetch (v4+) and ListOffsets (v2+) isolation levels: everything appended, or committed records only (up to the
#: last stable offset; a fetch answer lists the aborted transactions in it, whose batches the reader drops).
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass(slots=True)
class FetchPartition:
    partition: int = 0
    current_leader_epoch: int = -1  # v9+
    fetch_offset: int = 0
    log_start_offset: int = -1  # v5+ (only followers set it)
    partition_max_bytes: int = 0


@dataclass(slots=True)
class FetchTopic:
    topic: str = ""
    partitions: list[FetchPartition] = field(default_factory=list)


@dataclass(slots=True)
class ForgottenTopic:
    topic: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class FetchRequest:
    replica_id: int = -1  # -1 = a consumer, not a follower broker
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0x7FFFFFFF  # v3+; absent before = no response-size limit
    isolation_level: int = 0  # v4+; 0 = read_uncommitted, 1 = read_committed
    session_id: int = 0  # v7+
    session_epoch: int = -1  # v7+; -1 = sessionless full fetch (also what v0-v6 mean)
    topics: list[FetchTopic] = field(default_factory=list)
    forgotten_topics_data: list[ForgottenTopic] = field(default_factory=list)  # v7+
    rack_id: str = ""  # v11+


@dataclass(slots=True)
class AbortedTransaction:
    producer_id: int = 0
    first_offset: int = 0


@dataclass(slots=True)
class PartitionData:
    partition_index: int = 0
    error_code: int = 0
    high_watermark: int = 0
    last_stable_offset: int = -1  # v4+
    log_start_offset: int = -1  # v5+
    aborted_transactions: list[AbortedTransaction] | None = field(default_factory=list)  # v4+, nullable
    preferred_read_replica: int = -1  # v11+; -1 = keep fetching from the leader
    records: bytes | Any | None = None  # bytes, a deferred object (build only), or None


@dataclass(slots=True)
class FetchableTopicResponse:
    topic: str = ""
    partitions: list[PartitionData] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0  # v7+ (top-level: fetch-session errors)
    session_id: int = 0  # v7+; 0 = no session was created
    responses: list[FetchableTopicResponse] = field(default_factory=list)


# --- request ------------------------------------------------------------------------------------------------

_PART_V0 = schema(FetchPartition, partition=Int32, fetch_offset=Int64, partition_max_bytes=Int32)
_PART_V5 = schema(FetchPartition, partition=Int32, fetch_offset=Int64, log_start_offset=Int64,
                  partition_max_bytes=Int32)
_PART_V9 = schema(FetchPartition, partition=Int32, current_leader_epoch=Int32, fetch_offset=Int64,
                  log_start_offset=Int64, partition_max_bytes=Int32)
_FORGOTTEN_V7 = schema(ForgottenTopic, topic=String, partitions=Array(Int32))


def _topics(partition):
    return Array(schema(FetchTopic, topic=String, partitions=Array(partition)))


REQUEST_V0 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, topics=_topics(_PART_V0))
# v1, v2: same as v0 (v2 may return magic-1 messages).
# v3 adds the response-wide max_bytes; partition order now matters.
REQUEST_V3 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                    topics=_topics(_PART_V0))
# v4 adds isolation_level; from v4 on the response carries RecordBatch v2.
REQUEST_V4 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                    isolation_level=Int8, topics=_topics(_PART_V0))
# v5 adds the per-partition log_start_offset (v6 is the same).
REQUEST_V5 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                    isolation_level=Int8, topics=_topics(_PART_V5))
# v7 adds fetch sessions: session_id/session_epoch before the topics, forgotten topics after (v8 is the same).
REQUEST_V7 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                    isolation_level=Int8, session_id=Int32, session_epoch=Int32, topics=_topics(_PART_V5),
                    forgotten_topics_data=Array(_FORGOTTEN_V7))
# v9 adds current_leader_epoch (KIP-320); v10 only signals zstd support.
REQUEST_V9 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                    isolation_level=Int8, session_id=Int32, session_epoch=Int32, topics=_topics(_PART_V9),
                    forgotten_topics_data=Array(_FORGOTTEN_V7))
# v11 adds rack_id (KIP-392, fetch from follower).
REQUEST_V11 = schema(FetchRequest, replica_id=Int32, max_wait_ms=Int32, min_bytes=Int32, max_bytes=Int32,
                     isolation_level=Int8, session_id=Int32, session_epoch=Int32, topics=_topics(_PART_V9),
                     forgotten_topics_data=Array(_FORGOTTEN_V7), rack_id=String)
REQUEST_SCHEMAS = versioned(MAX_VERSION, {0: REQUEST_V0, 3: REQUEST_V3, 4: REQUEST_V4, 5: REQUEST_V5,
                                          7: REQUEST_V7, 9: REQUEST_V9, 11: REQUEST_V11})

# --- response -----------------------------------------------------------------------------------------------

_ABORTED_V4 = schema(AbortedTransaction, producer_id=Int64, first_offset=Int64)
_PDATA_V0 = schema(PartitionData, partition_index=Int32, error_code=Int16, high_watermark=Int64, records=Records)
_PDATA_V4 = schema(PartitionData, partition_index=Int32, error_code=Int16, high_watermark=Int64,
                   last_stable_offset=Int64, aborted_transactions=NullableArray(_ABORTED_V4), records=Records)
_PDATA_V5 = schema(PartitionData, partition_index=Int32, error_code=Int16, high_watermark=Int64,
                   last_stable_offset=Int64, log_start_offset=Int64,
                   aborted_transactions=NullableArray(_ABORTED_V4), records=Records)
_PDATA_V11 = schema(PartitionData, partition_index=Int32, error_code=Int16, high_watermark=Int64,
                    last_stable_offset=Int64, log_start_offset=Int64,
                    aborted_transactions=NullableArray(_ABORTED_V4), preferred_read_replica=Int32,
                    records=Records)


def _responses(partition):
    return Array(schema(FetchableTopicResponse, topic=String, partitions=Array(partition)))


RESPONSE_V0 = schema(FetchResponse, responses=_responses(_PDATA_V0))
# v1 adds throttle_time_ms, first (unlike Produce); v2, v3 are the same.
RESPONSE_V1 = schema(FetchResponse, throttle_time_ms=Int32, responses=_responses(_PDATA_V0))
RESPONSE_V4 = schema(FetchResponse, throttle_time_ms=Int32, responses=_responses(_PDATA_V4))
# v5 adds log_start_offset; v6 only adds KAFKA_STORAGE_ERROR.
RESPONSE_V5 = schema(FetchResponse, throttle_time_ms=Int32, responses=_responses(_PDATA_V5))
# v7 adds the top-level error_code and session_id; v8-v10 are the same.
RESPONSE_V7 = schema(FetchResponse, throttle_time_ms=Int32, error_code=Int16, session_id=Int32,
                     responses=_responses(_PDATA_V5))
RESPONSE_V11 = schema(FetchResponse, throttle_time_ms=Int32, error_code=Int16, session_id=Int32,
                      responses=_responses(_PDATA_V11))
RESPONSE_SCHEMAS = versioned(MAX_VERSION, {0: RESPONSE_V0, 1: RESPONSE_V1, 4: RESPONSE_V4, 5: RESPONSE_V5,
                                           7: RESPONSE_V7, 11: RESPONSE_V11})
