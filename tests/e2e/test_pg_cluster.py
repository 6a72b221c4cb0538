"""Two gateway processes over one PostgreSQL database (`storage.postgres.cluster`), real clients spread over both:
each gateway leads its share of the partitions, a consumer group's offsets live with the coordinator, and a kill -9
of one gateway under an idempotent producer's load — the group's coordinator and half the leaders — loses no
acknowledged record, stores none twice, keeps every partition's offsets contiguous and the group's committed
offsets: the other gateway takes every partition over once the dead one's lease passed. Native and TANK clients
reach every partition through either gateway (relayed to the leader over its relay socket, long-polls included);
a relay connection without the cluster's secret is closed and the gateway serves on."""

from __future__ import annotations

import socket
import threading
import time

import psycopg

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.clients.tank import TankClient
from logway.gateway.cluster.relays import preamble

from ..pg_cluster import bootstrap, leaders, stored_records
from ..pg_cluster import member as start_member
from ..pg_cluster import settled as settled_leaders
from .test_admin_http import scrape
from .test_admin_http import value as metric
from .test_postgres import dbname

pytestmark = pytest.mark.slow

PARTITIONS = 8


def member(tmp_path, name: str, pg_server, pg_database, *extra: str) -> GatewayProcess:
    return start_member(tmp_path / name, pg_server, dbname(pg_database), *extra)


def settled(a, b, topic: str) -> list[int]:
    return settled_leaders(a, b, topic, PARTITIONS)


def test_kafka_clients_over_two_gateways_and_a_kill_9_of_one(tmp_path, pg_server, pg_database):
    a = member(tmp_path, "a", pg_server, pg_database)
    b = member(tmp_path, "b", pg_server, pg_database)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(a)})
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])["t"].result(15)
        # both gateways lead a share of the partitions, whichever one is asked
        assert set(settled(a, b, "t")) == {0, 1}

        acked: dict[tuple[int, int], bytes] = {}
        failed: list = []
        lock = threading.Condition()  # (notified at each acknowledgement)

        def delivered(err, msg):
            with lock:
                if err is None:
                    acked[(msg.partition(), msg.offset())] = msg.value()
                    lock.notify_all()
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
            with lock:
                assert lock.wait_for(lambda: len(acked) >= 2000, 60), "the load was not acknowledged"
            a.kill()
            with lock:
                killed_at, at_kill = time.monotonic(), len(acked)
            # b leads every partition once a's lease passed, and the producer goes on through it
            leaders(b, "t", PARTITIONS, until=lambda brokers, found: brokers == {1} and set(found) == {1})
            took_over = time.monotonic() - killed_at
            with lock:
                assert lock.wait_for(lambda: len(acked) >= at_kill + 2000, 30), \
                    "the producer did not go on through the other gateway"
        finally:
            stop.set()
            loader.join(90)
        assert not failed, failed[:3]
        assert took_over < 15, took_over

        # every acknowledged record is there, once, at its offset; each partition's offsets contiguous from 0
        stored = stored_records(b, "t", PARTITIONS)
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


def test_native_and_tank_clients_reach_every_partition_through_either_gateway(tmp_path, pg_server, pg_database):
    a = member(tmp_path, "a", pg_server, pg_database)
    b = member(tmp_path, "b", pg_server, pg_database)
    try:
        with NativeClient(*a.native) as c:
            c.create_topic("n", PARTITIONS)
        lead = settled(a, b, "n")
        node = {0: a, 1: b}
        # native: produced through a into every partition (b's relayed to b), read through b (a's relayed to a)
        with NativeClient(*a.native) as c:
            for p in range(PARTITIONS):
                assert c.produce("n", p, [b"n%d-%d" % (p, i) for i in range(3)]) == [0, 1, 2]
        with NativeClient(*b.native) as c:
            for p in range(PARTITIONS):
                assert [r.value for r in c.fetch("n", p, 0).records] == [b"n%d-%d" % (p, i) for i in range(3)]
            assert c.commit("n", 3, "ng", 2)  # (the coordinator, member 0, is gateway a)
        with NativeClient(*a.native) as c:
            assert c.committed("n", 3, "ng") == 2
            assert c.describe_topic("n").partitions[5].log_end_offset == 3

        # TANK: a long-poll parked on one gateway for the other's partition is woken by an append through that one
        p = lead.index(0)  # a partition gateway a leads
        with TankClient(*b.addresses["tank"]) as t:
            request = t.send(_tank_consume("n", p, 4))  # seq = offset + 1: waits past the end
            parked_at(a)  # (the answer must come from the append, not from the wait's start)
            with NativeClient(*node[0].native) as c:
                assert c.produce("n", p, [b"woken"]) == [3]
            answer = t.receive(request, timeout=10)
        assert _values(answer) == [b"woken"]
        # native: the same, a fetch that waits (max_wait) parked through b at a
        with NativeClient(*b.native) as c:
            c.send(nv.FetchRequest("n", p, 4, 1 << 20, max_wait_ms=10_000, min_bytes=1))
            parked_at(a)
            with NativeClient(*a.native) as producer:
                assert producer.produce("n", p, [b"woken again"]) == [4]
            assert [r.value for r in c.receive(timeout=10).records] == [b"woken again"]
        with TankClient(*a.addresses["tank"]) as t:  # and a TANK get through a of b's partition
            q = lead.index(1)
            assert [m.value for m in t.get("n", q, 1, 1 << 20).messages] == [b"n%d-%d" % (q, i) for i in range(3)]

        # a connection to a relay socket without the cluster's secret is closed unserved; the gateway goes on
        with psycopg.connect(pg_database, autocommit=True) as conn:
            relay = conn.execute("SELECT addresses->>'relay' FROM logway.members WHERE member_id = 1").fetchone()[0]
            secret = conn.execute("SELECT value FROM logway.meta WHERE key = 'cluster_secret'").fetchone()[0]
        host, _, port = relay.rpartition(":")
        for first in (preamble("native", "0" * 64),  # another secret
                      preamble("kafka", secret),  # a protocol that is not relayed
                      preamble("native", secret)[:20]):  # cut short, then the peer's end
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(first)
                raw.shutdown(socket.SHUT_WR)
                assert raw.recv(100) == b""  # closed unserved
        with NativeClient(*a.native) as c:
            assert c.produce("n", lead.index(1), [b"after"]) == [3]
    finally:
        a.stop()
        b.stop()


def parked_at(gw, timeout: float = 10.0) -> None:
    """Return once `gw` has a long-poll parked (its `logway_long_polls_parked` gauge, from its admin listener)."""
    deadline = time.monotonic() + timeout
    while metric(scrape(gw), "logway_long_polls_parked") < 1:
        assert time.monotonic() < deadline, "no long-poll was parked"
        time.sleep(0.01)


def _tank_consume(topic, partition, seq):
    from logway.clients.tank import consume_request

    return consume_request({topic: [(partition, seq, 1 << 20)]}, max_wait_ms=10_000, min_bytes=1)


def _values(answer) -> list[bytes]:
    from logway.codecs.tank.chunk import decode_chunk

    return [m.value for topic in answer.topics for part in topic.partitions
            for m in decode_chunk(part.chunk, part.base_seqnum).records]


def test_transactions_span_the_partitions_of_both_gateways(tmp_path, pg_server, pg_database):
    a = member(tmp_path, "a", pg_server, pg_database)
    b = member(tmp_path, "b", pg_server, pg_database)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(b)})
        admin.create_topics([NewTopic("x", PARTITIONS, 1)])["x"].result(15)
        settled(a, b, "x")
        producer = Producer({"bootstrap.servers": bootstrap(b), "transactional.id": "tx-1"})
        producer.init_transactions(30)
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for p in range(PARTITIONS):
                producer.produce("x", b"%s-%d" % (outcome.encode(), p), partition=p)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        reader = Consumer({"bootstrap.servers": bootstrap(a), "group.id": "rc", "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        reader.assign([TopicPartition("x", p, 0) for p in range(PARTITIONS)])
        ends = [reader.get_watermark_offsets(TopicPartition("x", p), timeout=10)[1] for p in range(PARTITIONS)]
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # every partition read to its end (past the last marker)
            msg = reader.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            positions = reader.position([TopicPartition("x", p) for p in range(PARTITIONS)])
            if [tp.offset for tp in positions] == ends:
                break
        reader.close()
        assert sorted(got) == sorted(b"commit-%d" % p for p in range(PARTITIONS) for _ in range(2))
    finally:
        a.stop()
        b.stop()
