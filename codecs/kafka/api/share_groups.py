"""Share groups (KIP-932, queues for Kafka): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79) — version 1 only, as Kafka 4.1 serves them (v0 was Kafka 4.0's early access, removed) — and
the share-group offset admin APIs DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92), version 0. All flexible.

A member of a share group heartbeats its subscription and is assigned partitions, which other members may be
assigned too: records, not partitions, are handed out. ShareFetch acquires records for the member (answering the
batches as stored plus the ranges acquired, each with its delivery count) and may carry acknowledgements of
earlier ones; ShareAcknowledge carries acknowledgements alone. An acknowledgement batch covers first..last offset
with one type for the whole range or one per offset: 0 gap (no record there), 1 accept, 2 release (deliver again),
3 reject (never again). Both work within a share session: epoch 0 opens it (listing the partitions), then each
request increments it; -1 closes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..message import message, since, struct
from ..primitives import (ZERO_UUID, Array, Boolean, Int8, Int16, Int32, Int64, NullableArray, NullableString,
                          NullableStruct, Records, String, Uuid)
from .consumer_groups import DESCRIBED_ASSIGNMENT, HEARTBEAT_ASSIGNMENT, DescribedAssignment, HeartbeatAssignment
from .groups import AUTHORIZED_OPERATIONS_OMITTED

__all__ = [
    "SHARE_GROUP_HEARTBEAT_KEY",
    "SHARE_GROUP_DESCRIBE_KEY",
    "SHARE_FETCH_KEY",
    "SHARE_ACKNOWLEDGE_KEY",
    "DESCRIBE_SHARE_GROUP_OFFSETS_KEY",
    "ALTER_SHARE_GROUP_OFFSETS_KEY",
    "DELETE_SHARE_GROUP_OFFSETS_KEY",
    "ACK_GAP",
    "ACK_ACCEPT",
    "ACK_RELEASE",
    "ACK_REJECT",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "DescribedShareGroup",
    "DescribedShareGroupMember",
    "ShareFetchRequest",
    "ShareFetchTopic",
    "ShareFetchPartition",
    "AcknowledgementBatch",
    "ForgottenShareTopic",
    "ShareFetchResponse",
    "ShareFetchableTopicResponse",
    "SharePartitionData",
    "LeaderIdAndEpoch",
    "AcquiredRecords",
    "NodeEndpoint",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeTopic",
    "ShareAcknowledgePartition",
    "ShareAcknowledgeResponse",
    "ShareAcknowledgeTopicResponse",
    "ShareAcknowledgePartitionResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsRequestGroup",
    "DescribeShareGroupOffsetsRequestTopic",
    "DescribeShareGroupOffsetsResponse",
    "DescribeShareGroupOffsetsResponseGroup",
    "DescribeShareGroupOffsetsResponseTopic",
    "DescribeShareGroupOffsetsResponsePartition",
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsRequestTopic",
    "AlterShareGroupOffsetsRequestPartition",
    "AlterShareGroupOffsetsResponse",
    "AlterShareGroupOffsetsResponseTopic",
    "AlterShareGroupOffsetsResponsePartition",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsRequestTopic",
    "DeleteShareGroupOffsetsResponse",
    "DeleteShareGroupOffsetsResponseTopic",
    "SCHEMAS",
]

SHARE_GROUP_HEARTBEAT_KEY = 76
SHARE_GROUP_DESCRIBE_KEY = 77
SHARE_FETCH_KEY = 78
SHARE_ACKNOWLEDGE_KEY = 79
DESCRIBE_SHARE_GROUP_OFFSETS_KEY = 90
ALTER_SHARE_GROUP_OFFSETS_KEY = 91
DELETE_SHARE_GROUP_OFFSETS_KEY = 92
#: Acknowledgement types.
ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT = 0, 1, 2, 3
#: The versions served: v1 of the four share APIs (Kafka 4.1 removed v0), v0 of the offset admin APIs.
SHARE_VERSION = 1


# ====================================================================================== ShareGroupHeartbeat

@dataclass(slots=True)
class ShareGroupHeartbeatRequest:
    group_id: str = ""
    member_id: str = ""  # made up by the client (as ConsumerGroupHeartbeat v1)
    member_epoch: int = 0  # 0 = joining, -1 = leaving
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None  # null when unchanged


@dataclass(slots=True)
class ShareGroupHeartbeatResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: HeartbeatAssignment | None = None  # null: unchanged (ConsumerGroupHeartbeat's structure)


HEARTBEAT_REQUEST_SCHEMAS = message(
    ShareGroupHeartbeatRequest, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    group_id=String, member_id=String, member_epoch=Int32, rack_id=NullableString,
    subscribed_topic_names=NullableArray(String))
HEARTBEAT_RESPONSE_SCHEMAS = message(
    ShareGroupHeartbeatResponse, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString, member_id=NullableString,
    member_epoch=Int32, heartbeat_interval_ms=Int32,
    assignment=NullableStruct(HEARTBEAT_ASSIGNMENT))


# ======================================================================================= ShareGroupDescribe

@dataclass(slots=True)
class ShareGroupDescribeRequest:
    group_ids: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False


@dataclass(slots=True)
class DescribedShareGroupMember:
    member_id: str = ""
    rack_id: str | None = None
    member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    assignment: DescribedAssignment = field(default_factory=DescribedAssignment)  # (ConsumerGroupDescribe's)


@dataclass(slots=True)
class DescribedShareGroup:
    error_code: int = 0
    error_message: str | None = None
    group_id: str = ""
    group_state: str = ""  # "Empty", "Stable", "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedShareGroupMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(slots=True)
class ShareGroupDescribeResponse:
    throttle_time_ms: int = 0
    groups: list[DescribedShareGroup] = field(default_factory=list)


DESCRIBE_REQUEST_SCHEMAS = message(
    ShareGroupDescribeRequest, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    group_ids=Array(String), include_authorized_operations=Boolean)
DESCRIBE_RESPONSE_SCHEMAS = message(
    ShareGroupDescribeResponse, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    throttle_time_ms=Int32,
    groups=Array(struct(
        DescribedShareGroup, error_code=Int16, error_message=NullableString, group_id=String, group_state=String,
        group_epoch=Int32, assignment_epoch=Int32, assignor_name=String,
        members=Array(struct(
            DescribedShareGroupMember, member_id=String, rack_id=NullableString, member_epoch=Int32,
            client_id=String, client_host=String, subscribed_topic_names=Array(String),
            assignment=DESCRIBED_ASSIGNMENT)),
        authorized_operations=Int32)))


# =============================================================================== ShareFetch, ShareAcknowledge

@dataclass(slots=True)
class AcknowledgementBatch:
    first_offset: int = 0
    last_offset: int = 0  # inclusive
    acknowledge_types: list[int] = field(default_factory=list)  # one for the range, or one per offset


@dataclass(slots=True)
class ShareFetchPartition:
    partition_index: int = 0
    acknowledgement_batches: list[AcknowledgementBatch] = field(default_factory=list)


@dataclass(slots=True)
class ShareFetchTopic:
    topic_id: bytes = ZERO_UUID
    partitions: list[ShareFetchPartition] = field(default_factory=list)


@dataclass(slots=True)
class ForgottenShareTopic:
    topic_id: bytes = ZERO_UUID
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ShareFetchRequest:
    group_id: str | None = None
    member_id: str | None = None
    share_session_epoch: int = 0  # 0 opens a share session, -1 closes it, else the next epoch
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0x7FFFFFFF
    max_records: int = 500  # (a soft limit: whole batches are sent)
    batch_size: int = 500
    topics: list[ShareFetchTopic] = field(default_factory=list)
    forgotten_topics_data: list[ForgottenShareTopic] = field(default_factory=list)


@dataclass(slots=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class AcquiredRecords:
    first_offset: int = 0
    last_offset: int = 0
    delivery_count: int = 1


@dataclass(slots=True)
class SharePartitionData:
    partition_index: int = 0
    error_code: int = 0
    error_message: str | None = None
    acknowledge_error_code: int = 0
    acknowledge_error_message: str | None = None
    current_leader: LeaderIdAndEpoch = field(default_factory=LeaderIdAndEpoch)
    records: bytes | Any | None = None  # bytes, or a deferred object when building (see `primitives`)
    acquired_records: list[AcquiredRecords] = field(default_factory=list)


@dataclass(slots=True)
class ShareFetchableTopicResponse:
    topic_id: bytes = ZERO_UUID
    partitions: list[SharePartitionData] = field(default_factory=list)


@dataclass(slots=True)
class NodeEndpoint:
    node_id: int = 0
    host: str = ""
    port: int = 0
    rack: str | None = None


@dataclass(slots=True)
class ShareFetchResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    acquisition_lock_timeout_ms: int = 0
    responses: list[ShareFetchableTopicResponse] = field(default_factory=list)
    node_endpoints: list[NodeEndpoint] = field(default_factory=list)


_ACK_BATCHES = Array(struct(AcknowledgementBatch, first_offset=Int64, last_offset=Int64,
                            acknowledge_types=Array(Int8)))
_LEADER = struct(LeaderIdAndEpoch, leader_id=Int32, leader_epoch=Int32)
_NODE_ENDPOINTS = Array(struct(NodeEndpoint, node_id=Int32, host=String, port=Int32, rack=NullableString))
FETCH_REQUEST_SCHEMAS = message(
    ShareFetchRequest, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    group_id=NullableString, member_id=NullableString, share_session_epoch=Int32, max_wait_ms=Int32,
    min_bytes=Int32, max_bytes=Int32, max_records=since(1, Int32), batch_size=since(1, Int32),
    topics=Array(struct(ShareFetchTopic, topic_id=Uuid, partitions=Array(struct(
        ShareFetchPartition, partition_index=Int32, acknowledgement_batches=_ACK_BATCHES)))),
    forgotten_topics_data=Array(struct(ForgottenShareTopic, topic_id=Uuid, partitions=Array(Int32))))
FETCH_RESPONSE_SCHEMAS = message(
    ShareFetchResponse, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
    acquisition_lock_timeout_ms=since(1, Int32),
    responses=Array(struct(ShareFetchableTopicResponse, topic_id=Uuid, partitions=Array(struct(
        SharePartitionData, partition_index=Int32, error_code=Int16, error_message=NullableString,
        acknowledge_error_code=Int16, acknowledge_error_message=NullableString, current_leader=_LEADER,
        records=Records,
        acquired_records=Array(struct(AcquiredRecords, first_offset=Int64, last_offset=Int64,
                                      delivery_count=Int16)))))),
    node_endpoints=_NODE_ENDPOINTS)


@dataclass(slots=True)
class ShareAcknowledgePartition:
    partition_index: int = 0
    acknowledgement_batches: list[AcknowledgementBatch] = field(default_factory=list)


@dataclass(slots=True)
class ShareAcknowledgeTopic:
    topic_id: bytes = ZERO_UUID
    partitions: list[ShareAcknowledgePartition] = field(default_factory=list)


@dataclass(slots=True)
class ShareAcknowledgeRequest:
    group_id: str | None = None
    member_id: str | None = None
    share_session_epoch: int = 0
    topics: list[ShareAcknowledgeTopic] = field(default_factory=list)


@dataclass(slots=True)
class ShareAcknowledgePartitionResponse:
    partition_index: int = 0
    error_code: int = 0
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch = field(default_factory=LeaderIdAndEpoch)


@dataclass(slots=True)
class ShareAcknowledgeTopicResponse:
    topic_id: bytes = ZERO_UUID
    partitions: list[ShareAcknowledgePartitionResponse] = field(default_factory=list)


@dataclass(slots=True)
class ShareAcknowledgeResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    responses: list[ShareAcknowledgeTopicResponse] = field(default_factory=list)
    node_endpoints: list[NodeEndpoint] = field(default_factory=list)


ACKNOWLEDGE_REQUEST_SCHEMAS = message(
    ShareAcknowledgeRequest, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    group_id=NullableString, member_id=NullableString, share_session_epoch=Int32,
    topics=Array(struct(ShareAcknowledgeTopic, topic_id=Uuid, partitions=Array(struct(
        ShareAcknowledgePartition, partition_index=Int32, acknowledgement_batches=_ACK_BATCHES)))))
ACKNOWLEDGE_RESPONSE_SCHEMAS = message(
    ShareAcknowledgeResponse, SHARE_VERSION, min_version=SHARE_VERSION, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
    responses=Array(struct(ShareAcknowledgeTopicResponse, topic_id=Uuid, partitions=Array(struct(
        ShareAcknowledgePartitionResponse, partition_index=Int32, error_code=Int16, error_message=NullableString,
        current_leader=_LEADER)))),
    node_endpoints=_NODE_ENDPOINTS)


# ============================================================================ the share-group offset admin APIs

@dataclass(slots=True)
class DescribeShareGroupOffsetsRequestTopic:
    topic_name: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DescribeShareGroupOffsetsRequestGroup:
    group_id: str = ""
    topics: list[DescribeShareGroupOffsetsRequestTopic] | None = None  # None = every topic the group started on


@dataclass(slots=True)
class DescribeShareGroupOffsetsRequest:
    groups: list[DescribeShareGroupOffsetsRequestGroup] = field(default_factory=list)


@dataclass(slots=True)
class DescribeShareGroupOffsetsResponsePartition:
    partition_index: int = 0
    start_offset: int = -1  # the share-partition start offset (-1: not initialized)
    leader_epoch: int = -1
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class DescribeShareGroupOffsetsResponseTopic:
    topic_name: str = ""
    topic_id: bytes = ZERO_UUID
    partitions: list[DescribeShareGroupOffsetsResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class DescribeShareGroupOffsetsResponseGroup:
    group_id: str = ""
    topics: list[DescribeShareGroupOffsetsResponseTopic] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class DescribeShareGroupOffsetsResponse:
    throttle_time_ms: int = 0
    groups: list[DescribeShareGroupOffsetsResponseGroup] = field(default_factory=list)


@dataclass(slots=True)
class AlterShareGroupOffsetsRequestPartition:
    partition_index: int = 0
    start_offset: int = 0


@dataclass(slots=True)
class AlterShareGroupOffsetsRequestTopic:
    topic_name: str = ""
    partitions: list[AlterShareGroupOffsetsRequestPartition] = field(default_factory=list)


@dataclass(slots=True)
class AlterShareGroupOffsetsRequest:
    group_id: str = ""
    topics: list[AlterShareGroupOffsetsRequestTopic] = field(default_factory=list)


@dataclass(slots=True)
class AlterShareGroupOffsetsResponsePartition:
    partition_index: int = 0
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class AlterShareGroupOffsetsResponseTopic:
    topic_name: str = ""
    topic_id: bytes = ZERO_UUID
    partitions: list[AlterShareGroupOffsetsResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class AlterShareGroupOffsetsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    responses: list[AlterShareGroupOffsetsResponseTopic] = field(default_factory=list)


@dataclass(slots=True)
class DeleteShareGroupOffsetsRequestTopic:
    topic_name: str = ""


@dataclass(slots=True)
class DeleteShareGroupOffsetsRequest:
    group_id: str = ""
    topics: list[DeleteShareGroupOffsetsRequestTopic] = field(default_factory=list)


@dataclass(slots=True)
class DeleteShareGroupOffsetsResponseTopic:
    topic_name: str = ""
    topic_id: bytes = ZERO_UUID
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class DeleteShareGroupOffsetsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    responses: list[DeleteShareGroupOffsetsResponseTopic] = field(default_factory=list)


DESCRIBE_OFFSETS_REQUEST_SCHEMAS = message(
    DescribeShareGroupOffsetsRequest, 0, flexible_since=0,
    groups=Array(struct(DescribeShareGroupOffsetsRequestGroup, group_id=String, topics=NullableArray(struct(
        DescribeShareGroupOffsetsRequestTopic, topic_name=String, partitions=Array(Int32))))))
DESCRIBE_OFFSETS_RESPONSE_SCHEMAS = message(
    DescribeShareGroupOffsetsResponse, 0, flexible_since=0,
    throttle_time_ms=Int32,
    groups=Array(struct(
        DescribeShareGroupOffsetsResponseGroup, group_id=String,
        topics=Array(struct(DescribeShareGroupOffsetsResponseTopic, topic_name=String, topic_id=Uuid,
                            partitions=Array(struct(
                                DescribeShareGroupOffsetsResponsePartition, partition_index=Int32,
                                start_offset=Int64, leader_epoch=Int32, error_code=Int16,
                                error_message=NullableString)))),
        error_code=Int16, error_message=NullableString)))
ALTER_OFFSETS_REQUEST_SCHEMAS = message(
    AlterShareGroupOffsetsRequest, 0, flexible_since=0,
    group_id=String, topics=Array(struct(AlterShareGroupOffsetsRequestTopic, topic_name=String, partitions=Array(
        struct(AlterShareGroupOffsetsRequestPartition, partition_index=Int32, start_offset=Int64)))))
ALTER_OFFSETS_RESPONSE_SCHEMAS = message(
    AlterShareGroupOffsetsResponse, 0, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
    responses=Array(struct(AlterShareGroupOffsetsResponseTopic, topic_name=String, topic_id=Uuid, partitions=Array(
        struct(AlterShareGroupOffsetsResponsePartition, partition_index=Int32, error_code=Int16,
               error_message=NullableString)))))
DELETE_OFFSETS_REQUEST_SCHEMAS = message(
    DeleteShareGroupOffsetsRequest, 0, flexible_since=0,
    group_id=String, topics=Array(struct(DeleteShareGroupOffsetsRequestTopic, topic_name=String)))
DELETE_OFFSETS_RESPONSE_SCHEMAS = message(
    DeleteShareGroupOffsetsResponse, 0, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
    responses=Array(struct(DeleteShareGroupOffsetsResponseTopic, topic_name=String, topic_id=Uuid, error_code=Int16,
                           error_message=NullableString)))

#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    SHARE_GROUP_HEARTBEAT_KEY: (HEARTBEAT_REQUEST_SCHEMAS, HEARTBEAT_RESPONSE_SCHEMAS),
    SHARE_GROUP_DESCRIBE_KEY: (DESCRIBE_REQUEST_SCHEMAS, DESCRIBE_RESPONSE_SCHEMAS),
    SHARE_FETCH_KEY: (FETCH_REQUEST_SCHEMAS, FETCH_RESPONSE_SCHEMAS),
    SHARE_ACKNOWLEDGE_KEY: (ACKNOWLEDGE_REQUEST_SCHEMAS, ACKNOWLEDGE_RESPONSE_SCHEMAS),
    DESCRIBE_SHARE_GROUP_OFFSETS_KEY: (DESCRIBE_OFFSETS_REQUEST_SCHEMAS, DESCRIBE_OFFSETS_RESPONSE_SCHEMAS),
    ALTER_SHARE_GROUP_OFFSETS_KEY: (ALTER_OFFSETS_REQUEST_SCHEMAS, ALTER_OFFSETS_RESPONSE_SCHEMAS),
    DELETE_SHARE_GROUP_OFFSETS_KEY: (DELETE_OFFSETS_REQUEST_SCHEMAS, DELETE_OFFSETS_RESPONSE_SCHEMAS),
}
