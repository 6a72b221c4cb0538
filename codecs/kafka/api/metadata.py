"""Metadata (key 3), versions 0-8: brokers, controller and topic/partition leadership.

Request: topics[name] (v0: empty = all topics; v1+: nullable, null = all, empty = none), allow_auto_topic_creation
(v4+), include_cluster_authorized_operations and include_topic_authorized_operations (v8+).

Response: throttle_time_ms (v3+), brokers[node_id, host, port, rack (v1+)], cluster_id (v2+), controller_id (v1+;
admin clients send admin requests to it, so it must be a real node id), topics[error_code, name, is_internal (v1+),
partitions[error_code, partition_index, leader_id, leader_epoch (v7+), replica_nodes, isr_nodes,
offline_replicas (v5+)], topic_authorized_operations (v8+)], cluster_authorized_operations (v8+).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Boolean, Int16, Int32, NullableArray, NullableString, String, schema,
                          versioned)

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
MAX_VERSION = 8

#: Kafka's "no authorized operations were requested" marker (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(slots=True)
class MetadataRequestTopic:
    name: str = ""


@dataclass(slots=True)
class MetadataRequest:
    topics: list[MetadataRequestTopic] | None = field(default_factory=list)  # v1+: None = all topics
    allow_auto_topic_creation: bool = True  # v4+; older clients always allowed it
    include_cluster_authorized_operations: bool = False  # v8+
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
    name: str = ""
    is_internal: bool = False  # v1+
    partitions: list[MetadataResponsePartition] = field(default_factory=list)
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v8+


@dataclass(slots=True)
class MetadataResponse:
    throttle_time_ms: int = 0  # v3+
    brokers: list[MetadataResponseBroker] = field(default_factory=list)
    cluster_id: str | None = None  # v2+
    controller_id: int = -1  # v1+
    topics: list[MetadataResponseTopic] = field(default_factory=list)
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v8+


# --- request ------------------------------------------------------------------------------------------------

_TOPIC_V0 = schema(MetadataRequestTopic, name=String)

# v0: a non-nullable array; empty means *all* topics.
REQUEST_V0 = schema(MetadataRequest, topics=Array(_TOPIC_V0))
# v1: nullable; null means all topics and empty means none (librdkafka/kafka-python bootstrap with []). v2, v3 = v1.
REQUEST_V1 = schema(MetadataRequest, topics=NullableArray(_TOPIC_V0))
# v4 adds allow_auto_topic_creation (v5-v7 are the same).
REQUEST_V4 = schema(MetadataRequest, topics=NullableArray(_TOPIC_V0), allow_auto_topic_creation=Boolean)
REQUEST_V8 = schema(MetadataRequest, topics=NullableArray(_TOPIC_V0), allow_auto_topic_creation=Boolean,
                    include_cluster_authorized_operations=Boolean, include_topic_authorized_operations=Boolean)
REQUEST_SCHEMAS = versioned(MAX_VERSION, {0: REQUEST_V0, 1: REQUEST_V1, 4: REQUEST_V4, 8: REQUEST_V8})

# --- response -----------------------------------------------------------------------------------------------

_BROKER_V0 = schema(MetadataResponseBroker, node_id=Int32, host=String, port=Int32)
_BROKER_V1 = schema(MetadataResponseBroker, node_id=Int32, host=String, port=Int32, rack=NullableString)

_PART_V0 = schema(MetadataResponsePartition, error_code=Int16, partition_index=Int32, leader_id=Int32,
                  replica_nodes=Array(Int32), isr_nodes=Array(Int32))
_PART_V5 = schema(MetadataResponsePartition, error_code=Int16, partition_index=Int32, leader_id=Int32,
                  replica_nodes=Array(Int32), isr_nodes=Array(Int32), offline_replicas=Array(Int32))
_PART_V7 = schema(MetadataResponsePartition, error_code=Int16, partition_index=Int32, leader_id=Int32,
                  leader_epoch=Int32, replica_nodes=Array(Int32), isr_nodes=Array(Int32),
                  offline_replicas=Array(Int32))

_TOPIC_R_V0 = schema(MetadataResponseTopic, error_code=Int16, name=String, partitions=Array(_PART_V0))
_TOPIC_R_V1 = schema(MetadataResponseTopic, error_code=Int16, name=String, is_internal=Boolean,
                     partitions=Array(_PART_V0))
_TOPIC_R_V5 = schema(MetadataResponseTopic, error_code=Int16, name=String, is_internal=Boolean,
                     partitions=Array(_PART_V5))
_TOPIC_R_V7 = schema(MetadataResponseTopic, error_code=Int16, name=String, is_internal=Boolean,
                     partitions=Array(_PART_V7))
_TOPIC_R_V8 = schema(MetadataResponseTopic, error_code=Int16, name=String, is_internal=Boolean,
                     partitions=Array(_PART_V7), topic_authorized_operations=Int32)

RESPONSE_V0 = schema(MetadataResponse, brokers=Array(_BROKER_V0), topics=Array(_TOPIC_R_V0))
# v1 adds broker rack, controller_id (between brokers and topics) and is_internal.
RESPONSE_V1 = schema(MetadataResponse, brokers=Array(_BROKER_V1), controller_id=Int32,
                     topics=Array(_TOPIC_R_V1))
# v2 adds cluster_id, *before* controller_id.
RESPONSE_V2 = schema(MetadataResponse, brokers=Array(_BROKER_V1), cluster_id=NullableString,
                     controller_id=Int32, topics=Array(_TOPIC_R_V1))
# v3 adds throttle_time_ms first (v4 is the same).
RESPONSE_V3 = schema(MetadataResponse, throttle_time_ms=Int32, brokers=Array(_BROKER_V1),
                     cluster_id=NullableString, controller_id=Int32, topics=Array(_TOPIC_R_V1))
# v5 adds offline_replicas (v6 is the same).
RESPONSE_V5 = schema(MetadataResponse, throttle_time_ms=Int32, brokers=Array(_BROKER_V1),
                     cluster_id=NullableString, controller_id=Int32, topics=Array(_TOPIC_R_V5))
RESPONSE_V7 = schema(MetadataResponse, throttle_time_ms=Int32, brokers=Array(_BROKER_V1),
                     cluster_id=NullableString, controller_id=Int32, topics=Array(_TOPIC_R_V7))
RESPONSE_V8 = schema(MetadataResponse, throttle_time_ms=Int32, brokers=Array(_BROKER_V1),
                     cluster_id=NullableString, controller_id=Int32, topics=Array(_TOPIC_R_V8),
                     cluster_authorized_operations=Int32)
RESPONSE_SCHEMAS = versioned(MAX_VERSION, {0: RESPONSE_V0, 1: RESPONSE_V1, 2: RESPONSE_V2, 3: RESPONSE_V3,
                                           5: RESPONSE_V5, 7: RESPONSE_V7, 8: RESPONSE_V8})
