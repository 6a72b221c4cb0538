"""Produce (key 0), versions 0-13 (flexible from 9): append record sets to partitions.

Request: [transactional_id (v3+)], acks, timeout_ms, topic_data[name (v0-12) | topic_id (v13+, KIP-516),
partition_data[index, records]]. `records` is raw bytes (nullable): a legacy MessageSet (magic 0/1) in v0-v2, a
RecordBatch v2 from v3 on (aiokafka sends magic 2 even in v2: read the magic byte, never trust the version).
acks=0 means no response. v4-v8 change only what the broker may answer (v7: zstd); v10, v11 only errors (the
tagged current-leader hints of KIP-951, which a single broker never needs to give); v12 marks a client that may
rely on transactions v2 (KIP-890: the broker adds the partition to the transaction itself) — which it does only
when the broker advertises that feature, and we advertise no features.

Response: responses[name (v0-12) | topic_id (v13+), partition_responses[index, error_code, base_offset,
log_append_time_ms (v2+), log_start_offset (v5+), record_errors[batch_index, batch_index_error_message] (v8+),
error_message (v8+)]], throttle_time_ms (v1+, *after* the topic array, unlike most APIs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct, until
from ..primitives import ZERO_UUID, Array, Int16, Int32, Int64, NullableString, Records, String, Uuid

__all__ = [
    "API_KEY",
    "ProduceRequest",
    "TopicProduceData",
    "PartitionProduceData",
    "ProduceResponse",
    "TopicProduceResponse",
    "PartitionProduceResponse",
    "BatchIndexAndErrorMessage",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 0
MAX_VERSION = 13
FLEXIBLE_SINCE = 9


@dataclass(slots=True)
class PartitionProduceData:
    index: int = 0
    records: bytes | None = None


@dataclass(slots=True)
class TopicProduceData:
    name: str = ""  # v0-v12
    partition_data: list[PartitionProduceData] = field(default_factory=list)
    topic_id: bytes = ZERO_UUID  # v13+ (instead of the name)


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None = None  # v3+
    acks: int = 0
    timeout_ms: int = 0
    topic_data: list[TopicProduceData] = field(default_factory=list)


@dataclass(slots=True)
class BatchIndexAndErrorMessage:
    batch_index: int = 0
    batch_index_error_message: str | None = None


@dataclass(slots=True)
class PartitionProduceResponse:
    index: int = 0
    error_code: int = 0
    base_offset: int = 0
    log_append_time_ms: int = -1  # v2+; -1 = CreateTime topic
    log_start_offset: int = -1  # v5+
    record_errors: list[BatchIndexAndErrorMessage] = field(default_factory=list)  # v8+
    error_message: str | None = None  # v8+


@dataclass(slots=True)
class TopicProduceResponse:
    name: str = ""  # v0-v12
    partition_responses: list[PartitionProduceResponse] = field(default_factory=list)
    topic_id: bytes = ZERO_UUID  # v13+ (instead of the name)


@dataclass(slots=True)
class ProduceResponse:
    responses: list[TopicProduceResponse] = field(default_factory=list)
    throttle_time_ms: int = 0  # v1+


# --- request ------------------------------------------------------------------------------------------------

REQUEST_SCHEMAS = message(
    ProduceRequest, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    transactional_id=since(3, NullableString),
    acks=Int16,
    timeout_ms=Int32,
    topic_data=Array(struct(TopicProduceData, name=until(12, String), topic_id=since(13, Uuid),
                            partition_data=Array(struct(PartitionProduceData, index=Int32, records=Records)))))

# --- response -----------------------------------------------------------------------------------------------

RESPONSE_SCHEMAS = message(
    ProduceResponse, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    responses=Array(struct(
        TopicProduceResponse, name=until(12, String), topic_id=since(13, Uuid),
        partition_responses=Array(struct(
            PartitionProduceResponse, index=Int32, error_code=Int16, base_offset=Int64,
            log_append_time_ms=since(2, Int64), log_start_offset=since(5, Int64),
            record_errors=since(8, Array(struct(BatchIndexAndErrorMessage, batch_index=Int32,
                                                batch_index_error_message=NullableString))),
            error_message=since(8, NullableString))))),
    # v1 adds throttle_time_ms, placed after the responses (Produce and Fetch v0 predate the "first field" habit).
    throttle_time_ms=since(1, Int32))
