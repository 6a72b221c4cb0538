"""Compacted topics through a real gateway (`GatewayProcess`): its log cleaner cleans them in the background, and
readers of every protocol — native fetch, Kafka fetch (the stored batches, or transcoded), TANK consume (the stored
bundles, or transcoded), the console's message browser — step over the gaps it leaves, in both storage formats;
TANK's CreateTopic compaction configs; records without keys refused by every protocol; tombstones; the cleaner's
metrics."""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid

import pytest
import trio

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.api import fetch
from logway.codecs.kafka.records import decode_records, encode_batch, iter_batches, parse_header
from logway.codecs.records import Record
from logway.codecs.tank import CreateTopicError, ProduceError

from ..kafka_wire import KafkaWireClient

INVALID_RECORD = 87
#: A value that fills most of a 1 KiB segment: appending one rolls the segment before it.
FILLER = b"f" * 700


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("compaction") / "data")
    g = GatewayProcess(data, "log_level=WARNING", "listeners.tank.enabled=true", "storage.flush_interval_ms=50",
                       "storage.cleaner_check_interval_ms=50", "storage.cleaner_io_bytes_per_second=0")
    yield g
    g.stop()


@pytest.fixture
def native(gw):
    with NativeClient(*gw.native, timeout=10) as c:
        yield c


@pytest.fixture
def tank(gw):
    with TankClient(*gw.addresses["tank"], timeout=10) as c:
        yield c


@pytest.fixture
def kafka(gw):
    with KafkaWireClient(*gw.addresses["kafka"]) as c:
        yield c


COMPACTED = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01}


def kafka_topic(native) -> str:
    name = "c-" + uuid.uuid4().hex[:8]
    native.create_topic(name, 1)
    native.alter_topic_config(name, COMPACTED)
    return name


def keyed(n: int, keys: int, first: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % (i % keys), b"v%d" % i) for i in range(first, first + n)]


def expected_after(produced: list[tuple[int, bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
    """The last record of each key, at its offset."""
    last = {}
    for row in produced:
        last[row[1]] = row
    return sorted(last.values())


def fill_and_roll(produce, first_offset: int) -> list[tuple[int, bytes, bytes]]:
    """Records with keys of their own that roll the active segment twice: everything before them becomes
    cleanable once synced. Returns them as (offset, key, value)."""
    rows = []
    for i in range(3):
        key = b"filler-%d" % i
        offset = produce([(key, FILLER)])
        rows.append((offset, key, FILLER))
    return rows


def native_rows(native, topic) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from offset 0, following next_offset over the gaps."""
    rows, offset = [], 0
    while True:
        resp = native.fetch(topic, 0, offset, max_bytes=300)
        rows += [(r.offset, r.key, r.value) for r in resp.records]
        if resp.next_offset <= offset or not resp.records and resp.next_offset >= high_watermark(native, topic):
            return rows
        offset = resp.next_offset


def high_watermark(native, topic) -> int:
    return native.describe_topic(topic).partitions[0].log_end_offset


def kafka_rows(kafka, topic) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from offset 0 as a Kafka consumer reads it: the stored batches (or a transcoded answer), the
    next fetch after the last batch's last offset (Kafka's rule: batches keep their offsets when records go)."""
    rows, offset = [], 0
    while True:
        body = fetch.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=400, isolation_level=1,
                                  topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                                      partition=0, fetch_offset=offset, partition_max_bytes=400)])])
        part = kafka.call(1, 11, body).responses[0].partitions[0]
        assert part.error_code == 0, part.error_code
        data = part.records or b""
        batches = list(iter_batches(data))
        if not batches:
            return rows
        rows += [(r.offset, r.key, r.value) for r in decode_records(data, min_offset=offset)]
        last = parse_header(batches[-1])
        offset = last.base_offset + last.last_offset_delta + 1


def tank_rows(tank, topic) -> list[tuple[int, bytes | None, bytes]]:
    """Every message from the first available one (seq 0: where the cleaner left the first record; TANK answers a
    seq below it with a boundary error, as for a log whose first segments retention deleted)."""
    rows, seq = [], 0
    while True:
        got = tank.get(topic, 0, seq, 300)
        rows += [(m.seq - 1, m.key, m.value) for m in got.messages]
        if got.next_seq > got.high_water_mark or got.next_seq <= seq or not got.messages:
            return rows
        seq = got.next_seq


def wait_for(read, expected, what: str, timeout: float = 30.0):
    """Read until the reader sees `expected` (the cleaner has cleaned): the event these tests wait for."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == expected:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: the cleaner did not get there: {got} != {expected}")
        time.sleep(0.05)


def test_a_compacted_kafka_topic_reads_the_same_through_every_protocol(gw, native, kafka, tank):
    topic = kafka_topic(native)
    rows = []
    for pairs in (keyed(6, 4), keyed(6, 4, 6), keyed(9, 2, 12)):  # multi-record batches; k2, k3 not last
        batch = encode_batch([Record(v, key=k) for k, v in pairs], default_timestamp=int(time.time() * 1000))
        code, base = kafka.produce(topic, 0, batch)
        assert code == 0
        rows += [(base + i, k, v) for i, (k, v) in enumerate(pairs)]

    def produce(pairs):
        code, base = kafka.produce(topic, 0, encode_batch([Record(v, key=k) for k, v in pairs],
                                                          default_timestamp=int(time.time() * 1000)))
        assert code == 0
        return base

    rows += fill_and_roll(produce, len(rows))
    expected = expected_after(rows)
    assert len(expected) < len(rows)
    wait_for(lambda: native_rows(native, topic), expected, "native fetch")
    assert kafka_rows(kafka, topic) == expected
    assert tank_rows(tank, topic) == expected
    # From an offset the cleaner removed (after the first record kept), every reader goes on with the next record
    # kept.
    gone = next(r[0] for r in rows if r not in expected and r[0] > expected[0][0])
    after = [r for r in expected if r[0] > gone]
    assert native.fetch(topic, 0, gone).records[0].offset == after[0][0]
    assert tank.get(topic, 0, gone + 1).messages[0].seq == after[0][0] + 1


def test_a_compacted_tank_topic_from_tank_create_topic(gw, native, kafka, tank):
    topic = "c-" + uuid.uuid4().hex[:8]
    config = "log.cleanup.policy=cleanup\nlog.cleaner.min.cleanable.ratio=0.01\nlog.segment.bytes=1024"
    assert tank.create_topic(topic, 1, config) == CreateTopicError.OK
    described = {e.name: e.value for e in native.describe_topic_config(topic)}
    assert (described["cleanup.policy"], described["min.cleanable.dirty.ratio"]) == ("compact", 0.01)
    assert described["storage.format"] == "tank"
    count = [0]

    def produce(pairs):  # (TANK answers a produce with its error code alone: the offsets follow one another)
        assert tank.produce(topic, 0, [Record(v, key=k, timestamp=int(time.time() * 1000)) for k, v in pairs]) == 0
        count[0] += len(pairs)
        return count[0] - len(pairs)

    rows = []
    for pairs in (keyed(5, 3), keyed(5, 3, 5), keyed(7, 2, 10)):
        base = produce(pairs)
        rows += [(base + i, k, v) for i, (k, v) in enumerate(pairs)]
    rows += fill_and_roll(produce, len(rows))
    expected = expected_after(rows)
    wait_for(lambda: tank_rows(tank, topic), expected, "TANK consume")
    assert native_rows(native, topic) == expected
    assert kafka_rows(kafka, topic) == expected


def test_tank_create_topic_refuses_an_unknown_cleanup_policy(tank):
    for config in ("log.cleanup.policy=shred", "log.cleaner.min.cleanable.ratio=2",
                   "log.cleaner.min.cleanable.ratio=lots"):
        assert tank.create_topic("c-" + uuid.uuid4().hex[:8], 1, config) == CreateTopicError.INVALID_CONFIG


def test_records_without_a_key_are_refused_by_every_protocol(gw, native, kafka, tank):
    topic = kafka_topic(native)
    code, _ = kafka.produce(topic, 0, encode_batch([Record(b"v", key=b"k"), Record(b"no key")], default_timestamp=1))
    assert code == INVALID_RECORD
    with pytest.raises(NativeError, match="invalid record: .*needs a key"):
        native.produce(topic, 0, [Record(b"no key")])
    assert tank.produce(topic, 0, [Record(b"no key")]) == ProduceError.SYSTEM_ERROR  # (TANK has no closer code)
    assert high_watermark(native, topic) == 0
    native.produce(topic, 0, [Record(b"v", key=b"k")])
    assert high_watermark(native, topic) == 1


def test_tombstones_go_once_past_delete_retention_and_the_browser_steps_over_the_gaps(gw, native):
    topic = kafka_topic(native)
    native.alter_topic_config(topic, {"delete.retention.ms": 0})
    offsets = native.produce(topic, 0, [Record(b"1", key=b"a"), Record(b"2", key=b"b"), Record(b"3", key=b"a")])
    offsets += native.produce(topic, 0, [Record(None, key=b"b")])  # b deleted

    def produce(pairs):
        return native.produce(topic, 0, [Record(v, key=k) for k, v in pairs])[0]

    rows = [(offsets[2], b"a", b"3")] + fill_and_roll(produce, 4)
    wait_for(lambda: native_rows(native, topic), rows, "native fetch")
    host, port = gw.addresses["admin"]
    with urllib.request.urlopen(f"http://{host}:{port}/api/topics/{topic}/partitions/0/messages?offset=0&limit=10",
                                timeout=10) as answer:
        shown = json.load(answer)["messages"]
    assert [m["offset"] for m in shown] == [r[0] for r in rows]
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    cleanings = next(line for line in metrics.splitlines() if line.startswith("logway_cleaner_cleanings_total"))
    assert float(cleanings.split()[-1]) >= 1
    assert "logway_cleaner_errors_total 0.0" in metrics


# -- the gateway's cleaner task, in this process ------------------------------------------------------------------

def _compacted_partition(path, segments: int = 6):
    """An engine with one compacted partition of `segments` synced, cleanable segments of keyed records."""
    from logway.gateway.formats import STORAGE_FORMATS
    from logway.storage import LogEngine, TopicConfig

    eng = LogEngine(path, STORAGE_FORMATS, TopicConfig(segment_bytes=4096))
    plog = eng.create_topic("t", 1, {"cleanup.policy": "compact"}).partitions[0]
    i = 0
    while len(plog.segments) <= segments:
        plog.append(encode_batch([Record(b"v%d" % i + b"." * 100, key=b"k%d" % (i % 5))], default_timestamp=1))
        i += 1
    plog.roll()
    plog.sync()
    return eng, plog


def _cleaner(eng, bytes_per_second: int = 0):
    from logway.gateway.cleaning import LogCleaner
    from logway.storage import CleanerSettings

    return LogCleaner(eng, interval_ms=3600_000, bytes_per_second=bytes_per_second, settings=CleanerSettings())


async def test_a_cleaning_that_fails_is_counted_and_leaves_the_log_as_it_was(tmp_path):
    eng, plog = _compacted_partition(tmp_path)
    seg = plog.segments[2]
    with open(seg.log_path, "r+b") as f:  # a flipped byte in a frozen batch: its CRC fails
        f.seek(seg.size // 2)
        byte = f.read(1)
        f.seek(seg.size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = {name: os.path.getsize(os.path.join(plog.directory, name)) for name in os.listdir(plog.directory)}
    cleaner = _cleaner(eng)
    assert await cleaner.check() == 0
    assert (cleaner.errors, cleaner.cleanings, cleaner.cleaned_bytes) == (1, 0, 0)
    assert {name: os.path.getsize(os.path.join(plog.directory, name)) for name in os.listdir(plog.directory)} == before
    eng.close()


async def test_the_cleaner_task_cancelled_stops_its_thread_within_a_read(tmp_path):
    eng, plog = _compacted_partition(tmp_path, segments=40)
    cleaner = _cleaner(eng, bytes_per_second=2000)  # a pass would take a minute
    started = trio.current_time()
    with trio.move_on_after(0.5):
        await cleaner.check()
    assert trio.current_time() - started < 5 and cleaner.throttle.stopped
    assert not [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))]
    assert cleaner.cleanings == 0 and cleaner.errors == 0
    eng.close()  # (the partition's cleaning is over: closing does not wait)
