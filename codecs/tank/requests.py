"""TANK request payloads (spec §§4-6): their layouts, parsed by the broker (`parse_request`) and built by clients
(`encode_request`) from the same declarations (`schema`; `repr(LAYOUT)` prints a layout's fields).

Messages, by layout name::

    Produce 0x01 / ProduceWithSeqnum 0x05:
        PRODUCE_HEAD, topics_cnt u8 x (PRODUCE_TOPIC, partitions_cnt x
            (PRODUCE_PARTITION, bundle_len varint, [BASE_SEQNUM if 0x05], bundle))
    Consume 0x02:            CONSUME_REQUEST (CONSUME_TOPIC, CONSUME_PARTITION)
    Ping 0x03:               (empty)
    DiscoverPartitions 0x06: DISCOVER_PARTITIONS_REQUEST (no partition ids = all partitions)
    CreateTopic 0x07:        CREATE_TOPIC_REQUEST
    ReloadConf 0x08:         RELOAD_CONF_REQUEST
    Status 0x0a:             STATUS_REQUEST
    DiscoverTopics 0x0b:     DISCOVER_TOPICS_REQUEST
    DiscoverTopology 0x0c:   DISCOVER_TOPOLOGY_REQUEST

Produce is walked by hand around its layouts: the wire groups entries into runs of one topic while
`ProduceRequest.entries` is flat, and each parsed 0x01 entry keeps a view of `bundle_len | bundle` (its stored
form). Like TANK, the parsers read what the layout says and ignore bytes after it (except DiscoverPartitions,
whose optional list runs to the end of the payload).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LocalProtocolError
from .messages import (
    ConsumePartition,
    ConsumeRequest,
    ConsumeTopic,
    CreateTopicRequest,
    DiscoverPartitionsRequest,
    DiscoverTopicsRequest,
    DiscoverTopologyRequest,
    MsgType,
    PingEvent,
    ProduceEntry,
    ProduceRequest,
    ReloadConfRequest,
    StatusRequest,
)
from .schema import BYTES8, STR8, U8, U16, U32, U64, VARBYTES, Array, Optional, Rest, When, fields, record
from .varint import encode_varint
from .wire import Reader, malformed, runs

__all__ = [
    "REQUEST_TYPES",
    "CONSUME_FLAGS_VERSION",
    "parse_request",
    "encode_request",
    "PRODUCE_HEAD",
    "PRODUCE_TOPIC",
    "PRODUCE_PARTITION",
    "BASE_SEQNUM",
    "CONSUME_PARTITION",
    "CONSUME_TOPIC",
    "CONSUME_REQUEST",
    "DISCOVER_PARTITIONS_REQUEST",
    "CREATE_TOPIC_REQUEST",
    "RELOAD_CONF_REQUEST",
    "STATUS_REQUEST",
    "DISCOVER_TOPICS_REQUEST",
    "DISCOVER_TOPOLOGY_REQUEST",
]

#: ConsumeRequest's flags byte appears from this client_version on (Java sends 0, TankGo 1, the C++ client 2).
CONSUME_FLAGS_VERSION = 3

# --- layouts --------------------------------------------------------------------------------------------------

PRODUCE_HEAD = fields(client_version=U16, request_id=U32, client_id=BYTES8, required_acks=U8, ack_timeout=U32,
                      topics_cnt=U8)
PRODUCE_TOPIC = fields(name=STR8, partitions_cnt=U8, title="topic")
PRODUCE_PARTITION = fields(partition=U16)
BASE_SEQNUM = fields(base_seqnum=U64)
#: The smallest `bundle_len` varint: with PRODUCE_PARTITION (and BASE_SEQNUM) it bounds partitions_cnt.
_MIN_VARINT = 1

CONSUME_PARTITION = record(ConsumePartition, partition=U16, seq_num=U64, fetch_size=U32)
CONSUME_TOPIC = record(ConsumeTopic, name=STR8, partitions=Array(U8, CONSUME_PARTITION), title="topic")
CONSUME_REQUEST = record(
    ConsumeRequest, client_version=U16, request_id=U32, client_id=BYTES8, max_wait_ms=U64, min_bytes=U32,
    flags=When(f"client_version >= {CONSUME_FLAGS_VERSION}",
               lambda get: get("client_version") >= CONSUME_FLAGS_VERSION, flags=U8),
    topics=Array(U8, CONSUME_TOPIC))
DISCOVER_PARTITIONS_REQUEST = record(DiscoverPartitionsRequest, request_id=U32, topic=STR8, partitions=Rest(U16))
CREATE_TOPIC_REQUEST = record(CreateTopicRequest, request_id=U32, topic=STR8, partitions=U16,
                              config_text=VARBYTES)
RELOAD_CONF_REQUEST = record(ReloadConfRequest, request_id=U32, topic=STR8, partition=U16)
STATUS_REQUEST = record(StatusRequest, request_id=U32)
DISCOVER_TOPICS_REQUEST = record(DiscoverTopicsRequest, request_id=U32, flags=Optional(flags=U8))
DISCOVER_TOPOLOGY_REQUEST = record(DiscoverTopologyRequest, request_id=U32, flags=Optional(flags=U8))

# --- parsing (broker side) ------------------------------------------------------------------------------------


def _parse_produce(r: Reader, with_seqnum: bool) -> ProduceRequest:
    client_version, request_id, client_id, required_acks, ack_timeout, topics_cnt = PRODUCE_HEAD.values(r)
    r.count(topics_cnt, PRODUCE_TOPIC.min_size, "topics")
    min_part = PRODUCE_PARTITION.size + _MIN_VARINT + (BASE_SEQNUM.size if with_seqnum else 0)
    unpack_partition, partition_size = PRODUCE_PARTITION.struct.unpack_from, PRODUCE_PARTITION.size
    entries: list[ProduceEntry] = []
    append = entries.append
    view, buf = r.view, r.buf
    for _ in range(topics_cnt):
        topic, partitions_cnt = PRODUCE_TOPIC.values(r)
        if partitions_cnt * min_part > r.end - r.pos:  # (the labels are formatted only for the error)
            r.count(partitions_cnt, min_part, f"partitions of {topic!r}")  # raises
        for _ in range(partitions_cnt):
            pos = r.pos
            if r.end - pos < partition_size:
                r.need(partition_size, "partition")  # raises
            (partition,) = unpack_partition(buf, pos)
            start = r.pos = pos + partition_size
            bundle_len = r.varint("bundle_len")
            base = BASE_SEQNUM.values(r)[0] if with_seqnum else None
            pos = r.pos
            if r.end - pos < bundle_len:
                r.need(bundle_len, f"bundle of {topic}/{partition}")  # raises
            r.pos = pos + bundle_len
            bundle = view[pos:r.pos]
            entry = None if with_seqnum else view[start:r.pos]
            append(ProduceEntry(topic, partition, bundle, base, entry))
    return ProduceRequest(request_id, entries, with_seqnum, client_version, client_id, required_acks, ack_timeout)


#: What a standalone broker accepts. 0x04 (obsolete RegReplica) and 0x09 (ConsumePeer) are not here: TANK
#: closes the connection for them, as for any unknown type.
_PARSERS: dict[int, Callable[[Reader], Any]] = {
    MsgType.PRODUCE: lambda r: _parse_produce(r, False),
    MsgType.PRODUCE_WITH_SEQNUM: lambda r: _parse_produce(r, True),
    MsgType.CONSUME: CONSUME_REQUEST.parse,
    MsgType.PING: lambda r: PingEvent(),
    MsgType.DISCOVER_PARTITIONS: DISCOVER_PARTITIONS_REQUEST.parse,
    MsgType.CREATE_TOPIC: CREATE_TOPIC_REQUEST.parse,
    MsgType.RELOAD_CONF: RELOAD_CONF_REQUEST.parse,
    MsgType.STATUS: STATUS_REQUEST.parse,
    MsgType.DISCOVER_TOPICS: DISCOVER_TOPICS_REQUEST.parse,
    MsgType.DISCOVER_TOPOLOGY: DISCOVER_TOPOLOGY_REQUEST.parse,
}
REQUEST_TYPES = frozenset(_PARSERS)
#: The names errors give each request type (looked up once here, not through the enum for every request).
_NAMES = {t: MsgType(t).name for t in _PARSERS}


def parse_request(msg_type: int, payload: bytes) -> Any:
    """The request dataclass for one frame; RemoteProtocolError(fatal=True) when it is malformed."""
    parser = _PARSERS.get(msg_type)
    if parser is None:
        raise malformed(f"unknown request type {msg_type:#04x}")
    return parser(Reader(payload, _NAMES[msg_type]))


# --- encoding (client side) ------------------------------------------------------------------------------------


def _count(n: int, field: str, limit: int = 255) -> int:
    if n > limit:
        raise LocalProtocolError(f"{n} {field} do not fit in one request (at most {limit})")
    return n


def _encode_produce(req: ProduceRequest, out: list) -> int:
    topic_runs = runs(req.entries, lambda e: e.topic)
    PRODUCE_HEAD.build_values((req.client_version, req.request_id, req.client_id, req.required_acks,
                               req.ack_timeout, _count(len(topic_runs), "topic runs")), out)
    pack_partition, pack_seqnum = PRODUCE_PARTITION.struct.pack, BASE_SEQNUM.struct.pack
    for topic, entries in topic_runs:
        PRODUCE_TOPIC.build_values((topic, _count(len(entries), f"partitions of {topic!r}")), out)
        for e in entries:
            out.append(pack_partition(e.partition))
            out.append(encode_varint(len(e.bundle)))
            if req.with_seqnum:
                if e.base_seqnum is None:
                    raise LocalProtocolError(f"ProduceWithSeqnum entry {topic}/{e.partition} needs base_seqnum")
                out.append(pack_seqnum(e.base_seqnum))
            out.append(e.bundle)
    return MsgType.PRODUCE_WITH_SEQNUM if req.with_seqnum else MsgType.PRODUCE


def _layout(msg_type: int, layout) -> Callable[[Any, list], int]:
    def encode(req: Any, out: list) -> int:
        layout.build(req, out)
        return msg_type
    return encode


_ENCODERS: dict[type, Callable[[Any, list], int]] = {
    ProduceRequest: _encode_produce,
    ConsumeRequest: _layout(MsgType.CONSUME, CONSUME_REQUEST),
    PingEvent: lambda req, out: MsgType.PING,
    DiscoverPartitionsRequest: _layout(MsgType.DISCOVER_PARTITIONS, DISCOVER_PARTITIONS_REQUEST),
    CreateTopicRequest: _layout(MsgType.CREATE_TOPIC, CREATE_TOPIC_REQUEST),
    ReloadConfRequest: _layout(MsgType.RELOAD_CONF, RELOAD_CONF_REQUEST),
    StatusRequest: _layout(MsgType.STATUS, STATUS_REQUEST),
    DiscoverTopicsRequest: _layout(MsgType.DISCOVER_TOPICS, DISCOVER_TOPICS_REQUEST),
    DiscoverTopologyRequest: _layout(MsgType.DISCOVER_TOPOLOGY, DISCOVER_TOPOLOGY_REQUEST),
}


def encode_request(req: Any) -> tuple[int, list]:
    """(msg_type, payload pieces) for a request dataclass; the connection adds the frame header."""
    encoder = _ENCODERS.get(type(req))
    if encoder is None:
        raise LocalProtocolError(f"not a TANK request: {req!r}")
    out: list = []
    msg_type = encoder(req, out)
    return msg_type, out
