"""KIP-848 consumer groups with an unmodified client: confluent-kafka 2.16 (librdkafka 2.16) with
`group.protocol=consumer` against a gateway process — the server-side assignment, incremental rebalancing as
members come and go (a member keeps consuming what it keeps), static membership across a restart of the client, a
killed member's partitions taken over after its session, the range assignor asked for by the client, committed
offsets in the one offset store (a classic consumer and the native protocol see them), and classic and consumer
groups side by side as the admin client lists and describes them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient

pytestmark = pytest.mark.slow

SESSION_MS = 3000


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = GatewayProcess(str(tmp_path_factory.mktemp("kip848") / "data"), "log_level=WARNING",
                       "kafka.group_consumer_heartbeat_interval_ms=300",
                       f"kafka.group_consumer_session_timeout_ms={SESSION_MS}")
    yield g
    g.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def topic_with(gw, partitions: int, records: int) -> str:
    name = "cg-" + uuid.uuid4().hex[:8]
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)
    producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 0})
    for i in range(records):
        producer.produce(name, b"v%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0
    return name


class Tracked:
    """A consumer of the consumer protocol that records what it was assigned and what it was asked to revoke."""

    def __init__(self, gw, group, topic, **conf):
        self.assigned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.values: list[bytes] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": group,
                                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, **conf})
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer, partitions):
        self.assigned |= {tp.partition for tp in partitions}

    def _revoke(self, consumer, partitions):
        gone = {tp.partition for tp in partitions}
        self.revoked.append(gone)
        self.assigned -= gone

    def poll(self, seconds=0.2):
        msg = self.consumer.poll(seconds)
        if msg is not None and msg.error() is None:
            self.values.append(msg.value())
        return msg


def poll_until(members, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll(0.1)
        if done():
            return True
    return False


def test_server_side_assignment_and_incremental_rebalance(gw):
    topic = topic_with(gw, 4, 40)
    group = "g848-" + uuid.uuid4().hex[:8]
    first = Tracked(gw, group, topic)
    assert poll_until([first], lambda: len(first.values) == 40)  # alone: all four partitions
    assert first.assigned == {0, 1, 2, 3}
    first.consumer.commit(asynchronous=False)
    second = Tracked(gw, group, topic)
    assert poll_until([first, second], lambda: len(first.assigned) == 2 and len(second.assigned) == 2)
    # incremental: the first member gave up exactly the two partitions the second took, and kept consuming its two
    assert first.revoked == [second.assigned] and first.assigned.isdisjoint(second.assigned)
    producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 0})
    for p in range(4):
        producer.produce(topic, b"late-%d" % p, partition=p)
    assert producer.flush(15) == 0
    assert poll_until([first, second], lambda: len(first.values) + len(second.values) == 44)
    assert sorted(first.values[40:] + second.values) == sorted(b"late-%d" % p for p in range(4))
    second.consumer.close()  # leaves: the first member takes everything back
    assert poll_until([first], lambda: first.assigned == {0, 1, 2, 3})
    first.consumer.close()
    # the commits are in the one offset store: a classic consumer of the group sees them, and so does native
    classic = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": group, "group.protocol": "classic"})
    committed = classic.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    assert [tp.offset for tp in committed] == [10, 10, 10, 10]
    classic.close()
    with NativeClient(*gw.native) as c:
        assert c.committed(topic, 0, group) == 10


def test_range_assignor_as_the_client_asks(gw):
    topic = topic_with(gw, 4, 0)
    group = "g848r-" + uuid.uuid4().hex[:8]
    conf = {"group.remote.assignor": "range"}
    members = [Tracked(gw, group, topic, **conf) for _ in range(2)]
    assert poll_until(members, lambda: all(len(m.assigned) == 2 for m in members))
    assert sorted(sorted(m.assigned) for m in members) == [[0, 1], [2, 3]]  # contiguous ranges
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert described.type == ConsumerGroupType.CONSUMER
    for m in members:
        m.consumer.close()


STATIC_MEMBER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    bootstrap, group, topic, instance = sys.argv[1:5]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "group.instance.id": instance, "auto.offset.reset": "earliest"})
    assigned = set()
    c.subscribe([topic], on_assign=lambda _, ps: assigned.update(tp.partition for tp in ps))
    while True:
        c.poll(0.1)
        print("assigned", sorted(assigned), flush=True)
""")


def test_a_killed_member_is_replaced_after_its_session_and_a_static_member_keeps_its_partitions(gw, tmp_path):
    topic = topic_with(gw, 2, 0)
    group = "g848s-" + uuid.uuid4().hex[:8]
    script = tmp_path / "member.py"
    script.write_text(STATIC_MEMBER)

    def start(instance):
        return subprocess.Popen([sys.executable, str(script), bootstrap(gw), group, topic, instance],
                                stdout=subprocess.PIPE, text=True)

    def wait_assigned(proc, count):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("assigned") and len(eval(line.split(" ", 1)[1])) == count:
                return eval(line.split(" ", 1)[1])
        raise AssertionError("no assignment")

    static = start("static-1")
    try:
        mine = wait_assigned(static, 2)
        live = Tracked(gw, group, topic)
        assert poll_until([live], lambda: len(live.assigned) == 1)
        os.kill(static.pid, signal.SIGKILL)  # no leave: its session must expire first
        static.wait()
        started = time.monotonic()
        assert poll_until([live], lambda: live.assigned == {0, 1}, timeout=SESSION_MS / 1000 + 20)
        assert time.monotonic() - started >= SESSION_MS / 1000 * 0.5  # it waited for the session, not at once
        live.consumer.close()
        static = start("static-1")
        assert wait_assigned(static, 2) == mine  # alone again, with its instance id
    finally:
        static.kill()
        static.wait()


def test_classic_and_consumer_groups_side_by_side(gw):
    topic = topic_with(gw, 2, 10)
    new_group, old_group = "g848n-" + uuid.uuid4().hex[:8], "g848c-" + uuid.uuid4().hex[:8]
    modern = Tracked(gw, new_group, topic)
    classic = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": old_group, "group.protocol": "classic",
                        "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while (len(got) < 10 or len(modern.values) < 10) and time.monotonic() < deadline:
        modern.poll(0.1)
        msg = classic.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    assert len(got) == 10 and len(modern.values) == 10  # each group reads everything
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=10).result().valid}
    assert listed[new_group].type == ConsumerGroupType.CONSUMER
    assert listed[old_group].type == ConsumerGroupType.CLASSIC
    modern.consumer.close()
    classic.close()
