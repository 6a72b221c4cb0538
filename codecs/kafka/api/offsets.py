"""OffsetCommit (key 8, versions 0-9, flexible from 8), OffsetFetch (key 9, versions 0-9, flexible from 6) and
OffsetDelete (key 47, version 0): a group's committed offsets.

OffsetCommit request: group_id, generation_id_or_member_epoch and member_id (v1+), group_instance_id (v7+),
retention_time_ms (v2-v4 only; ignored by the gateway), topics[name, partitions[partition_index, committed_offset,
committed_leader_epoch (v6+), commit_timestamp (v1 only), committed_metadata]]. v9 (KIP-848): a member of a
consumer group sends its member epoch where a classic member sends its generation.
Response: throttle_time_ms (v3+), topics[name, partitions[partition_index, error_code]].

OffsetFetch request: group_id, topics[name, partition_indexes] (v2+: nullable, null = every partition the group
committed), require_stable (v7+); v8+ asks for several groups at once: groups[group_id, member_id and
member_epoch (v9+, KIP-848: a consumer group's member checks its epoch), topics (nullable)], require_stable.
Response: throttle_time_ms (v3+), topics[name, partitions[partition_index, committed_offset,
committed_leader_epoch (v5+), metadata, error_code]], error_code (v2+, top-level, *after* the topics); v8+:
groups[group_id, topics[...], error_code].

OffsetDelete request: group_id, topics[name, partitions[partition_index]]. Response: error_code, throttle_time_ms,
topics[name, partitions[partition_index, error_code]] (the group's error comes *before* the throttle time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, only, since, struct, switch, until
from ..primitives import Array, Boolean, Int16, Int32, Int64, NullableArray, NullableString, String

__all__ = [
    "OFFSET_COMMIT_KEY",
    "OFFSET_FETCH_KEY",
    "OFFSET_DELETE_KEY",
    "OffsetCommitRequest",
    "OffsetCommitRequestTopic",
    "OffsetCommitRequestPartition",
    "OffsetCommitResponse",
    "OffsetCommitResponseTopic",
    "OffsetCommitResponsePartition",
    "OffsetFetchRequest",
    "OffsetFetchRequestTopic",
    "OffsetFetchRequestGroup",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponseTopic",
    "OffsetFetchResponsePartition",
    "OFFSET_COMMIT_REQUEST_SCHEMAS",
    "OFFSET_COMMIT_RESPONSE_SCHEMAS",
    "OFFSET_FETCH_REQUEST_SCHEMAS",
    "OFFSET_FETCH_RESPONSE_SCHEMAS",
    "OffsetDeleteRequest",
    "OffsetDeleteRequestTopic",
    "OffsetDeleteRequestPartition",
    "OffsetDeleteResponse",
    "OffsetDeleteResponseTopic",
    "OffsetDeleteResponsePartition",
    "OFFSET_DELETE_REQUEST_SCHEMAS",
    "OFFSET_DELETE_RESPONSE_SCHEMAS",
]

OFFSET_COMMIT_KEY = 8
OFFSET_COMMIT_MAX_VERSION = 9
OFFSET_FETCH_KEY = 9
OFFSET_FETCH_MAX_VERSION = 9
OFFSET_DELETE_KEY = 47


# ============================================================================================= OffsetCommit

@dataclass(slots=True)
class OffsetCommitRequestPartition:
    partition_index: int = 0
    committed_offset: int = 0
    committed_leader_epoch: int = -1  # v6+
    commit_timestamp: int = -1  # v1 only
    committed_metadata: str | None = ""


@dataclass(slots=True)
class OffsetCommitRequestTopic:
    name: str = ""
    partitions: list[OffsetCommitRequestPartition] = field(default_factory=list)


@dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str = ""
    # GenerationIdOrMemberEpoch in Kafka's current JSON (KIP-848 renamed GenerationId; same wire slot). For the
    # classic group protocol it is the generation id: `generation_id` is a read/write alias.
    generation_id_or_member_epoch: int = -1  # v1+; -1 = a commit from outside the group protocol
    member_id: str = ""  # v1+
    group_instance_id: str | None = None  # v7+
    retention_time_ms: int = -1  # v2-v4; -1 = the broker's retention
    topics: list[OffsetCommitRequestTopic] = field(default_factory=list)

    @property
    def generation_id(self) -> int:
        return self.generation_id_or_member_epoch

    @generation_id.setter
    def generation_id(self, value: int) -> None:
        self.generation_id_or_member_epoch = value


@dataclass(slots=True)
class OffsetCommitResponsePartition:
    partition_index: int = 0
    error_code: int = 0


@dataclass(slots=True)
class OffsetCommitResponseTopic:
    name: str = ""
    partitions: list[OffsetCommitResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class OffsetCommitResponse:
    throttle_time_ms: int = 0  # v3+
    topics: list[OffsetCommitResponseTopic] = field(default_factory=list)


OFFSET_COMMIT_REQUEST_SCHEMAS = message(
    OffsetCommitRequest, OFFSET_COMMIT_MAX_VERSION, flexible_since=8,
    group_id=String,
    generation_id_or_member_epoch=since(1, Int32),
    member_id=since(1, String),
    group_instance_id=since(7, NullableString),
    retention_time_ms=only(2, 4, Int64),  # v5 drops it: the broker's offsets.retention.minutes decides
    topics=Array(struct(
        OffsetCommitRequestTopic, name=String,
        partitions=Array(struct(
            OffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
            committed_leader_epoch=since(6, Int32),
            commit_timestamp=only(1, 1, Int64),  # v1 only: between the offset and the metadata
            committed_metadata=NullableString)))))

OFFSET_COMMIT_RESPONSE_SCHEMAS = message(
    OffsetCommitResponse, OFFSET_COMMIT_MAX_VERSION, flexible_since=8,
    throttle_time_ms=since(3, Int32),
    topics=Array(struct(OffsetCommitResponseTopic, name=String, partitions=Array(struct(
        OffsetCommitResponsePartition, partition_index=Int32, error_code=Int16)))))


# ============================================================================================== OffsetFetch

@dataclass(slots=True)
class OffsetFetchRequestTopic:
    name: str = ""
    partition_indexes: list[int] = field(default_factory=list)


@dataclass(slots=True)
class OffsetFetchRequestGroup:
    """One group of an OffsetFetch v8+."""

    group_id: str = ""
    member_id: str | None = None  # v9+: a consumer group's member (KIP-848)
    member_epoch: int = -1  # v9+
    topics: list[OffsetFetchRequestTopic] | None = None  # None = all committed


@dataclass(slots=True)
class OffsetFetchRequest:
    group_id: str = ""  # v0-v7
    topics: list[OffsetFetchRequestTopic] | None = field(default_factory=list)  # v0-v7; v2+: None = all committed
    groups: list[OffsetFetchRequestGroup] = field(default_factory=list)  # v8+
    require_stable: bool = False  # v7+: wait out pending transactional commits (UNSTABLE_OFFSET_COMMIT)


@dataclass(slots=True)
class OffsetFetchResponsePartition:
    partition_index: int = 0
    committed_offset: int = -1  # -1 = nothing committed
    committed_leader_epoch: int = -1  # v5+
    metadata: str | None = ""
    error_code: int = 0


@dataclass(slots=True)
class OffsetFetchResponseTopic:
    name: str = ""
    partitions: list[OffsetFetchResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class OffsetFetchResponseGroup:
    """One group's answer in OffsetFetch v8+."""

    group_id: str = ""
    topics: list[OffsetFetchResponseTopic] = field(default_factory=list)
    error_code: int = 0


@dataclass(slots=True)
class OffsetFetchResponse:
    throttle_time_ms: int = 0  # v3+
    topics: list[OffsetFetchResponseTopic] = field(default_factory=list)  # v0-v7
    error_code: int = 0  # v2-v7: group-level errors (coordinator, authorization)
    groups: list[OffsetFetchResponseGroup] = field(default_factory=list)  # v8+


_F_TOPIC = struct(OffsetFetchRequestTopic, name=String, partition_indexes=Array(Int32))
OFFSET_FETCH_REQUEST_SCHEMAS = message(
    OffsetFetchRequest, OFFSET_FETCH_MAX_VERSION, flexible_since=6,
    group_id=until(7, String),
    # v2: topics become nullable (null = all topics the group committed)
    topics=until(7, switch({0: Array(_F_TOPIC), 2: NullableArray(_F_TOPIC)})),
    groups=since(8, Array(struct(OffsetFetchRequestGroup, group_id=String, member_id=since(9, NullableString),
                                 member_epoch=since(9, Int32), topics=NullableArray(_F_TOPIC)))),
    require_stable=since(7, Boolean))

_F_RESPONSE_TOPICS = Array(struct(OffsetFetchResponseTopic, name=String, partitions=Array(struct(
    OffsetFetchResponsePartition, partition_index=Int32, committed_offset=Int64,
    committed_leader_epoch=since(5, Int32), metadata=NullableString, error_code=Int16))))
OFFSET_FETCH_RESPONSE_SCHEMAS = message(
    OffsetFetchResponse, OFFSET_FETCH_MAX_VERSION, flexible_since=6,
    throttle_time_ms=since(3, Int32),
    topics=until(7, _F_RESPONSE_TOPICS),
    error_code=only(2, 7, Int16),  # after the topics
    groups=since(8, Array(struct(OffsetFetchResponseGroup, group_id=String, topics=_F_RESPONSE_TOPICS,
                                 error_code=Int16))))


# ============================================================================================= OffsetDelete

@dataclass(slots=True)
class OffsetDeleteRequestPartition:
    partition_index: int = 0


@dataclass(slots=True)
class OffsetDeleteRequestTopic:
    name: str = ""
    partitions: list[OffsetDeleteRequestPartition] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteRequest:
    group_id: str = ""
    topics: list[OffsetDeleteRequestTopic] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteResponsePartition:
    partition_index: int = 0
    error_code: int = 0


@dataclass(slots=True)
class OffsetDeleteResponseTopic:
    name: str = ""
    partitions: list[OffsetDeleteResponsePartition] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteResponse:
    error_code: int = 0
    throttle_time_ms: int = 0
    topics: list[OffsetDeleteResponseTopic] = field(default_factory=list)


OFFSET_DELETE_REQUEST_SCHEMAS = message(
    OffsetDeleteRequest, 0, flexible_since=None, group_id=String, topics=Array(struct(
        OffsetDeleteRequestTopic, name=String, partitions=Array(struct(OffsetDeleteRequestPartition,
                                                                       partition_index=Int32)))))
OFFSET_DELETE_RESPONSE_SCHEMAS = message(
    OffsetDeleteResponse, 0, flexible_since=None, error_code=Int16, throttle_time_ms=Int32, topics=Array(struct(
        OffsetDeleteResponseTopic, name=String, partitions=Array(struct(
            OffsetDeleteResponsePartition, partition_index=Int32, error_code=Int16)))))
