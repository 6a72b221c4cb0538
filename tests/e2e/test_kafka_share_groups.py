"""KIP-932 share groups with an unmodified client: confluent-kafka 2.16's `ShareConsumer` (librdkafka 2.16) against a
gateway process, in implicit and explicit acknowledgement modes — queue semantics over the log (members of one
group split the records, each delivered once), released and rejected records, a lock that expires hands the
record to another member, and after a kill -9 of the gateway an acknowledged record is never delivered again
while one acquired and not acknowledged is delivered again. Some records are written by a native client: the
queue is over the log every protocol shares."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import share_groups as S
from logway.codecs.kafka.error_codes import ErrorCode as E

from ..kafka_wire import KafkaWireClient

pytestmark = pytest.mark.slow

SETTINGS = ("log_level=WARNING", "kafka.group_share_heartbeat_interval_ms=300", "kafka.share_auto_offset_reset=earliest")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = GatewayProcess(str(tmp_path_factory.mktemp("kip932") / "data"), *SETTINGS)
    yield g
    g.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def topic_with(gw, partitions: int, values: list[bytes]) -> str:
    name = "sq-" + uuid.uuid4().hex[:8]
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)
    producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 0})
    for i, v in enumerate(values):
        producer.produce(name, v, partition=i % partitions)
    assert producer.flush(15) == 0
    return name


def share_consumer(gw, group, topic, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap(gw), "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers, done, timeout=30.0, on_message=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done():
        for c in consumers:
            for msg in c.poll(0.2):
                assert msg.error() is None, msg.error()
                on_message(c, msg)
    return done()


def start_offset(gw, group, topic) -> list[int]:
    with KafkaWireClient(*gw.addresses["kafka"]) as c:
        resp = c.call(90, 0, S.DescribeShareGroupOffsetsRequest(groups=[
            S.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    return sorted(p.start_offset for t in resp.groups[0].topics if t.topic_name == topic for p in t.partitions)


def test_implicit_mode_two_members_split_the_records_each_delivered_once(gw):
    values = [b"m%02d" % i for i in range(60)]
    topic = topic_with(gw, 2, values[:50])
    with NativeClient(*gw.native) as c:  # the rest through another protocol: one log
        c.produce(topic, 0, values[50:55])
        c.produce(topic, 1, values[55:])
    group = "sq-" + uuid.uuid4().hex[:8]
    consumers = [share_consumer(gw, group, topic), share_consumer(gw, group, topic)]
    seen: dict[ShareConsumer, list[bytes]] = {c: [] for c in consumers}
    assert poll_until(consumers, lambda: sum(map(len, seen.values())) >= 60,
                      on_message=lambda c, m: seen[c].append(m.value()))
    everything = [v for vs in seen.values() for v in vs]
    assert sorted(everything) == values  # each record once, whichever member got it
    for c in consumers:
        c.poll(0.5)  # implicit mode: the next poll acknowledges the previous batch
        c.commit_sync()
        c.close()
    assert start_offset(gw, group, topic) == [30, 30]  # every record done


def test_explicit_mode_accept_release_reject(gw):
    topic = topic_with(gw, 1, [b"accept", b"release", b"reject", b"later"])
    group = "sqx-" + uuid.uuid4().hex[:8]
    consumer = share_consumer(gw, group, topic, **{"share.acknowledgement.mode": "explicit"})
    firsts: list = []
    assert poll_until([consumer], lambda: len(firsts) == 4, on_message=lambda c, m: firsts.append(m))
    kinds = {b"accept": AcknowledgeType.ACCEPT, b"release": AcknowledgeType.RELEASE,
             b"reject": AcknowledgeType.REJECT, b"later": AcknowledgeType.ACCEPT}
    assert [m.delivery_count() for m in firsts] == [1, 1, 1, 1]
    for m in firsts:
        consumer.acknowledge(m, kinds[m.value()])
    consumer.commit_sync()
    again: list = []
    assert poll_until([consumer], lambda: again, on_message=lambda c, m: again.append(m))
    assert [(m.value(), m.delivery_count()) for m in again] == [(b"release", 2)]  # only the released one
    consumer.acknowledge(again[0])
    consumer.commit_sync()
    assert consumer.poll(1.0) == [] or all(m.error() for m in consumer.poll(0.1))
    consumer.close()
    assert start_offset(gw, group, topic) == [4]


def test_an_expired_lock_hands_the_record_to_another_member(gw):
    topic = topic_with(gw, 1, [b"slow"])
    group = "sql-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", "1500", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    holder = share_consumer(gw, group, topic, **{"share.acknowledgement.mode": "explicit"})
    held: list = []
    assert poll_until([holder], lambda: held, on_message=lambda c, m: held.append(m))
    # the holder neither acknowledges nor polls again; another member gets the record once the lock expires
    other = share_consumer(gw, group, topic)
    taken: list = []
    started = time.monotonic()
    assert poll_until([other], lambda: taken, on_message=lambda c, m: taken.append(m))
    assert (taken[0].value(), taken[0].delivery_count()) == (b"slow", 2) and time.monotonic() - started >= 0.5
    other.close()
    holder.close()


MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import AcknowledgeType, ShareConsumer
    bootstrap, group, topic, accept = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got = []
    while len(got) < 10:
        got += [m for m in c.poll(0.2) if m.error() is None]
    for m in got[:accept]:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()  # answered: those acknowledgements are durable
    for m in got[accept:]:  # acquired, never acknowledged: released again when the process dies, or its lock ends
        pass
    print("acked", " ".join(m.value().decode() for m in got[:accept]), flush=True)
    sys.stdin.read()  # until killed
""")


def test_after_kill_9_acknowledged_records_never_come_back_and_acquired_ones_do(tmp_path):
    data = str(tmp_path / "data")
    values = [b"k%d" % i for i in range(10)]
    script = tmp_path / "member.py"
    script.write_text(MEMBER)
    group = "sqk-" + uuid.uuid4().hex[:8]
    gw = GatewayProcess(data, *SETTINGS)
    member = None
    try:
        topic = topic_with(gw, 1, values)
        member = subprocess.Popen([sys.executable, str(script), bootstrap(gw), group, topic, "6"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = member.stdout.readline()
        acked = line.split()[1:]
        assert line.startswith("acked") and len(acked) == 6, line
        gw.kill()  # SIGKILL: nothing flushed or closed on the way out
    finally:
        if member is not None:
            member.kill()
            member.wait()
        gw.kill()
    gw = GatewayProcess(data, *SETTINGS)
    try:
        consumer = share_consumer(gw, group, topic)
        redelivered: list = []
        assert poll_until([consumer], lambda: len(redelivered) >= 4,
                          on_message=lambda c, m: redelivered.append((m.value().decode(), m.delivery_count())))
        time.sleep(1.0)
        redelivered += [(m.value().decode(), m.delivery_count()) for m in consumer.poll(0.5) if m.error() is None]
        assert sorted(v for v, _ in redelivered) == sorted(v.decode() for v in values if v.decode() not in acked)
        assert {count for _, count in redelivered} == {2}  # the delivery counts survived the kill
        consumer.close()
        with KafkaWireClient(*gw.addresses["kafka"]) as c:  # a session of the dead process is gone with it
            late = c.call(79, 1, S.ShareAcknowledgeRequest(group_id=group, member_id="gone", share_session_epoch=3))
            assert late.error_code == E.SHARE_SESSION_NOT_FOUND
    finally:
        gw.stop()
