"""The TANK protocol end to end: a real gateway process (`GatewayProcess`), real sockets on 127.0.0.1, our blocking
`TankClient`, and raw frames where the exact bytes matter. What a TANK 4.0 broker does is in
docs/tank.md (section numbers below refer to it).

Covers: the Ping on accept; CreateTopic (exists, invalid names and config); Produce of single, batched, keyed,
snappy and sparse (0x05) bundles, the same partition several times in one request, unknown topics/partitions;
Consume from 0, from the middle of a bundle, at EOF, from the tail with a long-poll woken by a produce on
another connection, min_bytes summed over produces and partitions, timeout answers and the timer's
normalisation, unknown topic/partition, boundary faults, a sparse first bundle (0xfe); pipelined requests
answered out of order; DiscoverPartitions, Status, DiscoverTopics, DiscoverTopology, ReloadConf; frames that
close the connection (0x04, unknown types, > 256 MiB, malformed) while other connections keep working; and
records crossing between TANK, native and Kafka clients in both storage formats.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError, TankBoundaryError, TankError
from logway.clients.native import NativeClient
from logway.clients.tank import UINT64_MAX, TankClient
from logway.codecs.records import Record
from logway.codecs.tank import (
    PING_FRAME,
    ConsumeFlags,
    ConsumeResponse,
    CreateTopicError,
    DiscoverPartitionsRequest,
    ProduceEntry,
    ProduceError,
    ProduceRequest,
    ReloadConfError,
    StatusRequest,
    StatusResponse,
    decode_chunk,
    encode_bundle,
    iter_chunk,
    wrap,
)

MiB = 1024 * 1024
TS = 1_795_284_759_461  # the capture's timestamp (ms)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("tank") / "data")
    gw = GatewayProcess(data, "storage.flush=none", "log_level=WARNING", "listeners.tank.enabled=true")
    try:
        if "tank" not in gw.addresses:
            pytest.fail(f"the gateway has no TANK listener (addresses: {sorted(gw.addresses)})")
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def tank(gateway):
    with TankClient(*gateway.addresses["tank"], timeout=10) as c:
        yield c


def new_client(gw) -> TankClient:
    return TankClient(*gw.addresses["tank"], timeout=10)


def topic_name(prefix: str = "t") -> str:
    return prefix + uuid.uuid4().hex[:12]


def make_topic(tank: TankClient, partitions: int = 1) -> str:
    name = topic_name()
    assert tank.create_topic(name, partitions) == CreateTopicError.OK
    return name


def bundle(values, *, ts=TS, keys=None, codec=0, sparse_seqs=None) -> bytes:
    keys = keys or [None] * len(values)
    stamps = ts if isinstance(ts, list) else [ts] * len(values)
    return encode_bundle([Record(v, k, t) for v, k, t in zip(values, keys, stamps)], codec=codec,
                         sparse_seqs=sparse_seqs)


def seqs(result) -> list[int]:
    return [m.seq for m in result.messages]


def one_partition(resp: ConsumeResponse, topic_index: int = 0, partition_index: int = 0):
    return resp.topics[topic_index].partitions[partition_index]


def chunk_records(p, min_seq: int = 0) -> list[Record]:
    """The records of a consume result's chunk (offset = seq - 1), filtered as the C++ client does."""
    return decode_chunk(p.chunk, p.base_seqnum, min_seq=min_seq, max_seq=p.high_water_mark).records


# -- raw frames ---------------------------------------------------------------------------------------------

def raw_connect(gw) -> socket.socket:
    s = socket.create_connection(gw.addresses["tank"], timeout=10)
    assert recv_exact(s, 5) == PING_FRAME  # spec §2: the broker speaks first
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        data = s.recv(n - len(out))
        if not data:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += data
    return bytes(out)


def read_frame(s: socket.socket) -> tuple[int, bytes]:
    msg_type, length = struct.unpack("<BI", recv_exact(s, 5))
    return msg_type, recv_exact(s, length)


def closed_within(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def assert_alive(gw) -> None:
    with new_client(gw) as c:
        assert isinstance(c.status(), StatusResponse)


# -- connection ---------------------------------------------------------------------------------------------

def test_ping_on_accept_before_any_request(gateway):
    s = socket.create_connection(gateway.addresses["tank"], timeout=5)
    try:
        assert recv_exact(s, 5) == b"\x03\x00\x00\x00\x00"
    finally:
        s.close()


def test_client_ping_is_ignored_and_consume_with_flags_byte(tank):
    topic = make_topic(tank)
    tank.send_raw(PING_FRAME)  # a Ping from a client: ignored, never answered
    assert tank.produce(topic, 0, bundle([b"x"])) == 0
    # client_version 3 carries the flags byte (spec §5.1); it must be parsed, not taken as topics_cnt
    resp = tank.consume({topic: [(0, 1, MiB)]}, client_version=3, flags=1)
    p = one_partition(resp)
    assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (0, 1, 1, wrap(bundle([b"x"])))
    assert tank.pings_received == 1


# -- CreateTopic --------------------------------------------------------------------------------------------

def test_create_topic_exists_invalid_name_and_config(tank):
    name = topic_name()
    assert tank.create_topic(name, 2, {"log.retention.secs": "3600"}) == CreateTopicError.OK
    assert tank.create_topic(name, 2) == CreateTopicError.ALREADY_EXISTS
    for bad in ("-lead", "trail_", "has space", "a" * 65, "__", "dot.ted", ""):
        assert tank.create_topic(bad, 1) == CreateTopicError.INVALID_REQUEST, bad
    assert tank.create_topic(topic_name(), 0) == CreateTopicError.INVALID_REQUEST
    assert tank.create_topic(topic_name(), 1, b"log.retention.secs=\n") == CreateTopicError.INVALID_CONFIG
    assert tank.create_topic("a" * 64, 1) in (CreateTopicError.OK, CreateTopicError.ALREADY_EXISTS)
    assert [(b.first_available, b.high_water_mark) for b in tank.discover_partitions(name)] == [(0, 0), (0, 0)]


# -- Produce and Consume --------------------------------------------------------------------------------------

def test_produce_single_message_and_consume_from_zero(tank):
    topic = make_topic(tank)
    hello = bundle([b"hello"])
    assert hello == bytes.fromhex("0400a5734fffa10100000568656c6c6f")  # spec §7.5
    assert tank.produce(topic, 0, hello) == ProduceError.OK
    p = one_partition(tank.consume({topic: [(0, 0, 128 * MiB)]}))
    # seq 0 = first available; the chunk is the stored entry, byte for byte (spec §5.2)
    assert (p.error, p.base_seqnum, p.high_water_mark) == (0, 1, 1)
    assert bytes(p.chunk) == wrap(hello)
    got = tank.get(topic, 0, 0)
    assert [(m.seq, m.key, m.value, m.timestamp) for m in got.messages] == [(1, None, b"hello", TS)]
    assert (got.next_seq, got.high_water_mark) == (2, 1)


def test_batched_keyed_snappy_bundles_keep_seqs_keys_and_timestamps(tank):
    topic = make_topic(tank)
    three = bundle([b"a", b"bb", b"ccc"])
    assert three[0] == 0x0C  # count 3 in the flags byte
    twenty = bundle([b"m%02d" % i for i in range(20)], ts=[TS + i for i in range(20)])
    assert twenty[:2] == b"\x00\x14"  # count 20 as a varint
    keyed = bundle([b"v1", b"v2"], keys=[b"k1", b"k2"], ts=TS + 100)
    snappy = bundle([b"%02d" % i + b"x" * 41 for i in range(40)], keys=[b"key%d" % i for i in range(40)],
                    ts=TS + 200, codec=1)
    assert snappy[0] & 0x03 == 1  # codec 1: raw snappy block
    bundles = [three, twenty, keyed, snappy]
    for b in bundles:
        assert tank.produce(topic, 0, b) == 0
    expected = ([(None, v, TS) for v in (b"a", b"bb", b"ccc")]
                + [(None, b"m%02d" % i, TS + i) for i in range(20)]
                + [(b"k1", b"v1", TS + 100), (b"k2", b"v2", TS + 100)]
                + [(b"key%d" % i, b"%02d" % i + b"x" * 41, TS + 200) for i in range(40)])
    got = tank.get(topic, 0, 1)
    assert [(m.key, m.value, m.timestamp) for m in got.messages] == expected
    assert seqs(got) == list(range(1, 66)) and got.next_seq == 66 and got.high_water_mark == 65
    p = one_partition(tank.consume({topic: [(0, 1, 128 * MiB)]}))
    assert bytes(p.chunk) == b"".join(wrap(b) for b in bundles)  # stored as sent, never rewritten
    # records given as values and (key, value) pairs: the client picks the codec like the C++ client
    assert tank.produce(topic, 0, [b"plain", (b"kk", b"vv")]) == 0
    tail = tank.get(topic, 0, 66)
    assert [(m.seq, m.key, m.value) for m in tail.messages] == [(66, None, b"plain"), (67, b"kk", b"vv")]


def test_same_partition_several_times_in_one_produce_and_error_runs(tank):
    topic = make_topic(tank, 2)
    b1, b2, b3, b4 = (bundle([b"one"]), bundle([b"two", b"three"]), bundle([b"p1"]), bundle([b"four"]))
    assert tank.produce_many([(topic, 0, b1), (topic, 0, b2), (topic, 1, b3), (topic, 0, b4)]) == [0, 0, 0, 0]
    got = tank.get(topic, 0, 0)
    assert [(m.seq, m.value) for m in got.messages] == [(1, b"one"), (2, b"two"), (3, b"three"), (4, b"four")]
    assert [(m.seq, m.value) for m in tank.get(topic, 1, 0).messages] == [(1, b"p1")]
    # an unknown topic answers one byte for its whole run; an unknown partition 0x01, positionally
    nosuch = topic_name("nosuch")
    errors = tank.produce_many([(topic, 0, b1), (nosuch, 0, b1), (nosuch, 1, b1), (topic, 9, b1), (topic, 1, b1)])
    assert errors == [0, ProduceError.UNKNOWN_TOPIC, ProduceError.UNKNOWN_TOPIC, ProduceError.UNKNOWN_PARTITION, 0]
    assert [(b.first_available, b.high_water_mark) for b in tank.discover_partitions(topic)] == [(1, 5), (1, 2)]


def test_unknown_topic_and_partition_on_produce_raw_bytes(gateway, tank):
    topic = make_topic(tank)
    s = raw_connect(gateway)
    try:
        # spec §10: produce nosuch/0 x -> `01 05000000 01000000 ff`; tv/9 -> `... 01`
        s.sendall(bytes.fromhex("012700000002000100000003632b2b000000000001066e6f737563680100000c0400771752ffa1"
                                "0100000178"))
        assert read_frame(s) == (0x01, bytes.fromhex("01000000ff"))
        name = topic.encode()
        body = (struct.pack("<HI", 2, 2) + b"\x03c++" + b"\x00" + struct.pack("<I", 0) + b"\x01"
                + bytes([len(name)]) + name + b"\x01" + struct.pack("<H", 9) + wrap(bundle([b"x"])))
        s.sendall(struct.pack("<BI", 0x01, len(body)) + body)
        assert read_frame(s) == (0x01, bytes.fromhex("0200000001"))
    finally:
        s.close()


def test_sparse_produce_with_seqnum_then_normal_produce_and_invalid_seqs(gateway, tank):
    topic = make_topic(tank, 2)
    values = [b"p", b"q", b"r", b"s"]
    sparse = bundle(values, sparse_seqs=[100, 103, 106, 109])
    assert sparse.hex() == ("50" "6400000000000000" "08" "00" "a5734fffa1010000" "0170" "02020171" "02020172"
                            "020173")  # spec §7.5, with our timestamp
    assert tank.produce_with_seqnum(topic, 1, values, 100, seqs=[100, 103, 106, 109]) == 0
    assert tank.produce(topic, 1, [b"next"]) == 0  # continues after the sparse bundle's last seq
    got = tank.get(topic, 1, 0)
    assert [(m.seq, m.value) for m in got.messages] == [(100, b"p"), (103, b"q"), (106, b"r"), (109, b"s"),
                                                        (110, b"next")]
    assert (got.next_seq, got.high_water_mark) == (111, 110)
    assert [(b.first_available, b.high_water_mark) for b in tank.discover_partitions(topic)] == [(0, 0), (100, 110)]
    # an explicit seq at or below the high-water mark: 0x0a, and nothing is appended
    assert tank.produce_with_seqnum(topic, 1, [b"dup"], 110) == ProduceError.INVALID_SEQNUM
    assert tank.produce_with_seqnum(topic, 1, [b"old"], 50) == ProduceError.INVALID_SEQNUM
    assert tank.produce(topic, 1, bundle([b"late"], sparse_seqs=[105])) == ProduceError.INVALID_SEQNUM
    assert tank.discover_partitions(topic)[1].high_water_mark == 110
    # a gap is allowed
    assert tank.produce_with_seqnum(topic, 1, [b"gap1", b"gap2"], 120) == 0
    assert [(m.seq, m.value) for m in tank.get(topic, 1, 111).messages] == [(120, b"gap1"), (121, b"gap2")]
    assert tank.produce(topic, 1, [b"after"]) == 0
    assert tank.get(topic, 1, 122).messages[0].seq == 122


def test_produce_with_seqnum_of_a_plain_bundle_keeps_its_explicit_seqs(tank):
    """Spec §4.4: TANK trusts base_seqnum but stores no seqs, so its readers disagree with its counters. A
    Python broker should refuse such an entry or store it with its explicit base; either way readers and
    counters must agree."""
    topic = make_topic(tank)
    assert tank.produce(topic, 0, [b"first"]) == 0
    err = tank.produce_with_seqnum(topic, 0, bundle([b"x", b"y"]), 500)
    assert tank.produce(topic, 0, [b"z"]) == 0
    got = tank.get(topic, 0, 0)
    if err == 0:
        assert [(m.seq, m.value) for m in got.messages] == [(1, b"first"), (500, b"x"), (501, b"y"), (502, b"z")]
    else:
        assert [(m.seq, m.value) for m in got.messages] == [(1, b"first"), (2, b"z")]
    assert got.high_water_mark == got.messages[-1].seq


def test_sparse_first_bundle_is_flagged_0xfe_and_seqs_come_from_its_header(tank):
    topic = make_topic(tank)
    sparse = bundle([b"p", b"q", b"r", b"s"], sparse_seqs=[100, 103, 106, 109])
    assert tank.produce_with_seqnum(topic, 0, sparse, 100) == 0
    p = one_partition(tank.consume({topic: [(0, 0, 128 * MiB)]}))
    assert (p.error, p.base_seqnum, p.high_water_mark) == (ConsumeFlags.SPARSE_FIRST, None, 109)
    assert bytes(p.chunk) == wrap(sparse)
    # from inside the sparse bundle: the chunk still starts with it, the client drops what is below
    p = one_partition(tank.consume({topic: [(0, 104, 128 * MiB)]}))
    assert p.error == ConsumeFlags.SPARSE_FIRST and bytes(p.chunk) == wrap(sparse)
    assert seqs(tank.get(topic, 0, 104)) == [106, 109]


def test_sparse_seq_below_first_available_is_a_boundary_fault(tank):
    topic = make_topic(tank)
    assert tank.produce_with_seqnum(topic, 0, [b"a", b"b"], 100) == 0
    p = one_partition(tank.consume({topic: [(0, 50, MiB)]}))
    assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk), p.first_available) == (1, 0, 101, b"", 100)
    with pytest.raises(TankBoundaryError) as info:
        tank.get(topic, 0, 50)
    assert (info.value.first_available, info.value.high_water_mark) == (100, 101)


def test_consume_from_the_middle_of_a_bundle(tank):
    topic = make_topic(tank)
    first, second = bundle([b"m%d" % i for i in range(1, 11)]), bundle([b"m%d" % i for i in range(11, 16)])
    assert tank.produce_many([(topic, 0, first), (topic, 0, second)]) == [0, 0]
    p = one_partition(tank.consume({topic: [(0, 7, 128 * MiB)]}))
    # the chunk starts with the bundle holding seq 7; base_seqnum is that bundle's first seq
    assert (p.error, p.base_seqnum, p.high_water_mark) == (0, 1, 15)
    assert bytes(p.chunk) == wrap(first) + wrap(second)
    got = tank.get(topic, 0, 7)
    assert [(m.seq, m.value) for m in got.messages] == [(i, b"m%d" % i) for i in range(7, 16)]
    p = one_partition(tank.consume({topic: [(0, 12, 128 * MiB)]}))
    assert (p.base_seqnum, bytes(p.chunk)) == (11, wrap(second))
    assert seqs(tank.get(topic, 0, 15)) == [15]


def test_chunks_hold_whole_bundles_at_least_one_whatever_the_fetch_size(tank):
    topic = make_topic(tank)
    big = bundle([b"%03d" % i + b"y" * 60 for i in range(300)], codec=1)
    small = [bundle([b"s%d" % i]) for i in range(5)]
    assert tank.produce(topic, 0, big) == 0
    for b in small:
        assert tank.produce(topic, 0, b) == 0
    p = one_partition(tank.consume({topic: [(0, 1, 10)]}))  # fetch_size far below one bundle
    entries = list(iter_chunk(p.chunk))
    assert entries and all(e.complete for e in entries)
    assert bytes(entries[0].bundle) == big and p.base_seqnum == 1
    p = one_partition(tank.consume({topic: [(0, 301, len(wrap(small[0])) + 1)]}))
    entries = list(iter_chunk(p.chunk))
    assert all(e.complete for e in entries) and 1 <= len(entries) <= 2 and p.base_seqnum == 301
    p = one_partition(tank.consume({topic: [(0, 302, 0)]}))  # even a fetch size of 0 gets a bundle
    assert p.base_seqnum == 302 and bytes(next(iter_chunk(p.chunk)).bundle) == small[1]
    got = tank.get(topic, 0, 150, fetch_size=16)
    assert seqs(got) == list(range(150, 301)) and got.next_seq == 301


def test_consume_at_eof_without_wait_answers_first_available(tank):
    topic = make_topic(tank, 2)
    assert tank.produce(topic, 0, [b"a", b"b", b"c"]) == 0
    resp = tank.consume({topic: [(0, 4, MiB), (1, 0, MiB)]})
    p0, p1 = resp.topics[0].partitions
    # spec §5.4: an EOF partition in an immediate answer carries base = first available, chunk_len 0
    assert (p0.partition, p0.error, p0.base_seqnum, p0.high_water_mark, bytes(p0.chunk)) == (0, 0, 1, 3, b"")
    assert (p1.partition, p1.error, p1.base_seqnum, p1.high_water_mark, bytes(p1.chunk)) == (1, 0, 0, 0, b"")
    got = tank.get(topic, 0, UINT64_MAX)
    assert got.messages == [] and got.next_seq == 4


def test_unknown_topic_and_unknown_partition_on_consume(gateway, tank):
    topic = make_topic(tank)
    x = bundle([b"x"])
    assert tank.produce(topic, 0, x) == 0
    nosuch = topic_name("nosuch")
    resp = tank.consume({nosuch: [(0, 0, MiB), (1, 0, MiB)], topic: [(9, 0, MiB), (0, 1, MiB)]})
    unknown, known = resp.topics
    assert (unknown.name, unknown.unknown, unknown.requested_count, unknown.partitions) == (nosuch, True, 2, [])
    assert [(p.partition, p.error) for p in known.partitions] == [(9, ConsumeFlags.UNKNOWN_PARTITION), (0, 0)]
    assert (known.partitions[1].base_seqnum, bytes(known.partitions[1].chunk)) == (1, wrap(x))
    with pytest.raises(TankError) as info:
        tank.get(nosuch, 0, 0)
    assert info.value.code == 0xFF
    s = raw_connect(gateway)
    try:  # spec §10, byte for byte: `02 13000000 0f000000 01000000 01 066e6f73756368 01 ffff`
        s.sendall(bytes.fromhex("022a0000000200010000000000000000000000000000000001066e6f737563680100000000000000"
                                "00000000000008"))
        assert read_frame(s) == (0x02, bytes.fromhex("0f0000000100000001066e6f7375636801ffff"))
    finally:
        s.close()


def test_boundary_faults_above_the_high_water_mark(tank):
    topic = make_topic(tank)
    assert tank.produce(topic, 0, [b"%d" % i for i in range(5)]) == 0
    for seq in (7, 1000):
        p = one_partition(tank.consume({topic: [(0, seq, MiB)]}))
        # spec §5.2: `01 | base 0 | hwm | chunk_len 0 | first_available`
        assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk), p.first_available) == (1, 0, 5, b"", 1)
    with pytest.raises(TankBoundaryError) as info:
        tank.get(topic, 0, 1000)
    assert (info.value.first_available, info.value.high_water_mark) == (1, 5)
    # seq = hwm + 1 is EOF, not a fault
    p = one_partition(tank.consume({topic: [(0, 6, MiB)]}))
    assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (0, 1, 5, b"")


# -- long-poll ------------------------------------------------------------------------------------------------

def test_tail_long_poll_woken_by_a_produce_on_another_connection(gateway, tank):
    topic = make_topic(tank)
    assert tank.produce(topic, 0, [b"before"]) == 0
    with new_client(gateway) as producer:
        for explicit in (False, True):  # UINT64_MAX, then lastAssigned + 1
            hwm = tank.discover_partitions(topic)[0].high_water_mark
            tail_seq = hwm + 1 if explicit else UINT64_MAX
            rid = tank.send(tank.consume_request({topic: [(0, tail_seq, MiB)]}, max_wait_ms=10_000))
            with pytest.raises(TimeoutError):
                tank.receive(rid, timeout=0.3)  # parked: every partition is at EOF
            tailed = bundle([b"tailed-%d" % hwm])
            t0 = time.monotonic()
            assert producer.produce(topic, 0, tailed) == 0
            p = one_partition(tank.receive(rid, timeout=5))
            assert time.monotonic() - t0 < 2
            assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (0, hwm + 1, hwm + 1,
                                                                                   wrap(tailed))
    # get(): a tail request with nothing delivered asks hwm + 1 next
    got = tank.get(topic, 0, UINT64_MAX, max_wait_ms=0)
    assert got.messages == [] and got.next_seq == 4


def test_long_poll_on_an_empty_partition_from_seq_zero(gateway, tank):
    topic = make_topic(tank)
    rid = tank.send(tank.consume_request({topic: [(0, 0, MiB)]}, max_wait_ms=10_000))
    with pytest.raises(TimeoutError):
        tank.receive(rid, timeout=0.3)
    with new_client(gateway) as producer:
        assert producer.produce(topic, 0, [b"first"]) == 0
    p = one_partition(tank.receive(rid, timeout=5))
    assert (p.error, p.base_seqnum, p.high_water_mark) == (0, 1, 1)
    assert [r.value for r in chunk_records(p)] == [b"first"]


def test_min_bytes_accumulates_across_produces(gateway, tank):
    topic = make_topic(tank)
    entry = wrap(bundle([b"0123456789"]))
    assert len(entry) == 22  # as in the spec's verified run (§5.4)
    rid = tank.send(tank.consume_request({topic: [(0, UINT64_MAX, MiB)]}, max_wait_ms=20_000, min_bytes=100))
    with new_client(gateway) as producer:
        for i in range(4):
            assert producer.produce(topic, 0, entry[1:]) == 0
            with pytest.raises(TimeoutError):
                tank.receive(rid, timeout=0.2)  # 22 * (i + 1) < 100 bytes captured
        assert producer.produce(topic, 0, entry[1:]) == 0
        p = one_partition(tank.receive(rid, timeout=5))
    assert (p.error, p.base_seqnum, p.high_water_mark) == (0, 1, 5)
    assert bytes(p.chunk) == entry * 5  # 110 bytes: every appended bundle since the request parked


def test_min_bytes_accumulates_across_partitions_of_one_request(gateway, tank):
    topic = make_topic(tank, 2)
    b = bundle([b"0123456789"])
    rid = tank.send(tank.consume_request({topic: [(0, UINT64_MAX, MiB), (1, 1, MiB)]}, max_wait_ms=20_000,
                                         min_bytes=60))
    with new_client(gateway) as producer:
        assert producer.produce(topic, 0, b) == 0
        assert producer.produce(topic, 1, b) == 0
        with pytest.raises(TimeoutError):
            tank.receive(rid, timeout=0.3)  # 44 bytes over two partitions
        assert producer.produce(topic, 0, b) == 0  # 66 >= 60
        resp = tank.receive(rid, timeout=5)
    p0, p1 = resp.topics[0].partitions
    assert (p0.partition, p0.error, p0.base_seqnum, p0.high_water_mark, bytes(p0.chunk)) == (0, 0, 1, 2,
                                                                                              wrap(b) * 2)
    assert (p1.partition, p1.error, p1.base_seqnum, p1.high_water_mark, bytes(p1.chunk)) == (1, 0, 1, 1, wrap(b))


def test_wake_up_answer_lists_every_parked_partition_and_ignores_fetch_size(gateway, tank):
    topic = make_topic(tank, 3)
    assert tank.produce(topic, 2, [b"old"]) == 0
    big = bundle([b"%04d" % i + b"w" * 200 for i in range(20)])  # ~4 KiB, far above the fetch size
    rid = tank.send(tank.consume_request({topic: [(0, 0, 16), (1, UINT64_MAX, 16), (2, 2, 16)]},
                                         max_wait_ms=20_000))
    with pytest.raises(TimeoutError):
        tank.receive(rid, timeout=0.3)
    with new_client(gateway) as producer:
        assert producer.produce(topic, 1, big) == 0
    resp = tank.receive(rid, timeout=5)
    p0, p1, p2 = resp.topics[0].partitions
    # spec §5.4: appended bytes whatever fetch_size; partitions with nothing appended: base 0, hwm, no chunk
    assert (p1.partition, p1.error, p1.base_seqnum, p1.high_water_mark, bytes(p1.chunk)) == (1, 0, 1, 20,
                                                                                              wrap(big))
    assert (p0.partition, p0.error, p0.base_seqnum, p0.high_water_mark, bytes(p0.chunk)) == (0, 0, 0, 0, b"")
    assert (p2.partition, p2.error, p2.base_seqnum, p2.high_water_mark, bytes(p2.chunk)) == (2, 0, 0, 1, b"")


def test_past_the_parked_limit_of_a_connection_a_consume_gets_the_timers_answer_at_once(gateway, tank):
    """A connection may park MAX_PARKED_PER_CONNECTION consumes; the next is answered at once as its timer would
    answer it (no data, the high-water mark), and the parked ones still wake when data comes."""
    from logway.gateway.protocols.tank import MAX_PARKED_PER_CONNECTION

    topic = make_topic(tank, 1)
    assert tank.produce(topic, 0, [b"a", b"b"]) == 0
    at_end = tank.consume_request({topic: [(0, 3, MiB)]}, max_wait_ms=20_000)
    parked = [tank.send(at_end) for _ in range(MAX_PARKED_PER_CONNECTION)]
    t0 = time.monotonic()
    over = tank.send(at_end)
    p = one_partition(tank.receive(over, timeout=5))
    assert (p.error, p.high_water_mark, bytes(p.chunk)) == (0, 2, b"")
    assert time.monotonic() - t0 < 5
    with new_client(gateway) as producer:
        assert producer.produce(topic, 0, [b"c"]) == 0
    for rid in parked:
        p = one_partition(tank.receive(rid, timeout=10))
        assert (p.high_water_mark, [r.value for r in chunk_records(p, 3)]) == (3, [b"c"])


@pytest.mark.parametrize("tail_seq", [UINT64_MAX, 1], ids=["uint64-max", "last-assigned-plus-one"])
def test_a_produce_right_behind_a_long_poll_on_the_same_connection_wakes_it(tank, tail_seq):
    """The Consume parks (its partition is at EOF), then the Produce that follows it in the same TCP segment
    appends: that append belongs to the parked request, as in TANK where the EOF check and the wait context
    are one step. It must be answered with the message, not after max_wait with an empty timeout answer."""
    topic = make_topic(tank)
    poll, consume_frame = tank.prepare(tank.consume_request({topic: [(0, tail_seq, MiB)]}, max_wait_ms=3_000))
    produce, produce_frame = tank.prepare(ProduceRequest(0, [ProduceEntry(topic, 0, bundle([b"self"]))]))
    t0 = time.monotonic()
    tank.send_raw(consume_frame + produce_frame)  # one write: the broker reads both frames at once
    assert [r.error for r in tank.receive(produce, timeout=5).results] == [0]
    p = one_partition(tank.receive(poll, timeout=5))
    elapsed = time.monotonic() - t0
    assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (0, 1, 1, wrap(bundle([b"self"]))), \
        f"answered after {elapsed:.2f} s"
    assert elapsed < 1


def test_a_produce_right_after_a_long_poll_from_another_connection_wakes_it(gateway, tank):
    """A tailing consumer re-polls at seq = next while a producer on another connection appends at the same
    moment: whichever the broker handles first, the consumer gets the message at once (never the empty answer
    of a timer that ran while its wake-up was missed)."""
    topic = make_topic(tank)
    with new_client(gateway) as producer:
        for seq in range(1, 61):
            poll, consume_frame = tank.prepare(tank.consume_request({topic: [(0, seq, MiB)]}, max_wait_ms=3_000))
            produce, produce_frame = producer.prepare(
                ProduceRequest(0, [ProduceEntry(topic, 0, bundle([b"m%d" % seq]))]))
            t0 = time.monotonic()
            tank.send_raw(consume_frame)
            producer.send_raw(produce_frame)
            assert [r.error for r in producer.receive(produce, timeout=5).results] == [0]
            p = one_partition(tank.receive(poll, timeout=5))
            elapsed = time.monotonic() - t0
            assert (p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (seq, seq, wrap(bundle([b"m%d" % seq]))), \
                f"round {seq}: answered after {elapsed:.2f} s with {len(p.chunk)} chunk bytes"


def test_min_bytes_not_reached_times_out_without_data(gateway, tank):
    topic = make_topic(tank)
    assert tank.produce(topic, 0, [b"a", b"b", b"c"]) == 0
    rid = tank.send(tank.consume_request({topic: [(0, 4, MiB)]}, max_wait_ms=500, min_bytes=10_000))
    with new_client(gateway) as producer:
        assert producer.produce(topic, 0, [b"d"]) == 0
    p = one_partition(tank.receive(rid, timeout=5))
    # spec §5.4: the timeout answer carries no data: err 0, base 0, the current hwm, chunk_len 0
    assert (p.error, p.base_seqnum, p.high_water_mark, bytes(p.chunk)) == (0, 0, 4, b"")


@pytest.mark.parametrize("max_wait_ms, low, high", [(500, 0.5, 0.8), (100, 0.32, 0.6)])
def test_timeout_answer_and_timer_normalisation(tank, max_wait_ms, low, high):
    """max_wait is rounded up to 64 ms with a 320 ms floor, and the expiry up to a multiple of 128 ms: 500 ms
    answers after 0.512-0.640 s (observed about 0.6 s), 100 ms after 0.320-0.448 s."""
    topic = make_topic(tank, 2)
    assert tank.produce(topic, 1, [b"x", b"y"]) == 0
    t0 = time.monotonic()
    resp = tank.consume({topic: [(0, 0, MiB), (1, UINT64_MAX, MiB)]}, max_wait_ms=max_wait_ms)
    elapsed = time.monotonic() - t0
    assert low <= elapsed <= high, elapsed
    p0, p1 = resp.topics[0].partitions
    assert (p0.partition, p0.error, p0.base_seqnum, p0.high_water_mark, bytes(p0.chunk)) == (0, 0, 0, 0, b"")
    assert (p1.partition, p1.error, p1.base_seqnum, p1.high_water_mark, bytes(p1.chunk)) == (1, 0, 0, 2, b"")


def test_a_partition_with_data_answers_at_once_whatever_max_wait(tank):
    topic = make_topic(tank, 2)
    assert tank.produce(topic, 1, [b"ready"]) == 0
    t0 = time.monotonic()
    resp = tank.consume({topic: [(0, 0, MiB), (1, 1, MiB)]}, max_wait_ms=5_000, min_bytes=1 << 20)
    assert time.monotonic() - t0 < 1
    p0, p1 = resp.topics[0].partitions
    assert (p0.error, p0.base_seqnum, bytes(p0.chunk)) == (0, 0, b"")
    assert (p1.error, p1.base_seqnum, p1.high_water_mark) == (0, 1, 1) and len(p1.chunk)
    # an EOF partition with data before it, next to a partition with an error: base = first available
    assert tank.produce(topic, 0, [b"a", b"b"]) == 0
    t0 = time.monotonic()
    resp = tank.consume({topic: [(0, 3, MiB), (7, 0, MiB)]}, max_wait_ms=5_000)
    assert time.monotonic() - t0 < 1
    p0, p7 = resp.topics[0].partitions
    assert (p0.error, p0.base_seqnum, p0.high_water_mark, bytes(p0.chunk)) == (0, 1, 2, b"")
    assert (p7.partition, p7.error) == (7, ConsumeFlags.UNKNOWN_PARTITION)


# -- pipelining -----------------------------------------------------------------------------------------------

def test_pipelined_requests_long_poll_answered_after_later_requests(gateway, tank):
    topic = make_topic(tank, 2)
    poll = tank.send(tank.consume_request({topic: [(0, UINT64_MAX, MiB)]}, max_wait_ms=10_000))
    status = tank.send(StatusRequest(0))
    discover = tank.send(DiscoverPartitionsRequest(0, topic))
    first, second = tank.receive(timeout=5), tank.receive(timeout=5)
    assert {first.request_id, second.request_id} == {status, discover}
    with pytest.raises(TimeoutError):
        tank.receive(timeout=0.3)
    # a second long poll on the same connection, on the other partition; woken first
    poll1 = tank.send(tank.consume_request({topic: [(1, UINT64_MAX, MiB)]}, max_wait_ms=10_000))
    with new_client(gateway) as producer:
        assert producer.produce(topic, 1, [b"to-one"]) == 0
        answer = tank.receive(timeout=5)
        assert answer.request_id == poll1 and one_partition(answer).partition == 1
        assert producer.produce(topic, 0, [b"to-zero"]) == 0
        answer = tank.receive(timeout=5)
    assert answer.request_id == poll and isinstance(answer, ConsumeResponse)
    assert [r.value for r in chunk_records(one_partition(answer))] == [b"to-zero"]


def test_pipelined_produces_and_consumes_keep_their_order(tank):
    topic = make_topic(tank)
    rids = []
    for i in range(20):
        rids.append(tank.send(tank.consume_request({topic: [(0, 1, MiB)]})) if i % 5 == 4 else None)
        rid, frame = tank.prepare(ProduceRequest(0, [ProduceEntry(topic, 0, bundle([b"%d" % i]))]))
        tank.send_raw(frame)
        rids.append(rid)
    for rid in [r for r in rids if r is not None]:
        resp = tank.receive(rid, timeout=5)
        if isinstance(resp, ConsumeResponse):
            assert one_partition(resp).error == 0
        else:
            assert [r.error for r in resp.results] == [0]
    assert [(m.seq, m.value) for m in tank.get(topic, 0, 1).messages] == [(i + 1, b"%d" % i) for i in range(20)]


# -- the other requests -----------------------------------------------------------------------------------------

def test_discover_partitions(tank):
    topic = make_topic(tank, 3)
    assert tank.produce(topic, 0, [b"%d" % i for i in range(5)]) == 0
    assert tank.produce_with_seqnum(topic, 1, [b"p", b"q"], 100, seqs=[100, 109]) == 0
    bounds = tank.discover_partitions(topic)
    assert [(b.first_available, b.high_water_mark) for b in bounds] == [(1, 5), (100, 109), (0, 0)]
    assert tank.discover_partitions(topic_name("nosuch")) == []  # count 0: unknown topic


def test_status_discover_topics_and_topology(gateway, tank):
    before = tank.status()
    topic = make_topic(tank, 3)
    status = tank.status()
    assert (status.topics, status.partitions) == (before.topics + 1, before.partitions + 3)
    assert status.version == 400 and not status.cluster_aware and status.global_flags == 0
    assert status.startup_ts is not None and status.startup_ts <= time.time() + 1
    topics = tank.discover_topics()
    assert (len(topics), sum(t.partitions for t in topics)) == (status.topics, status.partitions)
    mine = [t for t in topics if t.name == topic]
    assert [(t.partitions, t.enabled, t.replication_factor) for t in mine] == [(3, True, None)]
    assert tank.discover_topology().nodes is None  # standalone
    s = raw_connect(gateway)
    try:
        s.sendall(bytes.fromhex("0c050000000700000000"))
        assert read_frame(s) == (0x0C, bytes.fromhex("07000000ffff"))  # spec §6, §10
    finally:
        s.close()


def test_reload_conf(tank):
    topic = make_topic(tank, 2)
    assert tank.reload_conf(topic_name("nosuch"), 0) == ReloadConfError.UNKNOWN_TOPIC
    assert tank.reload_conf(topic, 5) == ReloadConfError.UNKNOWN_PARTITION
    # TANK answers 2 when <topic>/<partition>/config is missing; logway keeps topic configs in its own store
    # and answers "reloaded" (0). Either is a valid answer for a known partition; an error code for it is not.
    assert tank.reload_conf(topic, 1) in (ReloadConfError.OK, ReloadConfError.NO_CONFIG)


def test_produce_with_seqnum_is_answered_with_type_0x01(gateway, tank):
    topic = make_topic(tank)
    name = topic.encode()
    sparse = bundle([b"p"], sparse_seqs=[7])
    body = (struct.pack("<HI", 2, 42) + b"\x03c++" + b"\x00" + struct.pack("<I", 0) + b"\x01"
            + bytes([len(name)]) + name + b"\x01" + struct.pack("<H", 0) + bytes([len(sparse)])
            + struct.pack("<Q", 7) + sparse)
    s = raw_connect(gateway)
    try:
        s.sendall(struct.pack("<BI", 0x05, len(body)) + body)
        assert read_frame(s) == (0x01, struct.pack("<IB", 42, 0))
    finally:
        s.close()
    assert [(b.first_available, b.high_water_mark) for b in tank.discover_partitions(topic)] == [(7, 7)]


# -- frames that close the connection -----------------------------------------------------------------------

@pytest.mark.parametrize("frame", [
    pytest.param(bytes.fromhex("04020000000100"), id="0x04-obsolete-RegReplica"),
    pytest.param(bytes.fromhex("4200000000"), id="unknown-type-0x42"),
    pytest.param(bytes.fromhex("ff0400000001000000"), id="unknown-type-0xff"),
    pytest.param(struct.pack("<BI", 0x02, 256 * MiB + 1) + b"\x02\x00", id="frame-over-256MiB"),
    pytest.param(struct.pack("<BI", 0x02, 3) + b"\x02\x00\x01", id="truncated-consume-payload"),
    pytest.param(struct.pack("<BI", 0x0A, 2) + b"\x01\x00", id="truncated-status-payload"),
])
def test_bad_frames_close_the_connection_others_keep_working(gateway, tank, frame):
    topic = make_topic(tank)
    assert tank.produce(topic, 0, [b"x"]) == 0
    s = raw_connect(gateway)
    try:
        s.sendall(frame)
        assert closed_within(s, 5), "the broker kept the connection open"
    finally:
        s.close()
    # the other connection, opened before, still works; so does a new one
    assert [m.value for m in tank.get(topic, 0, 0).messages] == [b"x"]
    assert_alive(gateway)


def test_frame_over_256mib_is_refused_without_waiting_for_its_body(gateway):
    s = raw_connect(gateway)
    try:
        s.sendall(struct.pack("<BI", 0x01, 0xFFFFFFFF))
        t0 = time.monotonic()
        assert closed_within(s, 5)
        assert time.monotonic() - t0 < 2
    finally:
        s.close()


# -- across protocols --------------------------------------------------------------------------------------

def test_tank_client_reads_a_kafka_format_topic(gateway, tank):
    topic = topic_name("kafka")
    records = [Record(b"v%d" % i, b"k%d" % i if i % 3 else None, TS + 10 * i) for i in range(12)]
    with NativeClient(*gateway.native, timeout=10) as native:
        assert native.create_topic(topic, 2)
        assert native.produce(topic, 0, records[:5]) == list(range(5))
        assert native.produce(topic, 0, records[5:]) == list(range(5, 12))
    got = tank.get(topic, 0, 0)
    # bundles transcoded from RecordBatches: seq = offset + 1, keys and timestamps intact
    assert [(m.seq, m.key, m.value, m.timestamp) for m in got.messages] == [
        (r_i + 1, r.key, r.value, r.timestamp) for r_i, r in enumerate(records)]
    assert (got.next_seq, got.high_water_mark) == (13, 12)
    mid = tank.get(topic, 0, 8)
    assert seqs(mid) == list(range(8, 13))
    p = one_partition(tank.consume({topic: [(0, 8, MiB)]}))
    assert p.error == 0 and p.base_seqnum is not None and p.base_seqnum <= 8 and p.high_water_mark == 12
    assert all(e.complete for e in iter_chunk(p.chunk))
    assert [(b.first_available, b.high_water_mark) for b in tank.discover_partitions(topic)] == [(1, 12), (0, 0)]
    p = one_partition(tank.consume({topic: [(0, 100, MiB)]}))
    assert (p.error, p.first_available, p.high_water_mark) == (1, 1, 12)
    # a TANK long poll on a Kafka-format partition is woken by a native produce
    rid = tank.send(tank.consume_request({topic: [(1, UINT64_MAX, MiB)]}, max_wait_ms=10_000))
    with pytest.raises(TimeoutError):
        tank.receive(rid, timeout=0.3)
    with NativeClient(*gateway.native, timeout=10) as native:
        native.produce(topic, 1, [Record(b"woken", b"wk", TS)])
    p = one_partition(tank.receive(rid, timeout=5))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in chunk_records(p)] == [
        (0, b"wk", b"woken", TS)]


def test_tank_produce_into_a_kafka_format_topic_is_transcoded(gateway, tank):
    topic = topic_name("kafka")
    with NativeClient(*gateway.native, timeout=10) as native:
        assert native.create_topic(topic, 1)
        native.produce(topic, 0, [Record(b"native", b"nk", TS)])
        plain = bundle([b"a", b"b"], keys=[b"ka", None], ts=[TS + 1, TS + 2])
        snappy = bundle([b"%02d" % i + b"s" * 40 for i in range(30)], keys=[b"sk"] * 30, ts=TS + 3, codec=1)
        assert tank.produce_many([(topic, 0, plain), (topic, 0, snappy)]) == [0, 0]
        resp = native.fetch(topic, 0, 0, MiB)
        assert [(r.offset, r.key, r.value, r.timestamp) for r in resp.records] == (
            [(0, b"nk", b"native", TS), (1, b"ka", b"a", TS + 1), (2, None, b"b", TS + 2)]
            + [(3 + i, b"sk", b"%02d" % i + b"s" * 40, TS + 3) for i in range(30)])
    got = tank.get(topic, 0, 2)
    assert [(m.seq, m.key, m.value) for m in got.messages][:2] == [(2, b"ka", b"a"), (3, None, b"b")]
    assert got.next_seq == 34 and got.high_water_mark == 33


def tank_topic_with_records(tank) -> tuple[str, list[tuple[bytes | None, bytes, int]]]:
    topic = make_topic(tank)
    plain = [(None, b"plain-%d" % i, TS + i) for i in range(3)]
    keyed = [(b"key-%d" % i, b"keyed-%d" % i, TS + 100) for i in range(4)]
    snappy = [(b"sk-%d" % i, b"%03d" % i + b"z" * 50, TS + 200 + i) for i in range(40)]
    for group, codec in ((plain, 0), (keyed, 0), (snappy, 1)):
        b = bundle([v for _, v, _ in group], keys=[k for k, _, _ in group], ts=[t for _, _, t in group],
                   codec=codec)
        assert tank.produce(topic, 0, b) == 0
    return topic, plain + keyed + snappy


def test_native_fetch_of_a_tank_topic(gateway, tank):
    topic, expected = tank_topic_with_records(tank)
    with NativeClient(*gateway.native, timeout=10) as native:
        out, offset = [], 0
        while len(out) < len(expected):
            resp = native.fetch(topic, 0, offset, MiB)
            assert resp.records, f"no records at offset {offset}"
            out += resp.records
            offset = resp.next_offset
        assert offset == len(expected)
        assert [(r.offset, r.key, r.value, r.timestamp) for r in out] == [
            (i, k, v, t) for i, (k, v, t) in enumerate(expected)]
        # from the middle of a bundle: nothing below the asked offset
        resp = native.fetch(topic, 0, 5, MiB)
        assert resp.records[0].offset == 5 and resp.records[0].value == b"keyed-2"


def test_native_fetch_of_a_sparse_tank_partition_keeps_the_gaps(gateway, tank):
    topic = make_topic(tank)
    assert tank.produce_with_seqnum(topic, 0, [b"p", b"q", b"r", b"s"], 100, seqs=[100, 103, 106, 109]) == 0
    assert tank.produce(topic, 0, [(b"k", b"next")]) == 0
    with NativeClient(*gateway.native, timeout=10) as native:
        resp = native.fetch(topic, 0, 0, MiB)
        assert [(r.offset, r.value) for r in resp.records] == [(99, b"p"), (102, b"q"), (105, b"r"), (108, b"s"),
                                                                (109, b"next")]
        assert resp.next_offset == 110
        resp = native.fetch(topic, 0, 103, MiB)  # inside a gap: the next existing record
        assert [r.offset for r in resp.records] == [105, 108, 109]


def test_kafka_consumer_reads_a_tank_topic(gateway, tank):
    from kafka import KafkaConsumer, TopicPartition

    topic, expected = tank_topic_with_records(tank)
    consumer = KafkaConsumer(bootstrap_servers="%s:%d" % gateway.addresses["kafka"], enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        out = []
        deadline = time.monotonic() + 20
        while len(out) < len(expected) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                out.extend(batch)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in out] == [
        (i, k, v, t) for i, (k, v, t) in enumerate(expected)]


def test_kafka_producer_into_a_tank_topic_headers_refused(gateway, tank):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError, KafkaTimeoutError

    topic = make_topic(tank)
    producer = KafkaProducer(bootstrap_servers="%s:%d" % gateway.addresses["kafka"], acks=1, retries=0,
                             enable_idempotence=False, linger_ms=0, request_timeout_ms=10_000,
                             delivery_timeout_ms=15_000, max_block_ms=10_000)
    try:
        # a record a bundle can hold is transcoded into one (control: the topic accepts Kafka produces)
        meta = producer.send(topic, key=b"kk", value=b"vv", timestamp_ms=TS).get(timeout=15)
        assert meta.offset == 0
        with pytest.raises(KafkaError) as info:
            producer.send(topic, key=b"hk", value=b"with-headers", headers=[("h", b"1")],
                          timestamp_ms=TS).get(timeout=15)
        assert not isinstance(info.value, KafkaTimeoutError)  # refused by the gateway, not lost
    finally:
        producer.close(timeout=5)
    got = tank.get(topic, 0, 0)
    assert [(m.seq, m.key, m.value, m.timestamp) for m in got.messages] == [(1, b"kk", b"vv", TS)]
    assert got.high_water_mark == 1  # nothing of the refused record was appended


def test_native_produce_of_a_key_over_255_bytes_into_a_tank_topic_is_refused(gateway, tank):
    topic = make_topic(tank)
    with NativeClient(*gateway.native, timeout=10) as native:
        assert native.produce(topic, 0, [Record(b"ok", b"k" * 255, TS)]) == [0]
        with pytest.raises(NativeError) as info:
            native.produce(topic, 0, [Record(b"too-long", b"k" * 256, TS)])
        assert "key" in info.value.message
        native.ping()  # the connection is still usable
    got = tank.get(topic, 0, 0)
    assert [(m.seq, m.key, m.value) for m in got.messages] == [(1, b"k" * 255, b"ok")]
    assert got.high_water_mark == 1
