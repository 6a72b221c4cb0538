"""Cluster-description APIs: DescribeLogDirs (35, v0-4, flexible from 2) and DescribeCluster (60, v0-2; flexible
only).

DescribeLogDirs lists each log directory of a broker with the size of every partition in it (admin tools use it
for disk usage); v3 adds a top-level error code, v4 each directory's total and usable bytes. DescribeCluster is the admin client's Metadata without topics (cluster id, controller, brokers);
it has only flexible versions, so v0 is flexible (compact strings and arrays, tagged-field sections).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct
from ..primitives import Array, Boolean, Int8, Int16, Int32, Int64, NullableArray, NullableString, String
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
    total_bytes: int = -1  # v4+: the file system's size ...
    usable_bytes: int = -1  # v4+: ... and what is free in it


@dataclass(slots=True)
class DescribeLogDirsResponse:
    throttle_time_ms: int = 0
    results: list[DescribeLogDirsResult] = field(default_factory=list)
    error_code: int = 0  # v3+ (before the results)


DESCRIBE_LOG_DIRS_REQUEST_SCHEMAS = message(  # v1 = v0
    DescribeLogDirsRequest, 4, flexible_since=2,
    topics=NullableArray(struct(DescribableLogDirTopic, topic=String, partitions=Array(Int32))))
DESCRIBE_LOG_DIRS_RESPONSE_SCHEMAS = message(  # v1 = v0 (throttling behaviour only)
    DescribeLogDirsResponse, 4, flexible_since=2,
    throttle_time_ms=Int32, error_code=since(3, Int16),
    results=Array(struct(
        DescribeLogDirsResult, error_code=Int16, log_dir=String,
        topics=Array(struct(DescribeLogDirsTopic, name=String, partitions=Array(struct(
            DescribeLogDirsPartition, partition_index=Int32, partition_size=Int64, offset_lag=Int64,
            is_future_key=Boolean)))),
        total_bytes=since(4, Int64), usable_bytes=since(4, Int64))))


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


# v1 (KIP-919) adds the endpoint type; v2 (KIP-1073) fenced brokers.
DESCRIBE_CLUSTER_REQUEST_SCHEMAS = message(
    DescribeClusterRequest, 2, flexible_since=0,
    include_cluster_authorized_operations=Boolean, endpoint_type=since(1, Int8),
    include_fenced_brokers=since(2, Boolean))
DESCRIBE_CLUSTER_RESPONSE_SCHEMAS = message(
    DescribeClusterResponse, 2, flexible_since=0,
    throttle_time_ms=Int32, error_code=Int16, error_message=NullableString, endpoint_type=since(1, Int8),
    cluster_id=String, controller_id=Int32,
    brokers=Array(struct(DescribeClusterBroker, broker_id=Int32, host=String, port=Int32, rack=NullableString,
                         is_fenced=since(2, Boolean))),
    cluster_authorized_operations=Int32)


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    DESCRIBE_LOG_DIRS_KEY: (DESCRIBE_LOG_DIRS_REQUEST_SCHEMAS, DESCRIBE_LOG_DIRS_RESPONSE_SCHEMAS),
    DESCRIBE_CLUSTER_KEY: (DESCRIBE_CLUSTER_REQUEST_SCHEMAS, DESCRIBE_CLUSTER_RESPONSE_SCHEMAS),
}
