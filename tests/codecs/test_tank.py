"""Tests of the TANK codec (logway.codecs.tank) against the real-broker captures in fixtures/tank/.

Every captured request is parsed and its fields asserted; every captured response is rebuilt from dataclasses
and compared byte for byte (the broker-set values — bundle timestamps, Status startup_ts and
open_partitions_time — are inputs taken from the capture); the captured requests are rebuilt by our client
encoder too. Frames are fed whole, one byte at a time and with trailing bytes. Bundles are checked against the
spec §7.5 vectors, and `TankFormat` against the same entries. The payload layouts (`requests`/`responses`,
declared once with `schema`) are checked for the bounds and grammar they compute.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from logway.codecs.errors import LocalProtocolError, RecordFormatError, RemoteProtocolError
from logway.codecs.records import Record
from logway.codecs.tank import (
    CLOSED,
    NEED_DATA,
    ConsumePartition,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    CreateTopicRequest,
    CreateTopicResponse,
    DiscoverPartitionsRequest,
    DiscoverPartitionsResponse,
    DiscoverTopicsRequest,
    DiscoverTopicsResponse,
    DiscoverTopologyRequest,
    DiscoverTopologyResponse,
    Endpoint,
    PartitionBounds,
    PingEvent,
    ProduceEntry,
    ProduceRequest,
    ProduceResponse,
    ProduceResult,
    ReloadConfRequest,
    ReloadConfResponse,
    StatusRequest,
    StatusResponse,
    TankClientConnection,
    TankFormat,
    TankServerConnection,
    TopicInfo,
    TopologyNode,
    choose_codec,
    count_messages,
    decode_bundle,
    decode_chunk,
    decode_varint,
    encode_bundle,
    encode_varint,
    iter_chunk,
    parse_bundle_header,
    parse_topic_config,
    valid_topic_name,
    wrap,
)
from logway.codecs.tank import requests as tank_requests
from logway.codecs.tank import responses as tank_responses
from logway.codecs.tank import schema
from logway.codecs.tank.varint import Truncated
from logway.codecs.tank.wire import Reader

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "tank"
FRAMES = json.loads((FIXTURES / "frames.json").read_text())
SECTIONS = {s["name"]: s["frames"] for s in FRAMES["sections"]}
SPEC_FRAMES = {v["name"]: bytes.fromhex(v["hex"]) for v in FRAMES["spec_vectors"]}
BUNDLES = {b["name"]: b for b in json.loads((FIXTURES / "bundles.json").read_text())["bundles"]}
PING = bytes.fromhex("0300000000")
U64_MAX = 2**64 - 1


def frames(section: str, direction: str, *, pings: bool = False) -> list[bytes]:
    return [bytes.fromhex(f["hex"]) for f in SECTIONS[section]
            if f["direction"] == direction and (pings or f["type"] != 3)]


def request(section: str, i: int = 0) -> bytes:
    return frames(section, "C>S")[i]


def response(section: str, i: int = 0) -> bytes:
    return frames(section, "S>C")[i]


def records_of(vector: dict) -> list[Record]:
    def b(v):
        return None if v is None else v.encode()
    return [Record(b(r["value"]), b(r.get("key")), r["timestamp"]) for r in vector["records"]]


def bundle(name: str) -> bytes:
    return bytes.fromhex(BUNDLES[name]["hex"])


def parse_one(frame: bytes):
    conn = TankServerConnection()
    conn.receive_data(frame)
    event = conn.next_event()
    assert conn.next_event() is NEED_DATA
    return event


# The chunk tv/0 held at capture time: the five bundles produced into it, as stored.
TV0_CHUNK = b"".join(wrap(bundle(n)) for n in ("hello", "a_bb_ccc", "keyed", "m20", "snappy40"))


# ------------------------------------------------------------------------------------------ fixture integrity


def test_frames_json_agrees_with_the_annotated_capture():
    text = (FIXTURES / "tank_wire_captures.txt").read_text()
    hexes = []
    for block in re.split(r"\nconn\d+ [a-z>-]+ type=0x[0-9a-f]{2} \(\w+\) payload_len=\d+\n", "\n" + text)[1:]:
        lines = block.split("\n")
        hexes.append("".join(ln.strip() for ln in lines if ln.startswith("    ")))
    manifest = [f["hex"] for s in FRAMES["sections"] for f in s["frames"]]
    assert hexes == manifest and len(manifest) == 73
    for s in FRAMES["sections"]:
        for f in s["frames"]:
            raw = bytes.fromhex(f["hex"])
            assert raw[0] == f["type"] and struct.unpack_from("<I", raw, 1)[0] == len(raw) - 5 == f["payload_len"]


def test_raw_capture_reads_concatenate_to_the_annotated_frames():
    reads: dict[tuple[str, str], bytes] = {}
    for line in (FIXTURES / "tank_wire_captures.raw.txt").read_text().splitlines():
        m = re.match(r"(conn\d+) (C>S|S>C) (\d+) ([0-9a-f]+)$", line)
        if m:
            data = bytes.fromhex(m.group(4))
            assert len(data) == int(m.group(3))
            reads[m.group(1), m.group(2)] = reads.get((m.group(1), m.group(2)), b"") + data
    frames_by_conn: dict[tuple[str, str], bytes] = {}
    for s in FRAMES["sections"]:
        for f in s["frames"]:
            key = (f["conn"], f["direction"])
            frames_by_conn[key] = frames_by_conn.get(key, b"") + bytes.fromhex(f["hex"])
    assert reads == frames_by_conn


def test_bundle_vectors_are_the_bundles_of_the_captured_produce_requests():
    produced = {bytes(e.bundle) for name in SECTIONS if name.startswith("produce") or name == "consume_tail"
                for f in frames(name, "C>S") if f[0] in (1, 5) for e in parse_one(f).entries}
    for name, v in BUNDLES.items():
        if name != "hello_spec":
            assert bytes.fromhex(v["hex"]) in produced, name


# ------------------------------------------------------------------------------------------ varint


@pytest.mark.parametrize("value, hexed", [
    (0, "00"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"), (16384, "808001"),
    (2097152, "80808001"), (268435456, "8080808001"), (4294967295, "ffffffff0f"),
])
def test_varint_vectors(value, hexed):
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed) + b"\xaa") == (value, len(hexed) // 2)


def test_varint_bounds():
    with pytest.raises(RecordFormatError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(RecordFormatError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(Truncated):
        decode_varint(b"\x80\x80")
    with pytest.raises(Truncated):
        decode_varint(b"\x80\x01", 0, 1)  # `end` bounds the read
    for bad in (-1, 2**32):
        with pytest.raises(ValueError):
            encode_varint(bad)


# ------------------------------------------------------------------------------------------ requests (broker side)


def test_ping_on_accept_is_what_the_broker_sent():
    captured = {bytes.fromhex(f["hex"]) for s in SECTIONS.values() for f in s if f["type"] == 3}
    assert captured == {TankServerConnection().send(PingEvent())} == {TankClientConnection().send(PingEvent())} == {
        PING}


def test_parse_produce_requests():
    hello = parse_one(request("produce_hello"))
    assert hello == ProduceRequest(1, [ProduceEntry("tv", 0, bundle("hello"))], False, 2, b"c++", 0, 0)
    assert bytes(hello.entries[0].stored()) == wrap(bundle("hello"))  # the stored entry is a view of the frame
    assert isinstance(hello.entries[0].entry, memoryview)
    for section, name in [("produce_abc", "a_bb_ccc"), ("produce_keyed", "keyed"), ("produce_20", "m20"),
                          ("produce_snappy40", "snappy40")]:
        req = parse_one(request(section))
        assert [(e.topic, e.partition, bytes(e.bundle), e.base_seqnum) for e in req.entries] == [
            ("tv", 0, bundle(name), None)]
    assert parse_one(request("produce_unknown_topic")).entries[0].topic == "nosuch"
    assert parse_one(request("produce_unknown_partition")).entries[0].partition == 9
    tail = parse_one(request("consume_tail", 1))
    assert tail.entries == [ProduceEntry("tv", 1, bundle("tailed"))]


def test_parse_produce_with_seqnum():
    req = parse_one(request("produce_sparse"))
    assert req.with_seqnum and req.request_id == 1 and req.client_id == b"c++"
    assert req.entries == [ProduceEntry("tv", 1, bundle("sparse_100_103_106_109"), 100)]
    assert req.entries[0].entry is None  # base_seqnum sits between the varint and the bundle
    assert req.entries[0].stored() == wrap(bundle("sparse_100_103_106_109"))


def test_parse_produce_with_the_same_partition_repeated():
    entries = [ProduceEntry("tv", 0, bundle("hello")), ProduceEntry("tv", 0, bundle("a_bb_ccc")),
               ProduceEntry("tv", 0, bundle("keyed")), ProduceEntry("ev", 3, bundle("m20"))]
    frame = TankClientConnection().send(ProduceRequest(9, entries))
    assert parse_one(frame).entries == entries


def test_parse_consume_requests():
    from0 = parse_one(request("consume_from_0"))
    assert from0 == ConsumeRequest(1, 0, 0, [ConsumeTopic("tv", [ConsumePartition(0, 0, 128 * 2**20)])], 2, b"", 0)
    follow = parse_one(request("consume_from_0", 1))
    assert follow.request_id == 2 and follow.topics[0].partitions == [ConsumePartition(0, 66, 128 * 2**20)]
    assert parse_one(request("consume_sparse", 1)).topics[0].partitions == [ConsumePartition(1, 110, 128 * 2**20)]
    assert parse_one(request("consume_boundary")).topics[0].partitions[0].seq_num == 1000
    assert parse_one(request("consume_unknown_topic")).topics[0].name == "nosuch"
    tail = parse_one(request("consume_tail"))
    assert (tail.max_wait_ms, tail.min_bytes) == (2**32 - 1, 0)
    assert tail.topics == [ConsumeTopic("tv", [ConsumePartition(1, U64_MAX, 128 * 2**20)])]
    assert parse_one(request("consume_tail", 2)).topics[0].partitions[0].seq_num == 111


def test_parse_consume_with_client_version_3_flags_byte():
    req = ConsumeRequest(5, 100, 1, [ConsumeTopic("a", [ConsumePartition(0, 1, 10)]),
                                     ConsumeTopic("b", [ConsumePartition(1, 2, 20), ConsumePartition(2, 3, 30)])],
                         client_version=3, flags=1)
    frame = TankClientConnection().send(req)
    assert len(frame) == len(TankClientConnection().send(ConsumeRequest(5, 100, 1, req.topics))) + 1
    assert parse_one(frame) == req
    for version in (0, 1):  # Java (0) and TankGo (1) send no flags byte
        req0 = ConsumeRequest(5, 0, 0, req.topics, client_version=version)
        assert parse_one(TankClientConnection().send(req0)) == req0


def test_parse_the_other_requests():
    ct = parse_one(request("create_topic"))
    assert ct == CreateTopicRequest(1, "tv", 2, b"") and ct.config == {} and ct.config_errors == []
    assert parse_one(request("create_topic_exists")) == ct
    assert parse_one(request("discover_partitions")) == DiscoverPartitionsRequest(1, "tv", None)
    assert parse_one(request("status")) == StatusRequest(1)
    assert parse_one(request("discover_topics")) == DiscoverTopicsRequest(1, 0)
    assert parse_one(request("discover_topology")) == DiscoverTopologyRequest(1, 0)
    assert parse_one(request("reload_conf")) == ReloadConfRequest(1, "tv", 0)
    listed = DiscoverPartitionsRequest(3, "tv", [0, 1, 7])
    assert parse_one(TankClientConnection().send(listed)) == listed


def test_create_topic_config_is_parsed():
    text = (b"retention.segments.count = 4\n# a comment\nLOG.SEGMENT.BYTES=64mb # trailing comment\n\n"
            b"no.such.key=1\nbroken line\nlog.roll.secs=\n")
    req = parse_one(TankClientConnection().send(CreateTopicRequest(2, "orders", 8, text)))
    assert (req.topic, req.partitions, req.config_text) == ("orders", 8, text)
    assert req.config == {"retention.segments.count": "4", "log.segment.bytes": "64mb"}
    assert req.unknown_config_keys == ["no.such.key"]
    assert len(req.config_errors) == 2 and "line 6" in req.config_errors[0]  # "broken line", "log.roll.secs="
    assert parse_topic_config(b"flush.secs=" + b"9" * 129)[1]  # TANK refuses values over 128 bytes
    assert parse_topic_config(b"\xff=1")[1]


def test_valid_topic_names():
    for good in ("tv", "a", "events_2024", "a-b", "A1", "x" * 64):
        assert valid_topic_name(good), good
    for bad in ("", "-a", "a_", "___", "a.b", "x" * 65, "é"):
        assert not valid_topic_name(bad), bad


def test_client_ping_is_parsed_and_ignorable():
    conn = TankServerConnection()
    conn.receive_data(PING + request("status"))
    assert conn.next_event() == PingEvent()
    assert conn.next_event() == StatusRequest(1)


# ------------------------------------------------------------------------------------------ feeding


ALL_REQUESTS = [bytes.fromhex(f["hex"]) for s in FRAMES["sections"] for f in s["frames"] if f["direction"] == "C>S"]


def _drain(conn) -> list:
    out = []
    while (ev := conn.next_event()) is not NEED_DATA and ev is not CLOSED:
        out.append(ev)
    return out


def test_requests_fed_whole_byte_by_byte_and_with_trailing_bytes():
    whole = [parse_one(f) for f in ALL_REQUESTS]
    stream = b"".join(ALL_REQUESTS)

    conn = TankServerConnection()
    conn.receive_data(stream)
    assert _drain(conn) == whole

    conn = TankServerConnection()
    got = []
    for i in range(len(stream)):
        conn.receive_data(stream[i:i + 1])
        got += _drain(conn)
    assert got == whole

    conn = TankServerConnection()
    conn.receive_data(stream + ALL_REQUESTS[0][:7])
    assert _drain(conn) == whole
    assert conn.trailing_data == (ALL_REQUESTS[0][:7], False)
    conn.receive_data(ALL_REQUESTS[0][7:])
    conn.receive_data(b"")
    assert conn.next_event() == whole[0]
    assert conn.next_event() is CLOSED


def test_client_reads_pings_and_responses_as_the_raw_capture_delivered_them():
    """Each S>C TCP read of the raw capture, fed to a client that sent the captured requests."""
    lines = (FIXTURES / "tank_wire_captures.raw.txt").read_text().splitlines()
    clients: dict[str, TankClientConnection] = {}
    events: dict[str, list] = {}
    for line in lines:
        m = re.match(r"(conn\d+) (C>S|S>C) \d+ ([0-9a-f]+)$", line)
        if not m:
            continue
        conn_id, direction, data = m.group(1), m.group(2), bytes.fromhex(m.group(3))
        client = clients.setdefault(conn_id, TankClientConnection())
        if direction == "C>S":
            server = TankServerConnection()
            server.receive_data(data)
            assert client.send(server.next_event()) == data  # our client encoder rebuilds the C++ client's bytes
        else:
            client.receive_data(data)
            events.setdefault(conn_id, []).extend(_drain(client))
    assert all(c.pings_received == 1 for c in clients.values())
    assert events["conn42"] == [ProduceResponse(1, [ProduceResult("nosuch", 0, 0xFF)])]
    assert events["conn43"] == [ProduceResponse(1, [ProduceResult("tv", 9, 1)])]
    assert events["conn40"] == [ConsumeResponse(1, [ConsumeTopicResult("tv", [ConsumePartitionResult(9, 0xFF)])])]
    assert events["conn44"] == [DiscoverPartitionsResponse(1, "tv", [PartitionBounds(1, 65), PartitionBounds(100, 109)])]
    assert events["conn48"] == [ReloadConfResponse(1, "tv", 0, 2)]
    assert sum(len(v) for v in events.values()) == len(CAPTURED_RESPONSES)


# ------------------------------------------------------------------------------------------ responses (byte-exact)


def _part(partition, error=0, base=0, hwm=0, chunk=b"", first_available=0):
    return ConsumePartitionResult(partition, error, base, hwm, chunk, first_available)


def _consume(request_id, topic, *parts):
    return ConsumeResponse(request_id, [ConsumeTopicResult(topic, list(parts))])


# (section, index among the section's non-Ping S>C frames, the response built from dataclasses)
CAPTURED_RESPONSES = [
    ("create_topic", 0, CreateTopicResponse(1, "tv", 0)),
    ("create_topic_exists", 0, CreateTopicResponse(1, "tv", 1)),
    ("produce_hello", 0, ProduceResponse(1, [ProduceResult("tv", 0)])),
    ("produce_abc", 0, ProduceResponse(1, [ProduceResult("tv", 0)])),
    ("produce_keyed", 0, ProduceResponse(1, [ProduceResult("tv", 0)])),
    ("produce_20", 0, ProduceResponse(1, [ProduceResult("tv", 0)])),
    ("produce_snappy40", 0, ProduceResponse(1, [ProduceResult("tv", 0)])),
    ("produce_sparse", 0, ProduceResponse(1, [ProduceResult("tv", 1)])),  # frame type 0x01 for a 0x05
    ("produce_unknown_topic", 0, ProduceResponse(1, [ProduceResult("nosuch", 0, 0xFF)])),
    ("produce_unknown_partition", 0, ProduceResponse(1, [ProduceResult("tv", 9, 0x01)])),
    ("consume_from_0", 0, _consume(1, "tv", _part(0, 0, 1, 65, TV0_CHUNK))),
    ("consume_from_0", 1, _consume(2, "tv", _part(0, 0, 1, 65))),  # drained: base = first available
    ("consume_sparse", 0, _consume(1, "tv", _part(1, 0xFE, None, 109, wrap(bundle("sparse_100_103_106_109"))))),
    ("consume_sparse", 1, _consume(2, "tv", _part(1, 0, 100, 103))),
    ("consume_boundary", 0, _consume(1, "tv", _part(0, 0x01, 0, 65, first_available=1))),
    ("consume_boundary", 1, _consume(2, "tv", _part(0, 0, 1, 65))),
    ("consume_unknown_partition", 0, _consume(1, "tv", _part(9, 0xFF))),
    ("consume_unknown_topic", 0, ConsumeResponse(1, [ConsumeTopicResult("nosuch", [], True, 1)])),
    ("consume_tail", 0, _consume(1, "tv", _part(1, 0, 110, 110, wrap(bundle("tailed"))))),
    ("consume_tail", 1, ProduceResponse(1, [ProduceResult("tv", 1)])),
    ("discover_partitions", 0, DiscoverPartitionsResponse(1, "tv", [PartitionBounds(1, 65), PartitionBounds(100, 109)])),
    ("status", 0, StatusResponse(1, topics=4, partitions=8, open_partitions=7, open_partitions_time=0,
                                 startup_ts=0x6B01DF10, version=400)),
    ("discover_topics", 0, DiscoverTopicsResponse(1, [TopicInfo("bench", 1), TopicInfo("tv", 2),
                                                      TopicInfo("events", 2), TopicInfo("small", 2)])),
    ("discover_topology", 0, DiscoverTopologyResponse(1, None)),
    ("reload_conf", 0, ReloadConfResponse(1, "tv", 0, 2)),
]


def test_every_captured_response_is_covered():
    covered = {(s, i) for s, i, _ in CAPTURED_RESPONSES}
    expected = {(s, i) for s in SECTIONS for i in range(len(frames(s, "S>C")))}
    assert covered == expected


@pytest.mark.parametrize("section, index, built", CAPTURED_RESPONSES,
                         ids=[f"{s}.{i}" for s, i, _ in CAPTURED_RESPONSES])
def test_responses_are_byte_exact(section, index, built):
    assert TankServerConnection().send(built) == response(section, index)


@pytest.mark.parametrize("section, index, built", CAPTURED_RESPONSES,
                         ids=[f"{s}.{i}" for s, i, _ in CAPTURED_RESPONSES])
def test_client_parses_captured_responses(section, index, built):
    client = TankClientConnection()
    client.receive_data(PING)
    if isinstance(built, ProduceResponse):
        client.send(ProduceRequest(built.request_id, [ProduceEntry(r.topic, r.partition, b"x")
                                                      for r in built.results]))
    client.receive_data(response(section, index))
    assert client.next_event() == built
    assert client.next_event() is NEED_DATA and client.pings_received == 1


def test_long_poll_timeout_response_from_the_spec():
    built = _consume(7, "events", _part(1, 0, 0, 1))
    assert TankServerConnection().send(built) == SPEC_FRAMES["consume_long_poll_timeout"]


def test_requests_built_by_our_client_are_byte_exact_with_tank_cli():
    for raw in ALL_REQUESTS:
        assert TankClientConnection().send(parse_one(raw)) == raw


def test_produce_response_runs_collapse_and_endpoints():
    results = [ProduceResult("a", 0), ProduceResult("a", 1, 0x0A), ProduceResult("b", 0, 0xFF),
               ProduceResult("b", 1, 0xFF), ProduceResult("c", 0, 0xFC, Endpoint("10.0.0.7", 11011)),
               ProduceResult("c", 1, 0xFE), ProduceResult("d", 2, 0xFE), ProduceResult("d", 3, 0xFE),
               ProduceResult("a", 5, 0xFD)]
    frame = TankServerConnection().send(ProduceResponse(3, results))
    assert frame.hex() == ("01" "11000000" "03000000" "00" "0a" "ff" "fc" "0a000007" "032b" "fe" "fe" "fd")
    client = TankClientConnection()
    client.send(ProduceRequest(3, [ProduceEntry(r.topic, r.partition, b"x") for r in results]))
    client.receive_data(frame)
    assert client.next_event() == ProduceResponse(3, results)
    with pytest.raises(LocalProtocolError, match="whole run"):
        TankServerConnection().send(ProduceResponse(1, [ProduceResult("a", 0, 0xFF), ProduceResult("a", 1, 0)]))
    with pytest.raises(LocalProtocolError, match="first error"):
        TankServerConnection().send(ProduceResponse(1, [ProduceResult("a", 0, 0), ProduceResult("a", 1, 0xFF)]))
    with pytest.raises(LocalProtocolError):
        TankServerConnection().send(ProduceResponse(1, [ProduceResult("a", 0, 0xFC)]))  # no endpoint


def test_consume_response_fault_variants_round_trip():
    built = ConsumeResponse(4, [
        ConsumeTopicResult("a", [_part(0, 0xFB), ConsumePartitionResult(1, 0xFC, leader=Endpoint("1.2.3.4", 80)),
                                 _part(2, 0xFD), _part(3, 0, 5, 9, wrap(bundle("hello"))),
                                 _part(4, 0xFE, None, 109, wrap(bundle("sparse_100_103_106_109")))]),
        ConsumeTopicResult("gone", [], True, 3),
        ConsumeTopicResult("b", [_part(0, 0x01, 0, 65, first_available=1), _part(1, 0, 7, 7)]),
    ])
    frame = TankServerConnection().send(built)
    client = TankClientConnection()
    client.receive_data(frame)
    assert client.next_event() == built


def test_other_responses_round_trip():
    cases = [
        DiscoverPartitionsResponse(1, "t", [PartitionBounds(0, 0), PartitionBounds(U64_MAX, U64_MAX, 0xFD),
                                            PartitionBounds(U64_MAX, U64_MAX, 0xFC, Endpoint("127.0.0.1", 11011))]),
        DiscoverPartitionsResponse(2, "nosuch", []),
        StatusResponse(3, 1, 2),  # no optional tail
        StatusResponse(3, 1, 2, open_partitions=1, open_partitions_time=2, startup_ts=3),  # tail without version
        StatusResponse(4, 5, 6, 0, True, 1, "prod", 3, 7, 8, 9, 400),
        DiscoverTopicsResponse(5, [TopicInfo("a", 3, False, 2)], cluster_aware=True),
        DiscoverTopologyResponse(6, [TopologyNode(1, 3, 12, Endpoint("10.1.1.1", 9)), TopologyNode(2, 6, 0)], "c"),
        CreateTopicResponse(7, "x", 10),
    ]
    for built in cases:
        client = TankClientConnection()
        client.receive_data(TankServerConnection().send(built))
        assert client.next_event() == built


# ------------------------------------------------------------------------------------------ deferred chunks


class FileRange:
    """A stand-in for the gateway's file slice: only `.length` matters to the codec."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.length = len(data)


def test_consume_encoder_keeps_deferred_chunks_and_counts_them():
    chunk_a, chunk_b = wrap(bundle("hello")), wrap(bundle("m20"))
    all_bytes = ConsumeResponse(1, [ConsumeTopicResult("t", [_part(0, 0, 1, 5, chunk_a), _part(1, 0, 6, 25, chunk_b),
                                                             _part(2, 0, 1, 1, chunk_a)])])
    expected = TankServerConnection().send(all_bytes)
    deferred = FileRange(chunk_b)
    mixed = ConsumeResponse(1, [ConsumeTopicResult("t", [_part(0, 0, 1, 5, chunk_a), _part(1, 0, 6, 25, deferred),
                                                         _part(2, 0, 1, 1, memoryview(chunk_a))])])
    assert isinstance(expected, bytes)  # in-memory chunks of a few bytes: one piece
    pieces = TankServerConnection().send(mixed)
    assert len(pieces) == 3 and pieces[1] is deferred  # header + chunk_a coalesced, the range, then chunk_a
    assert isinstance(pieces[0], bytes) and pieces[0].endswith(chunk_a)
    assert b"".join(p.data if p is deferred else bytes(p) for p in pieces) == expected
    assert struct.unpack_from("<I", pieces[0], 1)[0] == len(expected) - 5


def test_consume_encoder_passes_large_byte_chunks_through_and_checks_deferred_lengths():
    big = bytes(100_000)
    pieces = TankServerConnection().send(_consume(1, "t", _part(0, 0, 1, 1, big), _part(1, 0, 1, 1, b"ab")))
    assert pieces[1] is big and pieces[2] == b"ab" and len(pieces) == 3  # a big chunk is not copied

    class NoLength:
        pass

    class BoolLength:
        length = True

    for bad in (NoLength(), BoolLength()):
        with pytest.raises(LocalProtocolError, match="length"):
            TankServerConnection().send(_consume(1, "t", _part(0, 0, 1, 1, bad)))
    with pytest.raises(LocalProtocolError, match="boundary"):
        TankServerConnection().send(_consume(1, "t", _part(0, 0x01, 0, 1, b"xx")))
    with pytest.raises(LocalProtocolError, match="err_flags"):
        TankServerConnection().send(_consume(1, "t", _part(0, 0x02)))


# ------------------------------------------------------------------------------------------ layouts


def test_layouts_compute_their_bounds_and_grammar():
    assert tank_requests.CONSUME_PARTITION.min_size == 14 and tank_requests.CONSUME_TOPIC.min_size == 2
    assert tank_requests.PRODUCE_TOPIC.min_size == 2 and tank_requests.PRODUCE_PARTITION.size == 2
    assert tank_responses.PARTITION_BOUNDS.min_size == 16 and tank_responses.TOPOLOGY_NODE.min_size == 5
    assert (tank_responses.TOPIC_INFO.min_size, tank_responses.TOPIC_INFO_CLUSTER.min_size) == (4, 5)
    assert tank_responses.CHUNK.struct.format == "<QQI" and tank_responses.CONSUME_PARTITION_HEAD.size == 3
    assert repr(tank_requests.RELOAD_CONF_REQUEST) == (
        "<ReloadConfRequest: request_id u32, topic str8, partition u16>")
    assert "[flags u8 if client_version >= 3]" in repr(tank_requests.CONSUME_REQUEST)
    assert "[open_partitions u32, open_partitions_time u32, startup_ts u32, [version u32]]" in repr(
        tank_responses.STATUS_RESPONSE)
    # every declared layout of both modules renders its grammar
    for module in (tank_requests, tank_responses):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, schema.Layout):
                assert value.grammar and repr(value).startswith("<"), name


def test_layouts_parse_and_build_the_same_bytes():
    layout = schema.fields(a=schema.U8, name=schema.STR8, b=schema.U32, title="thing")
    data = layout.pack(7, "tv", 300)
    assert data == b"\x07\x02tv" + struct.pack("<I", 300)
    assert layout.values(Reader(data, "T")) == (7, "tv", 300)
    with pytest.raises(RemoteProtocolError, match="T: thing b needs 4 bytes, 3 left"):
        layout.values(Reader(data[:-1], "T"))
    with pytest.raises(RemoteProtocolError, match="thing name needs 2 bytes, 1 left"):
        layout.values(Reader(b"\x07\x02t", "T"))
    node = TopologyNode(1, 0, 2, Endpoint("1.2.3.4", 5))
    with pytest.raises(LocalProtocolError, match="only with flags & 1"):  # a strict When refuses what it drops
        tank_responses.TOPOLOGY_NODE.build(node, [])
    with pytest.raises(LocalProtocolError, match="go together"):  # an Optional is all or nothing
        tank_responses.STATUS_RESPONSE.build(StatusResponse(1, 1, 1, open_partitions=1), [])
    with pytest.raises(LocalProtocolError, match="only with"):
        TankServerConnection().send(DiscoverPartitionsResponse(1, "t", [PartitionBounds(0, 0, 0xFD)]))
    with pytest.raises(LocalProtocolError):
        TankServerConnection().send(DiscoverPartitionsResponse(1, "t", [PartitionBounds(U64_MAX, U64_MAX)]))
    with pytest.raises(LocalProtocolError):
        TankClientConnection().send(DiscoverTopicsRequest(1, 256))
    assert parse_one(TankClientConnection().send(DiscoverTopicsRequest(1, 0))) == DiscoverTopicsRequest(1, 0)


def test_cluster_aware_topic_lists_carry_a_replication_factor():
    built = DiscoverTopicsResponse(5, [TopicInfo("a", 3, True, None)], cluster_aware=True)
    client = TankClientConnection()
    client.receive_data(TankServerConnection().send(built))
    assert client.next_event() == DiscoverTopicsResponse(5, [TopicInfo("a", 3, True, 0)], cluster_aware=True)


def test_server_and_client_send_only_their_own_events():
    with pytest.raises(LocalProtocolError):
        TankServerConnection().send(StatusRequest(1))
    with pytest.raises(LocalProtocolError):
        TankClientConnection().send(StatusResponse(1, 1, 1))
    with pytest.raises(LocalProtocolError):
        TankClientConnection().send(b"raw bytes")


# ------------------------------------------------------------------------------------------ error paths


def _fatal(data: bytes, conn=None, match: str | None = None) -> RemoteProtocolError:
    conn = conn or TankServerConnection()
    conn.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=match) as info:
        _drain(conn)
    assert info.value.fatal
    with pytest.raises(RemoteProtocolError):  # the connection stays broken
        conn.next_event()
    conn.receive_data(request("status"))
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    return info.value


def _frame(msg_type: int, payload: bytes) -> bytes:
    return struct.pack("<BI", msg_type, len(payload)) + payload


def test_oversized_length_is_refused_before_the_body():
    _fatal(struct.pack("<BI", 1, 256 * 2**20 + 1), match="exceeds")
    conn = TankServerConnection()
    conn.receive_data(struct.pack("<BI", 1, 256 * 2**20))  # exactly 256 MiB: allowed, waits for the body
    assert conn.next_event() is NEED_DATA
    _fatal(struct.pack("<BI", 2, 1001), TankServerConnection(max_frame=1000))


@pytest.mark.parametrize("msg_type", [0x00, 0x04, 0x09, 0x0D, 0xFF])
def test_unknown_and_obsolete_types_are_fatal(msg_type):
    _fatal(_frame(msg_type, b"\x00\x01"), match="unknown")


def test_truncated_and_malformed_payloads_are_fatal():
    produce = request("produce_hello")
    payload = produce[5:]
    _fatal(_frame(1, payload[:-3]), match="bundle")  # the bundle overruns the payload
    _fatal(_frame(1, payload[:10]))
    _fatal(_frame(2, request("consume_from_0")[5:-1]))
    _fatal(_frame(7, bytes.fromhex("01000000") + b"\x02tv" + b"\x02\x00"))  # CreateTopic without config_len
    _fatal(_frame(6, bytes.fromhex("01000000027476") + b"\x00"), match="u16")  # odd partition list
    _fatal(_frame(10, b"\x01\x00"))
    _fatal(_frame(8, bytes.fromhex("0100000002") + b"tv"))


def test_absurd_counts_and_str8_overruns_are_fatal():
    head = struct.pack("<HI", 2, 1) + b"\x03c++" + struct.pack("<BI", 0, 0)
    _fatal(_frame(1, head + b"\xff" + b"\x02tv\x01"), match="cannot fit")  # 255 topics in a few bytes
    _fatal(_frame(1, head + b"\x01" + b"\x02tv\xff" + b"\x00" * 10), match="cannot fit")
    cons = struct.pack("<HI", 2, 1) + b"\x00" + struct.pack("<QI", 0, 0)
    _fatal(_frame(2, cons + b"\x01" + b"\x02tv\xff" + b"\x00" * 14), match="cannot fit")
    _fatal(_frame(1, head + b"\x01" + b"\xc8tv"), match="topic name")  # str8 of 200 with 2 bytes left
    _fatal(_frame(1, b"\x02\x00\x01\x00\x00\x00\xfa"), match="client_id")
    _fatal(_frame(1, head + b"\x01\x02tv\x01\x00\x00" + b"\x80\x80\x80\x80\x80\x01"), match="longer than 5")
    _fatal(_frame(7, bytes.fromhex("01000000027476") + b"\x01\x00" + b"\xff\xff\xff\xff\x0f"), match="config")


def test_eof_inside_a_frame_is_fatal_and_clean_eof_closes():
    conn = TankServerConnection()
    conn.receive_data(request("status")[:3])
    conn.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="truncated"):
        conn.next_event()
    conn = TankServerConnection()
    conn.receive_data(request("status")[:7])
    conn.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="truncated"):
        conn.next_event()
    conn = TankServerConnection()
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"x")


def test_client_side_errors():
    _fatal(_frame(5, b""), TankClientConnection(), match="unknown")  # a broker never sends 0x05
    client = TankClientConnection()
    client.receive_data(response("produce_hello"))  # no pending request 1
    with pytest.raises(RemoteProtocolError, match="not pending") as info:
        client.next_event()
    assert not info.value.fatal
    overrun = bytearray(response("consume_tail"))
    struct.pack_into("<I", overrun, 1, len(overrun) - 5 - 3)
    _fatal(bytes(overrun[:-3]), TankClientConnection(), match="chunk")
    hdr = bytearray(response("consume_from_0", 1))
    struct.pack_into("<I", hdr, 5, 999)  # header_len past the payload
    _fatal(bytes(hdr), TankClientConnection(), match="header")
    _fatal(_frame(0x0B, struct.pack("<II", 1, 2**32 - 1) + b"\x00"), TankClientConnection(), match="cannot fit")
    bad_flags = bytearray(response("consume_from_0", 1))
    bad_flags[20] = 0x02
    _fatal(bytes(bad_flags), TankClientConnection(), match="err_flags")


def test_encoders_refuse_what_the_wire_cannot_carry():
    conn = TankServerConnection()
    with pytest.raises(LocalProtocolError, match="str8"):
        conn.send(CreateTopicResponse(1, "x" * 256, 0))
    with pytest.raises(LocalProtocolError):
        conn.send(ReloadConfResponse(1, "tv", 70000, 0))
    with pytest.raises(LocalProtocolError):
        conn.send(StatusResponse(1, 1, 1, version=400))
    with pytest.raises(LocalProtocolError):
        conn.send(StatusRequest(1))  # a request is not a response
    with pytest.raises(LocalProtocolError):
        TankClientConnection().send(ProduceRequest(1, [ProduceEntry("t", 0, b"x")], with_seqnum=True))
    with pytest.raises(LocalProtocolError):
        TankClientConnection().send(ConsumeRequest(1, 0, 0, [ConsumeTopic(f"t{i}", []) for i in range(256)]))


# ------------------------------------------------------------------------------------------ bundles


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_bundle_vectors_encode_byte_exact(name):
    v = BUNDLES[name]
    records = records_of(v)
    assert encode_bundle(records, codec=v["codec"], sparse_seqs=v.get("sparse_seqs")) == bundle(name)
    assert choose_codec(records) == v["codec"]  # the C++ client's rule picked the codec in the capture
    assert encode_bundle(records, sparse_seqs=v.get("sparse_seqs")) == bundle(name)


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_bundle_vectors_decode(name):
    v = BUNDLES[name]
    records, last = decode_bundle(bundle(name), v.get("first_seq"))
    seqs = v.get("sparse_seqs") or [v["first_seq"] + i for i in range(len(v["records"]))]
    expected = [Record(r.value, r.key, r.timestamp, (), s - 1) for r, s in zip(records_of(v), seqs)]
    assert records == expected and last == seqs[-1]


def test_bundle_header_bits():
    assert parse_bundle_header(bundle("hello"))[:5] == (0, 1, False, 0, 0)
    assert parse_bundle_header(bundle("m20")) == (0, 20, False, 0, 0, 2)
    assert parse_bundle_header(bundle("snappy40")) == (1, 40, False, 0, 0, 2)
    assert parse_bundle_header(bundle("sparse_100_103_106_109")) == (0, 4, True, 100, 109, 10)
    recs = [Record(b"v", None, 5)] * 15
    assert encode_bundle(recs)[0] == 15 << 2 and encode_bundle(recs * 2)[:2] == b"\x00\x1e"


def test_bundle_encoding_rules():
    ts = 1_700_000_000_000
    recs = [Record(b"a", b"k", ts), Record(b"b", None, ts), Record(b"c", b"k2", ts + 1), Record(b"d", None, ts + 1)]
    data = encode_bundle(recs, codec=0)
    # flags 0x10 | msg 1: HaveKey + ts | msg 2: reuse ts | msg 3: HaveKey + new ts | msg 4: reuse ts
    assert data.hex() == ("10" + "01" + struct.pack("<Q", ts).hex() + "016b" + "0161" + "02" + "0162"
                          + "01" + struct.pack("<Q", ts + 1).hex() + "026b32" + "0163" + "02" + "0164")
    got, last = decode_bundle(data, 10)
    assert [(r.value, r.key, r.timestamp, r.offset) for r in got] == [
        (b"a", b"k", ts, 9), (b"b", None, ts, 10), (b"c", b"k2", ts + 1, 11), (b"d", None, ts + 1, 12)]
    assert last == 13
    same_ts = [Record(b"a", b"k1", ts), Record(b"b", None, ts), Record(b"c", b"k2", ts)]  # the column-wise path
    assert encode_bundle(same_ts).hex() == ("0c" + "01" + struct.pack("<Q", ts).hex() + "026b31" + "0161"
                                            + "02" + "0162" + "03" + "026b32" + "0163")
    # an empty key is no key (as in the C++ client)
    assert decode_bundle(encode_bundle([Record(b"v", b"", ts)]), 1)[0][0].key is None


def test_sparse_bundles_use_prev_plus_one_and_deltas():
    recs = [Record(bytes([65 + i]), None, 7) for i in range(5)]
    seqs = [10, 11, 12, 20, 30]
    data = encode_bundle(recs, codec=0, sparse_seqs=seqs)
    # header: 0x54 (sparse, count 5), first 10, last-first-1 = 19; msg 2 and 3: prev+1 flag / delta 7
    assert data[:10].hex() == "54" + struct.pack("<Q", 10).hex() + "13"
    assert data[10] == 0 and data[19:21].hex() == "0141"  # first message: flags 0, ts, "A"
    assert data[21:24].hex() == "060142"  # second: reuse ts + SeqNumPrevPlusOne (11 = 10 + 1), "B"
    assert data[24:27].hex() == "060143"  # third: 12 = 11 + 1
    assert data[27:31].hex() == "02070144"  # fourth: reuse ts, delta 20 - 12 - 1 = 7, "D"
    assert data[31:].hex() == "020145"  # last: no delta (the header has the last seq)
    got, last = decode_bundle(data)
    assert [r.offset + 1 for r in got] == seqs and last == 30
    one = encode_bundle(recs[:1], sparse_seqs=[42])
    assert one[:9].hex() == "44" + struct.pack("<Q", 42).hex() and decode_bundle(one)[1] == 42
    for bad in ([1, 1, 2, 3, 4], [0, 1, 2, 3, 4], [5, 4, 6, 7, 8], [1, 2, 3]):
        with pytest.raises(ValueError):
            encode_bundle(recs, sparse_seqs=bad)


def test_records_a_bundle_cannot_carry_are_refused():
    with pytest.raises(RecordFormatError, match="255"):
        encode_bundle([Record(b"v", b"k" * 256, 1)])
    long_key = encode_bundle([Record(b"v", b"k" * 255, 1)])
    assert decode_bundle(long_key, 1)[0][0].key == b"k" * 255
    with pytest.raises(RecordFormatError, match="no value"):
        encode_bundle([Record(None, b"k", 1)])
    with pytest.raises(RecordFormatError, match="headers"):
        encode_bundle([Record(b"v", None, 1, (("h", b"1"),))])
    with pytest.raises(RecordFormatError, match="timestamp"):
        encode_bundle([Record(b"v")])
    with pytest.raises(RecordFormatError, match="u64"):
        encode_bundle([Record(b"v", None, 2**64)])
    got = decode_bundle(encode_bundle([Record(b"v"), Record(b"w", None, -1)], default_timestamp=99), 1)[0]
    assert [r.timestamp for r in got] == [99, 99]
    with pytest.raises(ValueError):
        encode_bundle([])
    with pytest.raises(ValueError):
        encode_bundle([Record(b"v", None, 1)], codec=2)


def test_large_and_compressed_bundles_round_trip():
    recs = [Record(b"%05d" % i * 20, None, 1000 + i // 100) for i in range(600)]
    assert choose_codec(recs) == 1
    data = encode_bundle(recs)
    assert data[0] == 0x01 and data[1:3] == encode_varint(600)
    got, last = decode_bundle(data, 1)
    assert [(r.value, r.timestamp) for r in got] == [(r.value, r.timestamp) for r in recs] and last == 600
    big = [Record(b"z" * 70_000, b"key", 5)]
    assert decode_bundle(encode_bundle(big, codec=0), 3)[0][0].value == b"z" * 70_000


@pytest.mark.parametrize("data, match", [
    (b"\x06\x00" + bytes(8) + b"\x01a", "codec"),
    (b"\x84\x00" + bytes(8) + b"\x01a", "bit 7"),
    (b"\x00\x00", "count 0"),
    (b"\x04\x00" + bytes(8) + b"\x05ab", "ends inside"),
    (b"\x04\x00" + bytes(8) + b"\x01ab", "left after"),
    (b"\x3c\x00" + bytes(8) + b"\x01a", "cannot fit"),
    (b"\x05\x10garbage!", "decompress"),
    (b"\x05\xff\xff\xff\xff\x0f", "claims"),
    (b"\x4c" + struct.pack("<Q", 5) + b"\x00", "cannot have seqs"),  # 3 messages over seqs 5..6
    (b"\x4c" + struct.pack("<Q", 2**64 - 2) + b"\x05", "overflows"),
    (b"\x04", "cannot fit"),
    (b"\x44\x00\x00\x00", "shorter than its header"),
])
def test_malformed_bundles(data, match):
    with pytest.raises(RecordFormatError, match=match):
        decode_bundle(data, 1)


# ------------------------------------------------------------------------------------------ TankFormat


FMT = TankFormat()


def test_tank_format_scan_and_validate_on_the_vectors():
    assert FMT.name == "tank" and FMT.header_size == 24
    for name, v in BUNDLES.items():
        entry = wrap(bundle(name))
        size, base, delta, max_ts = FMT.scan(memoryview(entry), 0)
        assert size == len(entry)
        if "sparse_seqs" in v:
            assert (base, delta) == (99, 9)
        else:
            assert (base, delta) == (None, len(v["records"]) - 1)
        assert max_ts == (-1 if v["codec"] else v["records"][0]["timestamp"])
        FMT.validate(memoryview(entry))
        FMT.validate(entry)
        assert FMT.stamp(memoryview(entry), 1234) == [memoryview(entry)]
    assert FMT.wrap(b"abc") == b"\x03abc"


def test_tank_format_scan_walks_a_segment_and_needs_only_the_header():
    buf = memoryview(TV0_CHUNK)
    pos, offset, seen = 0, 0, []
    while pos < len(buf):
        size, base, delta, _ = FMT.scan(buf, pos)
        seen.append((base if base is not None else offset, delta))
        offset = (base if base is not None else offset) + delta + 1
        pos += size
    assert seen == [(0, 0), (1, 2), (4, 0), (5, 19), (25, 39)] and offset == 65
    entry = wrap(bundle("sparse_100_103_106_109"))
    header_end = 1 + 10
    for cut in range(header_end):
        assert FMT.scan(memoryview(entry[:cut]), 0) is None, cut
    assert FMT.scan(memoryview(entry[:header_end]), 0) == (33, 99, 9, -1)  # first timestamp not in view: -1
    assert FMT.scan(memoryview(entry[:header_end + 9]), 0)[3] == BUNDLES["sparse_100_103_106_109"]["records"][0][
        "timestamp"]
    assert FMT.scan(memoryview(b"\x80\x80"), 0) is None


@pytest.mark.parametrize("entry, match", [
    (b"\x80\x80\x80\x80\x80\x01", "longer than 5"),
    (b"\x00", "runs past"),  # a zero-length bundle: its header would run past it
    (b"\x02\x06\x00", "codec"),
    (b"\x02\x84\x00", "bit 7"),
    (b"\x03\x00\x00\x00", "count 0"),
    (b"\x03\x08\x00\x00", "cannot fit"),
    (b"\x01\x00", "runs past"),  # count varint needed, bundle over
    (b"\x0b\x44" + bytes(8) + b"\x00\x00", "seq 0"),
    (b"\x0a\x4c" + struct.pack("<Q", 5) + b"\x00", "cannot have seqs"),
])
def test_tank_format_scan_refuses_garbage(entry, match):
    with pytest.raises(RecordFormatError, match=match):
        FMT.scan(memoryview(entry), 0)


def test_tank_format_validate_checks_the_length_and_the_snappy_claim():
    entry = wrap(bundle("hello"))
    with pytest.raises(RecordFormatError, match="varint says"):
        FMT.validate(entry + b"\x00")
    with pytest.raises(RecordFormatError):
        FMT.validate(entry[:-1])
    with pytest.raises(RecordFormatError, match="snappy"):
        FMT.validate(wrap(b"\x01\x28\x05" + b"\x00" * 5))  # 40 messages in 5 decompressed bytes


def test_tank_format_offset_for_timestamp():
    recs = [Record(b"v%d" % i, None, 100 + 10 * i) for i in range(5)]
    entry = wrap(encode_bundle(recs))
    assert FMT.offset_for_timestamp(memoryview(entry), 50, 0) == 50
    assert FMT.offset_for_timestamp(memoryview(entry), 50, 121) == 53
    assert FMT.offset_for_timestamp(memoryview(entry), 50, 141) is None
    sparse = wrap(encode_bundle(recs, sparse_seqs=[10, 20, 30, 40, 50]))
    assert FMT.offset_for_timestamp(memoryview(sparse), 9, 125) == 39


# ------------------------------------------------------------------------------------------ chunks


def test_iter_chunk_tolerates_a_truncated_last_entry():
    entries = list(iter_chunk(TV0_CHUNK))
    assert [e.complete for e in entries] == [True] * 5
    assert [bytes(e.bundle) for e in entries] == [bundle(n) for n in ("hello", "a_bb_ccc", "keyed", "m20", "snappy40")]
    assert [e.position for e in entries] == [0, 17, 39, 56, 167]
    cut = list(iter_chunk(TV0_CHUNK[:100]))
    assert [e.complete for e in cut] == [True, True, True, False] and cut[-1].size == 111
    assert len(list(iter_chunk(TV0_CHUNK[:168]))) == 4  # cut inside the last entry's 2-byte varint
    with pytest.raises(RecordFormatError):
        list(iter_chunk(b"\xff\xff\xff\xff\xff\xff"))


def test_count_messages_reads_headers_only():
    assert count_messages(TV0_CHUNK, 1) == (65, 66, 5, len(TV0_CHUNK))
    assert count_messages(TV0_CHUNK, 1, min_seq=3).messages == 63
    assert count_messages(TV0_CHUNK, 1, max_seq=30).messages == 30
    assert count_messages(TV0_CHUNK, 1, min_seq=U64_MAX).messages == 65  # tail request: keep everything
    assert count_messages(TV0_CHUNK[:100], 1) == (5, 6, 3, 56)  # the cut-off m20 bundle is not counted
    sparse = wrap(bundle("sparse_100_103_106_109")) + wrap(bundle("tailed"))
    assert count_messages(sparse, None) == (5, 111, 2, len(sparse))
    assert count_messages(sparse, None, min_seq=104).messages == 3  # 106, 109 and 110
    with pytest.raises(RecordFormatError, match="base_seqnum"):
        count_messages(TV0_CHUNK, None)


def test_decode_chunk_like_the_cpp_client():
    got = decode_chunk(TV0_CHUNK, 1)
    assert [r.offset for r in got.records] == list(range(65)) and got.next_seq == 66 and got.need_bytes == 0
    assert got.records[4].key == b"k1" and got.records[5].value == b"m00" and got.records[64].value.endswith(b"039")
    assert [r.offset for r in decode_chunk(TV0_CHUNK, 1, min_seq=3, max_seq=10).records] == list(range(2, 10))
    partial = decode_chunk(TV0_CHUNK[:100], 1)  # inside the uncompressed m20 bundle: its complete messages count
    assert [r.value for r in partial.records][-3:] == [b"m03", b"m04", b"m05"] and partial.need_bytes == 111
    assert len(partial.records) == 11 and partial.next_seq == 12
    snappy_cut = decode_chunk(TV0_CHUNK[:-5], 1)  # a cut compressed bundle is useless until whole
    assert len(snappy_cut.records) == 25 and snappy_cut.need_bytes == 222 and snappy_cut.next_seq == 26
    sparse = decode_chunk(wrap(bundle("sparse_100_103_106_109")) + wrap(bundle("tailed")), None, min_seq=103)
    assert [r.offset + 1 for r in sparse.records] == [103, 106, 109, 110]
    assert decode_chunk(b"", 5) == ([], None, 0)
    assert decode_chunk(TV0_CHUNK, 1, min_seq=U64_MAX).next_seq == 66  # tail: keep everything


def test_client_fed_one_byte_at_a_time_with_trailing_bytes():
    client = TankClientConnection()
    got, expected = [], []
    for section, index, built in CAPTURED_RESPONSES:
        if isinstance(built, ProduceResponse):  # capture request ids repeat: one pending request at a time
            client.send(ProduceRequest(built.request_id, [ProduceEntry(r.topic, r.partition, b"x")
                                                          for r in built.results]))
        for byte in PING + response(section, index):
            client.receive_data(bytes((byte,)))
            got += _drain(client)
        expected.append(built)
    assert got == expected and client.pings_received == len(expected)
    client.receive_data(response("status")[:9])
    assert client.next_event() is NEED_DATA and client.trailing_data == (response("status")[:9], False)


# ------------------------------------------------------------------------------------------ properties

from hypothesis import given, settings, strategies as st  # noqa: E402

_record = st.builds(Record, st.binary(max_size=300), st.one_of(st.none(), st.binary(min_size=1, max_size=255)),
                    st.integers(0, 2**64 - 1))


@settings(max_examples=150, deadline=None)
@given(st.lists(_record, min_size=1, max_size=40), st.sampled_from([0, 1]), st.data())
def test_bundles_round_trip(records, codec, data):
    sparse = data.draw(st.booleans())
    seqs = None
    if sparse:
        gaps = data.draw(st.lists(st.integers(1, 2**20), min_size=len(records), max_size=len(records)))
        seqs = [sum(gaps[:i + 1]) for i in range(len(records))]
    encoded = encode_bundle(records, codec=codec, sparse_seqs=seqs)
    first = data.draw(st.integers(1, 2**40))
    got, last = decode_bundle(encoded, first)
    want_seqs = seqs or list(range(first, first + len(records)))
    assert [(r.value, r.key, r.timestamp, r.offset) for r in got] == [
        (r.value, r.key, r.timestamp, s - 1) for r, s in zip(records, want_seqs)]
    assert last == want_seqs[-1]
    entry = wrap(encoded)
    size, base, delta, _ = FMT.scan(memoryview(entry), 0)
    FMT.validate(entry)
    assert size == len(entry) and delta == want_seqs[-1] - want_seqs[0]
    assert base == (want_seqs[0] - 1 if sparse else None)
    chunk = entry + wrap(encode_bundle(records[:1], codec=0))
    count = count_messages(chunk, None if sparse else first)
    assert count.messages == len(records) + 1 and count.next_seq == want_seqs[-1] + 2
    assert [r.offset for r in decode_chunk(chunk, None if sparse else first).records] == [
        s - 1 for s in want_seqs] + [want_seqs[-1]]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_never_escapes_as_anything_but_format_errors(data):
    for fn in (lambda: decode_bundle(data, 1), lambda: FMT.validate(data), lambda: decode_chunk(data, 1),
               lambda: count_messages(data, 1)):
        try:
            fn()
        except RecordFormatError:
            pass
    info = None
    try:
        info = FMT.scan(memoryview(data), 0)
    except RecordFormatError:
        pass
    assert info is None or info[0] > 0
    for conn in (TankServerConnection(), TankClientConnection()):
        conn.receive_data(bytes([data[0] % 13]) + struct.pack("<I", len(data) - 1) + data[1:] if data else b"")
        try:
            _drain(conn)
        except RemoteProtocolError:
            pass
