"""OffsetCommit (key 8, versions 0-7), OffsetFetch (key 9, versions 0-5) and OffsetDelete (key 47, version 0): a
group's committed offsets.

OffsetCommit request: group_id, generation_id_or_member_epoch and member_id (v1+), group_instance_id (v7+),
retention_time_ms (v2-v4 only; ignored by the gateway), topics[name, partitions[partition_index, committed_offset,
committed_leader_epoch (v6+), commit_timestamp (v1 only), committed_metadata]].
Response: throttle_time_ms (v3+), topics[name, partitions[partition_index, error_code]].

OffsetFetch request: group_id, topics[name, partition_indexes] (v2+: nullable, null = every partition the group
committed). Response: throttle_time_ms (v3+), topics[name, partitions[partition_index, committed_offset,
committed_leader_epoch (v5+), metadata, error_code]], error_code (v2+, top-level, *after* the topics).

OffsetDelete request: group_id, topics[name, partitions[partition_index]]. Response: error_code, throttle_time_ms,
topics[name, partitions[partition_index, error_code]] (the group's error comes *before* the throttle time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Int16, Int32, Int64, NullableArray, NullableString, String, schema,
                          versioned)

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
    "OffsetFetchResponse",
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
OFFSET_COMMIT_MAX_VERSION = 7
OFFSET_FETCH_KEY = 9
OFFSET_FETCH_MAX_VERSION = 5
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


def _commit_topics(partition):
    return Array(schema(OffsetCommitRequestTopic, name=String, partitions=Array(partition)))


_C_PART_V0 = schema(OffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
                    committed_metadata=NullableString)
# v1 only: a per-partition commit timestamp, between the offset and the metadata (removed again in v2).
_C_PART_V1 = schema(OffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
                    commit_timestamp=Int64, committed_metadata=NullableString)
_C_PART_V6 = schema(OffsetCommitRequestPartition, partition_index=Int32, committed_offset=Int64,
                    committed_leader_epoch=Int32, committed_metadata=NullableString)

OFFSET_COMMIT_REQUEST_V0 = schema(OffsetCommitRequest, group_id=String, topics=_commit_topics(_C_PART_V0))
OFFSET_COMMIT_REQUEST_V1 = schema(OffsetCommitRequest, group_id=String, generation_id_or_member_epoch=Int32,
                                  member_id=String, topics=_commit_topics(_C_PART_V1))
# v2 adds retention_time_ms and drops commit_timestamp (v3, v4 are the same).
OFFSET_COMMIT_REQUEST_V2 = schema(OffsetCommitRequest, group_id=String, generation_id_or_member_epoch=Int32,
                                  member_id=String, retention_time_ms=Int64, topics=_commit_topics(_C_PART_V0))
# v5 drops retention_time_ms (the broker's offsets.retention.minutes decides).
OFFSET_COMMIT_REQUEST_V5 = schema(OffsetCommitRequest, group_id=String, generation_id_or_member_epoch=Int32,
                                  member_id=String, topics=_commit_topics(_C_PART_V0))
OFFSET_COMMIT_REQUEST_V6 = schema(OffsetCommitRequest, group_id=String, generation_id_or_member_epoch=Int32,
                                  member_id=String, topics=_commit_topics(_C_PART_V6))
OFFSET_COMMIT_REQUEST_V7 = schema(OffsetCommitRequest, group_id=String, generation_id_or_member_epoch=Int32,
                                  member_id=String, group_instance_id=NullableString, topics=_commit_topics(_C_PART_V6))
OFFSET_COMMIT_REQUEST_SCHEMAS = versioned(OFFSET_COMMIT_MAX_VERSION, {
    0: OFFSET_COMMIT_REQUEST_V0, 1: OFFSET_COMMIT_REQUEST_V1, 2: OFFSET_COMMIT_REQUEST_V2,
    5: OFFSET_COMMIT_REQUEST_V5, 6: OFFSET_COMMIT_REQUEST_V6, 7: OFFSET_COMMIT_REQUEST_V7})

_C_TOPICS_R = Array(schema(OffsetCommitResponseTopic, name=String, partitions=Array(
    schema(OffsetCommitResponsePartition, partition_index=Int32, error_code=Int16))))
OFFSET_COMMIT_RESPONSE_V0 = schema(OffsetCommitResponse, topics=_C_TOPICS_R)  # v1, v2 = v0
OFFSET_COMMIT_RESPONSE_V3 = schema(OffsetCommitResponse, throttle_time_ms=Int32, topics=_C_TOPICS_R)  # v4-v7 = v3
OFFSET_COMMIT_RESPONSE_SCHEMAS = versioned(OFFSET_COMMIT_MAX_VERSION, {
    0: OFFSET_COMMIT_RESPONSE_V0, 3: OFFSET_COMMIT_RESPONSE_V3})


# ============================================================================================== OffsetFetch

@dataclass(slots=True)
class OffsetFetchRequestTopic:
    name: str = ""
    partition_indexes: list[int] = field(default_factory=list)


@dataclass(slots=True)
class OffsetFetchRequest:
    group_id: str = ""
    topics: list[OffsetFetchRequestTopic] | None = field(default_factory=list)  # v2+: None = all committed


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
class OffsetFetchResponse:
    throttle_time_ms: int = 0  # v3+
    topics: list[OffsetFetchResponseTopic] = field(default_factory=list)
    error_code: int = 0  # v2+: group-level errors (coordinator, authorization)


_F_TOPIC_V0 = schema(OffsetFetchRequestTopic, name=String, partition_indexes=Array(Int32))
OFFSET_FETCH_REQUEST_V0 = schema(OffsetFetchRequest, group_id=String, topics=Array(_F_TOPIC_V0))  # v1 = v0
# v2: topics become nullable (null = all topics the group committed); v3-v5 are the same.
OFFSET_FETCH_REQUEST_V2 = schema(OffsetFetchRequest, group_id=String, topics=NullableArray(_F_TOPIC_V0))
OFFSET_FETCH_REQUEST_SCHEMAS = versioned(OFFSET_FETCH_MAX_VERSION, {
    0: OFFSET_FETCH_REQUEST_V0, 2: OFFSET_FETCH_REQUEST_V2})


def _fetch_topics(partition):
    return Array(schema(OffsetFetchResponseTopic, name=String, partitions=Array(partition)))


_F_PART_V0 = schema(OffsetFetchResponsePartition, partition_index=Int32, committed_offset=Int64,
                    metadata=NullableString, error_code=Int16)
_F_PART_V5 = schema(OffsetFetchResponsePartition, partition_index=Int32, committed_offset=Int64,
                    committed_leader_epoch=Int32, metadata=NullableString, error_code=Int16)

OFFSET_FETCH_RESPONSE_V0 = schema(OffsetFetchResponse, topics=_fetch_topics(_F_PART_V0))  # v1 = v0
# v2 adds the top-level error_code, after the topics.
OFFSET_FETCH_RESPONSE_V2 = schema(OffsetFetchResponse, topics=_fetch_topics(_F_PART_V0), error_code=Int16)
# v3 adds throttle_time_ms first (v4 is the same).
OFFSET_FETCH_RESPONSE_V3 = schema(OffsetFetchResponse, throttle_time_ms=Int32, topics=_fetch_topics(_F_PART_V0),
                                  error_code=Int16)
OFFSET_FETCH_RESPONSE_V5 = schema(OffsetFetchResponse, throttle_time_ms=Int32, topics=_fetch_topics(_F_PART_V5),
                                  error_code=Int16)
OFFSET_FETCH_RESPONSE_SCHEMAS = versioned(OFFSET_FETCH_MAX_VERSION, {
    0: OFFSET_FETCH_RESPONSE_V0, 2: OFFSET_FETCH_RESPONSE_V2, 3: OFFSET_FETCH_RESPONSE_V3,
    5: OFFSET_FETCH_RESPONSE_V5})


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


OFFSET_DELETE_REQUEST_V0 = schema(OffsetDeleteRequest, group_id=String, topics=Array(schema(
    OffsetDeleteRequestTopic, name=String, partitions=Array(schema(OffsetDeleteRequestPartition,
                                                                   partition_index=Int32)))))
OFFSET_DELETE_RESPONSE_V0 = schema(OffsetDeleteResponse, error_code=Int16, throttle_time_ms=Int32, topics=Array(
    schema(OffsetDeleteResponseTopic, name=String, partitions=Array(schema(
        OffsetDeleteResponsePartition, partition_index=Int32, error_code=Int16)))))
OFFSET_DELETE_REQUEST_SCHEMAS = versioned(0, {0: OFFSET_DELETE_REQUEST_V0})
OFFSET_DELETE_RESPONSE_SCHEMAS = versioned(0, {0: OFFSET_DELETE_RESPONSE_V0})
