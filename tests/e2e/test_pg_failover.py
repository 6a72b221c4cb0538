"""Two cluster gateways over PostgreSQL under mixed load, and what can fail under them: the primary has a synchronous
standby (logway.bench.postgres `add_standby`, made with pg_basebackup), the gateways name both servers in one libpq
connection string (`target_session_attrs=read-write`: whichever takes writes), and under an idempotent
confluent-kafka producer spread over both gateways, native producers each on a partition its gateway leads and a
consumer group committing offsets, one of these happens:
- the primary is killed (kill -9) and, once the gateways' leases have lapsed, the standby is promoted
  (`pg_ctl promote`);
- the primary is killed and started again after as long;
- a gateway is killed (kill -9): the group's coordinator and half the leaders.
The rest carries on through it: acknowledgements resume, no acknowledged record is lost, none is stored twice,
every partition's offsets stay contiguous and the group's committed offsets are kept."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.bench.launcher import GatewayProcess
from logway.bench.postgres import PASSWORD, USER
from logway.clients.errors import ClientError
from logway.clients.native import NativeClient

from ..pg_cluster import leaders, stored_records
from .test_postgres import bootstrap

pytestmark = pytest.mark.slow

LEASE_MS = 1000
PARTITIONS = 8
NATIVE = 4  # native producers, each on one of partitions 0..NATIVE-1
TOPIC = "t"


def member(tmp_path, name: str, primary, standby, database: str) -> GatewayProcess:
    dsn = (f"host=127.0.0.1,127.0.0.1 port={primary.port},{standby.port} user={USER} password={PASSWORD} "
           f"dbname={database} target_session_attrs=read-write")
    return GatewayProcess(str(tmp_path / name), "storage.backend=postgres", f"storage.postgres.dsn={dsn}",
                          "storage.postgres.connect_timeout_ms=2000", "storage.postgres.commit_retry_ms=30000",
                          "storage.postgres.cluster=true", f"storage.postgres.lease_ms={LEASE_MS}",
                          "log_level=WARNING")


def leader_of(gateways, partition: int) -> GatewayProcess | None:
    """The gateway leading `partition` as Kafka metadata tells it (node id = member id), or None while none does."""
    md = AdminClient({"bootstrap.servers": ",".join(bootstrap(gw) for gw in gateways)}).list_topics(TOPIC, timeout=5)
    parts = md.topics[TOPIC].partitions
    node = parts[partition].leader if partition in parts else -1
    if node not in md.brokers:
        return None
    port = md.brokers[node].port
    return next((gw for gw in gateways if gw.addresses["kafka"][1] == port), None)


class Load:
    """What the clients were told: acknowledged records by (partition, offset), the group's acknowledged commits,
    and errors a client must never see; `lock` (a Condition) is notified at each acknowledgement."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.kinds = {"kafka": 0, "native": 0}
        self.commits: list[dict[int, int]] = []
        self.tried: dict[int, set[int]] = {}  # every offset the group tried to commit, by partition
        self.failed: list = []
        self.stop = threading.Event()

    def ack(self, kind: str, items) -> None:
        with self.lock:
            for key, value in items:
                self.acked[key] = value
                self.kinds[kind] += 1
            self.lock.notify_all()

    def count(self, kind: str) -> int:
        with self.lock:
            return self.kinds[kind]

    def wait(self, what: str, predicate, timeout: float) -> None:
        with self.lock:
            assert self.lock.wait_for(predicate, timeout), f"{what} within {timeout} s: {self.kinds}"


def kafka_producer(gateways, load: Load) -> None:
    """An idempotent producer (acks=all) over both gateways, every partition in turn."""
    def delivered(err, msg):
        if err is None:
            load.ack("kafka", [((msg.partition(), msg.offset()), msg.value())])
        else:
            with load.lock:
                load.failed.append(err)

    producer = Producer({"bootstrap.servers": ",".join(bootstrap(gw) for gw in gateways), "enable.idempotence": True,
                         "acks": "all", "linger.ms": 2, "message.timeout.ms": 90_000})
    i = 0
    while not load.stop.is_set():
        producer.produce(TOPIC, b"kafka-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
        producer.poll(0)
        i += 1
        if i % 100 == 0:
            time.sleep(0.01)
    assert producer.flush(120) == 0


def native_producer(gateways, partition: int, load: Load) -> None:
    """Runs of records to `partition` through the gateway leading it (asked again after any error: not
    acknowledged, so a record of a failed run may or may not be stored, but never twice)."""
    seq = 0
    while not load.stop.is_set():
        try:
            gw = leader_of(gateways, partition)
            if gw is None:
                load.stop.wait(0.05)
                continue
            with NativeClient(*gw.native, timeout=40) as c:
                while not load.stop.is_set():
                    values = [b"native%d-%d" % (partition, seq + i) for i in range(1 + seq % 13)]
                    seq += len(values)
                    offsets = c.produce(TOPIC, partition, values)
                    load.ack("native", [((partition, o), v) for o, v in zip(offsets, values)])
        except (ClientError, OSError, KafkaException):
            load.stop.wait(0.05)


def group_consumer(gateways, load: Load) -> None:
    """A consumer group member that commits its position every few hundred records; each offset it tries to commit
    and each commit acknowledged is noted. After the load it commits once more until that is acknowledged (what
    it then holds of each partition: a partition whose position is not known again after a rebalance is left out
    of it)."""
    consumer = Consumer({"bootstrap.servers": ",".join(bootstrap(gw) for gw in gateways), "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])

    def commit() -> bool:
        with load.lock:
            for tp in consumer.position(consumer.assignment()):
                if tp.offset >= 0:
                    load.tried.setdefault(tp.partition, set()).add(tp.offset)
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException:
            return False
        with load.lock:
            load.commits.append({tp.partition: tp.offset for tp in done if tp.offset >= 0})
            load.lock.notify_all()
        return True

    try:
        seen = 0
        while not load.stop.is_set():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
                if seen % 300 == 0:
                    commit()
        deadline = time.monotonic() + 60
        while not commit():
            assert time.monotonic() < deadline, "the group's last commit was never acknowledged"
            consumer.poll(0.2)
    finally:
        consumer.close()


@pytest.mark.parametrize("event", ["promote the standby", "restart the primary", "kill a gateway"])
def test_under_mixed_load_nothing_acknowledged_is_lost_when_we(tmp_path, pg_primary_and_standby, event):
    primary, standby = pg_primary_and_standby
    database = primary.create_database()
    a = member(tmp_path, "a", primary, standby, database)
    b = member(tmp_path, "b", primary, standby, database)
    gateways = [a, b]
    load = Load()
    threads = [threading.Thread(target=kafka_producer, args=(gateways, load)),
               threading.Thread(target=group_consumer, args=(gateways, load)),
               *(threading.Thread(target=native_producer, args=(gateways, p, load)) for p in range(NATIVE))]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(a)})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(15)
        leaders(b, TOPIC, PARTITIONS, until=lambda brokers, found: len(brokers) == 2 and set(found) == brokers)
        try:
            for t in threads:
                t.start()
            load.wait("acknowledgements of both kinds and a group commit before the kill",
                      lambda: min(load.kinds.values()) >= 1000 and load.commits, 60)
            (a if event == "kill a gateway" else primary).kill()
            with load.lock:
                at_kill = dict(load.kinds)
                committed_before = {p: o for c in load.commits for p, o in c.items()}
            if event != "kill a gateway":
                time.sleep(2 * LEASE_MS / 1000)  # (no primary for longer than a lease: the time passing is the point)
                standby.promote() if event == "promote the standby" else primary.start()
            back_at = time.monotonic()
            with load.lock:
                commits_then = len(load.commits)
            # both kinds of producers and the group go on, within a bounded time
            load.wait(f"acknowledgements of both kinds after we {event}",
                      lambda: all(load.kinds[k] >= at_kill[k] + 1000 for k in at_kill), 60)
            load.wait(f"a group commit after we {event}", lambda: len(load.commits) > commits_then, 30)
            resumed_s = time.monotonic() - back_at
            live = {1} if event == "kill a gateway" else {0, 1}
            leaders(b, TOPIC, PARTITIONS, until=lambda brokers, found: brokers == live and set(found) == brokers)
        finally:
            load.stop.set()
            for t in threads:
                if t.ident is not None:  # (started)
                    t.join(150)
        assert not any(t.is_alive() for t in threads)
        assert not load.failed, load.failed[:3]

        stored = stored_records(b, TOPIC, PARTITIONS)
        lost = [key for key, value in load.acked.items() if stored.get(key) != value]
        assert not lost, f"acknowledged records lost or moved: {lost[:5]}"
        values = list(stored.values())
        assert len(values) == len(set(values)), "a record was stored twice"
        # the group's offsets: each partition's is its last acknowledged commit or one tried after it (a commit the
        # client got no answer to may have been written: the coordinator died, or the database, before answering)
        last = {p: o for c in load.commits for p, o in c.items()}
        again = Consumer({"bootstrap.servers": bootstrap(b), "group.id": "g", "enable.auto.commit": False})
        kept = {tp.partition: tp.offset for tp in again.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=15) if tp.offset >= 0}
        again.close()
        assert set(kept) == set(last)
        for p, offset in kept.items():
            assert offset >= last[p] and offset in load.tried[p], (p, offset, last[p], sorted(load.tried[p]))
        assert all(kept[p] >= o for p, o in committed_before.items())
        print(f"acknowledgements resumed {resumed_s:.1f} s after we {event}; {load.kinds}")
    finally:
        a.stop()
        b.stop()
