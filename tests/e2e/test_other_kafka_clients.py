"""librdkafka (confluent-kafka) and aiokafka, unmodified, against a real gateway: admin, idempotent compressed
produce, a consumer group, commits — on each storage backend (local files, and PostgreSQL: a database of the
session's throwaway server), and on two gateways sharing a database (`storage.postgres.cluster`: the clients
bootstrap from one and find both, the native reads go through the other)."""

from __future__ import annotations

import asyncio
import time

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient

from ..pg_cluster import GatewayPair

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["local", "postgres", "postgres-cluster"])
def gw(request, tmp_path_factory):
    backend, database = (), None
    settings = ("storage.flush=always", "kafka.auto_create_topics=true")  # (aiokafka's topic is auto-created)
    if request.param.startswith("postgres"):
        server = request.getfixturevalue("pg_server")
        database = server.create_database()
        backend = ("storage.backend=postgres", f"storage.postgres.dsn={server.dsn(database)}")
    if request.param == "postgres-cluster":
        g = GatewayPair(tmp_path_factory.mktemp("clients"), server, database, *settings)
    else:
        g = GatewayProcess(str(tmp_path_factory.mktemp("clients") / "data"), "log_level=WARNING", *settings,
                           *backend)
    yield g
    g.stop()
    if database is not None:
        server.drop_database(database)


def test_librdkafka_admin_idempotent_lz4_producer_and_group_consumer(gw):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = "%s:%d" % gw.addresses["kafka"]
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic("rdk", num_partitions=2, replication_factor=1)]).values():
        assert future.result(10) is None
    producer = confluent_kafka.Producer({"bootstrap.servers": bs, "enable.idempotence": True,
                                         "compression.type": "lz4", "linger.ms": 5})
    delivered = []
    for i in range(200):
        producer.produce("rdk", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")],
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(15) == 0
    assert len(delivered) == 200 and not [d for d in delivered if d[0]]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "rdk-group",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "session.timeout.ms": 6000})
    consumer.subscribe(["rdk"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), msg.headers()))
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(200))
    with NativeClient(*gw.native) as native:
        ends = {p.partition: p.log_end_offset for p in native.describe_topic("rdk").partitions}
        assert sum(ends.values()) == 200
        assert {p: native.committed("rdk", p, "rdk-group") for p in ends} == ends


def test_aiokafka_idempotent_gzip_producer_and_group_consumer(gw):
    aiokafka = pytest.importorskip("aiokafka")
    bs = "%s:%d" % gw.addresses["kafka"]

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True,
                                             compression_type="gzip")
        await producer.start()
        for i in range(50):
            await producer.send("aio", key=b"k", value=b"v%d" % i, headers=[("h", b"1")])
        await producer.flush()
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("aio", bootstrap_servers=bs, group_id="aio-group",
                                             auto_offset_reset="earliest", enable_auto_commit=False,
                                             session_timeout_ms=6000, heartbeat_interval_ms=500)
        await consumer.start()
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(messages)
        await consumer.commit()
        committed = await consumer.committed(next(iter(consumer.assignment())))
        await consumer.stop()
        return got, committed

    got, committed = asyncio.run(run())
    assert [m.value for m in got] == [b"v%d" % i for i in range(50)]  # auto-created topic, one partition
    assert got[0].headers == (("h", b"1"),) and committed == 50
