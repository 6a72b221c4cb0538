"""Produce (key 0), versions 0-8: append record sets to partitions.

Request: [transactional_id (v3+)], acks, timeout_ms, topic_data[name, partition_data[index, records]].
`records` is raw bytes (nullable): a legacy MessageSet (magic 0/1) in v0-v2, a RecordBatch v2 from v3 on
(aiokafka sends magic 2 even in v2: read the magic byte, never trust the version). acks=0 means no response.

Response: responses[name, partition_responses[index, error_code, base_offset, log_append_time_ms (v2+),
log_start_offset (v5+), record_errors[batch_index, batch_index_error_message] (v8+), error_message (v8+)]],
throttle_time_ms (v1+, *after* the topic array, unlike most APIs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Int16, Int32, Int64, NullableString, Records, String, schema,
                          versioned)

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
MAX_VERSION = 8


@dataclass(slots=True)
class PartitionProduceData:
    index: int = 0
    records: bytes | None = None


@dataclass(slots=True)
class TopicProduceData:
    name: str = ""
    partition_data: list[PartitionProduceData] = field(default_factory=list)


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
    name: str = ""
    partition_responses: list[PartitionProduceResponse] = field(default_factory=list)


@dataclass(slots=True)
class ProduceResponse:
    responses: list[TopicProduceResponse] = field(default_factory=list)
    throttle_time_ms: int = 0  # v1+


# --- request ------------------------------------------------------------------------------------------------

_PARTITION_V0 = schema(PartitionProduceData, index=Int32, records=Records)
_TOPIC_V0 = schema(TopicProduceData, name=String, partition_data=Array(_PARTITION_V0))

REQUEST_V0 = schema(ProduceRequest, acks=Int16, timeout_ms=Int32, topic_data=Array(_TOPIC_V0))
# v1, v2: same layout (v2 may carry magic-1 messages with timestamps).
REQUEST_V3 = schema(ProduceRequest, transactional_id=NullableString, acks=Int16, timeout_ms=Int32,
                    topic_data=Array(_TOPIC_V0))
# v4-v8: same layout as v3 (v4 may get KAFKA_STORAGE_ERROR, v7 may carry zstd, v8 changes only the response).
REQUEST_SCHEMAS = versioned(MAX_VERSION, {0: REQUEST_V0, 3: REQUEST_V3})

# --- response -----------------------------------------------------------------------------------------------

_P_RESP_V0 = schema(PartitionProduceResponse, index=Int32, error_code=Int16, base_offset=Int64)
_P_RESP_V2 = schema(PartitionProduceResponse, index=Int32, error_code=Int16, base_offset=Int64,
                    log_append_time_ms=Int64)
_P_RESP_V5 = schema(PartitionProduceResponse, index=Int32, error_code=Int16, base_offset=Int64,
                    log_append_time_ms=Int64, log_start_offset=Int64)
_RECORD_ERROR_V8 = schema(BatchIndexAndErrorMessage, batch_index=Int32,
                          batch_index_error_message=NullableString)
_P_RESP_V8 = schema(PartitionProduceResponse, index=Int32, error_code=Int16, base_offset=Int64,
                    log_append_time_ms=Int64, log_start_offset=Int64,
                    record_errors=Array(_RECORD_ERROR_V8), error_message=NullableString)


def _topic(partition):
    return schema(TopicProduceResponse, name=String, partition_responses=Array(partition))


RESPONSE_V0 = schema(ProduceResponse, responses=Array(_topic(_P_RESP_V0)))
# v1 adds throttle_time_ms, placed after the responses (Produce and Fetch v0 predate the "first field" habit).
RESPONSE_V1 = schema(ProduceResponse, responses=Array(_topic(_P_RESP_V0)), throttle_time_ms=Int32)
RESPONSE_V2 = schema(ProduceResponse, responses=Array(_topic(_P_RESP_V2)), throttle_time_ms=Int32)
# v3, v4: same as v2.
RESPONSE_V5 = schema(ProduceResponse, responses=Array(_topic(_P_RESP_V5)), throttle_time_ms=Int32)
# v6, v7: same as v5.
RESPONSE_V8 = schema(ProduceResponse, responses=Array(_topic(_P_RESP_V8)), throttle_time_ms=Int32)
RESPONSE_SCHEMAS = versioned(MAX_VERSION, {0: RESPONSE_V0, 1: RESPONSE_V1, 2: RESPONSE_V2, 5: RESPONSE_V5,
                                           8: RESPONSE_V8})
