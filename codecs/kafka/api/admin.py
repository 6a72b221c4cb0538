"""Topic admin and producer-setup APIs: CreateTopics (19, v0-4), DeleteTopics (20, v0-3), DeleteRecords (21, v0-1),
InitProducerId (22, v0-1), CreatePartitions (37, v0-1).

Admin clients send CreateTopics/DeleteTopics/CreatePartitions to the controller named in Metadata, DeleteRecords
(move a partition's log start offset forward) to each partition's leader. InitProducerId gives an idempotent (or
transactional) producer its producer id and epoch; kafka-python's default producer is idempotent and fails
without it. Its v2+ is flexible, v3+ lets a producer bump its own epoch (KIP-360): clients fall back to v0-1
(librdkafka, kafka-python 3 and aiokafka all do), so v0-1 is all we implement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Boolean, Int16, Int32, Int64, NullableArray, NullableString, String, schema,
                          versioned)

__all__ = [
    "CREATE_TOPICS_KEY",
    "DELETE_TOPICS_KEY",
    "INIT_PRODUCER_ID_KEY",
    "DELETE_RECORDS_KEY",
    "CREATE_PARTITIONS_KEY",
    "CreateTopicsRequest",
    "CreatableTopic",
    "CreatableReplicaAssignment",
    "CreatableTopicConfig",
    "CreateTopicsResponse",
    "CreatableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DeletableTopicResult",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "DeleteRecordsRequest",
    "DeleteRecordsTopic",
    "DeleteRecordsPartition",
    "DeleteRecordsResponse",
    "DeleteRecordsTopicResult",
    "DeleteRecordsPartitionResult",
    "CreatePartitionsRequest",
    "CreatePartitionsTopic",
    "CreatePartitionsAssignment",
    "CreatePartitionsResponse",
    "CreatePartitionsTopicResult",
    "SCHEMAS",
]

CREATE_TOPICS_KEY = 19
DELETE_TOPICS_KEY = 20
DELETE_RECORDS_KEY = 21
INIT_PRODUCER_ID_KEY = 22
CREATE_PARTITIONS_KEY = 37


# ============================================================================================= CreateTopics

@dataclass(slots=True)
class CreatableReplicaAssignment:
    partition_index: int = 0
    broker_ids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CreatableTopicConfig:
    name: str = ""
    value: str | None = None


@dataclass(slots=True)
class CreatableTopic:
    name: str = ""
    num_partitions: int = -1  # -1 = broker default (v4+), or when assignments are given
    replication_factor: int = -1  # -1 = broker default (v4+), or when assignments are given
    assignments: list[CreatableReplicaAssignment] = field(default_factory=list)
    configs: list[CreatableTopicConfig] = field(default_factory=list)


@dataclass(slots=True)
class CreateTopicsRequest:
    topics: list[CreatableTopic] = field(default_factory=list)
    timeout_ms: int = 60000
    validate_only: bool = False  # v1+


@dataclass(slots=True)
class CreatableTopicResult:
    name: str = ""
    error_code: int = 0
    error_message: str | None = None  # v1+


@dataclass(slots=True)
class CreateTopicsResponse:
    throttle_time_ms: int = 0  # v2+
    topics: list[CreatableTopicResult] = field(default_factory=list)


_CREATABLE_V0 = schema(
    CreatableTopic, name=String, num_partitions=Int32, replication_factor=Int16,
    assignments=Array(schema(CreatableReplicaAssignment, partition_index=Int32, broker_ids=Array(Int32))),
    configs=Array(schema(CreatableTopicConfig, name=String, value=NullableString)))
CREATE_TOPICS_REQUEST_V0 = schema(CreateTopicsRequest, topics=Array(_CREATABLE_V0), timeout_ms=Int32)
# v1 adds validate_only; v2, v3 = v1; v4 = v1 but num_partitions/replication_factor may be -1 (KIP-464).
CREATE_TOPICS_REQUEST_V1 = schema(CreateTopicsRequest, topics=Array(_CREATABLE_V0), timeout_ms=Int32,
                                  validate_only=Boolean)

CREATE_TOPICS_RESPONSE_V0 = schema(CreateTopicsResponse, topics=Array(
    schema(CreatableTopicResult, name=String, error_code=Int16)))
_RESULT_V1 = schema(CreatableTopicResult, name=String, error_code=Int16, error_message=NullableString)
CREATE_TOPICS_RESPONSE_V1 = schema(CreateTopicsResponse, topics=Array(_RESULT_V1))
# v2 adds throttle_time_ms first; v3, v4 = v2.
CREATE_TOPICS_RESPONSE_V2 = schema(CreateTopicsResponse, throttle_time_ms=Int32, topics=Array(_RESULT_V1))


# ============================================================================================= DeleteTopics

@dataclass(slots=True)
class DeleteTopicsRequest:
    topic_names: list[str] = field(default_factory=list)
    timeout_ms: int = 0


@dataclass(slots=True)
class DeletableTopicResult:
    name: str = ""
    error_code: int = 0


@dataclass(slots=True)
class DeleteTopicsResponse:
    throttle_time_ms: int = 0  # v1+
    responses: list[DeletableTopicResult] = field(default_factory=list)


DELETE_TOPICS_REQUEST_V0 = schema(DeleteTopicsRequest, topic_names=Array(String), timeout_ms=Int32)  # v1-v3 = v0
_DELETABLE_V0 = schema(DeletableTopicResult, name=String, error_code=Int16)
DELETE_TOPICS_RESPONSE_V0 = schema(DeleteTopicsResponse, responses=Array(_DELETABLE_V0))
# v1 adds throttle_time_ms first; v2 = v1; v3 = v1 but may return TOPIC_DELETION_DISABLED.
DELETE_TOPICS_RESPONSE_V1 = schema(DeleteTopicsResponse, throttle_time_ms=Int32, responses=Array(_DELETABLE_V0))


# =========================================================================================== InitProducerId

@dataclass(slots=True)
class InitProducerIdRequest:
    transactional_id: str | None = None  # None = idempotent producer without transactions
    transaction_timeout_ms: int = 0


@dataclass(slots=True)
class InitProducerIdResponse:
    throttle_time_ms: int = 0  # present from v0 (a late API: throttle time from the start)
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = 0


INIT_PRODUCER_ID_REQUEST_V0 = schema(InitProducerIdRequest, transactional_id=NullableString,
                                     transaction_timeout_ms=Int32)  # v1 = v0
INIT_PRODUCER_ID_RESPONSE_V0 = schema(InitProducerIdResponse, throttle_time_ms=Int32, error_code=Int16,
                                      producer_id=Int64, producer_epoch=Int16)  # v1 = v0 (throttling change only)


# ============================================================================================ DeleteRecords

@dataclass(slots=True)
class DeleteRecordsPartition:
    partition_index: int = 0
    offset: int = 0  # the new log start offset; -1 = the high watermark (delete everything)


@dataclass(slots=True)
class DeleteRecordsTopic:
    name: str = ""
    partitions: list[DeleteRecordsPartition] = field(default_factory=list)


@dataclass(slots=True)
class DeleteRecordsRequest:
    topics: list[DeleteRecordsTopic] = field(default_factory=list)
    timeout_ms: int = 0


@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    partition_index: int = 0
    low_watermark: int = 0  # the partition's log start offset after the deletion
    error_code: int = 0


@dataclass(slots=True)
class DeleteRecordsTopicResult:
    name: str = ""
    partitions: list[DeleteRecordsPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class DeleteRecordsResponse:
    throttle_time_ms: int = 0
    topics: list[DeleteRecordsTopicResult] = field(default_factory=list)


DELETE_RECORDS_REQUEST_V0 = schema(DeleteRecordsRequest, topics=Array(schema(
    DeleteRecordsTopic, name=String, partitions=Array(schema(DeleteRecordsPartition, partition_index=Int32,
                                                             offset=Int64)))),
    timeout_ms=Int32)  # v1 = v0
DELETE_RECORDS_RESPONSE_V0 = schema(DeleteRecordsResponse, throttle_time_ms=Int32, topics=Array(schema(
    DeleteRecordsTopicResult, name=String, partitions=Array(schema(
        DeleteRecordsPartitionResult, partition_index=Int32, low_watermark=Int64, error_code=Int16)))))  # v1 = v0


# ========================================================================================= CreatePartitions

@dataclass(slots=True)
class CreatePartitionsAssignment:
    broker_ids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CreatePartitionsTopic:
    name: str = ""
    count: int = 0  # the new total number of partitions
    assignments: list[CreatePartitionsAssignment] | None = None  # None = the broker chooses


@dataclass(slots=True)
class CreatePartitionsRequest:
    topics: list[CreatePartitionsTopic] = field(default_factory=list)
    timeout_ms: int = 0
    validate_only: bool = False


@dataclass(slots=True)
class CreatePartitionsTopicResult:
    name: str = ""
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class CreatePartitionsResponse:
    throttle_time_ms: int = 0
    results: list[CreatePartitionsTopicResult] = field(default_factory=list)


CREATE_PARTITIONS_REQUEST_V0 = schema(CreatePartitionsRequest, topics=Array(schema(
    CreatePartitionsTopic, name=String, count=Int32,
    assignments=NullableArray(schema(CreatePartitionsAssignment, broker_ids=Array(Int32))))),
    timeout_ms=Int32, validate_only=Boolean)  # v1 = v0
CREATE_PARTITIONS_RESPONSE_V0 = schema(CreatePartitionsResponse, throttle_time_ms=Int32, results=Array(schema(
    CreatePartitionsTopicResult, name=String, error_code=Int16, error_message=NullableString)))  # v1 = v0


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    CREATE_TOPICS_KEY: (
        versioned(4, {0: CREATE_TOPICS_REQUEST_V0, 1: CREATE_TOPICS_REQUEST_V1}),
        versioned(4, {0: CREATE_TOPICS_RESPONSE_V0, 1: CREATE_TOPICS_RESPONSE_V1, 2: CREATE_TOPICS_RESPONSE_V2})),
    DELETE_TOPICS_KEY: (
        versioned(3, {0: DELETE_TOPICS_REQUEST_V0}),
        versioned(3, {0: DELETE_TOPICS_RESPONSE_V0, 1: DELETE_TOPICS_RESPONSE_V1})),
    DELETE_RECORDS_KEY: (
        versioned(1, {0: DELETE_RECORDS_REQUEST_V0}),
        versioned(1, {0: DELETE_RECORDS_RESPONSE_V0})),
    INIT_PRODUCER_ID_KEY: (
        versioned(1, {0: INIT_PRODUCER_ID_REQUEST_V0}),
        versioned(1, {0: INIT_PRODUCER_ID_RESPONSE_V0})),
    CREATE_PARTITIONS_KEY: (
        versioned(1, {0: CREATE_PARTITIONS_REQUEST_V0}),
        versioned(1, {0: CREATE_PARTITIONS_RESPONSE_V0})),
}
