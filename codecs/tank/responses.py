"""TANK response payloads (spec §§4-6): their layouts, built by the broker (`encode_response`,
`encode_consume_response`) and parsed by clients (`parse_response`) from the same declarations (`schema`;
`repr(LAYOUT)` prints a layout's fields).

Messages, by layout name::

    Produce 0x01 (also answers 0x05): PRODUCE_RESPONSE_HEAD, then per run of consecutive entries with the same
        topic: PRODUCE_ERROR for its first entry; 0xff (unknown topic) / 0xfe (read-only) stand for the whole
        run; otherwise [LEADER if 0xfc], then PRODUCE_ERROR [+ LEADER] for each remaining entry of the run
    Consume 0x02: CONSUME_RESPONSE_HEAD (header_len), the header, then the chunks in header order:
        header = CONSUME_HEADER, topics_cnt x (CONSUME_TOPIC_HEAD, then UNKNOWN_TOPIC for an unknown topic
            (partitions_cnt echoes the request), or partitions_cnt x (CONSUME_PARTITION_HEAD, then by err_flags:
            0xff/0xfd/0xfb nothing, 0xfc LEADER, 0xfe SPARSE_CHUNK, 0x01 BOUNDARY, 0x00 CHUNK))
    DiscoverPartitions 0x06: DISCOVER_PARTITIONS_RESPONSE (PARTITION_BOUNDS)
    CreateTopic 0x07:        CREATE_TOPIC_RESPONSE
    ReloadConf 0x08:         RELOAD_CONF_RESPONSE
    Status 0x0a:             STATUS_RESPONSE
    DiscoverTopics 0x0b:     DISCOVER_TOPICS_HEAD, count x (TOPIC_INFO, or TOPIC_INFO_CLUSTER when cluster_aware)
    DiscoverTopology 0x0c:   TOPOLOGY_HEAD; count 0xffff = standalone, nothing follows; else CLUSTER_NAME,
                             count x TOPOLOGY_NODE

Produce, Consume, DiscoverTopics and DiscoverTopology are walked by hand around their layouts (runs, the chunks
after the header, counts that come before the field their items depend on). The Consume encoder returns a list
of pieces: chunks may be deferred objects (anything that is not bytes/bytearray/memoryview and has an int
`.length`: a file range the gateway sends with os.sendfile); the frame length counts them, and adjacent small
byte pieces are joined.
"""

from __future__ import annotations

import dataclasses
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
from .schema import (
    BOOL,
    ENDPOINT,
    STR8,
    U8,
    U16,
    U32,
    U64,
    Array,
    Optional,
    When,
    build_items,
    fields,
    read_items,
    record,
)
from .wire import FRAME_HEADER, Reader, malformed, runs

__all__ = [
    "RESPONSE_TYPES",
    "COALESCE_LIMIT",
    "encode_response",
    "encode_consume_response",
    "parse_response",
    "chunk_length",
    "PRODUCE_RESPONSE_HEAD",
    "PRODUCE_ERROR",
    "LEADER",
    "CONSUME_RESPONSE_HEAD",
    "CONSUME_HEADER",
    "CONSUME_TOPIC_HEAD",
    "UNKNOWN_TOPIC",
    "CONSUME_PARTITION_HEAD",
    "CHUNK",
    "SPARSE_CHUNK",
    "BOUNDARY",
    "PARTITION_BOUNDS",
    "DISCOVER_PARTITIONS_RESPONSE",
    "CREATE_TOPIC_RESPONSE",
    "RELOAD_CONF_RESPONSE",
    "STATUS_RESPONSE",
    "DISCOVER_TOPICS_HEAD",
    "TOPIC_INFO",
    "TOPIC_INFO_CLUSTER",
    "TOPOLOGY_HEAD",
    "CLUSTER_NAME",
    "TOPOLOGY_NODE",
]

UINT64_MAX = (1 << 64) - 1
#: UNKNOWN_TOPIC's marker, where a known topic's first partition id would be; also DiscoverTopology's
#: "standalone" node count.
UNKNOWN_TOPIC_MARKER = 0xFFFF
#: Produce errors written once for a whole run of one topic.
_COLLAPSED = (ProduceError.UNKNOWN_TOPIC, ProduceError.READ_ONLY)
#: err_flags after which nothing else is written for the partition.
_BARE = (ConsumeFlags.UNKNOWN_PARTITION, ConsumeFlags.NO_LEADER, ConsumeFlags.SYSTEM_ERROR)
_WITH_CHUNK = (ConsumeFlags.OK, ConsumeFlags.BOUNDARY, ConsumeFlags.SPARSE_FIRST)
#: Byte pieces up to this size are joined with their neighbours (fewer, larger sends); bigger ones are passed
#: through as they are, so an in-memory chunk of megabytes is not copied just to prepend a header.
COALESCE_LIMIT = 64 * 1024
_BYTES_LIKE = (bytes, bytearray, memoryview)
_U32_MAX = 0xFFFFFFFF

# --- layouts --------------------------------------------------------------------------------------------------

PRODUCE_RESPONSE_HEAD = fields(request_id=U32)
PRODUCE_ERROR = fields(error=U8)
LEADER = fields(leader=ENDPOINT)

CONSUME_RESPONSE_HEAD = fields(header_len=U32)
CONSUME_HEADER = fields(request_id=U32, topics_cnt=U8)
CONSUME_TOPIC_HEAD = fields(name=STR8, partitions_cnt=U8, title="topic")
UNKNOWN_TOPIC = fields(marker=U16)
CONSUME_PARTITION_HEAD = fields(partition=U16, err_flags=U8)
CHUNK = fields(base_seqnum=U64, high_water_mark=U64, chunk_len=U32)
SPARSE_CHUNK = fields(high_water_mark=U64, chunk_len=U32)  # 0xfe: the first bundle carries its own seqs
BOUNDARY = fields(base_seqnum=U64, high_water_mark=U64, chunk_len=U32, first_available=U64)  # chunk_len is 0

PARTITION_BOUNDS = record(
    PartitionBounds, first_available=U64, high_water_mark=U64,
    unavailable=When("first_available == high_water_mark == 2**64-1",
                     lambda get: get("first_available") == UINT64_MAX == get("high_water_mark"), strict=True,
                     reason=U8, leader=When("reason == 0xfc", lambda get: get("reason") == 0xFC, leader=ENDPOINT)))
DISCOVER_PARTITIONS_RESPONSE = record(DiscoverPartitionsResponse, request_id=U32, topic=STR8,
                                      partitions=Array(U16, PARTITION_BOUNDS))
CREATE_TOPIC_RESPONSE = record(CreateTopicResponse, request_id=U32, topic=STR8, error=U8)
RELOAD_CONF_RESPONSE = record(ReloadConfResponse, request_id=U32, topic=STR8, partition=U16, error=U8)
STATUS_RESPONSE = record(
    StatusResponse, request_id=U32, global_flags=U8, cluster_aware=BOOL, topics=U32, partitions=U32,
    cluster=When("cluster_aware", lambda get: get("cluster_aware"),
                 cluster_flags=U8, cluster_name=STR8, available_nodes=U32),
    tail=Optional(open_partitions=U32, open_partitions_time=U32, startup_ts=U32, version=Optional(version=U32)))

DISCOVER_TOPICS_HEAD = fields(request_id=U32, count=U32, cluster_aware=BOOL)
TOPIC_INFO = record(TopicInfo, name=STR8, enabled=BOOL, partitions=U16)
TOPIC_INFO_CLUSTER = record(TopicInfo, name=STR8, enabled=BOOL, partitions=U16, replication_factor=U8)

TOPOLOGY_HEAD = fields(request_id=U32, count=U16)
CLUSTER_NAME = fields(cluster_name=STR8)
TOPOLOGY_NODE = record(TopologyNode, node_id=U16, flags=U8,
                       endpoint=When("flags & 1", lambda get: get("flags") & 1, strict=True, endpoint=ENDPOINT),
                       partitions_replicated=U16)

# --- encoding (broker side) -------------------------------------------------------------------------------------

# The Consume encoder's structs, bound once: it runs for every fetch. The frame header and header_len are packed
# together (the struct is derived from the two declarations).
_pack_frame_head = struct.Struct(FRAME_HEADER.format + CONSUME_RESPONSE_HEAD.struct.format[1:]).pack
_pack_consume_header = CONSUME_HEADER.struct.pack
_pack_partition_head = CONSUME_PARTITION_HEAD.struct.pack
_pack_chunk = CHUNK.struct.pack


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


def _encode_produce(resp: ProduceResponse, out: list) -> None:
    out.append(PRODUCE_RESPONSE_HEAD.pack(resp.request_id))
    pack_error = PRODUCE_ERROR.struct.pack
    for topic, results in runs(resp.results, lambda r: r.topic):
        first = results[0].error
        if first in _COLLAPSED:
            if any(r.error != first for r in results):
                raise LocalProtocolError(f"error {first:#x} covers the whole run of {topic!r}; the run mixes errors")
            out.append(pack_error(first))
            continue
        for r in results:
            if r.error == ProduceError.UNKNOWN_TOPIC:
                raise LocalProtocolError(f"0xff (unknown topic) must be the first error of the run of {topic!r}")
            out.append(pack_error(r.error))
            if r.error == ProduceError.OTHER_LEADER:
                LEADER.build_values((r.leader,), out)


def encode_consume_response(resp: ConsumeResponse) -> list:
    """The whole Consume frame as pieces: bytes, and the chunks as given (deferred ones untouched)."""
    hdr = [_pack_consume_header(resp.request_id, len(resp.topics))]
    append = hdr.append
    pack_part, pack_chunk = _pack_partition_head, _pack_chunk
    chunks: list = []
    total = 0
    for t in resp.topics:
        if t.unknown:
            CONSUME_TOPIC_HEAD.build_values((t.name, t.requested_count), hdr)
            append(UNKNOWN_TOPIC.pack(UNKNOWN_TOPIC_MARKER))
            continue
        CONSUME_TOPIC_HEAD.build_values((t.name, len(t.partitions)), hdr)
        for p in t.partitions:
            e = p.error
            append(pack_part(p.partition, e))
            if e in _BARE:
                continue
            if e == ConsumeFlags.OTHER_LEADER:
                LEADER.build_values((p.leader,), hdr)
                continue
            if e not in _WITH_CHUNK:
                raise LocalProtocolError(f"{t.name}/{p.partition}: err_flags {e:#x} is not one clients understand")
            chunk = p.chunk
            length = len(chunk) if type(chunk) is bytes else chunk_length(chunk)
            if e == ConsumeFlags.BOUNDARY:
                if length:  # the C++ client does not skip a chunk after a boundary fault: it would desync
                    raise LocalProtocolError(f"{t.name}/{p.partition}: a boundary fault carries no chunk")
                append(BOUNDARY.pack(p.base_seqnum or 0, p.high_water_mark, 0, p.first_available))
                continue
            if e == ConsumeFlags.SPARSE_FIRST:
                append(SPARSE_CHUNK.pack(p.high_water_mark, length))
            else:
                append(pack_chunk(p.base_seqnum or 0, p.high_water_mark, length))
            if length:
                chunks.append(chunk)
                total += length
    header = b"".join(hdr)
    frame_len = CONSUME_RESPONSE_HEAD.size + len(header) + total
    if frame_len > _U32_MAX:
        raise LocalProtocolError(f"consume response of {frame_len} bytes does not fit a frame")
    head = _pack_frame_head(MsgType.CONSUME, frame_len, len(header)) + header
    if not chunks:
        return [head]
    if len(chunks) == 1 and type(chunks[0]) is bytes and total <= COALESCE_LIMIT:
        return [head + chunks[0]]  # a tailing consumer's answer: one small chunk, one piece
    return _coalesce([head, *chunks])


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


def _encode_discover_topics(resp: DiscoverTopicsResponse, out: list) -> None:
    out.append(DISCOVER_TOPICS_HEAD.pack(resp.request_id, len(resp.topics), resp.cluster_aware))
    if not resp.cluster_aware:
        build_items(resp.topics, TOPIC_INFO, out, "topics")
        return
    # A cluster-aware list always carries a replication factor: 0 when the topic does not say.
    topics = [t if t.replication_factor is not None else dataclasses.replace(t, replication_factor=0)
              for t in resp.topics]
    build_items(topics, TOPIC_INFO_CLUSTER, out, "topics")


def _encode_discover_topology(resp: DiscoverTopologyResponse, out: list) -> None:
    if resp.nodes is None:
        out.append(TOPOLOGY_HEAD.pack(resp.request_id, UNKNOWN_TOPIC_MARKER))
        return
    if len(resp.nodes) >= UNKNOWN_TOPIC_MARKER:
        raise LocalProtocolError(f"{len(resp.nodes)} nodes: 0xffff means standalone")
    out.append(TOPOLOGY_HEAD.pack(resp.request_id, len(resp.nodes)))
    CLUSTER_NAME.build_values((resp.cluster_name,), out)
    build_items(resp.nodes, TOPOLOGY_NODE, out, "nodes")


_ENCODERS: dict[type, tuple[int, Callable[[Any, list], Any]]] = {
    ProduceResponse: (MsgType.PRODUCE, _encode_produce),
    DiscoverPartitionsResponse: (MsgType.DISCOVER_PARTITIONS, DISCOVER_PARTITIONS_RESPONSE.build),
    CreateTopicResponse: (MsgType.CREATE_TOPIC, CREATE_TOPIC_RESPONSE.build),
    ReloadConfResponse: (MsgType.RELOAD_CONF, RELOAD_CONF_RESPONSE.build),
    StatusResponse: (MsgType.STATUS, STATUS_RESPONSE.build),
    DiscoverTopicsResponse: (MsgType.DISCOVER_TOPICS, _encode_discover_topics),
    DiscoverTopologyResponse: (MsgType.DISCOVER_TOPOLOGY, _encode_discover_topology),
}


def encode_response(resp: Any) -> tuple[int, list]:
    """(msg_type, payload pieces) for any response but Consume (see `encode_consume_response`)."""
    entry = _ENCODERS.get(type(resp))
    if entry is None:
        raise LocalProtocolError(f"not a TANK response the broker sends whole: {resp!r}")
    msg_type, encoder = entry
    out: list = []
    encoder(resp, out)
    return msg_type, out


# --- parsing (client side) --------------------------------------------------------------------------------------


def _parse_produce(r: Reader, entries_of: Callable[[int], list | None]) -> ProduceResponse:
    (request_id,) = PRODUCE_RESPONSE_HEAD.values(r)
    entries = entries_of(request_id)
    if entries is None:
        raise RemoteProtocolError(f"produce response for request {request_id}, which is not pending")
    results: list[ProduceResult] = []
    for topic, run in runs(entries, lambda e: e[0]):
        (err,) = PRODUCE_ERROR.values(r)
        if err in _COLLAPSED:
            results.extend(ProduceResult(topic, p, err) for _, p in run)
            continue
        for i, (_, partition) in enumerate(run):
            if i:
                (err,) = PRODUCE_ERROR.values(r)
            leader = LEADER.values(r)[0] if err == ProduceError.OTHER_LEADER else None
            results.append(ProduceResult(topic, partition, err, leader))
    return ProduceResponse(request_id, results)


def _parse_consume(r: Reader) -> ConsumeResponse:
    (header_len,) = CONSUME_RESPONSE_HEAD.values(r)
    r.need(header_len, "header")
    chunk_pos = r.pos + header_len
    frame_end, r.end = r.end, chunk_pos  # parse the header within its own bounds
    request_id, topics_cnt = CONSUME_HEADER.values(r)
    r.count(topics_cnt, CONSUME_TOPIC_HEAD.min_size, "topics")
    part_head, chunk, sparse_chunk, boundary = (CONSUME_PARTITION_HEAD.values, CHUNK.values, SPARSE_CHUNK.values,
                                                BOUNDARY.values)
    unknown = UNKNOWN_TOPIC.struct
    topics: list[ConsumeTopicResult] = []
    with_chunks: list[tuple[ConsumePartitionResult, int]] = []
    for _ in range(topics_cnt):
        name, cnt = CONSUME_TOPIC_HEAD.values(r)
        if r.end - r.pos >= unknown.size and unknown.unpack_from(r.buf, r.pos)[0] == UNKNOWN_TOPIC_MARKER:
            r.pos += unknown.size
            topics.append(ConsumeTopicResult(name, [], True, cnt))
            continue
        r.count(cnt, CONSUME_PARTITION_HEAD.size, f"partitions of {name!r}")
        parts = []
        for _ in range(cnt):
            partition, e = part_head(r)
            p = ConsumePartitionResult(partition, e)
            parts.append(p)
            if e in _BARE:
                continue
            if e == ConsumeFlags.OTHER_LEADER:
                (p.leader,) = LEADER.values(r)
                continue
            if e == ConsumeFlags.OK:
                p.base_seqnum, p.high_water_mark, chunk_len = chunk(r)
            elif e == ConsumeFlags.SPARSE_FIRST:
                p.base_seqnum = None
                p.high_water_mark, chunk_len = sparse_chunk(r)
            elif e == ConsumeFlags.BOUNDARY:  # its chunk_len is 0 and the C++ client does not skip one
                p.base_seqnum, p.high_water_mark, chunk_len, p.first_available = boundary(r)
                continue
            else:
                raise malformed(f"Consume: {name}/{partition}: unknown err_flags {e:#x}")
            if chunk_len:
                with_chunks.append((p, chunk_len))
        topics.append(ConsumeTopicResult(name, parts))
    r.pos, r.end = chunk_pos, frame_end
    for p, chunk_len in with_chunks:
        p.chunk = r.take(chunk_len, f"chunk of partition {p.partition}")
    return ConsumeResponse(request_id, topics)


def _parse_discover_topics(r: Reader) -> DiscoverTopicsResponse:
    request_id, count, cluster_aware = DISCOVER_TOPICS_HEAD.values(r)
    topics = read_items(r, count, TOPIC_INFO_CLUSTER if cluster_aware else TOPIC_INFO, "topics")
    return DiscoverTopicsResponse(request_id, topics, cluster_aware)


def _parse_discover_topology(r: Reader) -> DiscoverTopologyResponse:
    request_id, count = TOPOLOGY_HEAD.values(r)
    if count == UNKNOWN_TOPIC_MARKER:
        return DiscoverTopologyResponse(request_id, None)
    (name,) = CLUSTER_NAME.values(r)
    return DiscoverTopologyResponse(request_id, read_items(r, count, TOPOLOGY_NODE, "nodes"), name)


_PARSERS: dict[int, Callable[[Reader], Any]] = {
    MsgType.CONSUME: _parse_consume,
    MsgType.DISCOVER_PARTITIONS: DISCOVER_PARTITIONS_RESPONSE.parse,
    MsgType.CREATE_TOPIC: CREATE_TOPIC_RESPONSE.parse,
    MsgType.RELOAD_CONF: RELOAD_CONF_RESPONSE.parse,
    MsgType.STATUS: STATUS_RESPONSE.parse,
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
