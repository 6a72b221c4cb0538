"""Cluster-description APIs: DescribeLogDirs (35, v0-1) and DescribeCluster (60, v0-2; flexible only).

DescribeLogDirs lists each log directory of a broker with the size of every partition in it (admin tools use it
for disk usage). DescribeCluster is the admin client's Metadata without topics (cluster id, controller, brokers);
it has only flexible versions, so v0 is flexible (compact strings and arrays, tagged-field sections).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Boolean, Int8, Int16, Int32, Int64, NullableArray, NullableString, String, flexible,
                          schema, versioned)
from .groups import AUTHORIZED_OPERATIONS_OMITTED

__all__ = [
    "DESCRIBE_LOG_DIRS_KEY",
    "DESCRIBE_CLUSTER_KEY",
    "DescribeLogDirsRequest",
    "DescribableLogDirTopic",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "DescribeLogDirsPartition",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeClusterBroker",
    "SCHEMAS",
]

DESCRIBE_LOG_DIRS_KEY = 35
DESCRIBE_CLUSTER_KEY = 60
#: DescribeCluster endpoint types (v1+): brokers, or (KRaft) controllers — this gateway has brokers only.
ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2


# ========================================================================================== DescribeLogDirs

@dataclass(slots=True)
class DescribableLogDirTopic:
    topic: str = ""
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DescribeLogDirsRequest:
    topics: list[DescribableLogDirTopic] | None = None  # None = every partition


@dataclass(slots=True)
class DescribeLogDirsPartition:
    partition_index: int = 0
    partition_size: int = 0
    offset_lag: int = 0
    is_future_key: bool = False


@dataclass(slots=True)
class DescribeLogDirsTopic:
    name: str = ""
    partitions: list[DescribeLogDirsPartition] = field(default_factory=list)


@dataclass(slots=True)
class DescribeLogDirsResult:
    error_code: int = 0
    log_dir: str = ""
    topics: list[DescribeLogDirsTopic] = field(default_factory=list)


@dataclass(slots=True)
class DescribeLogDirsResponse:
    throttle_time_ms: int = 0
    results: list[DescribeLogDirsResult] = field(default_factory=list)


DESCRIBE_LOG_DIRS_REQUEST_V0 = schema(DescribeLogDirsRequest, topics=NullableArray(schema(
    DescribableLogDirTopic, topic=String, partitions=Array(Int32))))  # v1 = v0
DESCRIBE_LOG_DIRS_RESPONSE_V0 = schema(DescribeLogDirsResponse, throttle_time_ms=Int32, results=Array(schema(
    DescribeLogDirsResult, error_code=Int16, log_dir=String, topics=Array(schema(
        DescribeLogDirsTopic, name=String, partitions=Array(schema(
            DescribeLogDirsPartition, partition_index=Int32, partition_size=Int64, offset_lag=Int64,
            is_future_key=Boolean)))))))  # v1 = v0 (throttling behaviour only)


# ========================================================================================== DescribeCluster

@dataclass(slots=True)
class DescribeClusterRequest:
    include_cluster_authorized_operations: bool = False
    endpoint_type: int = ENDPOINT_BROKERS  # v1+
    include_fenced_brokers: bool = False  # v2+


@dataclass(slots=True)
class DescribeClusterBroker:
    broker_id: int = 0
    host: str = ""
    port: int = 0
    rack: str | None = None
    is_fenced: bool = False  # v2+


@dataclass(slots=True)
class DescribeClusterResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    endpoint_type: int = ENDPOINT_BROKERS  # v1+
    cluster_id: str = ""
    controller_id: int = -1
    brokers: list[DescribeClusterBroker] = field(default_factory=list)
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


DESCRIBE_CLUSTER_REQUEST_V0 = flexible(schema(DescribeClusterRequest, include_cluster_authorized_operations=Boolean))
# v1 (KIP-919) adds the endpoint type; v2 (KIP-1073) fenced brokers.
DESCRIBE_CLUSTER_REQUEST_V1 = flexible(schema(DescribeClusterRequest, include_cluster_authorized_operations=Boolean,
                                              endpoint_type=Int8))
DESCRIBE_CLUSTER_REQUEST_V2 = flexible(schema(DescribeClusterRequest, include_cluster_authorized_operations=Boolean,
                                              endpoint_type=Int8, include_fenced_brokers=Boolean))


def _describe_cluster_response(version: int):
    head = dict(throttle_time_ms=Int32, error_code=Int16, error_message=NullableString)
    if version >= 1:
        head["endpoint_type"] = Int8
    broker = dict(broker_id=Int32, host=String, port=Int32, rack=NullableString)
    if version >= 2:
        broker["is_fenced"] = Boolean
    return flexible(schema(DescribeClusterResponse, **head, cluster_id=String, controller_id=Int32,
                           brokers=Array(schema(DescribeClusterBroker, **broker)), cluster_authorized_operations=Int32))


DESCRIBE_CLUSTER_RESPONSE_V0, DESCRIBE_CLUSTER_RESPONSE_V1, DESCRIBE_CLUSTER_RESPONSE_V2 = (
    _describe_cluster_response(v) for v in range(3))


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    DESCRIBE_LOG_DIRS_KEY: (
        versioned(1, {0: DESCRIBE_LOG_DIRS_REQUEST_V0}),
        versioned(1, {0: DESCRIBE_LOG_DIRS_RESPONSE_V0})),
    DESCRIBE_CLUSTER_KEY: (
        versioned(2, {0: DESCRIBE_CLUSTER_REQUEST_V0, 1: DESCRIBE_CLUSTER_REQUEST_V1, 2: DESCRIBE_CLUSTER_REQUEST_V2}),
        versioned(2, {0: DESCRIBE_CLUSTER_RESPONSE_V0, 1: DESCRIBE_CLUSTER_RESPONSE_V1,
                      2: DESCRIBE_CLUSTER_RESPONSE_V2})),
}
