"""TANK response payloads: built by the broker (`encode_response`, `encode_consume_response`), parsed by clients
(`parse_response`).

Layouts (spec §§4-6; all integers little-endian)::

    Produce 0x01 (also answers 0x05): request_id u32, then per run of consecutive entries with the same topic:
        err u8 for its first entry; 0xff (unknown topic) / 0xfe (read-only) stand for the whole run; otherwise
        [addr4 + port u16 if 0xfc], then err u8 [+ endpoint] for each remaining entry of the run
    Consume 0x02: header_len u32, header, then the chunks in header order:
        header = request_id u32, topics_cnt u8, per topic: name str8, partitions_cnt u8, then
            0xffff u16 for an unknown topic (partitions_cnt echoes the request), or per partition:
            partition u16, err_flags u8, and unless err_flags is 0xff/0xfd/0xfb:
                0xfc: addr4 + port u16; else [base_seqnum u64 unless 0xfe], high_water_mark u64, chunk_len u32,
                [first_available u64 if 0x01]
    DiscoverPartitions 0x06: request_id u32, topic str8, count u16,
        count x (first_available u64, high_water_mark u64, [reason u8 [+ endpoint if 0xfc] if both are 2**64-1])
    CreateTopic 0x07:  request_id u32, topic str8, err u8
    ReloadConf 0x08:   request_id u32, topic str8, partition u16, err u8
    Status 0x0a:       request_id u32, global_flags u8, cluster_aware bool, topics u32, partitions u32,
                       [cluster_flags u8, cluster_name str8, available_nodes u32 if cluster_aware],
                       [open_partitions u32, open_partitions_time u32, startup_ts u32, [version u32]]
    DiscoverTopics 0x0b:   request_id u32, n u32, cluster_aware bool,
                           n x (name str8, enabled bool, partitions u16, [replication_factor u8 if cluster_aware])
    DiscoverTopology 0x0c: request_id u32, n u16; 0xffff = standalone, nothing follows; else cluster_name str8,
                           n x (node_id u16, flags u8, [addr4 + port u16 if flags & 1], partitions_replicated u16)

The Consume encoder returns a list of pieces: chunks may be deferred objects (anything that is not
bytes/bytearray/memoryview and has an int `.length`: a file range the gateway sends with os.sendfile); the frame
length counts them, and adjacent small byte pieces are joined.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from ..errors import LocalProtocolError, RemoteProtocolError
from .messages import (
    ConsumeFlags,
    ConsumePartitionResult,
    ConsumeResponse,
    ConsumeTopicResult,
    CreateTopicResponse,
    DiscoverPartitionsResponse,
    DiscoverTopicsResponse,
    DiscoverTopologyResponse,
    MsgType,
    PartitionBounds,
    ProduceError,
    ProduceResponse,
    ProduceResult,
    ReloadConfResponse,
    StatusResponse,
    TopicInfo,
    TopologyNode,
)
from .requests import _group
from .wire import U8, U16, U32, U64, Reader, malformed, pack_endpoint, pack_str8

__all__ = ["RESPONSE_TYPES", "encode_response", "encode_consume_response", "parse_response", "chunk_length"]

UINT64_MAX = (1 << 64) - 1
_UNKNOWN_TOPIC_MARKER = 0xFFFF
_PART_HEAD = struct.Struct("<HB")  # partition, err_flags
_NODE_HEAD = struct.Struct("<HB")  # node_id, flags
_FRAME_HEAD = struct.Struct("<BII")  # msg_type, frame length, header_len (Consume)
_COLLAPSED = (ProduceError.UNKNOWN_TOPIC, ProduceError.READ_ONLY)
#: err_flags after which nothing else is written for the partition.
_BARE = (ConsumeFlags.UNKNOWN_PARTITION, ConsumeFlags.NO_LEADER, ConsumeFlags.SYSTEM_ERROR)
_WITH_CHUNK = (ConsumeFlags.OK, ConsumeFlags.BOUNDARY, ConsumeFlags.SPARSE_FIRST)
#: Byte pieces up to this size are joined with their neighbours (fewer, larger sends); bigger ones are passed
#: through as they are, so an in-memory chunk of megabytes is not copied just to prepend a header.
COALESCE_LIMIT = 64 * 1024
_BYTES_LIKE = (bytes, bytearray, memoryview)
_U32_MAX = 0xFFFFFFFF

# --- encoding (broker side) -------------------------------------------------------------------------------------


def chunk_length(chunk: Any) -> int:
    """Bytes of a chunk: len() of a bytes-like, else the deferred object's int `.length`."""
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    if isinstance(chunk, (bytes, bytearray)):
        return len(chunk)
    length = getattr(chunk, "length", None)
    if type(length) is not int or length < 0:
        raise LocalProtocolError(f"a consume chunk must be bytes-like or have an int .length >= 0: {chunk!r}")
    return length


def _encode_produce(resp: ProduceResponse) -> list:
    out = [U32.pack(resp.request_id)]
    for topic, results in _group(resp.results, lambda r: r.topic):
        first = results[0].error
        if first in _COLLAPSED:
            if any(r.error != first for r in results):
                raise LocalProtocolError(f"error {first:#x} covers the whole run of {topic!r}; the run mixes errors")
            out.append(U8.pack(first))
            continue
        for r in results:
            if r.error == ProduceError.UNKNOWN_TOPIC:
                raise LocalProtocolError(f"0xff (unknown topic) must be the first error of the run of {topic!r}")
            out.append(U8.pack(r.error))
            if r.error == ProduceError.OTHER_LEADER:
                out.append(pack_endpoint(r.leader, f"leader of {topic}/{r.partition}"))
    return out


def encode_consume_response(resp: ConsumeResponse) -> list:
    """The whole Consume frame as pieces: bytes, and the chunks as given (deferred ones untouched)."""
    hdr = [U32.pack(resp.request_id), U8.pack(len(resp.topics))]
    chunks: list = []
    total = 0
    for t in resp.topics:
        hdr.append(pack_str8(t.name, "topic"))
        if t.unknown:
            hdr.append(U8.pack(t.requested_count))
            hdr.append(U16.pack(_UNKNOWN_TOPIC_MARKER))
            continue
        hdr.append(U8.pack(len(t.partitions)))
        for p in t.partitions:
            e = p.error
            hdr.append(_PART_HEAD.pack(p.partition, e))
            if e in _BARE:
                continue
            if e == ConsumeFlags.OTHER_LEADER:
                hdr.append(pack_endpoint(p.leader, f"leader of {t.name}/{p.partition}"))
                continue
            if e not in _WITH_CHUNK:
                raise LocalProtocolError(f"{t.name}/{p.partition}: err_flags {e:#x} is not one clients understand")
            length = chunk_length(p.chunk)
            if e != ConsumeFlags.SPARSE_FIRST:
                hdr.append(U64.pack(p.base_seqnum or 0))
            hdr.append(U64.pack(p.high_water_mark))
            if e == ConsumeFlags.BOUNDARY:
                if length:  # the C++ client does not skip a chunk after a boundary fault: it would desync
                    raise LocalProtocolError(f"{t.name}/{p.partition}: a boundary fault carries no chunk")
                hdr.append(U32.pack(0))
                hdr.append(U64.pack(p.first_available))
                continue
            hdr.append(U32.pack(length))
            if length:
                chunks.append(p.chunk)
                total += length
    header = b"".join(hdr)
    frame_len = 4 + len(header) + total
    if frame_len > _U32_MAX:
        raise LocalProtocolError(f"consume response of {frame_len} bytes does not fit a frame")
    return _coalesce([_FRAME_HEAD.pack(MsgType.CONSUME, frame_len, len(header)) + header, *chunks])


def _coalesce(pieces: list) -> list:
    out: list = []
    pending: list = []
    for piece in pieces:
        if isinstance(piece, _BYTES_LIKE) and chunk_length(piece) <= COALESCE_LIMIT:
            pending.append(piece)
            continue
        if pending:
            out.append(b"".join(pending))
            pending = []
        out.append(piece)
    if pending:
        out.append(b"".join(pending))
    return out


def _encode_discover_partitions(resp: DiscoverPartitionsResponse) -> list:
    out = [U32.pack(resp.request_id), pack_str8(resp.topic, "topic"), U16.pack(len(resp.partitions))]
    for i, p in enumerate(resp.partitions):
        out.append(U64.pack(p.first_available) + U64.pack(p.high_water_mark))
        unavailable = p.first_available == UINT64_MAX and p.high_water_mark == UINT64_MAX
        if unavailable != (p.reason is not None):
            raise LocalProtocolError(f"partition {i}: a reason goes with (2**64-1, 2**64-1) and only with it")
        if unavailable:
            out.append(U8.pack(p.reason))
            if p.reason == 0xFC:
                out.append(pack_endpoint(p.leader, f"leader of partition {i}"))
    return out


def _encode_status(resp: StatusResponse) -> list:
    out = [U32.pack(resp.request_id), U8.pack(resp.global_flags), U8.pack(bool(resp.cluster_aware)),
           U32.pack(resp.topics), U32.pack(resp.partitions)]
    if resp.cluster_aware:
        out += [U8.pack(resp.cluster_flags), pack_str8(resp.cluster_name, "cluster_name"),
                U32.pack(resp.available_nodes)]
    tail = (resp.open_partitions, resp.open_partitions_time, resp.startup_ts)
    if any(v is not None for v in tail):
        if any(v is None for v in tail):
            raise LocalProtocolError("open_partitions, open_partitions_time and startup_ts go together")
        out += [U32.pack(v) for v in tail]
        if resp.version is not None:
            out.append(U32.pack(resp.version))
    elif resp.version is not None:
        raise LocalProtocolError("version needs open_partitions, open_partitions_time and startup_ts")
    return out


def _encode_discover_topics(resp: DiscoverTopicsResponse) -> list:
    out = [U32.pack(resp.request_id), U32.pack(len(resp.topics)), U8.pack(bool(resp.cluster_aware))]
    for t in resp.topics:
        out += [pack_str8(t.name, "topic"), U8.pack(bool(t.enabled)), U16.pack(t.partitions)]
        if resp.cluster_aware:
            out.append(U8.pack(t.replication_factor or 0))
    return out


def _encode_discover_topology(resp: DiscoverTopologyResponse) -> list:
    if resp.nodes is None:
        return [U32.pack(resp.request_id), U16.pack(_UNKNOWN_TOPIC_MARKER)]
    if len(resp.nodes) >= 0xFFFF:
        raise LocalProtocolError(f"{len(resp.nodes)} nodes: 0xffff means standalone")
    out = [U32.pack(resp.request_id), U16.pack(len(resp.nodes)), pack_str8(resp.cluster_name, "cluster_name")]
    for n in resp.nodes:
        out.append(_NODE_HEAD.pack(n.node_id, n.flags))
        if (n.flags & 1) != (n.endpoint is not None):
            raise LocalProtocolError(f"node {n.node_id}: flags bit 0 says whether an endpoint follows")
        if n.endpoint is not None:
            out.append(pack_endpoint(n.endpoint, f"node {n.node_id}"))
        out.append(U16.pack(n.partitions_replicated))
    return out


_ENCODERS: dict[type, tuple[int, Callable[[Any], list]]] = {
    ProduceResponse: (MsgType.PRODUCE, _encode_produce),
    DiscoverPartitionsResponse: (MsgType.DISCOVER_PARTITIONS, _encode_discover_partitions),
    CreateTopicResponse: (MsgType.CREATE_TOPIC, lambda r: [U32.pack(r.request_id), pack_str8(r.topic, "topic"),
                                                           U8.pack(r.error)]),
    ReloadConfResponse: (MsgType.RELOAD_CONF, lambda r: [U32.pack(r.request_id), pack_str8(r.topic, "topic"),
                                                         U16.pack(r.partition), U8.pack(r.error)]),
    StatusResponse: (MsgType.STATUS, _encode_status),
    DiscoverTopicsResponse: (MsgType.DISCOVER_TOPICS, _encode_discover_topics),
    DiscoverTopologyResponse: (MsgType.DISCOVER_TOPOLOGY, _encode_discover_topology),
}


def encode_response(resp: Any) -> tuple[int, list]:
    """(msg_type, payload pieces) for any response but Consume (see `encode_consume_response`)."""
    entry = _ENCODERS.get(type(resp))
    if entry is None:
        raise LocalProtocolError(f"not a TANK response the broker sends whole: {resp!r}")
    msg_type, encoder = entry
    return msg_type, encoder(resp)


# --- parsing (client side) --------------------------------------------------------------------------------------

#: The smallest consume partition entry (id + err_flags) and topic (str8 + partitions_cnt).
_MIN_CONSUME_PART = 3
_MIN_TOPIC = 2


def _parse_produce(r: Reader, entries_of: Callable[[int], list | None]) -> ProduceResponse:
    request_id = r.u32("request_id")
    entries = entries_of(request_id)
    if entries is None:
        raise RemoteProtocolError(f"produce response for request {request_id}, which is not pending")
    results: list[ProduceResult] = []
    for topic, run in _group(entries, lambda e: e[0]):
        err = r.u8("error")
        if err in _COLLAPSED:
            results.extend(ProduceResult(topic, p, err) for _, p in run)
            continue
        for i, (_, partition) in enumerate(run):
            if i:
                err = r.u8("error")
            leader = r.endpoint("leader") if err == ProduceError.OTHER_LEADER else None
            results.append(ProduceResult(topic, partition, err, leader))
    return ProduceResponse(request_id, results)


def _parse_consume(r: Reader) -> ConsumeResponse:
    header_len = r.u32("header_len")
    r.need(header_len, "header")
    chunk_pos = r.pos + header_len
    frame_end, r.end = r.end, chunk_pos  # parse the header within its own bounds
    request_id = r.u32("request_id")
    topics_cnt = r.count(r.u8("topics_cnt"), _MIN_TOPIC, "topics")
    topics: list[ConsumeTopicResult] = []
    with_chunks: list[tuple[ConsumePartitionResult, int]] = []
    for _ in range(topics_cnt):
        name = r.str8("topic name")
        cnt = r.u8("partitions_cnt")
        if r.remaining >= 2 and U16.unpack_from(r.buf, r.pos)[0] == _UNKNOWN_TOPIC_MARKER:
            r.pos += 2
            topics.append(ConsumeTopicResult(name, [], True, cnt))
            continue
        r.count(cnt, _MIN_CONSUME_PART, f"partitions of {name!r}")
        parts = []
        for _ in range(cnt):
            partition, e = r.u16("partition"), r.u8("err_flags")
            p = ConsumePartitionResult(partition, e)
            parts.append(p)
            if e in _BARE:
                continue
            if e == ConsumeFlags.OTHER_LEADER:
                p.leader = r.endpoint("leader")
                continue
            if e not in _WITH_CHUNK:
                raise malformed(f"Consume: {name}/{partition}: unknown err_flags {e:#x}")
            p.base_seqnum = None if e == ConsumeFlags.SPARSE_FIRST else r.u64("base_seqnum")
            p.high_water_mark = r.u64("high_water_mark")
            chunk_len = r.u32("chunk_len")
            if e == ConsumeFlags.BOUNDARY:  # its chunk_len is 0 and the C++ client does not skip one
                p.first_available = r.u64("first_available")
            elif chunk_len:
                with_chunks.append((p, chunk_len))
        topics.append(ConsumeTopicResult(name, parts))
    r.pos, r.end = chunk_pos, frame_end
    for p, chunk_len in with_chunks:
        p.chunk = r.take(chunk_len, f"chunk of partition {p.partition}")
    return ConsumeResponse(request_id, topics)


def _parse_discover_partitions(r: Reader) -> DiscoverPartitionsResponse:
    request_id = r.u32("request_id")
    topic = r.str8("topic")
    n = r.count(r.u16("count"), 16, "partitions")
    parts = []
    for _ in range(n):
        p = PartitionBounds(r.u64("first_available"), r.u64("high_water_mark"))
        if p.first_available == UINT64_MAX and p.high_water_mark == UINT64_MAX:
            p.reason = r.u8("reason")
            if p.reason == 0xFC:
                p.leader = r.endpoint("leader")
        parts.append(p)
    return DiscoverPartitionsResponse(request_id, topic, parts)


def _parse_status(r: Reader) -> StatusResponse:
    s = StatusResponse(r.u32("request_id"), 0, 0)
    s.global_flags = r.u8("global_flags")
    s.cluster_aware = bool(r.u8("cluster_aware"))
    s.topics, s.partitions = r.u32("topics"), r.u32("partitions")
    if s.cluster_aware:
        s.cluster_flags = r.u8("cluster_flags")
        s.cluster_name = r.str8("cluster_name")
        s.available_nodes = r.u32("available_nodes")
    if r.remaining:
        s.open_partitions = r.u32("open_partitions")
        s.open_partitions_time = r.u32("open_partitions_time")
        s.startup_ts = r.u32("startup_ts")
        if r.remaining:
            s.version = r.u32("version")
    return s


def _parse_discover_topics(r: Reader) -> DiscoverTopicsResponse:
    request_id = r.u32("request_id")
    n = r.u32("n")
    cluster_aware = bool(r.u8("cluster_aware"))
    r.count(n, 4 + cluster_aware, "topics")  # str8 + enabled + partitions [+ replication factor]
    topics = []
    for _ in range(n):
        t = TopicInfo(r.str8("name"), 0, bool(r.u8("enabled")))
        t.partitions = r.u16("partitions")
        if cluster_aware:
            t.replication_factor = r.u8("replication_factor")
        topics.append(t)
    return DiscoverTopicsResponse(request_id, topics, cluster_aware)


def _parse_discover_topology(r: Reader) -> DiscoverTopologyResponse:
    request_id = r.u32("request_id")
    n = r.u16("n")
    if n == 0xFFFF:
        return DiscoverTopologyResponse(request_id, None)
    name = r.str8("cluster_name")
    r.count(n, 5, "nodes")
    nodes = []
    for _ in range(n):
        node_id, flags = r.u16("node_id"), r.u8("flags")
        ep = r.endpoint("endpoint") if flags & 1 else None
        nodes.append(TopologyNode(node_id, flags, r.u16("partitions_replicated"), ep))
    return DiscoverTopologyResponse(request_id, nodes, name)


_PARSERS: dict[int, Callable[[Reader], Any]] = {
    MsgType.CONSUME: _parse_consume,
    MsgType.DISCOVER_PARTITIONS: _parse_discover_partitions,
    MsgType.CREATE_TOPIC: lambda r: CreateTopicResponse(r.u32("request_id"), r.str8("topic"), r.u8("error")),
    MsgType.RELOAD_CONF: lambda r: ReloadConfResponse(r.u32("request_id"), r.str8("topic"), r.u16("partition"),
                                                      r.u8("error")),
    MsgType.STATUS: _parse_status,
    MsgType.DISCOVER_TOPICS: _parse_discover_topics,
    MsgType.DISCOVER_TOPOLOGY: _parse_discover_topology,
}
#: Frames a client accepts (Ping 0x03 included: the broker's greeting).
RESPONSE_TYPES = frozenset({*_PARSERS, MsgType.PRODUCE, MsgType.PING})


def parse_response(msg_type: int, payload: bytes, entries_of: Callable[[int], list | None]) -> Any:
    """The response dataclass for one frame (not Ping). `entries_of(request_id)` gives the (topic, partition)
    list of a pending Produce request: its response is matched to the request by position."""
    what = MsgType(msg_type).name if msg_type in RESPONSE_TYPES else f"type {msg_type:#04x}"
    r = Reader(payload, what)
    if msg_type == MsgType.PRODUCE:
        return _parse_produce(r, entries_of)
    parser = _PARSERS.get(msg_type)
    if parser is None:
        raise malformed(f"unknown response type {msg_type:#04x}")
    return parser(r)
