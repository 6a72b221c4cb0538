"""Events of the native protocol: one frozen dataclass per request and per response.

These are plain values with no wire knowledge; `connection.py` maps them to and from JSON frames. A server
receives the request events and sends the response events; a client does the reverse. Records travel as the
shared `logway.codecs.records.Record` (value = the wire "payload").
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """Extension: log start/end offsets of every partition of `topic` — or, with `partitions`, of those only
    (ones the topic lacks are left out); with `details` also each partition's size on disk and segment
    count, and the topic's storage format; with `at_timestamp` (ms) also each partition's `timestamp_offset`."""

    topic: str
    details: bool = False
    partitions: list[int] | None = None
    at_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    """Extension: grow `topic` to `partitions` partitions in all (more than it has); `validate_only` checks only."""

    topic: str
    partitions: int
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    """Extension: delete the records of one partition below `offset` (-1: every visible record), moving its log
    start offset there."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class AlterTopicConfigRequest:
    """Extension: set (`set`: name -> int or decimal string) and remove (`delete`: names) config overrides of
    `topic`, validated as a whole; `validate_only` checks only."""

    topic: str
    set: dict[str, int | float | str] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class DescribeTopicConfigRequest:
    """Extension: `topic`'s config settings (only `keys` when given) with their values and sources."""

    topic: str
    keys: list[str] | None = None


@dataclass(frozen=True, slots=True)
class DeleteGroupOffsetsRequest:
    """Extension: delete `group_id`'s committed offsets: all of them, or those of the (topic, partition) pairs
    in `partitions`."""

    group_id: str
    partitions: list[tuple[str, int]] | None = None


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    """Extension: every consumer group the gateway knows: those with committed offsets (any protocol) and the
    Kafka groups its coordinator holds, in group id order — a page of them: those after `after` (None: from the
    first) that fit one answer (see `ListGroupsResponse.next`)."""

    after: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeGroupRequest:
    """Extension: `group_id`'s state, members (Kafka groups) and, per topic-partition, its committed offset and
    the log end offset."""

    group_id: str


#: The targets of `ResetGroupOffsetsRequest.to`: (name, whether `value` is needed).
RESET_TARGETS = {"earliest": False, "latest": False, "offset": True, "timestamp": True}


@dataclass(frozen=True, slots=True)
class ResetGroupOffsetsRequest:
    """Extension: set `group_id`'s committed offsets to the `to` position of each partition — "earliest" (the log
    start), "latest" (the last stable offset), "offset" (`value`, moved into the partition's range) or
    "timestamp" (the first record at or after `value` ms; the latest when there is none). `topics`: (topic,
    partitions or None for all of them) pairs; None: the partitions the group has committed offsets for. Refused
    while the group has active Kafka members; `validate_only` computes the plan and changes nothing."""

    group_id: str
    to: str
    value: int | None = None
    topics: list[tuple[str, list[int] | None]] | None = None
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class PingRequest:
    """Extension: liveness check, answered by `PongResponse`."""


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """Extension: log in; the first request when the gateway requires one. One of: the gateway's shared `token`; a
    `user` and its `password`; or a SCRAM exchange (`mechanism` SCRAM-SHA-256 or -512, `message` the client-first
    message, then — after an `AuthResponse` carrying the server-first message — the client-final one)."""

    token: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    mechanism: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TxnEndRequest:
    """Internal: end producer `producer_id`'s transaction of `epoch` in `partitions` (the worker asked owns them),
    `committed` or aborted: a marker where the topic's format has one, synced when acknowledgements wait for the
    disk. Idempotent. Sent by worker 0, the transaction coordinator, while it completes a transaction."""

    producer_id: int
    epoch: int
    committed: bool
    partitions: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class TxnQueryRequest:
    """Internal: what is producer `producer_id`'s transaction of `epoch` in `topic`-`partition`? Asked of the
    coordinator by the partition's owner — for a transactional batch of a producer it has not heard of, and for
    a transaction it found open at its start —; answered by `TxnResponse` with the state "ongoing" (open, with
    that partition added), "committed", "aborted" or "completing" (the coordinator will send `TxnEnd`)."""

    producer_id: int
    epoch: int
    topic: str
    partition: int


# -------------------------------------------------------------------------------------------- responses


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """The offset assigned to each produced record, by index."""

    offsets: list[int]


class EncodedRecords:
    """Fetched records already encoded as the items of a Fetch answer's `records` array (`wire.encode_fetched`):
    `text` is the items' JSON joined by commas, `ends[i]` where item i ends in it, with each record's offset and
    value size beside. A server that answers several readers with the same records encodes them once; nothing in
    it is tracked by the cyclic garbage collector."""

    __slots__ = ("text", "ends", "offsets", "sizes")

    def __init__(self, text: bytes, ends: tuple[int, ...], offsets: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        self.text = text
        self.ends = ends
        self.offsets = offsets
        self.sizes = sizes  # bytes of each record's value (0 for a null one)

    def __len__(self) -> int:
        return len(self.ends)

    def head(self, count: int) -> "EncodedRecords":
        """The first `count` records."""
        if count >= len(self.ends):
            return self
        return EncodedRecords(self.text[:self.ends[count - 1]] if count else b"", self.ends[:count],
                              self.offsets[:count], self.sizes[:count])

    @classmethod
    def join(cls, parts: "list[EncodedRecords]") -> "EncodedRecords":
        """The records of `parts`, in order, as one."""
        parts = [p for p in parts if p.ends]
        if len(parts) == 1:
            return parts[0]
        texts, ends, offsets, sizes = [], [], [], []
        shift = 0
        for p in parts:
            texts.append(p.text)
            ends += [end + shift for end in p.ends] if shift else p.ends
            offsets += p.offsets
            sizes += p.sizes
            shift += len(p.text) + 1  # the comma that joins it to the next
        return cls(b",".join(texts), tuple(ends), tuple(offsets), tuple(sizes))

    def fitting(self, max_bytes: int) -> int:
        """How many records from the first fit in `max_bytes` of values (at least one, when there is one)."""
        total = 0
        for i, size in enumerate(self.sizes):
            total += size
            if total > max_bytes and i > 0:
                return i
        return len(self.sizes)

    @property
    def value_bytes(self) -> int:
        return sum(self.sizes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EncodedRecords) and (self.text, self.ends) == (other.text, other.ends)

    def __repr__(self) -> str:
        return f"EncodedRecords({len(self.ends)} records, offsets {self.offsets[:1]}..{self.offsets[-1:]})"


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Records read (each with its `offset` set, or already encoded: `EncodedRecords`) and the offset to fetch
    next."""

    records: list[Record] | EncodedRecords
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
    """One entry of `DescribeTopicResponse`: the partition's retained offset range [start, end); with `details`
    asked for, its size on disk (bytes), segment count and last stable offset (where committed reads stop: below
    the end while a transaction is open) too; with `at_timestamp`, `timestamp_offset`: where a
    reader starting at that time begins — the first retained record whose timestamp is at or after it, or the log
    end when there is none (None when not asked for)."""

    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int | None = None
    segments: int | None = None
    timestamp_offset: int | None = None
    last_stable_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeTopicResponse:
    """`format` (the storage format: "kafka" or "tank") is set when `details` was asked for."""

    topic: str
    partitions: list[PartitionSummary]
    format: str | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    """The topic's partition count after the request."""

    topic: str
    partitions: int


@dataclass(frozen=True, slots=True)
class DeleteRecordsResponse:
    """The partition's log start offset after the request."""

    log_start_offset: int


@dataclass(frozen=True, slots=True)
class AlterTopicConfigResponse:
    """True when the change was made (false for `validate_only`)."""

    altered: bool


@dataclass(frozen=True, slots=True)
class TopicConfigEntry:
    """One entry of `DescribeTopicConfigResponse`: a setting's value, where it comes from ("topic": the topic's
    override, "broker": the gateway's `storage.*` configuration, "default": built in), the value it has without
    the topic's override, and whether it can change."""

    name: str
    value: int | float | str
    source: str
    default: int | float | str
    read_only: bool


@dataclass(frozen=True, slots=True)
class DescribeTopicConfigResponse:
    topic: str
    configs: list[TopicConfigEntry]


@dataclass(frozen=True, slots=True)
class DeleteGroupOffsetsResponse:
    """How many committed offsets were deleted."""

    deleted: int


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One entry of `ListGroupsResponse`. `state` is Kafka's ("Empty", "PreparingRebalance",
    "CompletingRebalance", "Stable"; a consumer group's "Assigning", "Reconciling"); a group with committed offsets
    only is "Empty" with protocol type "" and type ""."""

    group_id: str
    state: str
    protocol_type: str
    members: int
    type: str = ""  # a live Kafka group's: "classic", "consumer" (KIP-848) or "share" (KIP-932); "" otherwise


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    """`next`: set when more groups follow — ask again with `after=next`."""

    groups: list[GroupSummary]
    next: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member of a live Kafka group, with the partitions assigned to it (when its assignment can be read: a
    Stable "consumer" group)."""

    member_id: str
    client_id: str
    client_host: str
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupPartition:
    """One topic-partition of `DescribeGroupResponse`: the committed offset (None: assigned, never committed) and
    the log end offset committed readers see (the last stable offset; None when the topic no longer exists)."""

    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int | None
    metadata: str = ""

    @property
    def lag(self) -> int | None:
        """Records between the committed offset and the log end (None when either is unknown)."""
        if self.committed_offset is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.committed_offset, 0)


@dataclass(frozen=True, slots=True)
class DescribeGroupResponse:
    """A group neither with committed offsets nor known to the Kafka coordinator is "Dead", with nothing else (as
    Kafka's DescribeGroups)."""

    group_id: str
    state: str
    protocol_type: str
    members: list[GroupMember]
    partitions: list[GroupPartition]
    type: str = ""  # as `GroupSummary.type`


@dataclass(frozen=True, slots=True)
class GroupOffsetReset:
    """One entry of `ResetGroupOffsetsResponse`: the committed offset before (None: none) and the new one."""

    topic: str
    partition: int
    previous_offset: int | None
    offset: int


@dataclass(frozen=True, slots=True)
class ResetGroupOffsetsResponse:
    """The plan (`reset` false: validate_only) or what was committed (`reset` true)."""

    group_id: str
    offsets: list[GroupOffsetReset]
    reset: bool


@dataclass(frozen=True, slots=True)
class PongResponse:
    """Answer to `PingRequest`."""


@dataclass(frozen=True, slots=True)
class AuthResponse:
    """Answer to an accepted `AuthRequest` (a rejected one gets an `ErrorResponse` and the connection closes):
    `authenticated`, and the `principal` it now is; in a SCRAM exchange, `message` is the server's (the
    server-first, with `authenticated` false; then the server-final)."""

    authenticated: bool
    message: str | None = None
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class TxnResponse:
    """Answer to the internal `TxnEnd` ("ok") and `TxnQuery` requests (see `TxnQueryRequest`)."""

    state: str = "ok"


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """Any failure; `message` starts with the seed's words (e.g. "partition not found: ...")."""

    message: str


@dataclass(frozen=True, slots=True)
class RelayedResponse:
    """An answer another server already encoded, sent as it is: `payload` is its JSON (the frame without its
    length), e.g. a worker relaying the answer of the worker that owns the partition. `error_code` is 1 when it
    is an `Error` answer (what the relaying server counts), else 0."""

    payload: bytes
    error_code: int = 0

    @classmethod
    def of(cls, payload: bytes) -> "RelayedResponse":
        return cls(payload, int(payload.startswith(b'{"Error"')))


Request = (
    ProduceRequest
    | FetchRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | CreateTopicRequest
    | DeleteTopicRequest
    | ListTopicsRequest
    | DescribeTopicRequest
    | CreatePartitionsRequest
    | DeleteRecordsRequest
    | AlterTopicConfigRequest
    | DescribeTopicConfigRequest
    | DeleteGroupOffsetsRequest
    | ListGroupsRequest
    | DescribeGroupRequest
    | ResetGroupOffsetsRequest
    | PingRequest
    | AuthRequest
    | TxnEndRequest
    | TxnQueryRequest
)
Response = (
    ProduceResponse
    | RelayedResponse
    | FetchResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | CreateTopicResponse
    | DeleteTopicResponse
    | ListTopicsResponse
    | DescribeTopicResponse
    | CreatePartitionsResponse
    | DeleteRecordsResponse
    | AlterTopicConfigResponse
    | DescribeTopicConfigResponse
    | DeleteGroupOffsetsResponse
    | ListGroupsResponse
    | DescribeGroupResponse
    | ResetGroupOffsetsResponse
    | PongResponse
    | AuthResponse
    | TxnResponse
    | ErrorResponse
)
