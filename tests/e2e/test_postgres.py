"""A gateway on the postgres storage backend (`storage.backend: postgres`), a real process against a real server
(logway.bench.postgres): native, Kafka (kafka-python, confluent-kafka) and TANK clients producing and consuming across
protocols, committed offsets, transactions, a restart, a kill -9 of the gateway, and a kill -9 and restart of the
PostgreSQL server under load — no acknowledged record lost or duplicated, offsets contiguous — and the start-up
errors, one line each."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from logway.bench.launcher import GatewayProcess
from logway.bench.postgres import PASSWORD, USER, free_port
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient

from ..pg_cluster import GatewayPair

pytestmark = pytest.mark.slow


def pg_settings(server, dbname: str, **over) -> list[str]:
    """The --set flags of a gateway on database `dbname` of `server`."""
    keys = {"host": "127.0.0.1", "port": server.port, "user": USER, "password": PASSWORD, "dbname": dbname,
            "connect_timeout_ms": 2000, **over}
    return ["storage.backend=postgres", *(f"storage.postgres.{k}={v}" for k, v in keys.items())]


def dbname(dsn: str) -> str:
    return dsn.split("dbname=")[1]


def start(tmp_path, pg_server, pg_database, *extra) -> GatewayProcess:
    return GatewayProcess(str(tmp_path / "data"), *pg_settings(pg_server, dbname(pg_database)), "log_level=WARNING",
                          "kafka.transaction_abort_check_ms=200", *extra)


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def native_values(gw, topic, partition=0):
    out, offset = [], 0
    with NativeClient(*gw.native) as c:
        end = c.describe_topic(topic).partitions[partition].log_end_offset
        while offset < end:
            resp = c.fetch(topic, partition, offset, 1 << 20)
            out += [(r.offset, r.value) for r in resp.records]
            offset = resp.next_offset
    return out


def ck_values(gw, topic, expect, isolation="read_committed", timeout=20.0):
    c = CKConsumer({"bootstrap.servers": bootstrap(gw), "group.id": "r-" + uuid.uuid4().hex[:6],
                    "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "fetch.queue.backoff.ms": 10})
    c.assign([CKTopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    return out


@pytest.mark.parametrize("gateways", ["one", "two"])
def test_every_protocol_produces_and_consumes_across_the_others_and_a_restart_keeps_it_all(tmp_path, pg_server,
                                                                                          pg_database, gateways):
    """(two: a cluster of two gateways over the database, `tests/pg_cluster.GatewayPair` — Kafka clients bootstrap
    from one and find both, native and TANK clients go through the other)"""
    def start_gateways():
        if gateways == "two":
            return GatewayPair(tmp_path, pg_server, dbname(pg_database), "kafka.transaction_abort_check_ms=200")
        return start(tmp_path, pg_server, pg_database)

    gw = start_gateways()
    try:
        with NativeClient(*gw.native) as c:
            c.create_topic("k", 1)
            c.create_topic("n", 1)
            assert c.produce("n", 0, [b"native-0", b"native-1"]) == [0, 1]
        with TankClient(*gw.addresses["tank"]) as t:
            t.create_topic("tk", 1)
            t.produce("tk", 0, [b"tank-0", b"tank-1", b"tank-2"])
            t.produce("k", 0, [b"tank-into-kafka"])
        producer = KafkaProducer(bootstrap_servers=bootstrap(gw), acks="all")
        for i in range(200):
            producer.send("k", value=b"kp-%d" % i, key=b"key")
        producer.flush()
        producer.close()
        ck = CKProducer({"bootstrap.servers": bootstrap(gw), "enable.idempotence": True, "linger.ms": 5})
        for i in range(300):
            ck.produce("k", value=b"ck-%d" % i)
        assert ck.flush(20) == 0
        del ck  # (gone before the gateway stops: librdkafka would try to reconnect)
        expected_k = [b"tank-into-kafka"] + [b"kp-%d" % i for i in range(200)] + [b"ck-%d" % i for i in range(300)]
        # a Kafka topic read by every protocol
        assert [v for _, v in native_values(gw, "k")] == expected_k
        consumer = KafkaConsumer(bootstrap_servers=bootstrap(gw), group_id="kg", enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=3000)
        consumer.subscribe(["k"])
        got = [m.value for m in consumer]
        consumer.commit()
        consumer.close()
        assert got == expected_k
        assert ck_values(gw, "k", len(expected_k)) == expected_k
        with TankClient(*gw.addresses["tank"]) as t:
            got = t.get("k", 0, 1, 1 << 20)  # (seq = offset + 1)
            assert [m.value for m in got.messages][:3] == expected_k[:3]
        # TANK and native topics read by Kafka clients
        assert ck_values(gw, "tk", 3) == [b"tank-0", b"tank-1", b"tank-2"]
        assert ck_values(gw, "n", 2) == [b"native-0", b"native-1"]
        with NativeClient(*gw.native) as c:
            c.commit("n", 0, "ng", 2)
        gw.stop()
        gw = start_gateways()
        assert [v for _, v in native_values(gw, "k")] == expected_k
        with NativeClient(*gw.native) as c:
            assert c.committed("n", 0, "ng") == 2
            assert c.produce("n", 0, [b"native-2"]) == [2]
        consumer = KafkaConsumer(bootstrap_servers=bootstrap(gw), group_id="kg", enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        consumer.subscribe(["k"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.position(TopicPartition("k", 0)) == len(expected_k)  # its committed offset, kept
        consumer.close()
    finally:
        gw.stop()


def test_transactions_commit_and_abort(tmp_path, pg_server, pg_database):
    gw = start(tmp_path, pg_server, pg_database)
    try:
        with NativeClient(*gw.native) as c:
            c.create_topic("tx", 1)
        p = CKProducer({"bootstrap.servers": bootstrap(gw), "transactional.id": "t1", "linger.ms": 5})
        p.init_transactions(15)
        p.begin_transaction()
        for i in range(5):
            p.produce("tx", value=b"committed-%d" % i)
        p.commit_transaction(15)
        p.begin_transaction()
        for i in range(5):
            p.produce("tx", value=b"aborted-%d" % i)
        assert p.flush(15) == 0  # (written, then aborted: librdkafka would drop what it had not sent yet)
        p.abort_transaction(15)
        p.begin_transaction()
        p.produce("tx", value=b"last")
        p.commit_transaction(15)
        want = [b"committed-%d" % i for i in range(5)] + [b"last"]
        assert ck_values(gw, "tx", 6) == want
        assert len(ck_values(gw, "tx", 11, isolation="read_uncommitted")) == 11
        assert [v for _, v in native_values(gw, "tx")] == want  # native readers see committed records only
        gw.stop()
        gw = start(tmp_path, pg_server, pg_database)  # the coordinator's state and the aborted range are kept
        assert ck_values(gw, "tx", 6) == want
        p = CKProducer({"bootstrap.servers": bootstrap(gw), "transactional.id": "t1", "linger.ms": 5})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("tx", value=b"after-restart")
        p.commit_transaction(15)
        assert ck_values(gw, "tx", 7) == want + [b"after-restart"]
        del p
    finally:
        gw.stop()


# -- crashes under load ----------------------------------------------------------------------------------------

def _producer(addr, tag, group, acked, stop, lock):
    """A native producer that records each acknowledged record at its offset (telling those waiting on `lock`, a
    `threading.Condition`), and commits its group's offset."""
    rnd = random.Random(tag)
    seq = 0
    while not stop.is_set():
        try:
            with NativeClient(*addr, timeout=20) as c:
                while not stop.is_set():
                    payloads = [f"{tag}-{seq + i}".encode() for i in range(rnd.randint(1, 20))]
                    seq += len(payloads)
                    offsets = c.produce("load", 0, payloads)
                    with lock:
                        acked.update(zip(offsets, payloads))
                        lock.notify_all()
                    c.commit("load", 0, group, offsets[-1] + 1)
                    with lock:
                        acked[("commit", group)] = offsets[-1] + 1
        except (OSError, ConnectionError, RuntimeError):
            if stop.wait(0.05):  # an error answer or a lost connection: not acknowledged; go on
                return


def _check(gw, acked):
    records = native_values(gw, "load")
    offsets = [o for o, _ in records]
    assert offsets == list(range(len(offsets)))  # contiguous from 0
    values = [v for _, v in records]
    assert len(values) == len(set(values)), "a record was stored twice"
    stored = dict(records)
    lost = [o for o, v in acked.items() if isinstance(o, int) and stored.get(o) != v]
    assert not lost, f"acknowledged records lost or moved: {lost[:5]}"
    with NativeClient(*gw.native) as c:
        for key, offset in acked.items():
            if isinstance(key, tuple):
                assert (c.committed("load", 0, key[1]) or 0) >= offset


def _load(gw, cycle, acked, lock, seconds, during=None):
    stop = threading.Event()
    threads = [threading.Thread(target=_producer, args=(gw.native, f"{cycle}.{i}", f"g{i}", acked, stop, lock))
               for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    if during is not None:
        during()
    stop.set()
    for t in threads:
        t.join(60)
    return threads


def test_kill_9_of_the_gateway_under_load_loses_nothing_acknowledged(tmp_path, pg_server, pg_database):
    acked: dict = {}
    lock = threading.Condition()
    rnd = random.Random(3)
    for cycle in range(3):
        gw = start(tmp_path, pg_server, pg_database)
        if cycle == 0:
            with NativeClient(*gw.native) as c:
                c.create_topic("load", 1)
        else:
            _check(gw, acked)
        _load(gw, cycle, acked, lock, rnd.uniform(0.5, 1.2), during=gw.kill)
    gw = start(tmp_path, pg_server, pg_database)
    try:
        _check(gw, acked)
        assert sum(isinstance(k, int) for k in acked) > 100  # it really produced
    finally:
        gw.stop()


def test_kill_9_and_restart_of_the_database_under_load_loses_nothing_acknowledged(tmp_path, pg_server, pg_database):
    acked: dict = {}
    lock = threading.Condition()
    gw = start(tmp_path, pg_server, pg_database, "storage.postgres.commit_retry_ms=20000")
    try:
        with NativeClient(*gw.native) as c:
            c.create_topic("load", 1)

        def acks() -> int:
            with lock:
                return sum(isinstance(k, int) for k in acked)

        def crash():
            before = acks()
            for _ in range(2):
                pg_server.kill()
                time.sleep(0.3)  # (down for a while under load: the time passing is the point)
                pg_server.start()
                back = acks()
                with lock:  # the gateway acknowledges again once the server is back
                    assert lock.wait_for(lambda: acks() > back, timeout=30), "no acknowledgement after it came back"
            assert before > 0

        _load(gw, 0, acked, lock, 1.0, during=crash)
        _check(gw, acked)
        with NativeClient(*gw.native) as c:  # and it goes on
            assert c.produce("load", 0, [b"after"]) == [max(k for k in acked if isinstance(k, int)) + 1]
    finally:
        gw.stop()


# -- start-up errors -------------------------------------------------------------------------------------------

def serve(tmp_path, *settings: str) -> subprocess.CompletedProcess:
    args = [a for s in ("listeners.native.port=0", "listeners.kafka.port=0", "listeners.tank.port=0",
                        "listeners.admin.port=0", "log_level=WARNING", *settings) for a in ("--set", s)]
    return subprocess.run([sys.executable, "-m", "logway.cli", "serve", "--data-dir", str(tmp_path / "data"), *args],
                          capture_output=True, text=True, timeout=60)


def one_line(r: subprocess.CompletedProcess, *fragments: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    for fragment in ("logway: ", *fragments):
        assert fragment in r.stderr, (fragment, r.stderr)
    return r.stderr


def test_start_up_errors_are_one_line_each(tmp_path, pg_server, pg_database):
    name = dbname(pg_database)
    one_line(serve(tmp_path, *pg_settings(pg_server, name, port=free_port())), "is unreachable",
             "storage.postgres.host")
    one_line(serve(tmp_path, *pg_settings(pg_server, "nowhere")), "does not exist", "createdb")
    one_line(serve(tmp_path, *pg_settings(pg_server, name, password="wrong")), "refused the login",
             "password authentication failed", "storage.postgres.password")
    gw = start(tmp_path, pg_server, pg_database)
    try:
        one_line(serve(tmp_path / "other", *pg_settings(pg_server, name)), "in use by another logway gateway",
                 f"pid {gw.pid}")
        one_line(serve(tmp_path / "other", *pg_settings(pg_server, name, cluster="true")),  # (a cluster's member)
                 "in use by a logway gateway that is not in cluster mode", f"pid {gw.pid}")
    finally:
        gw.stop()
    gw = start(tmp_path, pg_server, pg_database, "storage.postgres.cluster=true", "storage.postgres.cluster_name=blue")
    try:  # a gateway alone pointed at a cluster's database, and a gateway of another cluster
        one_line(serve(tmp_path / "other", *pg_settings(pg_server, name)), "in use by a cluster of logway gateways",
                 "set storage.postgres.cluster to join them")
        one_line(serve(tmp_path / "other", *pg_settings(pg_server, name, cluster="true", cluster_name="green")),
                 "belongs to logway cluster 'blue'", "configured for cluster 'green'")
    finally:
        gw.stop()
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("UPDATE logway.meta SET value = '99' WHERE key = 'schema_version'")
    one_line(serve(tmp_path, *pg_settings(pg_server, name)), "version 99, newer than this logway's")


def test_users_and_acls_live_in_the_database_and_hold_after_a_restart(tmp_path, pg_server, pg_database):
    from logway.clients.errors import NativeError
    from logway.codecs import native as nv

    auth = ("auth.native_login=true", "auth.kafka_sasl_scram=true", "auth.users.root=root-pw",
            "auth.super_users=User:root")
    gw = start(tmp_path, pg_server, pg_database, *auth)
    try:
        with NativeClient(*gw.native) as root:
            root.login("root", "root-pw")
            root.create_topic("mine", 1)
            root.create_topic("theirs", 1)
            assert root.set_password("alice", "alice-pw", "SCRAM-SHA-512")
            root.create_acls([nv.AclEntry("Topic", "mine", "LITERAL", "User:alice", "*", op, "Allow")
                              for op in ("Write", "Read", "Describe")])
        gw.stop()
        with psycopg.connect(pg_database) as conn:  # (what the database holds: a credential, never the password)
            keys = [bytes(k).decode() for (k,) in conn.execute(
                "SELECT key FROM logway.states WHERE store = 'security' ORDER BY key")]
            states = b"".join(bytes(s) for (s,) in conn.execute(
                "SELECT state FROM logway.states WHERE store = 'security'"))
        assert keys == ['acl ["TOPIC","mine","LITERAL","User:alice","*","DESCRIBE","ALLOW"]',
                        'acl ["TOPIC","mine","LITERAL","User:alice","*","READ","ALLOW"]',
                        'acl ["TOPIC","mine","LITERAL","User:alice","*","WRITE","ALLOW"]',
                        'scram ["alice","SCRAM-SHA-512"]']
        assert b"alice-pw" not in states
        gw = start(tmp_path, pg_server, pg_database, *auth)
        with NativeClient(*gw.native) as alice:
            alice.login("alice", "alice-pw", "SCRAM-SHA-512")
            assert alice.produce("mine", 0, [b"a"]) == [0]
            with pytest.raises(NativeError, match="not authorized: User:alice may not WRITE TOPIC 'theirs'"):
                alice.produce("theirs", 0, [b"x"])
        with NativeClient(*gw.native) as root:
            root.login("root", "root-pw")
            assert len(root.delete_acls(nv.AclEntry(principal="User:alice"))) == 3
        with NativeClient(*gw.native) as alice:
            alice.login("alice", "alice-pw", "SCRAM-SHA-512")
            with pytest.raises(NativeError, match="not authorized"):
                alice.produce("mine", 0, [b"b"])
    finally:
        gw.stop()
