"""The consumer group protocol of KIP-848 (Kafka 4): ConsumerGroupHeartbeat (68, v0-1) and ConsumerGroupDescribe
(69, v0-1), flexible in every version.

A member of a "consumer" group sends nothing but heartbeats: its subscription, and the partitions it owns; the
broker computes the assignment (a server-side assignor) and answers each heartbeat with the member's epoch and,
when it changed, its assignment (topics by id). The first heartbeat has member epoch 0 (v1: with a member id the
client made up, KIP-1082; v0: an empty id the broker fills in), -1 leaves the group, -2 leaves a static member
for a while. Fields a member does not need to repeat (rack, rebalance timeout, subscription, assignor, owned
partitions) are null when unchanged. v1 adds the subscription regex (KIP-848's RE2J pattern).

ConsumerGroupDescribe describes consumer groups: state, group and assignment epochs, the assignor, each member's
subscription, current and target assignment; v1 adds each member's type (KIP-1099: 0 classic, 1 consumer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct
from ..primitives import (ZERO_UUID, Array, Boolean, Int8, Int16, Int32, NullableArray, NullableString,
                          NullableStruct, String, Uuid)
from .groups import AUTHORIZED_OPERATIONS_OMITTED

__all__ = [
    "CONSUMER_GROUP_HEARTBEAT_KEY",
    "CONSUMER_GROUP_DESCRIBE_KEY",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "HeartbeatTopicPartitions",
    "HeartbeatAssignment",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "DescribedConsumerGroup",
    "DescribedConsumerGroupMember",
    "DescribedAssignment",
    "DescribedTopicPartitions",
    "SCHEMAS",
]

CONSUMER_GROUP_HEARTBEAT_KEY = 68
CONSUMER_GROUP_DESCRIBE_KEY = 69


# =================================================================================== ConsumerGroupHeartbeat

@dataclass(slots=True)
class HeartbeatTopicPartitions:
    topic_id: bytes = ZERO_UUID
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str = ""
    member_id: str = ""  # v0: "" on the first heartbeat; v1: made up by the client
    member_epoch: int = 0  # 0 = joining, -1 = leaving, -2 = a static member leaving for now
    instance_id: str | None = None  # static membership; null when unchanged
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1  # -1 when unchanged
    subscribed_topic_names: list[str] | None = None  # null when unchanged
    subscribed_topic_regex: str | None = None  # v1+
    server_assignor: str | None = None  # null: the broker's default
    topic_partitions: list[HeartbeatTopicPartitions] | None = None  # owned now; null when unchanged


@dataclass(slots=True)
class HeartbeatAssignment:
    topic_partitions: list[HeartbeatTopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupHeartbeatResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: HeartbeatAssignment | None = None  # null: unchanged


#: The assignment structures, shared with the share group APIs (`share_groups`: Kafka declares them per API, alike).
HEARTBEAT_TOPIC_PARTITIONS = struct(HeartbeatTopicPartitions, topic_id=Uuid, partitions=Array(Int32))
HEARTBEAT_ASSIGNMENT = struct(HeartbeatAssignment, topic_partitions=Array(HEARTBEAT_TOPIC_PARTITIONS))
REQUEST_SCHEMAS = message(
    ConsumerGroupHeartbeatRequest, 1, flexible_since=0,
    group_id=String, member_id=String, member_epoch=Int32, instance_id=NullableString, rack_id=NullableString,
    rebalance_timeout_ms=Int32, subscribed_topic_names=NullableArray(String),
    subscribed_topic_regex=since(1, NullableString), server_assignor=NullableString,
    topic_partitions=NullableArray(HEARTBEAT_TOPIC_PARTITIONS))
RESPONSE_SCHEMAS = message(
    ConsumerGroupHeartbeatResponse, 1, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString, member_id=NullableString,
    member_epoch=Int32, heartbeat_interval_ms=Int32,
    assignment=NullableStruct(HEARTBEAT_ASSIGNMENT))


# ==================================================================================== ConsumerGroupDescribe

@dataclass(slots=True)
class ConsumerGroupDescribeRequest:
    group_ids: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False


@dataclass(slots=True)
class DescribedTopicPartitions:
    topic_id: bytes = ZERO_UUID
    topic_name: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DescribedAssignment:
    topic_partitions: list[DescribedTopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class DescribedConsumerGroupMember:
    member_id: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    assignment: DescribedAssignment = field(default_factory=DescribedAssignment)
    target_assignment: DescribedAssignment = field(default_factory=DescribedAssignment)
    member_type: int = -1  # v1+: 0 = classic (a JoinGroup member of a consumer group), 1 = consumer


@dataclass(slots=True)
class DescribedConsumerGroup:
    error_code: int = 0
    error_message: str | None = None
    group_id: str = ""
    group_state: str = ""  # "Empty", "Assigning", "Reconciling", "Stable", "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerGroupMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(slots=True)
class ConsumerGroupDescribeResponse:
    throttle_time_ms: int = 0
    groups: list[DescribedConsumerGroup] = field(default_factory=list)


DESCRIBED_ASSIGNMENT = struct(DescribedAssignment, topic_partitions=Array(struct(
    DescribedTopicPartitions, topic_id=Uuid, topic_name=String, partitions=Array(Int32))))
DESCRIBE_REQUEST_SCHEMAS = message(
    ConsumerGroupDescribeRequest, 1, flexible_since=0,
    group_ids=Array(String), include_authorized_operations=Boolean)
DESCRIBE_RESPONSE_SCHEMAS = message(
    ConsumerGroupDescribeResponse, 1, flexible_since=0,
    throttle_time_ms=Int32,
    groups=Array(struct(
        DescribedConsumerGroup, error_code=Int16, error_message=NullableString, group_id=String,
        group_state=String, group_epoch=Int32, assignment_epoch=Int32, assignor_name=String,
        members=Array(struct(
            DescribedConsumerGroupMember, member_id=String, instance_id=NullableString, rack_id=NullableString,
            member_epoch=Int32, client_id=String, client_host=String, subscribed_topic_names=Array(String),
            subscribed_topic_regex=NullableString, assignment=DESCRIBED_ASSIGNMENT, target_assignment=DESCRIBED_ASSIGNMENT,
            member_type=since(1, Int8))),
        authorized_operations=Int32)))

#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    CONSUMER_GROUP_HEARTBEAT_KEY: (REQUEST_SCHEMAS, RESPONSE_SCHEMAS),
    CONSUMER_GROUP_DESCRIBE_KEY: (DESCRIBE_REQUEST_SCHEMAS, DESCRIBE_RESPONSE_SCHEMAS),
}
