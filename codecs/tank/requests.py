"""TANK request payloads: parsed by the broker (`parse_request`), built by clients (`encode_request`).

Layouts (spec §§4-6; all integers little-endian)::

    Produce 0x01 / ProduceWithSeqnum 0x05:
        client_version u16, request_id u32, client_id str8, required_acks u8, ack_timeout u32, topics_cnt u8,
        topics_cnt x (name str8, partitions_cnt u8,
                      partitions_cnt x (partition u16, bundle_len varint, [base_seqnum u64 if 0x05], bundle))
    Consume 0x02:
        client_version u16, request_id u32, client_id str8, max_wait_ms u64, min_bytes u32,
        [flags u8 if client_version >= 3], topics_cnt u8,
        topics_cnt x (name str8, partitions_cnt u8, partitions_cnt x (partition u16, seq u64, fetch_size u32))
    Ping 0x03:               (empty)
    DiscoverPartitions 0x06: request_id u32, topic str8, [partition u16]* (none = all partitions)
    CreateTopic 0x07:        request_id u32, topic str8, partitions u16, config_len varint, config text
    ReloadConf 0x08:         request_id u32, topic str8, partition u16
    Status 0x0a:             request_id u32
    DiscoverTopics 0x0b:     request_id u32, [flags u8]
    DiscoverTopology 0x0c:   request_id u32, [flags u8]

Like TANK, the parsers read what the layout says and ignore bytes after it (except DiscoverPartitions, whose
optional list runs to the end of the payload).
"""

from __future__ import annotations

import struct
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
from .varint import encode_varint
from .wire import U16, U64, Reader, malformed, pack_str8

__all__ = ["REQUEST_TYPES", "parse_request", "encode_request"]

_PRODUCE_HEAD = struct.Struct("<HI")  # client_version, request_id
_PRODUCE_ACKS = struct.Struct("<BI")  # required_acks, ack_timeout
_CONSUME_WAIT = struct.Struct("<QI")  # max_wait_ms, min_bytes
_CONSUME_PART = struct.Struct("<HQI")  # partition, seq_num, fetch_size
_RID = struct.Struct("<I")
#: Smallest encodings, for bounding counts before looping: a topic is str8 (1) + partitions_cnt (1); a produce
#: partition is id (2) + bundle_len varint (1) [+ base_seqnum (8)]; a consume partition is 14 bytes.
_MIN_TOPIC = 2
_MIN_PRODUCE_PART = 3
_MIN_CONSUME_PART = _CONSUME_PART.size
#: ConsumeFlags flags byte appears from this client_version on.
CONSUME_FLAGS_VERSION = 3


# --- parsing (broker side) ------------------------------------------------------------------------------------


def _parse_produce(r: Reader, with_seqnum: bool) -> ProduceRequest:
    client_version = r.u16("client_version")
    request_id = r.u32("request_id")
    client_id = r.bytes8("client_id")
    required_acks = r.u8("required_acks")
    ack_timeout = r.u32("ack_timeout")
    topics_cnt = r.count(r.u8("topics_cnt"), _MIN_TOPIC, "topics")
    min_part = _MIN_PRODUCE_PART + (8 if with_seqnum else 0)
    entries: list[ProduceEntry] = []
    view = r.view
    for _ in range(topics_cnt):
        topic = r.str8("topic name")
        parts = r.count(r.u8("partitions_cnt"), min_part, f"partitions of {topic!r}")
        for _ in range(parts):
            partition = r.u16("partition")
            start = r.pos
            bundle_len = r.varint("bundle_len")
            base = r.u64("base_seqnum") if with_seqnum else None
            bundle = r.take(bundle_len, f"bundle of {topic}/{partition}")
            entry = None if with_seqnum else view[start:r.pos]
            entries.append(ProduceEntry(topic, partition, bundle, base, entry))
    return ProduceRequest(request_id, entries, with_seqnum, client_version, client_id, required_acks, ack_timeout)


def _parse_consume(r: Reader) -> ConsumeRequest:
    client_version = r.u16("client_version")
    request_id = r.u32("request_id")
    client_id = r.bytes8("client_id")
    max_wait = r.u64("max_wait_ms")
    min_bytes = r.u32("min_bytes")
    flags = r.u8("flags") if client_version >= CONSUME_FLAGS_VERSION else 0
    topics_cnt = r.count(r.u8("topics_cnt"), _MIN_TOPIC, "topics")
    topics: list[ConsumeTopic] = []
    unpack = _CONSUME_PART.unpack_from
    for _ in range(topics_cnt):
        name = r.str8("topic name")
        n = r.count(r.u8("partitions_cnt"), _MIN_CONSUME_PART, f"partitions of {name!r}")
        pos = r.pos
        parts = [ConsumePartition(*unpack(r.buf, pos + i * _MIN_CONSUME_PART)) for i in range(n)]
        r.pos = pos + n * _MIN_CONSUME_PART
        topics.append(ConsumeTopic(name, parts))
    return ConsumeRequest(request_id, max_wait, min_bytes, topics, client_version, client_id, flags)


def _parse_discover_partitions(r: Reader) -> DiscoverPartitionsRequest:
    request_id = r.u32("request_id")
    topic = r.str8("topic")
    if not r.remaining:
        return DiscoverPartitionsRequest(request_id, topic, None)
    if r.remaining % 2:
        raise malformed(f"{r.what}: partition list of {r.remaining} bytes is not a list of u16")
    ids = [v for (v,) in U16.iter_unpack(r.take(r.remaining, "partitions"))]
    return DiscoverPartitionsRequest(request_id, topic, ids)


def _parse_create_topic(r: Reader) -> CreateTopicRequest:
    request_id = r.u32("request_id")
    topic = r.str8("topic")
    partitions = r.u16("partitions")
    config = bytes(r.take(r.varint("config_len"), "config"))
    return CreateTopicRequest(request_id, topic, partitions, config)


def _parse_reload_conf(r: Reader) -> ReloadConfRequest:
    return ReloadConfRequest(r.u32("request_id"), r.str8("topic"), r.u16("partition"))


def _parse_status(r: Reader) -> StatusRequest:
    return StatusRequest(r.u32("request_id"))


def _parse_discover_topics(r: Reader) -> DiscoverTopicsRequest:
    request_id = r.u32("request_id")
    return DiscoverTopicsRequest(request_id, r.u8("flags") if r.remaining else 0)


def _parse_discover_topology(r: Reader) -> DiscoverTopologyRequest:
    request_id = r.u32("request_id")
    return DiscoverTopologyRequest(request_id, r.u8("flags") if r.remaining else 0)


#: What a standalone broker accepts. 0x04 (obsolete RegReplica) and 0x09 (ConsumePeer) are not here: TANK
#: closes the connection for them, as for any unknown type.
_PARSERS: dict[int, Callable[[Reader], Any]] = {
    MsgType.PRODUCE: lambda r: _parse_produce(r, False),
    MsgType.PRODUCE_WITH_SEQNUM: lambda r: _parse_produce(r, True),
    MsgType.CONSUME: _parse_consume,
    MsgType.PING: lambda r: PingEvent(),
    MsgType.DISCOVER_PARTITIONS: _parse_discover_partitions,
    MsgType.CREATE_TOPIC: _parse_create_topic,
    MsgType.RELOAD_CONF: _parse_reload_conf,
    MsgType.STATUS: _parse_status,
    MsgType.DISCOVER_TOPICS: _parse_discover_topics,
    MsgType.DISCOVER_TOPOLOGY: _parse_discover_topology,
}
REQUEST_TYPES = frozenset(_PARSERS)


def parse_request(msg_type: int, payload: bytes) -> Any:
    """The request dataclass for one frame; RemoteProtocolError(fatal=True) when it is malformed."""
    parser = _PARSERS.get(msg_type)
    if parser is None:
        raise malformed(f"unknown request type {msg_type:#04x}")
    return parser(Reader(payload, MsgType(msg_type).name))


# --- encoding (client side) ------------------------------------------------------------------------------------


def _group(items, key) -> list[tuple[Any, list]]:
    """Consecutive runs of items with the same key (the wire groups partitions by topic this way)."""
    runs: list[tuple[Any, list]] = []
    for item in items:
        k = key(item)
        if runs and runs[-1][0] == k:
            runs[-1][1].append(item)
        else:
            runs.append((k, [item]))
    return runs


def _count(n: int, field: str, limit: int = 255) -> bytes:
    if n > limit:
        raise LocalProtocolError(f"{n} {field} do not fit in one request (at most {limit})")
    return bytes((n,))


def _encode_produce(req: ProduceRequest) -> tuple[int, list]:
    out = [_PRODUCE_HEAD.pack(req.client_version, req.request_id), pack_str8(req.client_id, "client_id"),
           _PRODUCE_ACKS.pack(req.required_acks, req.ack_timeout)]
    runs = _group(req.entries, lambda e: e.topic)
    out.append(_count(len(runs), "topic runs"))
    for topic, entries in runs:
        out.append(pack_str8(topic, "topic"))
        out.append(_count(len(entries), f"partitions of {topic!r}"))
        for e in entries:
            out.append(U16.pack(e.partition))
            out.append(encode_varint(len(e.bundle)))
            if req.with_seqnum:
                if e.base_seqnum is None:
                    raise LocalProtocolError(f"ProduceWithSeqnum entry {topic}/{e.partition} needs base_seqnum")
                out.append(U64.pack(e.base_seqnum))
            out.append(e.bundle)
    return (MsgType.PRODUCE_WITH_SEQNUM if req.with_seqnum else MsgType.PRODUCE), out


def _encode_consume(req: ConsumeRequest) -> tuple[int, list]:
    out = [_PRODUCE_HEAD.pack(req.client_version, req.request_id), pack_str8(req.client_id, "client_id"),
           _CONSUME_WAIT.pack(req.max_wait_ms, req.min_bytes)]
    if req.client_version >= CONSUME_FLAGS_VERSION:
        out.append(bytes((req.flags,)))
    out.append(_count(len(req.topics), "topics"))
    for t in req.topics:
        out.append(pack_str8(t.name, "topic"))
        out.append(_count(len(t.partitions), f"partitions of {t.name!r}"))
        out.extend(_CONSUME_PART.pack(p.partition, p.seq_num, p.fetch_size) for p in t.partitions)
    return MsgType.CONSUME, out


def _encode_simple(req: Any) -> tuple[int, list]:
    if not hasattr(req, "request_id"):
        raise LocalProtocolError(f"not a TANK request: {req!r}")
    rid = _RID.pack(req.request_id)
    if isinstance(req, DiscoverPartitionsRequest):
        ids = [U16.pack(p) for p in req.partitions or ()]
        return MsgType.DISCOVER_PARTITIONS, [rid, pack_str8(req.topic, "topic"), *ids]
    if isinstance(req, CreateTopicRequest):
        config = bytes(req.config_text)
        return MsgType.CREATE_TOPIC, [rid, pack_str8(req.topic, "topic"), U16.pack(req.partitions),
                                      encode_varint(len(config)), config]
    if isinstance(req, ReloadConfRequest):
        return MsgType.RELOAD_CONF, [rid, pack_str8(req.topic, "topic"), U16.pack(req.partition)]
    if isinstance(req, StatusRequest):
        return MsgType.STATUS, [rid]
    if isinstance(req, DiscoverTopicsRequest):
        return MsgType.DISCOVER_TOPICS, [rid, bytes((req.flags,))]
    if isinstance(req, DiscoverTopologyRequest):
        return MsgType.DISCOVER_TOPOLOGY, [rid, bytes((req.flags,))]
    raise LocalProtocolError(f"not a TANK request: {req!r}")


def encode_request(req: Any) -> tuple[int, list]:
    """(msg_type, payload pieces) for a request dataclass; the connection adds the frame header."""
    if isinstance(req, ProduceRequest):
        return _encode_produce(req)
    if isinstance(req, ConsumeRequest):
        return _encode_consume(req)
    if isinstance(req, PingEvent):
        return MsgType.PING, []
    return _encode_simple(req)
