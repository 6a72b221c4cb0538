"""Fetch (key 1), versions 0-18 (flexible from 12): read record sets from partitions.

Request: replica_id (v0-14; v15+ moves it into a tagged field for followers), max_wait_ms, min_bytes, max_bytes
(v3+), isolation_level (v4+), session_id and session_epoch (v7+), topics[topic (v0-12) | topic_id (v13+),
partitions[partition, current_leader_epoch (v9+), fetch_offset, last_fetched_epoch (v12+), log_start_offset (v5+),
partition_max_bytes]], forgotten_topics_data[topic (v7-12) | topic_id (v13+), partitions[int32]] (v7+), rack_id
(v11+). Fetch sessions (v7+): the gateway answers session_id 0 (sessionless) and accepts full fetches. v16-v18
change only tagged fields (leader hints, replica directories, high watermarks of KRaft followers), all skipped.

Response: throttle_time_ms (v1+), error_code and session_id (v7+), responses[topic (v0-12) | topic_id (v13+),
partitions[partition_index, error_code, high_watermark, last_stable_offset (v4+), log_start_offset (v5+),
aborted_transactions (v4+, nullable), preferred_read_replica (v11+), records]].

`records` (nullable) is bytes when parsed; when building a response it may also be a deferred object with an
integer `length` (a file slice sent with os.sendfile), see `primitives.build_chunks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..message import message, only, since, struct, until
from ..primitives import ZERO_UUID, Array, Int8, Int16, Int32, Int64, NullableArray, Records, String, Uuid

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
MAX_VERSION = 18
FLEXIBLE_SINCE = 12
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
    last_fetched_epoch: int = -1  # v12+ (followers only)


@dataclass(slots=True)
class FetchTopic:
    topic: str = ""  # v0-v12
    partitions: list[FetchPartition] = field(default_factory=list)
    topic_id: bytes = ZERO_UUID  # v13+ (instead of the name)


@dataclass(slots=True)
class ForgottenTopic:
    topic: str = ""  # v7-v12
    partitions: list[int] = field(default_factory=list)
    topic_id: bytes = ZERO_UUID  # v13+ (instead of the name)


@dataclass(slots=True)
class FetchRequest:
    replica_id: int = -1  # v0-v14; -1 = a consumer, not a follower broker
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
    topic: str = ""  # v0-v12
    partitions: list[PartitionData] = field(default_factory=list)
    topic_id: bytes = ZERO_UUID  # v13+ (instead of the name)


@dataclass(slots=True)
class FetchResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0  # v7+ (top-level: fetch-session errors)
    session_id: int = 0  # v7+; 0 = no session was created
    responses: list[FetchableTopicResponse] = field(default_factory=list)


# --- request ------------------------------------------------------------------------------------------------

REQUEST_SCHEMAS = message(
    FetchRequest, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    replica_id=until(14, Int32),
    max_wait_ms=Int32,
    min_bytes=Int32,
    max_bytes=since(3, Int32),  # v3: the response-wide limit; partition order now matters
    isolation_level=since(4, Int8),  # from v4 on the response carries RecordBatch v2
    session_id=since(7, Int32),  # v7: fetch sessions (KIP-227)
    session_epoch=since(7, Int32),
    topics=Array(struct(
        FetchTopic, topic=until(12, String), topic_id=since(13, Uuid),
        partitions=Array(struct(
            FetchPartition, partition=Int32,
            current_leader_epoch=since(9, Int32),  # KIP-320; v10 only signals zstd support
            fetch_offset=Int64, last_fetched_epoch=since(12, Int32), log_start_offset=since(5, Int64),
            partition_max_bytes=Int32)))),
    forgotten_topics_data=since(7, Array(struct(ForgottenTopic, topic=only(7, 12, String), topic_id=since(13, Uuid),
                                                partitions=Array(Int32)))),
    rack_id=since(11, String))  # KIP-392, fetch from follower

# --- response -----------------------------------------------------------------------------------------------

RESPONSE_SCHEMAS = message(
    FetchResponse, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=since(1, Int32),  # first (unlike Produce)
    error_code=since(7, Int16),  # top-level: fetch-session errors
    session_id=since(7, Int32),
    responses=Array(struct(
        FetchableTopicResponse, topic=until(12, String), topic_id=since(13, Uuid),
        partitions=Array(struct(
            PartitionData, partition_index=Int32, error_code=Int16, high_watermark=Int64,
            last_stable_offset=since(4, Int64), log_start_offset=since(5, Int64),
            aborted_transactions=since(4, NullableArray(struct(AbortedTransaction, producer_id=Int64,
                                                               first_offset=Int64))),
            preferred_read_replica=since(11, Int32),
            records=Records)))))
