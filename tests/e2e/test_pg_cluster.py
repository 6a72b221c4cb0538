"""Two gateway processes over one PostgreSQL database (`storage.postgres.cluster`), real Kafka clients spread over
both: each gateway leads its share of the partitions, a consumer group's offsets live with the coordinator, and a
kill -9 of one gateway under an idempotent producer's load — the group's coordinator and half the leaders — loses
no acknowledged record, stores none twice, keeps every partition's offsets contiguous and the group's committed
offsets: the other gateway takes every partition over once the dead one's lease passed."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.bench.launcher import GatewayProcess

from .test_postgres import bootstrap, dbname, pg_settings

pytestmark = pytest.mark.slow

LEASE_MS = 1000
PARTITIONS = 8


def member(tmp_path, name: str, pg_server, pg_database, *extra: str) -> GatewayProcess:
    return GatewayProcess(str(tmp_path / name), *pg_settings(pg_server, dbname(pg_database)),
                          "storage.postgres.cluster=true", f"storage.postgres.lease_ms={LEASE_MS}",
                          "log_level=WARNING", *extra)


def leaders(gw, topic: str, timeout: float = 20.0, until=lambda brokers, leaders: True) -> tuple[set, list]:
    """(node ids of the brokers, each partition's leader) as `gw` tells a Kafka client, once `until` holds."""
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=5)
        brokers = set(md.brokers)
        parts = md.topics[topic].partitions if topic in md.topics and md.topics[topic].error is None else {}
        found = [parts[p].leader if p in parts else -1 for p in range(PARTITIONS)]
        if until(brokers, found):
            return brokers, found
        assert time.monotonic() < deadline, f"the cluster did not settle: brokers {brokers}, leaders {found}"
        time.sleep(0.1)


def test_kafka_clients_over_two_gateways_and_a_kill_9_of_one(tmp_path, pg_server, pg_database):
    a = member(tmp_path, "a", pg_server, pg_database)
    b = member(tmp_path, "b", pg_server, pg_database)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(a)})
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])["t"].result(15)
        # both gateways lead a share of the partitions, whichever one is asked
        brokers, first = leaders(b, "t", until=lambda brokers, found: len(brokers) == 2 and set(found) == brokers)
        assert leaders(a, "t")[1] == first and brokers == {0, 1}

        acked: dict[tuple[int, int], bytes] = {}
        failed: list = []
        lock = threading.Lock()

        def delivered(err, msg):
            with lock:
                if err is None:
                    acked[(msg.partition(), msg.offset())] = msg.value()
                else:
                    failed.append(err)

        producer = Producer({"bootstrap.servers": f"{bootstrap(a)},{bootstrap(b)}", "enable.idempotence": True,
                             "linger.ms": 2, "message.timeout.ms": 60_000})
        for i in range(400):
            producer.produce("t", b"before-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
        assert producer.flush(30) == 0 and len(acked) == 400

        # a consumer group through gateway b reads them and commits (its coordinator: member 0, gateway a)
        group = Consumer({"bootstrap.servers": bootstrap(b), "group.id": "g", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
        group.subscribe(["t"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 400 and time.monotonic() < deadline:
            msg = group.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 400
        group.commit(asynchronous=False)
        committed = {tp.partition: tp.offset for tp in group.committed(
            [TopicPartition("t", p) for p in range(PARTITIONS)], timeout=10)}
        assert sum(committed.values()) == 400
        group.close()

        # an idempotent producer's load; gateway a (the coordinator, half the leaders) is killed under it
        stop = threading.Event()

        def load():
            i = 0
            while not stop.is_set():
                producer.produce("t", b"load-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
                producer.poll(0)
                i += 1
                if i % 200 == 0:
                    time.sleep(0.01)
            producer.flush(60)

        loader = threading.Thread(target=load)
        loader.start()
        try:
            while len(acked) < 2000:
                time.sleep(0.05)
            a.kill()
            killed_at, at_kill = time.monotonic(), len(acked)
            # b leads every partition once a's lease passed, and the producer goes on through it
            leaders(b, "t", until=lambda brokers, found: brokers == {1} and set(found) == {1})
            took_over = time.monotonic() - killed_at
            deadline = time.monotonic() + 30
            while len(acked) < at_kill + 2000 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(acked) >= at_kill + 2000, "the producer did not go on through the other gateway"
        finally:
            stop.set()
            loader.join(90)
        assert not failed, failed[:3]
        assert took_over < 15, took_over

        # every acknowledged record is there, once, at its offset; each partition's offsets contiguous from 0
        reader = Consumer({"bootstrap.servers": bootstrap(b), "group.id": "check", "enable.auto.commit": False})
        stored: dict[tuple[int, int], bytes] = {}
        for p in range(PARTITIONS):
            low, high = reader.get_watermark_offsets(TopicPartition("t", p), timeout=10)
            reader.assign([TopicPartition("t", p, 0)])
            while sum(1 for key in stored if key[0] == p) < high:
                msg = reader.poll(5)
                assert msg is not None, f"partition {p}: nothing more before {high}"
                if msg.error() is None:
                    stored[(p, msg.offset())] = msg.value()
            offsets = sorted(o for q, o in stored if q == p)
            assert offsets == list(range(high)), f"partition {p}: offsets not contiguous"
        reader.close()
        lost = [key for key, value in acked.items() if stored.get(key) != value]
        assert not lost, f"acknowledged records lost or moved: {lost[:5]}"
        values = list(stored.values())
        assert len(values) == len(set(values)), "a record was stored twice"

        # the group's committed offsets outlived its coordinator
        again = Consumer({"bootstrap.servers": bootstrap(b), "group.id": "g", "enable.auto.commit": False})
        assert {tp.partition: tp.offset for tp in again.committed(
            [TopicPartition("t", p) for p in range(PARTITIONS)], timeout=15)} == committed
        again.close()
    finally:
        a.stop()
        b.stop()
