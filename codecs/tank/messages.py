"""TANK requests and responses as plain dataclasses, with the protocol's type ids and error codes.

Names are `str` (decoded as UTF-8 with `surrogateescape`, so any bytes a peer sends round-trip exactly);
`client_id` stays `bytes` (TANK skips it). Sequence numbers are TANK's (first message = 1). Byte payloads
parsed from the wire are `memoryview`s into the frame (no copy); they compare equal to `bytes`.
An endpoint is `Endpoint("a.b.c.d", port)`: 4 address bytes in network order, then a little-endian u16 port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from .message_set import wrap

__all__ = [
    "MsgType",
    "ProduceError",
    "ConsumeFlags",
    "CreateTopicError",
    "ReloadConfError",
    "PartitionReason",
    "Endpoint",
    "CONFIG_KEYS",
    "parse_topic_config",
    "valid_topic_name",
    # requests
    "ProduceEntry",
    "ProduceRequest",
    "ConsumePartition",
    "ConsumeTopic",
    "ConsumeRequest",
    "PingEvent",
    "DiscoverPartitionsRequest",
    "CreateTopicRequest",
    "ReloadConfRequest",
    "StatusRequest",
    "DiscoverTopicsRequest",
    "DiscoverTopologyRequest",
    # responses
    "ProduceResult",
    "ProduceResponse",
    "ConsumePartitionResult",
    "ConsumeTopicResult",
    "ConsumeResponse",
    "PartitionBounds",
    "DiscoverPartitionsResponse",
    "CreateTopicResponse",
    "ReloadConfResponse",
    "StatusResponse",
    "TopicInfo",
    "DiscoverTopicsResponse",
    "TopologyNode",
    "DiscoverTopologyResponse",
]


class MsgType(IntEnum):
    """`enum class TankAPIMsgType : uint8_t` (common.h)."""

    PRODUCE = 0x01
    CONSUME = 0x02
    PING = 0x03
    REG_REPLICA = 0x04  # obsolete: TANK disconnects a peer that sends it
    PRODUCE_WITH_SEQNUM = 0x05  # answered with a PRODUCE (0x01) frame
    DISCOVER_PARTITIONS = 0x06
    CREATE_TOPIC = 0x07
    RELOAD_CONF = 0x08
    CONSUME_PEER = 0x09  # cluster replication; a standalone broker disconnects
    STATUS = 0x0A
    DISCOVER_TOPICS = 0x0B
    DISCOVER_TOPOLOGY = 0x0C


class ProduceError(IntEnum):
    OK = 0x00
    UNKNOWN_PARTITION = 0x01
    SYSTEM_ERROR = 0x02
    ACKS_PENDING = 0x03
    INSUFFICIENT_REPLICAS = 0x04
    INVALID_SEQNUM = 0x0A
    OTHER_LEADER = 0xFC  # + leader endpoint
    NO_LEADER = 0xFD
    READ_ONLY = 0xFE  # one byte for the whole run of a topic
    UNKNOWN_TOPIC = 0xFF  # one byte for the whole run of a topic


class ConsumeFlags(IntEnum):
    """Consume response `err_flags` per partition."""

    OK = 0x00
    BOUNDARY = 0x01  # + first_available_seqnum; chunk_len must be 0
    SYSTEM_ERROR = 0xFB
    OTHER_LEADER = 0xFC  # + endpoint, nothing else
    NO_LEADER = 0xFD
    SPARSE_FIRST = 0xFE  # not an error: no base_seqnum, the first bundle is sparse
    UNKNOWN_PARTITION = 0xFF


class CreateTopicError(IntEnum):
    OK = 0
    ALREADY_EXISTS = 1
    SYSTEM_ERROR = 2
    INVALID_CONFIG = 4
    READ_ONLY = 5
    INVALID_REQUEST = 10
    UNSUPPORTED = 11


class ReloadConfError(IntEnum):
    OK = 0
    NO_CONFIG = 2
    PARSE_FAILURE = 3
    UNKNOWN_PARTITION = 10
    UNKNOWN_TOPIC = 11
    CLUSTER_MODE = 12


class PartitionReason(IntEnum):
    """DiscoverPartitions: why a partition reports (UINT64_MAX, UINT64_MAX)."""

    SYSTEM_ERROR = 0xFB
    OTHER_LEADER = 0xFC
    NO_LEADER = 0xFD


class Endpoint(NamedTuple):
    host: str  # dotted IPv4
    port: int


# --- topic names and config ------------------------------------------------------------------------------------

_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ALNUM = re.compile(r"[A-Za-z0-9]")


def valid_topic_name(name: str) -> bool:
    """TANK's CreateTopic rule: 1-64 of [A-Za-z0-9_-], not starting/ending with - or _, one alphanumeric."""
    return (bool(_TOPIC_NAME.fullmatch(name)) and name[0] not in "-_" and name[-1] not in "-_"
            and bool(_ALNUM.search(name)))


#: The keys TANK's `parse_partition_config` understands (it matches them case-insensitively).
CONFIG_KEYS = frozenset({
    "retention.segments.count", "log.retention.bytes", "log.retention.secs", "log.cleanup.policy",
    "log.cleaner.min.cleanable.ratio", "log.segment.bytes", "log.index.interval.bytes",
    "log.index.size.max.bytes", "log.roll.jitter.secs", "log.roll.secs", "flush.messages", "flush.secs",
})
#: parse_partition_config refuses a value outside 1..128 bytes.
_MAX_CONFIG_VALUE = 128


def parse_topic_config(text: bytes) -> tuple[dict[str, str], list[str], list[str]]:
    """Split CreateTopic config text like TANK: `key=value` lines, `#` starts a comment anywhere in a line.

    Returns `(config, errors, unknown_keys)`: known keys (lower-cased) to their trimmed values; lines TANK
    would refuse (no value, a value over 128 bytes, bytes that are not UTF-8) — the broker answers err 4;
    keys TANK does not know (it logs and ignores them). Blank lines are skipped (TANK trims the whole text, so
    only interior whitespace-only lines differ: TANK refuses those, we skip them). Values are not
    interpreted here (sizes, durations): that is the broker's job.
    """
    config: dict[str, str] = {}
    errors: list[str] = []
    unknown: list[str] = []
    try:
        decoded = bytes(text).decode("utf-8")
    except UnicodeDecodeError as exc:
        return config, [f"config is not UTF-8: {exc}"], unknown
    for number, line in enumerate(decoded.split("\n"), 1):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not 1 <= len(value.encode()) <= _MAX_CONFIG_VALUE:
            errors.append(f"line {number}: {'no value' if not value else 'value over 128 bytes'} for {key!r}")
            continue
        if not key:
            continue  # TANK skips `=value` silently
        lowered = key.lower()
        if lowered in CONFIG_KEYS:
            config[lowered] = value
        else:
            unknown.append(key)
    return config, errors, unknown


# --- requests (client -> broker) ------------------------------------------------------------------------------


@dataclass(slots=True)
class ProduceEntry:
    """One (topic, partition, bundle) of a Produce request; the same partition may appear more than once."""

    topic: str
    partition: int
    bundle: Any  # bytes-like: the bundle without its varint length
    base_seqnum: int | None = None  # ProduceWithSeqnum (0x05) only: seq of the bundle's first message
    #: Parsed 0x01 requests: `varint bundle_len | bundle` exactly as on the wire, i.e. the stored entry, as a
    #: view (no copy). None otherwise; `stored()` then builds it.
    entry: Any = field(default=None, compare=False, repr=False)

    def stored(self):
        """The bytes to append to a TANK-format log: `varint bundle_len | bundle`."""
        return self.entry if self.entry is not None else wrap(self.bundle)


@dataclass(slots=True)
class ProduceRequest:
    request_id: int
    entries: list[ProduceEntry]
    with_seqnum: bool = False  # msg type 0x05: every entry carries base_seqnum
    client_version: int = 2
    client_id: bytes = b"c++"
    required_acks: int = 0  # cluster mode only
    ack_timeout: int = 0  # ms, cluster mode only


@dataclass(slots=True)
class ConsumePartition:
    partition: int
    seq_num: int  # 0 = first available, 2**64-1 = tail
    fetch_size: int


@dataclass(slots=True)
class ConsumeTopic:
    name: str
    partitions: list[ConsumePartition]


@dataclass(slots=True)
class ConsumeRequest:
    request_id: int
    max_wait_ms: int
    min_bytes: int
    topics: list[ConsumeTopic]
    client_version: int = 2  # >= 3: the flags byte is on the wire
    client_id: bytes = b""
    flags: int = 0  # bit 0 prefer_local_node (cluster); only sent when client_version >= 3


@dataclass(slots=True)
class PingEvent:
    """A Ping frame; the broker sends one on accept and ignores those it receives."""


@dataclass(slots=True)
class DiscoverPartitionsRequest:
    request_id: int
    topic: str
    partitions: list[int] | None = None  # None: all partitions


@dataclass(slots=True)
class CreateTopicRequest:
    request_id: int
    topic: str
    partitions: int
    config_text: bytes = b""
    config: dict[str, str] = field(init=False, compare=False)
    config_errors: list[str] = field(init=False, compare=False)  # non-empty: answer err 4
    unknown_config_keys: list[str] = field(init=False, compare=False)  # TANK ignores these

    def __post_init__(self) -> None:
        self.config, self.config_errors, self.unknown_config_keys = parse_topic_config(self.config_text)


@dataclass(slots=True)
class ReloadConfRequest:
    request_id: int
    topic: str
    partition: int


@dataclass(slots=True)
class StatusRequest:
    request_id: int


@dataclass(slots=True)
class DiscoverTopicsRequest:
    request_id: int
    flags: int = 0


@dataclass(slots=True)
class DiscoverTopologyRequest:
    request_id: int
    flags: int = 0


# --- responses (broker -> client) ------------------------------------------------------------------------------


@dataclass(slots=True)
class ProduceResult:
    """The outcome for one entry of the request, in request order (the wire matches them by position)."""

    topic: str
    partition: int
    error: int = ProduceError.OK
    leader: Endpoint | None = None  # with OTHER_LEADER


@dataclass(slots=True)
class ProduceResponse:
    request_id: int
    results: list[ProduceResult]


@dataclass(slots=True)
class ConsumePartitionResult:
    partition: int
    error: int = ConsumeFlags.OK  # err_flags; SPARSE_FIRST (0xfe) when the chunk's first bundle is sparse
    base_seqnum: int | None = 0  # first seq of the first bundle (None when parsed with 0xfe)
    high_water_mark: int = 0
    #: bytes-like, or (when encoding) a deferred object with an int `.length` the gateway sends with sendfile.
    chunk: Any = b""
    first_available: int = 0  # BOUNDARY only
    leader: Endpoint | None = None  # OTHER_LEADER only


@dataclass(slots=True)
class ConsumeTopicResult:
    name: str
    partitions: list[ConsumePartitionResult] = field(default_factory=list)
    unknown: bool = False  # unknown topic: written as name, requested_count, 0xffff
    requested_count: int = 0  # the request's partitions_cnt, echoed for an unknown topic


@dataclass(slots=True)
class ConsumeResponse:
    request_id: int
    topics: list[ConsumeTopicResult]


@dataclass(slots=True)
class PartitionBounds:
    first_available: int
    high_water_mark: int  # TANK's "last assigned" in standalone mode
    reason: int | None = None  # PartitionReason, only when both values are 2**64-1
    leader: Endpoint | None = None  # with OTHER_LEADER


@dataclass(slots=True)
class DiscoverPartitionsResponse:
    request_id: int
    topic: str
    partitions: list[PartitionBounds]  # empty: unknown topic


@dataclass(slots=True)
class CreateTopicResponse:
    request_id: int
    topic: str
    error: int = CreateTopicError.OK


@dataclass(slots=True)
class ReloadConfResponse:
    request_id: int
    topic: str
    partition: int
    error: int = ReloadConfError.OK


@dataclass(slots=True)
class StatusResponse:
    request_id: int
    topics: int
    partitions: int
    global_flags: int = 0
    cluster_aware: bool = False
    cluster_flags: int = 0  # cluster-aware only
    cluster_name: str = ""  # cluster-aware only
    available_nodes: int = 0  # cluster-aware only
    # The optional tail (clients check whether the payload continues): the first three go together.
    open_partitions: int | None = None
    open_partitions_time: int | None = None
    startup_ts: int | None = None  # unix seconds
    version: int | None = None  # 400 for TANK 4.0


@dataclass(slots=True)
class TopicInfo:
    name: str
    partitions: int
    enabled: bool = True
    replication_factor: int | None = None  # cluster-aware only


@dataclass(slots=True)
class DiscoverTopicsResponse:
    request_id: int
    topics: list[TopicInfo]
    cluster_aware: bool = False


@dataclass(slots=True)
class TopologyNode:
    node_id: int
    flags: int  # bit0 has endpoint, bit1 available, bit2 blocked
    partitions_replicated: int
    endpoint: Endpoint | None = None  # present exactly when flags bit 0 is set


@dataclass(slots=True)
class DiscoverTopologyResponse:
    request_id: int
    nodes: list[TopologyNode] | None = None  # None: standalone (n = 0xffff and nothing else)
    cluster_name: str = ""
