"""Kafka transactions with unmodified clients against a real gateway process: confluent-kafka (librdkafka),
kafka-python and aiokafka transactional producers commit and abort; read_committed consumers see committed records
only and read_uncommitted ones everything; native and TANK readers never see aborted records; consume-transform-
produce with send_offsets_to_transaction commits the group's offsets with the output; a zombie is fenced; an
expired transaction is aborted; a gateway killed mid-transaction recovers the coordinator and the LSO."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaException, TopicPartition as CKTopicPartition
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError as KPError

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("txn") / "data")
    gw = GatewayProcess(data, "storage.flush=always", "log_level=WARNING", "kafka.transaction_abort_check_ms=200")
    yield gw
    gw.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def new_topic(gw, partitions=1, fmt="kafka") -> str:
    name = "tx-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    fs = admin.create_topics([NewTopic(name, partitions, 1, config={"storage.format": fmt})])
    fs[name].result(10)
    return name


def ck_producer(gw, tid, **extra):
    p = CKProducer({"bootstrap.servers": bootstrap(gw), "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(15)
    return p


def ck_values(gw, topic, isolation, expect, partitions=(0,), timeout=15.0):
    """Values a confluent-kafka consumer reads from the start (waits for `expect` values, or until the timeout)."""
    c = CKConsumer({"bootstrap.servers": bootstrap(gw), "group.id": "r-" + uuid.uuid4().hex[:6],
                    "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "fetch.queue.backoff.ms": 10})
    c.assign([CKTopicPartition(topic, p, 0) for p in partitions])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    return out


def kp_values(gw, topic, isolation, expect, timeout=10.0):
    c = KafkaConsumer(bootstrap_servers=bootstrap(gw), isolation_level=isolation, enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=300).values():
            out += [r.value for r in records]
    c.close()
    return out


def native_values(gw, topic, partition=0):
    out, offset = [], 0
    with NativeClient(*gw.native) as c:
        while True:
            resp = c.fetch(topic, partition, offset, max_wait_ms=0)
            if not resp.records:
                return out
            out += [r.value for r in resp.records]
            offset = resp.next_offset


def tank_values(gw, topic, partition=0):
    with TankClient(*gw.addresses["tank"]) as c:
        return [m.value for m in c.get(topic, partition, 0, 1 << 20).messages]


# -- confluent-kafka ---------------------------------------------------------------------------------------------

def test_confluent_commit_and_abort_isolation_and_other_protocols(gateway):
    topic = new_topic(gateway)
    p = ck_producer(gateway, "ck-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"c%d" % i, partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"a%d" % i, partition=0)
    p.flush(10)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"c-last", partition=0)
    p.commit_transaction(15)
    committed = [b"c0", b"c1", b"c2", b"c3", b"c4", b"c-last"]
    assert ck_values(gateway, topic, "read_committed", 6) == committed
    everything = ck_values(gateway, topic, "read_uncommitted", 9)
    assert everything == committed[:5] + [b"a0", b"a1", b"a2", b"c-last"]
    assert kp_values(gateway, topic, "read_committed", 6) == committed
    assert native_values(gateway, topic) == committed
    assert tank_values(gateway, topic) == committed


def test_open_transaction_holds_read_committed_back_until_commit(gateway):
    topic = new_topic(gateway)
    with NativeClient(*gateway.native) as c:
        c.produce(topic, 0, [b"before"])
    p = ck_producer(gateway, "hold-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    p.produce(topic, b"in-txn", partition=0)
    p.flush(10)
    with NativeClient(*gateway.native) as c:
        c.produce(topic, 0, [b"after"])  # behind the open transaction: not readable by committed readers yet
    assert ck_values(gateway, topic, "read_committed", 2, timeout=3) == [b"before"]
    assert native_values(gateway, topic) == [b"before"]
    assert tank_values(gateway, topic) == [b"before"]
    assert ck_values(gateway, topic, "read_uncommitted", 3) == [b"before", b"in-txn", b"after"]
    # ListOffsets(latest): the LSO for read_committed, the high watermark otherwise
    for isolation, end in (("read_committed", 1), ("read_uncommitted", 3)):
        c = CKConsumer({"bootstrap.servers": bootstrap(gateway), "group.id": "w", "isolation.level": isolation})
        assert c.get_watermark_offsets(CKTopicPartition(topic, 0), 10) == (0, end), isolation
        c.close()
    p.commit_transaction(15)
    assert ck_values(gateway, topic, "read_committed", 3) == [b"before", b"in-txn", b"after"]
    assert native_values(gateway, topic) == [b"before", b"in-txn", b"after"]


def test_tank_topic_transactions_without_markers(gateway):
    topic = new_topic(gateway, fmt="tank")
    p = ck_producer(gateway, "tank-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    p.produce(topic, b"kept", partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"dropped", partition=0)
    p.flush(10)
    p.abort_transaction(15)
    assert tank_values(gateway, topic) == [b"kept"]
    assert native_values(gateway, topic) == [b"kept"]
    assert ck_values(gateway, topic, "read_committed", 1) == [b"kept"]


def test_confluent_consume_transform_produce_commits_offsets_with_the_output(gateway):
    src, dst = new_topic(gateway), new_topic(gateway)
    with NativeClient(*gateway.native) as c:
        c.produce(src, 0, [b"x%d" % i for i in range(10)])
    group = "ctp-" + uuid.uuid4().hex[:6]
    consumer = CKConsumer({"bootstrap.servers": bootstrap(gateway), "group.id": group,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "isolation.level": "read_committed"})
    consumer.subscribe([src])
    p = ck_producer(gateway, "ctp-" + uuid.uuid4().hex[:6])
    seen = []
    deadline = time.monotonic() + 20
    while len(seen) < 10 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            seen.append(m)
    assert len(seen) == 10
    p.begin_transaction()
    for m in seen[:6]:
        p.produce(dst, m.value().upper(), partition=0)
    p.send_offsets_to_transaction([CKTopicPartition(src, 0, seen[5].offset() + 1)],
                                  consumer.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    p.begin_transaction()  # the rest aborted: neither output nor offsets
    for m in seen[6:]:
        p.produce(dst, m.value().upper(), partition=0)
    p.send_offsets_to_transaction([CKTopicPartition(src, 0, 10)], consumer.consumer_group_metadata(), 15)
    p.abort_transaction(15)
    consumer.close()
    assert ck_values(gateway, dst, "read_committed", 6) == [b"X%d" % i for i in range(6)]
    with NativeClient(*gateway.native) as c:
        assert c.committed(src, 0, group) == 6


def test_confluent_zombie_is_fenced(gateway):
    topic = new_topic(gateway)
    tid = "zombie-" + uuid.uuid4().hex[:6]
    old = ck_producer(gateway, tid)
    old.begin_transaction()
    old.produce(topic, b"zombie", partition=0)
    old.flush(10)
    new = ck_producer(gateway, tid)  # fences the old one and aborts its open transaction
    new.begin_transaction()
    new.produce(topic, b"fresh", partition=0)
    new.commit_transaction(15)
    with pytest.raises(KafkaException) as exc:
        old.produce(topic, b"late", partition=0)
        old.commit_transaction(10)
    assert exc.value.args[0].fatal() or "fenced" in str(exc.value).lower()
    assert ck_values(gateway, topic, "read_committed", 1) == [b"fresh"]
    assert ck_values(gateway, topic, "read_uncommitted", 2) == [b"zombie", b"fresh"]


def test_an_expired_transaction_is_aborted(gateway):
    topic = new_topic(gateway)
    p = ck_producer(gateway, "slow-" + uuid.uuid4().hex[:6], **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"too-late", partition=0)
    p.flush(10)
    deadline = time.monotonic() + 10
    while native_values(gateway, topic) == [] and time.monotonic() < deadline:
        with NativeClient(*gateway.native) as c:
            c.produce(topic, 0, [b"probe"])  # readable only once the transaction ended
        time.sleep(0.3)
    assert b"too-late" not in native_values(gateway, topic)
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


# -- kafka-python and aiokafka -----------------------------------------------------------------------------------

def test_kafka_python_transactions(gateway):
    topic = new_topic(gateway)
    p = KafkaProducer(bootstrap_servers=bootstrap(gateway), transactional_id="kp-" + uuid.uuid4().hex[:6])
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic, b"k%d" % i, partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, b"gone", partition=0)
    p.flush()
    p.abort_transaction()
    p.close()
    assert kp_values(gateway, topic, "read_committed", 3) == [b"k0", b"k1", b"k2"]
    assert kp_values(gateway, topic, "read_uncommitted", 4) == [b"k0", b"k1", b"k2", b"gone"]
    assert native_values(gateway, topic) == [b"k0", b"k1", b"k2"]


def test_kafka_python_zombie_is_fenced(gateway):
    topic = new_topic(gateway)
    tid = "kpz-" + uuid.uuid4().hex[:6]
    old = KafkaProducer(bootstrap_servers=bootstrap(gateway), transactional_id=tid)
    old.init_transactions()
    new = KafkaProducer(bootstrap_servers=bootstrap(gateway), transactional_id=tid)
    new.init_transactions()
    old.begin_transaction()
    with pytest.raises(KPError):
        old.send(topic, b"zombie", partition=0).get(10)
        old.commit_transaction()
    new.begin_transaction()
    new.send(topic, b"ok", partition=0)
    new.commit_transaction()
    new.close()
    old.close(timeout=1)
    assert kp_values(gateway, topic, "read_committed", 1) == [b"ok"]


def test_aiokafka_transactions(gateway):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTP

    topic = new_topic(gateway)

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap(gateway), transactional_id="aio-" + uuid.uuid4().hex[:6])
        await p.start()
        try:
            async with p.transaction():
                for i in range(4):
                    await p.send_and_wait(topic, b"a%d" % i, partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
        out = {}
        for isolation in ("read_committed", "read_uncommitted"):
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap(gateway), isolation_level=isolation,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            try:
                c.assign([AioTP(topic, 0)])
                await c.seek_to_beginning()
                values = []
                deadline = time.monotonic() + 10
                while len(values) < (4 if isolation == "read_committed" else 5) and time.monotonic() < deadline:
                    batch = await c.getmany(timeout_ms=300)
                    for records in batch.values():
                        values += [r.value for r in records]
                out[isolation] = values
            finally:
                await c.stop()
        return out

    out = asyncio.run(main())
    assert out["read_committed"] == [b"a0", b"a1", b"a2", b"a3"]
    assert out["read_uncommitted"] == [b"a0", b"a1", b"a2", b"a3", b"aborted"]


# -- recovery ----------------------------------------------------------------------------------------------------

def test_kill_mid_transaction_recovers_and_the_late_commit_or_timeout_resolves_it(tmp_path):
    data = str(tmp_path / "data")
    gw = GatewayProcess(data, "storage.flush=always", "log_level=WARNING", "kafka.transaction_abort_check_ms=200")
    try:
        topic = new_topic(gw)
        tid = "kill-" + uuid.uuid4().hex[:6]
        p = ck_producer(gw, tid, **{"transaction.timeout.ms": 2000})
        p.begin_transaction()
        p.produce(topic, b"committed", partition=0)
        p.commit_transaction(15)
        p.begin_transaction()
        p.produce(topic, b"open-at-kill", partition=0)
        p.flush(10)
        gw.kill()
        del p
        gw = GatewayProcess(data, "storage.flush=always", "log_level=WARNING",
                            "kafka.transaction_abort_check_ms=200")
        # The open transaction is rebuilt (the LSO holds readers back) and aborted by its timeout.
        assert native_values(gw, topic) == [b"committed"]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with NativeClient(*gw.native) as c:
                c.produce(topic, 0, [b"probe"])
            if b"probe" in native_values(gw, topic):
                break
            time.sleep(0.3)
        assert native_values(gw, topic)[:2] == [b"committed", b"probe"]
        assert b"open-at-kill" not in native_values(gw, topic)
        p2 = ck_producer(gw, tid)  # the id lives on: a new producer of it works
        p2.begin_transaction()
        p2.produce(topic, b"after", partition=0)
        p2.commit_transaction(15)
        assert ck_values(gw, topic, "read_committed", 99, timeout=3)[-1] == b"after"
    finally:
        gw.stop()
