"""Unmodified kafka-python against a real gateway process: producers (idempotent, acks, compression), consumers
(assign, seek, timestamps, backlog, long-poll), consumer groups (split, leave, kill, resume after restart),
admin calls, and records crossing between the Kafka and native protocols."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.kafka.records import parse_header
from logway.codecs.records import Record

from ..kafka_groups import POLL_MS, group_consumer, poll_values

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("kafka") / "data")
    # Tests here create their topics. With auto-creation, a member's Metadata request queued behind its long-poll
    # Fetch is answered after that Fetch — after the member closed, if it just did — and would recreate a topic a
    # test deleted meanwhile (kafka-python 3.0.12 asks for auto-creation whatever allow_auto_create_topics says).
    gw = GatewayProcess(data, "storage.flush=always", "kafka.auto_create_topics=false", "log_level=WARNING")
    yield gw
    gw.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def topic_name() -> str:
    return "t-" + uuid.uuid4().hex[:10]


def create(gw, name, partitions=1):
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)


def consume_all(gw, topic, partitions=(0,), *, expect, timeout=20, **opts):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gw), enable_auto_commit=False, **opts)
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    consumer.seek_to_beginning()
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    consumer.close()
    return out


# -- producers -----------------------------------------------------------------------------------------------

def test_default_producer_idempotent_acks_all_keys_headers_timestamps(gateway):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway))
    assert producer.config["enable_idempotence"] and producer.config["acks"] in (-1, "all")
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i), ("n", b"")],
                             timestamp_ms=1_700_000_000_000 + i) for i in range(200)]
    producer.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    assert offsets == list(range(200))
    producer.close()
    records = consume_all(gateway, topic, expect=200)
    assert [(r.offset, r.key, r.value) for r in records] == [(i, b"k%d" % i, b"v%d" % i) for i in range(200)]
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(200)]
    assert records[7].headers == [("h", b"7"), ("n", b"")]


@pytest.mark.parametrize("acks", [1, 0])
def test_producer_acks(gateway, acks):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway), acks=acks, enable_idempotence=False)
    for i in range(50):
        producer.send(topic, value=b"m%d" % i)
    producer.flush()
    producer.close()
    assert [r.value for r in consume_all(gateway, topic, expect=50)] == [b"m%d" % i for i in range(50)]


@pytest.mark.parametrize("codec, attr", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_producer_compression_stored_verbatim(gateway, codec, attr):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway), compression_type=codec, linger_ms=50)
    for i in range(300):
        producer.send(topic, key=b"key", value=(b"compressible value %d " % i) * 5)
    producer.flush()
    producer.close()
    records = consume_all(gateway, topic, expect=300)
    assert [r.value for r in records] == [(b"compressible value %d " % i) * 5 for i in range(300)]
    segment = os.path.join(gateway.data_dir, "topics", topic, "0", f"{0:020d}.log")
    with open(segment, "rb") as f:
        header = parse_header(f.read(61))
    assert header.compression == attr  # the producer's compressed batch is on disk as sent


def test_retried_idempotent_batch_is_not_duplicated(gateway):
    from logway.codecs.kafka.records import encode_batch

    from ..kafka_wire import KafkaWireClient

    topic = topic_name()
    create(gateway, topic)
    with KafkaWireClient(*gateway.addresses["kafka"]) as client:
        pid, epoch = client.init_producer_id()
        batch = encode_batch([Record(b"once-%d" % i) for i in range(3)], default_timestamp=1, producer_id=pid,
                             producer_epoch=epoch, base_sequence=0)
        first = client.produce(topic, 0, batch)
        again = client.produce(topic, 0, batch)  # the retry a lost response would cause
        assert first == again == (0, 0)
        gap = encode_batch([Record(b"x")], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                           base_sequence=10)
        assert client.produce(topic, 0, gap)[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = encode_batch([Record(b"next")], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                           base_sequence=3)
        assert client.produce(topic, 0, nxt) == (0, 3)
    assert [r.value for r in consume_all(gateway, topic, expect=4)] == [b"once-0", b"once-1", b"once-2", b"next"]


# -- consumers -----------------------------------------------------------------------------------------------

def test_assign_earliest_latest_offset_and_timestamp(gateway):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway))
    for i in range(20):
        producer.send(topic, value=b"%d" % i, timestamp_ms=1_800_000_000_000 + i * 1000)
    producer.flush()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gateway), enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 20}
    found = consumer.offsets_for_times({tp: 1_800_000_000_000 + 7500})[tp]
    assert found.offset == 8 and found.timestamp == 1_800_000_000_000 + 8000
    assert consumer.offsets_for_times({tp: 1_900_000_000_000})[tp] is None

    def first_value(seek):
        seek()
        for _ in range(20):
            got = consumer.poll(timeout_ms=500)
            if got:
                return got[tp][0].value
        return None

    assert first_value(lambda: consumer.seek_to_beginning(tp)) == b"0"
    assert first_value(lambda: consumer.seek(tp, 13)) == b"13"
    assert first_value(lambda: consumer.seek(tp, found.offset)) == b"8"
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 20
    assert consumer.poll(timeout_ms=300) == {}
    consumer.close()
    producer.close()


def test_backlog_of_100000_records_with_small_partition_fetch(gateway):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway), batch_size=64 * 1024, linger_ms=20)
    for i in range(100_000):
        producer.send(topic, value=b"%06d" % i)
    producer.flush()
    producer.close()
    records = consume_all(gateway, topic, expect=100_000, timeout=120, max_partition_fetch_bytes=4096)
    assert len(records) == 100_000
    assert [r.offset for r in records] == list(range(100_000))
    assert records[-1].value == b"099999"


def test_long_poll_wakes_within_milliseconds_of_a_produce(gateway):
    topic = topic_name()
    create(gateway, topic)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gateway), enable_auto_commit=False, fetch_max_wait_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    consumer.poll(timeout_ms=200)  # the first long-poll is now parked in the gateway
    with NativeClient(*gateway.native) as native:
        time.sleep(0.3)
        sent = time.monotonic()
        native.produce(topic, 0, [b"wake"])
        got = {}
        while not got and time.monotonic() - sent < 10:
            got = consumer.poll(timeout_ms=50)
        latency = time.monotonic() - sent
    assert got[tp][0].value == b"wake"
    assert latency < 0.5, f"long-poll answered {latency * 1000:.0f} ms after the produce"
    consumer.close()


# -- consumer groups -----------------------------------------------------------------------------------------

def _wait_assignment(consumers, want, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(timeout_ms=POLL_MS)  # see tests/kafka_groups.py
        got = [len(c.assignment()) for c in consumers]
        if got == want:
            return
    raise AssertionError(f"assignments {[sorted(c.assignment()) for c in consumers]} never became sizes {want}")


def test_two_consumers_split_partitions_and_one_leaving_hands_over(gateway):
    topic = topic_name()
    create(gateway, topic, 4)
    group = "g-" + topic
    a = group_consumer(bootstrap(gateway), topic, group)
    b = group_consumer(bootstrap(gateway), topic, group)
    _wait_assignment([a, b], [2, 2])
    assert a.assignment() | b.assignment() == {TopicPartition(topic, p) for p in range(4)}
    b.close()  # LeaveGroup
    _wait_assignment([a], [4])
    a.close()


def test_killed_consumer_is_evicted_after_session_timeout(gateway, tmp_path):
    topic = topic_name()
    create(gateway, topic, 2)
    group = "g-" + topic
    script = tmp_path / "member.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from kafka import KafkaConsumer
        c = KafkaConsumer(bootstrap_servers={bootstrap(gateway)!r}, group_id={group!r},
                          session_timeout_ms=3000, heartbeat_interval_ms=300)
        c.partitions_for_topic({topic!r})  # metadata first, 1 s polls: see tests/kafka_groups.py
        c.subscribe([{topic!r}])
        told = False
        while True:
            c.poll(timeout_ms=1000)
            if c.assignment() and not told:
                print("assigned", len(c.assignment()), flush=True)
                told = True
    """))
    member = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([member.stdout], [], [], 60)
        assert ready and member.stdout.readline().startswith("assigned")
        survivor = group_consumer(bootstrap(gateway), topic, group)
        _wait_assignment([survivor], [1])
        member.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session timeout can free its partition
        member.wait()
        t0 = time.monotonic()
        _wait_assignment([survivor], [2], timeout=20)
        assert time.monotonic() - t0 >= 1.0
        survivor.close()
    finally:
        member.kill()


def test_committed_offsets_resume_after_gateway_restart(tmp_path):
    data = str(tmp_path / "data")
    topic, group = "resume", "resumers"
    with GatewayProcess(data, "log_level=WARNING") as gw:
        create(gw, topic)
        producer = KafkaProducer(bootstrap_servers=bootstrap(gw))
        for i in range(10):
            producer.send(topic, value=b"%d" % i)
        producer.flush()
        producer.close()
        consumer = group_consumer(bootstrap(gw), topic, group, enable_auto_commit=False, auto_offset_reset="earliest")
        seen = poll_values(consumer, 6)
        consumer.commit()
        consumer.close()
        assert seen == [b"%d" % i for i in range(6)]
    with GatewayProcess(data, "log_level=WARNING") as gw:
        consumer = group_consumer(bootstrap(gw), topic, group, enable_auto_commit=False, auto_offset_reset="earliest")
        rest = poll_values(consumer, 4, timeout=20)
        consumer.close()
        assert rest == [b"%d" % i for i in range(6, 10)]
        with NativeClient(*gw.native) as native:  # the same offsets, seen through the native protocol
            assert native.committed(topic, 0, group) == 6


# -- admin ---------------------------------------------------------------------------------------------------

def test_admin_topics_and_groups(gateway):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(gateway))
    name = topic_name()
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1,
                                  topic_configs={"retention.ms": "60000"})])
    assert name in admin.list_topics()
    described = admin.describe_topics([name])[0]
    assert described.get("name", described.get("topic")) == name and len(described["partitions"]) == 3
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    group = "g-" + name
    consumer = group_consumer(bootstrap(gateway), name, group)
    _wait_assignment([consumer], [3])
    listed = {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
    assert listed[group] == "consumer"
    desc = admin.describe_groups([group])[group]
    assert desc["error"] is None and desc["group_state"] == "Stable" and len(desc["members"]) == 1
    assignment = desc["members"][0]["member_assignment"]  # decoded by kafka-python from what we stored
    assert sorted(p for t in assignment["assigned_partitions"] for p in t["partitions"]) == [0, 1, 2]
    consumer.close()
    admin.delete_topics([name])
    assert name not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([name])
    admin.close()


# -- cross-protocol ------------------------------------------------------------------------------------------

def test_kafka_produce_native_fetch_and_back(gateway):
    topic = topic_name()
    create(gateway, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway))
    producer.send(topic, key=b"kk", value=b"from kafka", timestamp_ms=1_750_000_000_000)
    producer.flush()
    producer.close()
    with NativeClient(*gateway.native) as native:
        rec = native.fetch(topic, 0, 0).records[0]
        assert (rec.offset, rec.key, rec.value, rec.timestamp) == (0, b"kk", b"from kafka", 1_750_000_000_000)
        native.produce(topic, 0, [Record(b"from native", key=b"nk", timestamp=1_760_000_000_000)])
    records = consume_all(gateway, topic, expect=2)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"kk", b"from kafka", 1_750_000_000_000), (b"nk", b"from native", 1_760_000_000_000)]
