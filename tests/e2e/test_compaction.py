"""Compacted topics (`cleanup.policy=compact`) with unmodified Kafka clients against a real gateway: librdkafka
(confluent-kafka) and kafka-python read a compacted topic from the beginning across the gaps the cleaner left, a
consumer group whose committed offset was compacted away resumes at the next record kept; and a gateway killed
with SIGKILL in the middle of cleaning comes back with the old segments or the cleaned ones, never a mix."""

from __future__ import annotations

import os
import random
import time
import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.records import Record

pytestmark = pytest.mark.slow

confluent_kafka = pytest.importorskip("confluent_kafka")

#: Small segments and an eager cleaner: a few hundred records make a compacted log of many cleaned segments.
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
KEYS = 13


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = GatewayProcess(str(tmp_path_factory.mktemp("compaction") / "data"), "log_level=WARNING",
                       "storage.flush_interval_ms=50", "storage.cleaner_check_interval_ms=50",
                       "storage.cleaner_io_bytes_per_second=0")
    yield g
    g.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def create_compacted(gw) -> str:
    """A compacted topic, created as Kafka Streams and Connect create theirs: CreateTopics with its configs."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "compacted-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    for future in admin.create_topics([NewTopic(name, 1, 1, config=COMPACTED)]).values():
        assert future.result(10) is None
    return name


def produce(gw, topic, n: int, first: int = 0, keys: int = KEYS) -> list[tuple[int, bytes, bytes | None]]:
    """n records over `keys` keys through an idempotent librdkafka producer (every 10th a tombstone), then records
    with keys of their own that roll the active segment past them; (offset, key, value) of each."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(gw), "enable.idempotence": True,
                                         "linger.ms": 2})
    delivered = {}

    def done(err, msg):
        assert err is None, err
        delivered[msg.offset()] = (msg.key(), msg.value())

    for i in range(first, first + n):
        producer.produce(topic, key=b"k%d" % (i % keys), value=None if i % 10 == 9 else b"v%d" % i,
                         on_delivery=done)
        if i % 50 == 49:
            producer.flush(10)  # (several batches, each an idempotent producer's)
    for i in range(3):
        producer.produce(topic, key=b"roll-%d-%d" % (first, i), value=b"r" * 1900, on_delivery=done)
        producer.flush(10)
    assert producer.flush(10) == 0
    return [(offset, *delivered[offset]) for offset in sorted(delivered)]


def last_per_key(rows, *, tombstones: bool = True):
    latest = {}
    for row in rows:
        latest[row[1]] = row
    return sorted(r for r in latest.values() if tombstones or r[2] is not None)


def native_rows(gw, topic) -> list[tuple[int, bytes, bytes | None]]:
    rows, offset = [], 0
    with NativeClient(*gw.native, timeout=10) as native:
        end = native.describe_topic(topic).partitions[0].log_end_offset
        while offset < end:
            resp = native.fetch(topic, 0, offset)
            rows += [(r.offset, r.key, r.value) for r in resp.records]
            if resp.next_offset <= offset:
                break
            offset = resp.next_offset
    return rows


def wait_compacted(gw, topic, expected, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (got := native_rows(gw, topic)) != expected:
        assert time.monotonic() < deadline, f"not compacted in time: {got}"
        time.sleep(0.05)


def confluent_read(gw, topic, *, group: str | None = None, start: int | None = None) -> list:
    """Everything from `start` (the beginning by default, or the group's committed offset) to the end of the
    partition, as librdkafka delivers it."""
    config = {"bootstrap.servers": bootstrap(gw), "group.id": group or "reader-" + uuid.uuid4().hex[:6],
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True}
    consumer = confluent_kafka.Consumer(config)
    if group is None:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING
                                                        if start is None else start)])
    else:
        consumer.subscribe([topic])
    rows = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return rows
                raise AssertionError(msg.error())
            rows.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within 30 s: {rows}")


def kafka_python_read(gw, topic, end: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gw), enable_auto_commit=False, fetch_max_bytes=4096,
                             max_partition_fetch_bytes=1024)  # (small fetches: many of them land in gaps)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    rows = []
    deadline = time.monotonic() + 30
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            rows += [(r.offset, r.key, r.value) for r in records]
    consumer.close()
    return rows


def test_kafka_clients_read_a_compacted_topic_from_the_beginning(gw):
    topic = create_compacted(gw)
    rows = produce(gw, topic, 300)
    expected = last_per_key(rows)
    assert len(expected) < len(rows) / 10
    wait_compacted(gw, topic, expected)
    assert confluent_read(gw, topic) == expected
    assert kafka_python_read(gw, topic, rows[-1][0] + 1) == expected


def test_a_group_whose_committed_offset_was_compacted_away_resumes_at_the_next_record(gw):
    topic = create_compacted(gw)
    rows = produce(gw, topic, 200)
    rows += produce(gw, topic, 60, 200, keys=5)  # (the other keys' last records come before a gap)
    expected = last_per_key(rows)
    gone = next(r[0] for r in rows if r not in expected and r[0] > expected[0][0] + 5)
    with NativeClient(*gw.native) as native:
        native.commit(topic, 0, "resumer", gone)  # committed before the cleaner removes that record
    wait_compacted(gw, topic, expected)
    got = confluent_read(gw, topic, group="resumer")
    assert got == [r for r in expected if r[0] >= gone] and got[0][0] > gone
    # kafka-python, in a group, from the same committed offset.
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap(gw), group_id="resumer", enable_auto_commit=False,
                             auto_offset_reset="earliest")
    first = []
    deadline = time.monotonic() + 30
    while not first and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            first += [r.offset for r in records]
    consumer.close()
    assert first[0] == got[0][0]


# -- kill -9 while cleaning ------------------------------------------------------------------------------------

def _cleaning_files(partition_dir: str) -> list[str]:
    try:
        return [n for n in os.listdir(partition_dir) if n.endswith((".tmp", ".swap"))]
    except FileNotFoundError:
        return []


def test_kill_9_while_cleaning_leaves_the_old_segments_or_the_cleaned_ones(tmp_path):
    """A slow cleaner (a low throttle) over a partition of many segments, the gateway SIGKILLed at random moments
    while a cleaned segment is being written or swapped: after each restart the partition holds every record the
    cleaning keeps and none it never held, each offset once in order; left alone, it ends fully compacted."""
    data = str(tmp_path / "data")
    slow = ("log_level=WARNING", "storage.flush_interval_ms=50", "storage.cleaner_check_interval_ms=50",
            "storage.cleaner_io_bytes_per_second=150000")
    rnd = random.Random(38)
    with GatewayProcess(data, *slow, "storage.cleaner_check_interval_ms=3600000") as gw:  # no cleaning yet
        with NativeClient(*gw.native) as native:
            native.create_topic("kill", 1)
            native.alter_topic_config("kill", COMPACTED)
            for i in range(0, 3000, 25):
                native.produce("kill", 0, [Record(b"v%d-" % j + b"x" * 60, key=b"k%d" % (j % 97))
                                           for j in range(i, i + 25)])
            native.produce("kill", 0, [Record(b"r" * 1900, key=b"roll-%d" % i) for i in range(1)])
            native.produce("kill", 0, [Record(b"r" * 1900, key=b"roll-x")])
        original = native_rows(gw, "kill")
    final = last_per_key(original)
    partition_dir = os.path.join(data, "topics", "kill", "0")
    kills = 0
    for cycle in range(4):
        gw = GatewayProcess(data, *slow)
        deadline = time.monotonic() + 30
        while not _cleaning_files(partition_dir) and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rnd.uniform(0, 0.8))
        if _cleaning_files(partition_dir):
            kills += 1
        gw.kill()
        with GatewayProcess(data, *slow[:2], "storage.cleaner_check_interval_ms=3600000") as gw:
            got = native_rows(gw, "kill")
            assert set(final) <= set(got) <= set(original), cycle
            assert [r[0] for r in got] == sorted({r[0] for r in got}), cycle
            assert not _cleaning_files(partition_dir), cycle
    assert kills >= 2, "the kills did not come while the cleaner was writing"
    with GatewayProcess(data, *slow[:3], "storage.cleaner_io_bytes_per_second=0") as gw:
        wait_compacted(gw, "kill", final)
