"""Metadata (key 3), versions 0-13 (flexible from 9): brokers, controller and topic/partition leadership.

Request: topics[topic_id (v10+), name (nullable from v10: a topic asked for by id)] (v0: empty = all topics;
v1+: nullable, null = all, empty = none), allow_auto_topic_creation (v4+), include_cluster_authorized_operations
(v8-10; DescribeCluster answers it since), include_topic_authorized_operations (v8+).

Response: throttle_time_ms (v3+), brokers[node_id, host, port, rack (v1+)], cluster_id (v2+), controller_id (v1+;
admin clients send admin requests to it, so it must be a real node id), topics[error_code, name (nullable from
v12: an unknown topic id has none), topic_id (v10+), is_internal (v1+), partitions[error_code, partition_index,
leader_id, leader_epoch (v7+), replica_nodes, isr_nodes, offline_replicas (v5+)], topic_authorized_operations
(v8+)], cluster_authorized_operations (v8-10), error_code (v13+: a top-level error, KIP-1102's
REBOOTSTRAP_REQUIRED).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, only, since, struct, switch
from ..primitives import (ZERO_UUID, Array, Boolean, Int16, Int32, NullableArray, NullableString, String, Uuid,
                          schema)

__all__ = [
    "API_KEY",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponseTopic",
    "MetadataResponsePartition",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 3
MAX_VERSION = 13
FLEXIBLE_SINCE = 9

#: Kafka's "no authorized operations were requested" marker (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(slots=True)
class MetadataRequestTopic:
    name: str | None = ""  # None (v10+): the topic is asked for by id
    topic_id: bytes = ZERO_UUID  # v10+ (on the wire before the name)


@dataclass(slots=True)
class MetadataRequest:
    topics: list[MetadataRequestTopic] | None = field(default_factory=list)  # v1+: None = all topics
    allow_auto_topic_creation: bool = True  # v4+; older clients always allowed it
    include_cluster_authorized_operations: bool = False  # v8-v10
    include_topic_authorized_operations: bool = False  # v8+


@dataclass(slots=True)
class MetadataResponseBroker:
    node_id: int = 0
    host: str = ""
    port: int = 0
    rack: str | None = None  # v1+


@dataclass(slots=True)
class MetadataResponsePartition:
    error_code: int = 0
    partition_index: int = 0
    leader_id: int = 0
    leader_epoch: int = -1  # v7+
    replica_nodes: list[int] = field(default_factory=list)
    isr_nodes: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)  # v5+


@dataclass(slots=True)
class MetadataResponseTopic:
    error_code: int = 0
    name: str | None = ""  # None (v12+): an unknown topic id
    is_internal: bool = False  # v1+
    partitions: list[MetadataResponsePartition] = field(default_factory=list)
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v8+
    topic_id: bytes = ZERO_UUID  # v10+ (on the wire after the name)


@dataclass(slots=True)
class MetadataResponse:
    throttle_time_ms: int = 0  # v3+
    brokers: list[MetadataResponseBroker] = field(default_factory=list)
    cluster_id: str | None = None  # v2+
    controller_id: int = -1  # v1+
    topics: list[MetadataResponseTopic] = field(default_factory=list)
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v8-v10
    error_code: int = 0  # v13+


# --- request ------------------------------------------------------------------------------------------------

REQUEST_SCHEMAS = message(
    MetadataRequest, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    # v0: a non-nullable array, empty means *all* topics; v1+: null means all and empty none (librdkafka and
    # kafka-python bootstrap with []).
    topics=switch({0: Array(struct(MetadataRequestTopic, name=String)),
                   1: NullableArray(struct(MetadataRequestTopic, topic_id=since(10, Uuid),
                                           name=switch({0: String, 10: NullableString})))}),
    allow_auto_topic_creation=since(4, Boolean),
    include_cluster_authorized_operations=only(8, 10, Boolean),
    include_topic_authorized_operations=since(8, Boolean))

# --- response -----------------------------------------------------------------------------------------------

_BROKER_V0 = schema(MetadataResponseBroker, node_id=Int32, host=String, port=Int32)
_BROKER_V1 = schema(MetadataResponseBroker, node_id=Int32, host=String, port=Int32, rack=NullableString)

RESPONSE_SCHEMAS = message(
    MetadataResponse, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
    throttle_time_ms=since(3, Int32),
    brokers=switch({0: Array(_BROKER_V0), 1: Array(_BROKER_V1)}),
    cluster_id=since(2, NullableString),  # v2 puts it *before* controller_id
    controller_id=since(1, Int32),
    topics=Array(struct(
        MetadataResponseTopic, error_code=Int16, name=switch({0: String, 12: NullableString}),
        topic_id=since(10, Uuid), is_internal=since(1, Boolean),
        partitions=Array(struct(
            MetadataResponsePartition, error_code=Int16, partition_index=Int32, leader_id=Int32,
            leader_epoch=since(7, Int32), replica_nodes=Array(Int32), isr_nodes=Array(Int32),
            offline_replicas=since(5, Array(Int32)))),
        topic_authorized_operations=since(8, Int32))),
    cluster_authorized_operations=only(8, 10, Int32),
    error_code=since(13, Int16))
