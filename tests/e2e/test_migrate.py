"""`logway migrate`, end to end: a gateway on local files fed by real clients (native, TANK, kafka-python,
confluent-kafka idempotent and transactional producers, a committed group offset, DeleteRecords, a user and its
ACLs), stopped and moved into a database (a real server, logway.bench.postgres) by the command; then a gateway on
`storage.backend: postgres` serves the same records at the same offsets to Kafka, native and TANK readers, with the
same topic ids, committed offsets, users and ACLs, and new writes go on at the log ends with new producer ids. And
the command's refusals, one line each: a data directory in use, an unreachable database, a target with topics of
its own, a compacted topic, a directory without logway data."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer

from logway.bench.launcher import GatewayProcess
from logway.bench.postgres import free_port
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs import native as nv
from logway.codecs.kafka.records import KafkaFormat, parse_header
from logway.storage import LogEngine, TopicConfig

from .test_postgres import bootstrap, ck_values, dbname, pg_settings

pytestmark = pytest.mark.slow


def migrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logway.cli", "migrate", *args], capture_output=True, text=True,
                          timeout=120)


def one_line(done: subprocess.CompletedProcess, status: int, *needles: str) -> None:
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("logway: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def topic_ids(gw, names) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    described = admin.describe_topics(TopicCollection(list(names)))
    return {name: str(described[name].result(10).topic_id) for name in names}


def native_records(gw, topic, partition=0) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a native reader gets, from the log start."""
    out = []
    with NativeClient(*gw.native) as c:
        p = c.describe_topic(topic).partitions[partition]
        offset = p.log_start_offset
        while offset < p.log_end_offset:
            resp = c.fetch(topic, partition, offset, 1 << 20)
            out += [(r.offset, r.value) for r in resp.records]
            if resp.next_offset == offset:
                break
            offset = resp.next_offset
    return out


def tank_values(gw, topic) -> list[tuple[int, bytes]]:
    with TankClient(*gw.addresses["tank"]) as t:
        return [(m.seq, m.value) for m in t.get(topic, 0, 1, 1 << 20).messages]


def snapshot(gw) -> dict:
    """What the clients of every protocol see of the gateway's topics and offsets."""
    with NativeClient(*gw.native) as c:
        ends = {(t, p.partition): (p.log_start_offset, p.log_end_offset) for t in ("orders", "tx", "tk")
                for p in c.describe_topic(t).partitions}
        committed = c.committed("orders", 0, "billing")
    return {"native": {f"{t}-{p}": native_records(gw, t, p) for t, p in (("orders", 0), ("orders", 1), ("tx", 0), ("tk", 0))},
            "kafka": {"orders": ck_values(gw, "orders", 140), "tx": ck_values(gw, "tx", 6),
                      "tx-uncommitted": ck_values(gw, "tx", 11, isolation="read_uncommitted")},
            "tank": tank_values(gw, "tk"), "ends": ends, "committed": committed,
            "ids": topic_ids(gw, ("orders", "tx", "tk"))}


def fill(gw) -> None:
    with NativeClient(*gw.native) as c:
        c.create_topic("orders", 2)
        c.create_topic("tx", 1)
        c.create_topic("secure", 1)
        assert c.produce("orders", 1, [b"native-0", b"native-1"]) == [0, 1]
        assert c.set_password("alice", "alice-pw", "SCRAM-SHA-256")
        c.create_acls([nv.AclEntry("Topic", "secure", "LITERAL", "User:alice", "*", op, "Allow")
                       for op in ("Write", "Read", "Describe")])
    with TankClient(*gw.addresses["tank"]) as t:
        t.create_topic("tk", 1)
        for i in range(3):
            t.produce("tk", 0, [b"tank-%d-a" % i, b"tank-%d-b" % i])
    producer = KafkaProducer(bootstrap_servers=bootstrap(gw), acks="all")
    for i in range(50):
        producer.send("orders", value=b"kp-%d" % i, partition=0)
    producer.flush()
    producer.close()
    ck = CKProducer({"bootstrap.servers": bootstrap(gw), "enable.idempotence": True, "linger.ms": 5})
    for i in range(100):
        ck.produce("orders", value=b"ck-%d" % i, partition=0)
    assert ck.flush(20) == 0
    del ck
    p = CKProducer({"bootstrap.servers": bootstrap(gw), "transactional.id": "t1", "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx", value=b"committed-%d" % i)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx", value=b"aborted-%d" % i)
    assert p.flush(15) == 0
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce("tx", value=b"last")
    p.commit_transaction(15)
    del p
    with NativeClient(*gw.native) as c:
        assert c.delete_records("orders", 0, 10) == 10  # the log start inside kafka-python's batches
        assert c.commit("orders", 0, "billing", 120)


def test_a_data_directory_moved_into_a_database_is_served_as_it_was(tmp_path, pg_server, pg_database):
    data = str(tmp_path / "data")
    gw = GatewayProcess(data, "log_level=WARNING")
    try:
        fill(gw)
        before = snapshot(gw)
        one_line(migrate("--data-dir", data, "--to", pg_database), 1, "is in use by another logway process",
                 f"(pid {gw.pid})", "stop that gateway first")
    finally:
        gw.stop()
    assert before["ends"][("orders", 0)] == (10, 150) and len(before["kafka"]["orders"]) == 140
    assert before["native"]["orders-0"][0][0] == 10 and len(before["kafka"]["tx-uncommitted"]) == 11
    with open(os.path.join(data, "producer_ids")) as f:
        reserved = int(f.read())

    done = migrate("--data-dir", data, "--to", pg_database, "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    by_topic = {r["topic"]: r for r in rows if "topic" in r}
    assert {t: (r["partitions"], r["format"], r["status"]) for t, r in by_topic.items()} == {
        "orders": (2, "kafka", "copied"), "secure": (1, "kafka", "copied"), "tk": (1, "tank", "copied"),
        "tx": (1, "kafka", "copied")}
    assert by_topic["orders"]["log_start_offsets"] == [10, 0] and rows[-1]["verified"] is True

    pg = pg_settings(pg_server, dbname(pg_database))
    gw = GatewayProcess(str(tmp_path / "pg-run"), *pg, "log_level=WARNING")
    try:
        assert snapshot(gw) == before  # the same records at the same offsets, ids, ends, committed offset
        with NativeClient(*gw.native) as c:
            assert c.produce("orders", 1, [b"native-2"]) == [2]
        ck = CKProducer({"bootstrap.servers": bootstrap(gw), "enable.idempotence": True, "linger.ms": 5})
        ck.produce("orders", value=b"after", partition=0)
        assert ck.flush(20) == 0
        del ck
        assert native_records(gw, "orders", 0)[-1] == (150, b"after")
        with TankClient(*gw.addresses["tank"]) as t:
            t.produce("tk", 0, [b"tank-after"])
        assert tank_values(gw, "tk")[-1] == (7, b"tank-after")  # (seq = offset + 1)
    finally:
        gw.stop()
    with psycopg.connect(pg_database) as conn:  # the new idempotent producer's id: one the directory never gave
        data_of_last = conn.execute(
            "SELECT b.data FROM logway.batches b JOIN logway.partitions p USING (partition_id) JOIN logway.topics t "
            "USING (topic_id) WHERE t.name = 'orders' AND p.partition = 0 ORDER BY end_offset DESC LIMIT 1"
        ).fetchone()[0]
    view, pos, fmt = memoryview(bytes(data_of_last)), 0, KafkaFormat()
    while pos + fmt.scan(view, pos)[0] < len(view):
        pos += fmt.scan(view, pos)[0]
    assert parse_header(view, pos).producer_id >= reserved

    gw = GatewayProcess(str(tmp_path / "pg-run"), *pg, "log_level=WARNING", "auth.native_login=true",
                        "auth.users.root=root-pw", "auth.super_users=User:root")
    try:
        with NativeClient(*gw.native) as alice:  # the user and its ACLs came along
            alice.login("alice", "alice-pw", "SCRAM-SHA-256")
            assert alice.produce("secure", 0, [b"s"]) == [0]
            with pytest.raises(NativeError, match="not authorized: User:alice may not WRITE TOPIC 'orders'"):
                alice.produce("orders", 0, [b"x"])
    finally:
        gw.stop()


def _data_dir(path, **topics) -> str:
    eng = LogEngine(path, {"kafka": KafkaFormat()}, TopicConfig())
    for name, config in topics.items():
        eng.create_topic(name, 1, config)
    eng.close()
    return str(path)


def test_what_cannot_be_migrated_is_refused_in_one_line(tmp_path, pg_server, pg_database):
    plain = _data_dir(tmp_path / "plain", t={})
    one_line(migrate("--data-dir", plain, "--to", f"host=127.0.0.1 port={free_port()} user=x dbname=x", "--set",
                     "storage.postgres.connect_timeout_ms=1000"), 1, "unreachable")
    compacted = _data_dir(tmp_path / "compacted", t={}, table={"cleanup.policy": "compact"})
    one_line(migrate("--data-dir", compacted, "--to", pg_database), 1, "table are compacted",
             "does not compact yet; nothing was copied")
    other = _data_dir(tmp_path / "other", theirs={})
    assert migrate("--data-dir", other, "--to", pg_database).returncode == 0
    one_line(migrate("--data-dir", plain, "--to", pg_database), 1, "holds topics of its own (theirs)",
             "--into-existing")
    done = migrate("--data-dir", plain, "--to", pg_database, "--into-existing")
    assert done.returncode == 0, done.stderr
    header, row, sentence = done.stdout.splitlines()
    assert header == "topic\ttopic_id\tpartitions\tformat\trecords\tbytes\tstatus"
    assert row.split("\t")[2:] == ["1", "kafka", "0", "0", "copied"]
    assert sentence.startswith("copied and verified 1 topic(s) into database postgresql://127.0.0.1:")
    one_line(migrate("--data-dir", str(tmp_path / "nothing"), "--to", pg_database), 2, "holds no logway data")
    one_line(migrate("--data-dir", plain, "--to", pg_database, "--schema", "Bad-Name"), 2, "configuration error")
