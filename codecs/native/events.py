"""Events of the native protocol: one frozen dataclass per request and per response.

These are plain values with no wire knowledge; `connection.py` maps them to and from JSON frames. A server
receives the request events and sends the response events; a client does the reverse. Records travel as the
shared `logway.codecs.records.Record` (value = the wire "payload").
"""

from __future__ import annotations

from dataclasses import dataclass

from logway.codecs.records import Record

# --------------------------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """Append `records` in order to one partition (an empty list is a no-op)."""

    topic: str
    partition: int
    records: list[Record]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Read from `offset`; with `group_id` the broker starts at max(committed, offset).

    `max_wait_ms`/`min_bytes` are the gateway's long-poll extension (0 = answer at once, as the seed does).
    """

    topic: str
    partition: int
    offset: int
    max_bytes: int
    group_id: str | None = None
    max_wait_ms: int = 0
    min_bytes: int = 0


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    """Store `offset` (exclusive: the next offset to read) for (group_id, topic, partition)."""

    topic: str
    partition: int
    group_id: str
    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    """Ask for the committed offset of (group_id, topic, partition)."""

    topic: str
    partition: int
    group_id: str


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    """Extension: create `topic` with `partitions` partitions."""

    topic: str
    partitions: int = 1


@dataclass(frozen=True, slots=True)
class DeleteTopicRequest:
    """Extension: delete `topic`, its data and its committed offsets."""

    topic: str


@dataclass(frozen=True, slots=True)
class ListTopicsRequest:
    """Extension: list every topic with its partition count."""


@dataclass(frozen=True, slots=True)
class DescribeTopicRequest:
    """Extension: log start/end offsets of every partition of `topic`."""

    topic: str


@dataclass(frozen=True, slots=True)
class PingRequest:
    """Extension: liveness check, answered by `PongResponse`."""


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """Extension: present the gateway's access token; must be the first request when the gateway requires one."""

    token: str


# -------------------------------------------------------------------------------------------- responses


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """The offset assigned to each produced record, by index."""

    offsets: list[int]


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Records read (each with its `offset` set) and the offset to fetch next."""

    records: list[Record]
    next_offset: int


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    success: bool


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    """The committed offset, or None when the group never committed this partition."""

    offset: int | None


@dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    created: bool


@dataclass(frozen=True, slots=True)
class DeleteTopicResponse:
    deleted: bool


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """One entry of `ListTopicsResponse`."""

    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class ListTopicsResponse:
    topics: list[TopicSummary]


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """One entry of `DescribeTopicResponse`: the partition's retained offset range [start, end)."""

    partition: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class DescribeTopicResponse:
    topic: str
    partitions: list[PartitionSummary]


@dataclass(frozen=True, slots=True)
class PongResponse:
    """Answer to `PingRequest`."""


@dataclass(frozen=True, slots=True)
class AuthResponse:
    """Answer to an accepted `AuthRequest` (a rejected one gets an `ErrorResponse` and the connection closes)."""

    authenticated: bool


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """Any failure; `message` starts with the seed's words (e.g. "partition not found: ...")."""

    message: str


Request = (
    ProduceRequest
    | FetchRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | CreateTopicRequest
    | DeleteTopicRequest
    | ListTopicsRequest
    | DescribeTopicRequest
    | PingRequest
    | AuthRequest
)
Response = (
    ProduceResponse
    | FetchResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | CreateTopicResponse
    | DeleteTopicResponse
    | ListTopicsResponse
    | DescribeTopicResponse
    | PongResponse
    | AuthResponse
    | ErrorResponse
)
