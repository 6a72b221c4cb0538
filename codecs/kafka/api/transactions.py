"""Transactional producer APIs: AddPartitionsToTxn (24, v0-5), AddOffsetsToTxn (25, v0-4), EndTxn (26, v0-5),
TxnOffsetCommit (28, v0-5); flexible from v3.

A transactional producer (InitProducerId with a transactional id, in `admin`) registers each partition before it
writes to it (AddPartitionsToTxn), registers the consumer group whose offsets it commits (AddOffsetsToTxn), commits
those offsets inside the transaction (TxnOffsetCommit, to the group coordinator), and ends the transaction
(EndTxn: commit or abort; the broker then writes a control batch, `records.encode_control_batch`, to every
partition of the transaction). v1 and v2 change only the broker's behaviour (v2: PRODUCER_FENCED may be
returned), except TxnOffsetCommit v2, which adds the committed leader epoch, and v3, which adds the group member
(KIP-447: the broker fences a zombie consumer's commits). AddPartitionsToTxn v4+ carries several transactions and
a verify-only flag (KIP-890 part 1: how brokers ask the coordinator; clients keep to v0-3). EndTxn v5 answers
the producer id and epoch, and v5 of EndTxn and TxnOffsetCommit (AddOffsetsToTxn v4) mark clients of
transactions v2 (KIP-890 part 2), which use them only when the broker advertises that feature; we advertise no
features, so they are served with the classic semantics. Field names of AddPartitionsToTxn v0-3 follow Kafka
2.x's message JSON (Kafka 3.x renamed them `V3AndBelow...`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct, until
from ..primitives import Array, Boolean, Int16, Int32, Int64, NullableString, String

__all__ = [
    "ADD_PARTITIONS_TO_TXN_KEY",
    "ADD_OFFSETS_TO_TXN_KEY",
    "END_TXN_KEY",
    "TXN_OFFSET_COMMIT_KEY",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnTransaction",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnResult",
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
FLEXIBLE_SINCE = 3  # of each of the four


# ======================================================================================= AddPartitionsToTxn

@dataclass(slots=True)
class AddPartitionsToTxnTopic:
    name: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnTransaction:
    """One transaction of an AddPartitionsToTxn v4+."""

    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    verify_only: bool = False  # only check that the partitions are in the transaction
    topics: list[AddPartitionsToTxnTopic] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    transactional_id: str = ""  # v0-v3
    producer_id: int = -1  # v0-v3
    producer_epoch: int = -1  # v0-v3
    topics: list[AddPartitionsToTxnTopic] = field(default_factory=list)  # v0-v3
    transactions: list[AddPartitionsToTxnTransaction] = field(default_factory=list)  # v4+


@dataclass(slots=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: int = 0
    error_code: int = 0


@dataclass(slots=True)
class AddPartitionsToTxnTopicResult:
    name: str = ""
    results: list[AddPartitionsToTxnPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnResult:
    """One transaction's results in AddPartitionsToTxn v4+."""

    transactional_id: str = ""
    topic_results: list[AddPartitionsToTxnTopicResult] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: int = 0
    results: list[AddPartitionsToTxnTopicResult] = field(default_factory=list)  # v0-v3
    error_code: int = 0  # v4+
    results_by_transaction: list[AddPartitionsToTxnResult] = field(default_factory=list)  # v4+


_TXN_TOPIC = struct(AddPartitionsToTxnTopic, name=String, partitions=Array(Int32))
ADD_PARTITIONS_TO_TXN_REQUEST_SCHEMAS = message(
    AddPartitionsToTxnRequest, 5, flexible_since=FLEXIBLE_SINCE,
    transactional_id=until(3, String), producer_id=until(3, Int64), producer_epoch=until(3, Int16),
    topics=until(3, Array(_TXN_TOPIC)),
    transactions=since(4, Array(struct(AddPartitionsToTxnTransaction, transactional_id=String, producer_id=Int64,
                                       producer_epoch=Int16, verify_only=Boolean, topics=Array(_TXN_TOPIC)))))
_TXN_TOPIC_RESULTS = Array(struct(AddPartitionsToTxnTopicResult, name=String, results=Array(struct(
    AddPartitionsToTxnPartitionResult, partition_index=Int32, error_code=Int16))))
ADD_PARTITIONS_TO_TXN_RESPONSE_SCHEMAS = message(
    AddPartitionsToTxnResponse, 5, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=Int32, error_code=since(4, Int16),
    results_by_transaction=since(4, Array(struct(AddPartitionsToTxnResult, transactional_id=String,
                                                 topic_results=_TXN_TOPIC_RESULTS))),
    results=until(3, _TXN_TOPIC_RESULTS))


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


ADD_OFFSETS_TO_TXN_REQUEST_SCHEMAS = message(
    AddOffsetsToTxnRequest, 4, flexible_since=FLEXIBLE_SINCE,
    transactional_id=String, producer_id=Int64, producer_epoch=Int16, group_id=String)
ADD_OFFSETS_TO_TXN_RESPONSE_SCHEMAS = message(
    AddOffsetsToTxnResponse, 4, flexible_since=FLEXIBLE_SINCE, throttle_time_ms=Int32, error_code=Int16)


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
    producer_id: int = -1  # v5+
    producer_epoch: int = -1  # v5+


END_TXN_REQUEST_SCHEMAS = message(
    EndTxnRequest, 5, flexible_since=FLEXIBLE_SINCE,
    transactional_id=String, producer_id=Int64, producer_epoch=Int16, committed=Boolean)
END_TXN_RESPONSE_SCHEMAS = message(
    EndTxnResponse, 5, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=Int32, error_code=Int16, producer_id=since(5, Int64), producer_epoch=since(5, Int16))


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
    generation_id: int = -1  # v3+ (KIP-447: the consumer group member committing, -1: none; before the topics)
    member_id: str = ""  # v3+
    group_instance_id: str | None = None  # v3+


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


TXN_OFFSET_COMMIT_REQUEST_SCHEMAS = message(
    TxnOffsetCommitRequest, 5, flexible_since=FLEXIBLE_SINCE,
    transactional_id=String, group_id=String, producer_id=Int64, producer_epoch=Int16,
    generation_id=since(3, Int32), member_id=since(3, String), group_instance_id=since(3, NullableString),
    topics=Array(struct(TxnOffsetCommitRequestTopic, name=String, partitions=Array(struct(
        TxnOffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
        committed_leader_epoch=since(2, Int32),  # before the metadata
        committed_metadata=NullableString)))))
TXN_OFFSET_COMMIT_RESPONSE_SCHEMAS = message(
    TxnOffsetCommitResponse, 5, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=Int32, topics=Array(struct(TxnOffsetCommitResponseTopic, name=String, partitions=Array(struct(
        TxnOffsetCommitResponsePartition, partition_index=Int32, error_code=Int16)))))


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    ADD_PARTITIONS_TO_TXN_KEY: (ADD_PARTITIONS_TO_TXN_REQUEST_SCHEMAS, ADD_PARTITIONS_TO_TXN_RESPONSE_SCHEMAS),
    ADD_OFFSETS_TO_TXN_KEY: (ADD_OFFSETS_TO_TXN_REQUEST_SCHEMAS, ADD_OFFSETS_TO_TXN_RESPONSE_SCHEMAS),
    END_TXN_KEY: (END_TXN_REQUEST_SCHEMAS, END_TXN_RESPONSE_SCHEMAS),
    TXN_OFFSET_COMMIT_KEY: (TXN_OFFSET_COMMIT_REQUEST_SCHEMAS, TXN_OFFSET_COMMIT_RESPONSE_SCHEMAS),
}
