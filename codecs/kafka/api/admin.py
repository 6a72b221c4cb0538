"""Topic admin and producer-setup APIs: CreateTopics (19, v0-7, flexible from 5), DeleteTopics (20, v0-6, from 4),
DeleteRecords (21, v0-2, from 2), InitProducerId (22, v0-5, from 2), CreatePartitions (37, v0-3, from 2).

Admin clients send CreateTopics/DeleteTopics/CreatePartitions to the controller named in Metadata, DeleteRecords
(move a partition's log start offset forward) to each partition's leader. CreateTopics v5+ answers each topic's
partitions, replication factor and configs, v7 its topic id; DeleteTopics v6 names topics by name or id.
InitProducerId gives an idempotent (or transactional) producer its producer id and epoch; kafka-python's default
producer is idempotent and fails without it. v3+ carries the producer's current id and epoch, so that a
transactional producer can have its epoch bumped after an error instead of being fenced (KIP-360); v4 may answer
PRODUCER_FENCED, v5 is v4 (KIP-890's clients).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct, switch, until
from ..primitives import (ZERO_UUID, Array, Boolean, Int8, Int16, Int32, Int64, NullableArray, NullableString, String,
                          Uuid)

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
    "CreatableTopicConfigs",
    "DeleteTopicsRequest",
    "DeleteTopicState",
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
class CreatableTopicConfigs:
    """A created topic's config entry (CreateTopics v5+)."""

    name: str = ""
    value: str | None = None
    read_only: bool = False
    config_source: int = -1
    is_sensitive: bool = False


@dataclass(slots=True)
class CreatableTopicResult:
    name: str = ""
    error_code: int = 0
    error_message: str | None = None  # v1+
    topic_id: bytes = ZERO_UUID  # v7+ (after the name)
    num_partitions: int = -1  # v5+
    replication_factor: int = -1  # v5+
    configs: list[CreatableTopicConfigs] | None = None  # v5+


@dataclass(slots=True)
class CreateTopicsResponse:
    throttle_time_ms: int = 0  # v2+
    topics: list[CreatableTopicResult] = field(default_factory=list)


CREATE_TOPICS_REQUEST_SCHEMAS = message(
    CreateTopicsRequest, 7, flexible_since=5,
    topics=Array(struct(
        CreatableTopic, name=String, num_partitions=Int32, replication_factor=Int16,
        assignments=Array(struct(CreatableReplicaAssignment, partition_index=Int32, broker_ids=Array(Int32))),
        configs=Array(struct(CreatableTopicConfig, name=String, value=NullableString)))),
    timeout_ms=Int32,
    validate_only=since(1, Boolean))  # v4: num_partitions/replication_factor may be -1 (KIP-464)
CREATE_TOPICS_RESPONSE_SCHEMAS = message(
    CreateTopicsResponse, 7, flexible_since=5,
    throttle_time_ms=since(2, Int32),
    topics=Array(struct(
        CreatableTopicResult, name=String, topic_id=since(7, Uuid), error_code=Int16,
        error_message=since(1, NullableString), num_partitions=since(5, Int32), replication_factor=since(5, Int16),
        configs=since(5, NullableArray(struct(CreatableTopicConfigs, name=String, value=NullableString,
                                              read_only=Boolean, config_source=Int8, is_sensitive=Boolean))))))


# ============================================================================================= DeleteTopics

@dataclass(slots=True)
class DeleteTopicState:
    """A topic to delete in DeleteTopics v6+: by name, or (name null) by id."""

    name: str | None = None
    topic_id: bytes = ZERO_UUID


@dataclass(slots=True)
class DeleteTopicsRequest:
    topic_names: list[str] = field(default_factory=list)  # v0-v5
    topics: list[DeleteTopicState] = field(default_factory=list)  # v6+
    timeout_ms: int = 0


@dataclass(slots=True)
class DeletableTopicResult:
    name: str | None = ""  # nullable from v6
    error_code: int = 0
    error_message: str | None = None  # v5+
    topic_id: bytes = ZERO_UUID  # v6+ (after the name)


@dataclass(slots=True)
class DeleteTopicsResponse:
    throttle_time_ms: int = 0  # v1+
    responses: list[DeletableTopicResult] = field(default_factory=list)


DELETE_TOPICS_REQUEST_SCHEMAS = message(
    DeleteTopicsRequest, 6, flexible_since=4,
    topic_names=until(5, Array(String)),
    topics=since(6, Array(struct(DeleteTopicState, name=NullableString, topic_id=Uuid))),
    timeout_ms=Int32)
# v1 adds throttle_time_ms first; v3 may return TOPIC_DELETION_DISABLED; v5 adds error messages.
DELETE_TOPICS_RESPONSE_SCHEMAS = message(
    DeleteTopicsResponse, 6, flexible_since=4,
    throttle_time_ms=since(1, Int32),
    responses=Array(struct(DeletableTopicResult, name=switch({0: String, 6: NullableString}), topic_id=since(6, Uuid),
                           error_code=Int16, error_message=since(5, NullableString))))


# =========================================================================================== InitProducerId

@dataclass(slots=True)
class InitProducerIdRequest:
    transactional_id: str | None = None  # None = idempotent producer without transactions
    transaction_timeout_ms: int = 0
    producer_id: int = -1  # v3+: the producer's current id and epoch (-1: none yet), to bump (KIP-360)
    producer_epoch: int = -1  # v3+


@dataclass(slots=True)
class InitProducerIdResponse:
    throttle_time_ms: int = 0  # present from v0 (a late API: throttle time from the start)
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = 0


INIT_PRODUCER_ID_REQUEST_SCHEMAS = message(
    InitProducerIdRequest, 5, flexible_since=2,
    transactional_id=NullableString, transaction_timeout_ms=Int32, producer_id=since(3, Int64),
    producer_epoch=since(3, Int16))
INIT_PRODUCER_ID_RESPONSE_SCHEMAS = message(  # a late API: throttle time from the start
    InitProducerIdResponse, 5, flexible_since=2,
    throttle_time_ms=Int32, error_code=Int16, producer_id=Int64, producer_epoch=Int16)


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


DELETE_RECORDS_REQUEST_SCHEMAS = message(
    DeleteRecordsRequest, 2, flexible_since=2,
    topics=Array(struct(DeleteRecordsTopic, name=String, partitions=Array(struct(
        DeleteRecordsPartition, partition_index=Int32, offset=Int64)))),
    timeout_ms=Int32)
DELETE_RECORDS_RESPONSE_SCHEMAS = message(
    DeleteRecordsResponse, 2, flexible_since=2,
    throttle_time_ms=Int32, topics=Array(struct(DeleteRecordsTopicResult, name=String, partitions=Array(struct(
        DeleteRecordsPartitionResult, partition_index=Int32, low_watermark=Int64, error_code=Int16)))))


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


CREATE_PARTITIONS_REQUEST_SCHEMAS = message(  # v1 = v0; v3 = v2
    CreatePartitionsRequest, 3, flexible_since=2,
    topics=Array(struct(CreatePartitionsTopic, name=String, count=Int32, assignments=NullableArray(struct(
        CreatePartitionsAssignment, broker_ids=Array(Int32))))),
    timeout_ms=Int32, validate_only=Boolean)
CREATE_PARTITIONS_RESPONSE_SCHEMAS = message(
    CreatePartitionsResponse, 3, flexible_since=2,
    throttle_time_ms=Int32, results=Array(struct(CreatePartitionsTopicResult, name=String, error_code=Int16,
                                                 error_message=NullableString)))


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    CREATE_TOPICS_KEY: (CREATE_TOPICS_REQUEST_SCHEMAS, CREATE_TOPICS_RESPONSE_SCHEMAS),
    DELETE_TOPICS_KEY: (DELETE_TOPICS_REQUEST_SCHEMAS, DELETE_TOPICS_RESPONSE_SCHEMAS),
    DELETE_RECORDS_KEY: (DELETE_RECORDS_REQUEST_SCHEMAS, DELETE_RECORDS_RESPONSE_SCHEMAS),
    INIT_PRODUCER_ID_KEY: (INIT_PRODUCER_ID_REQUEST_SCHEMAS, INIT_PRODUCER_ID_RESPONSE_SCHEMAS),
    CREATE_PARTITIONS_KEY: (CREATE_PARTITIONS_REQUEST_SCHEMAS, CREATE_PARTITIONS_RESPONSE_SCHEMAS),
}
