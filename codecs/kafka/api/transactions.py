"""Transactional producer APIs: AddPartitionsToTxn (24, v0-2), AddOffsetsToTxn (25, v0-2), EndTxn (26, v0-2),
TxnOffsetCommit (28, v0-2).

A transactional producer (InitProducerId with a transactional id, in `admin`) registers each partition before it
writes to it (AddPartitionsToTxn), registers the consumer group whose offsets it commits (AddOffsetsToTxn), commits
those offsets inside the transaction (TxnOffsetCommit, to the group coordinator), and ends the transaction
(EndTxn: commit or abort; the broker then writes a control batch, `records.encode_control_batch`, to every
partition of the transaction). Every version here is non-flexible (flexible from v3 on). v1 and v2 change only the
broker's behaviour (v2: PRODUCER_FENCED may be returned), except TxnOffsetCommit v2, which adds the committed
leader epoch. Field names follow Kafka 2.x's message JSON (Kafka 3.x renamed AddPartitionsToTxn's v0-3 fields
`V3AndBelow...` when v4 batched several transactions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import Array, Boolean, Int16, Int32, Int64, NullableString, String, schema, versioned

__all__ = [
    "ADD_PARTITIONS_TO_TXN_KEY",
    "ADD_OFFSETS_TO_TXN_KEY",
    "END_TXN_KEY",
    "TXN_OFFSET_COMMIT_KEY",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnTopicResult",
    "AddPartitionsToTxnPartitionResult",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestTopic",
    "TxnOffsetCommitRequestPartition",
    "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponseTopic",
    "TxnOffsetCommitResponsePartition",
    "SCHEMAS",
]

ADD_PARTITIONS_TO_TXN_KEY = 24
ADD_OFFSETS_TO_TXN_KEY = 25
END_TXN_KEY = 26
TXN_OFFSET_COMMIT_KEY = 28
MAX_VERSION = 2  # of each of the four: v3 is flexible


# ======================================================================================= AddPartitionsToTxn

@dataclass(slots=True)
class AddPartitionsToTxnTopic:
    name: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    topics: list[AddPartitionsToTxnTopic] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: int = 0
    error_code: int = 0


@dataclass(slots=True)
class AddPartitionsToTxnTopicResult:
    name: str = ""
    results: list[AddPartitionsToTxnPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: int = 0
    results: list[AddPartitionsToTxnTopicResult] = field(default_factory=list)


ADD_PARTITIONS_TO_TXN_REQUEST_V0 = schema(
    AddPartitionsToTxnRequest, transactional_id=String, producer_id=Int64, producer_epoch=Int16,
    topics=Array(schema(AddPartitionsToTxnTopic, name=String, partitions=Array(Int32))))  # v1, v2 = v0
ADD_PARTITIONS_TO_TXN_RESPONSE_V0 = schema(
    AddPartitionsToTxnResponse, throttle_time_ms=Int32, results=Array(schema(
        AddPartitionsToTxnTopicResult, name=String, results=Array(schema(
            AddPartitionsToTxnPartitionResult, partition_index=Int32, error_code=Int16)))))  # v1, v2 = v0


# ========================================================================================== AddOffsetsToTxn

@dataclass(slots=True)
class AddOffsetsToTxnRequest:
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    group_id: str = ""


@dataclass(slots=True)
class AddOffsetsToTxnResponse:
    throttle_time_ms: int = 0
    error_code: int = 0


ADD_OFFSETS_TO_TXN_REQUEST_V0 = schema(AddOffsetsToTxnRequest, transactional_id=String, producer_id=Int64,
                                       producer_epoch=Int16, group_id=String)  # v1, v2 = v0
ADD_OFFSETS_TO_TXN_RESPONSE_V0 = schema(AddOffsetsToTxnResponse, throttle_time_ms=Int32,
                                        error_code=Int16)  # v1, v2 = v0


# =================================================================================================== EndTxn

@dataclass(slots=True)
class EndTxnRequest:
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    committed: bool = False  # True: commit the transaction, False: abort it


@dataclass(slots=True)
class EndTxnResponse:
    throttle_time_ms: int = 0
    error_code: int = 0


END_TXN_REQUEST_V0 = schema(EndTxnRequest, transactional_id=String, producer_id=Int64, producer_epoch=Int16,
                            committed=Boolean)  # v1, v2 = v0
END_TXN_RESPONSE_V0 = schema(EndTxnResponse, throttle_time_ms=Int32, error_code=Int16)  # v1, v2 = v0


# ========================================================================================== TxnOffsetCommit

@dataclass(slots=True)
class TxnOffsetCommitRequestPartition:
    partition_index: int = 0
    committed_offset: int = 0
    committed_leader_epoch: int = -1  # v2+
    committed_metadata: str | None = None


@dataclass(slots=True)
class TxnOffsetCommitRequestTopic:
    name: str = ""
    partitions: list[TxnOffsetCommitRequestPartition] = field(default_factory=list)


@dataclass(slots=True)
class TxnOffsetCommitRequest:
    transactional_id: str = ""
    group_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    topics: list[TxnOffsetCommitRequestTopic] = field(default_factory=list)


@dataclass(slots=True)
class TxnOffsetCommitResponsePartition:
    partition_index: int = 0
    error_code: int = 0


@dataclass(slots=True)
class TxnOffsetCommitResponseTopic:
    name: str = ""
    partitions: list[TxnOffsetCommitResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class TxnOffsetCommitResponse:
    throttle_time_ms: int = 0
    topics: list[TxnOffsetCommitResponseTopic] = field(default_factory=list)


def _txn_commit_request(partition):
    return schema(TxnOffsetCommitRequest, transactional_id=String, group_id=String, producer_id=Int64,
                  producer_epoch=Int16, topics=Array(schema(TxnOffsetCommitRequestTopic, name=String,
                                                            partitions=Array(partition))))


TXN_OFFSET_COMMIT_REQUEST_V0 = _txn_commit_request(schema(
    TxnOffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
    committed_metadata=NullableString))  # v1 = v0
# v2 adds committed_leader_epoch before the metadata.
TXN_OFFSET_COMMIT_REQUEST_V2 = _txn_commit_request(schema(
    TxnOffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64, committed_leader_epoch=Int32,
    committed_metadata=NullableString))
TXN_OFFSET_COMMIT_RESPONSE_V0 = schema(
    TxnOffsetCommitResponse, throttle_time_ms=Int32, topics=Array(schema(
        TxnOffsetCommitResponseTopic, name=String, partitions=Array(schema(
            TxnOffsetCommitResponsePartition, partition_index=Int32, error_code=Int16)))))  # v1, v2 = v0


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    ADD_PARTITIONS_TO_TXN_KEY: (
        versioned(MAX_VERSION, {0: ADD_PARTITIONS_TO_TXN_REQUEST_V0}),
        versioned(MAX_VERSION, {0: ADD_PARTITIONS_TO_TXN_RESPONSE_V0})),
    ADD_OFFSETS_TO_TXN_KEY: (
        versioned(MAX_VERSION, {0: ADD_OFFSETS_TO_TXN_REQUEST_V0}),
        versioned(MAX_VERSION, {0: ADD_OFFSETS_TO_TXN_RESPONSE_V0})),
    END_TXN_KEY: (
        versioned(MAX_VERSION, {0: END_TXN_REQUEST_V0}),
        versioned(MAX_VERSION, {0: END_TXN_RESPONSE_V0})),
    TXN_OFFSET_COMMIT_KEY: (
        versioned(MAX_VERSION, {0: TXN_OFFSET_COMMIT_REQUEST_V0, 2: TXN_OFFSET_COMMIT_REQUEST_V2}),
        versioned(MAX_VERSION, {0: TXN_OFFSET_COMMIT_RESPONSE_V0})),
}
