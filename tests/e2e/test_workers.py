"""`workers: 2` (docs/scaling.md): two worker processes over one data directory, each the only writer of its
partitions, seen by Kafka clients as two brokers. The storage engine's share mode in process first (ownership,
topic changes seen across engines, the locks, producer-id ranges), then real `logway serve` processes with
confluent-kafka (librdkafka routes produce and fetch to each partition's leader) and the wire client for the
answers a client only sees by mistake (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR), and a power cut of the whole
gateway on the power-loss file system. `workers: 1` is the rest of the suite."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
import trio
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.bench.launcher import GatewayProcess
from logway.bench.proc import child_pids as children
from logway.bench.proc import process_alive as alive
from logway.clients.errors import KafkaError, NativeError
from logway.clients.kafka import LATEST, READ_COMMITTED, READ_UNCOMMITTED, AsyncKafkaClient, KafkaClient, KafkaConfig
from logway.clients.kafka_routes import TRANSACTION, Coordinator, Leader
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient, consume_request
from logway.codecs import native as nv
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.records import Record
from logway.codecs.tank import ConsumeFlags
from logway.codecs.tank.chunk import decode_chunk
from logway.gateway.cluster.ownership import leaders, partition_leader
from logway.gateway.cluster.workers import worker_overrides
from logway.gateway.config import load_config
from logway.gateway.formats import STORAGE_FORMATS
from logway.storage import LogEngine, StorageError, TopicExists
from logway.storage.engine import WORKER_PRODUCER_IDS, ForeignPartition, PartitionNotOwned, Share

from ..certs import self_signed
from ..kafka_wire import KafkaWireClient
from ..other_user import CAN_SWITCH, WHY_NOT, OtherUser
from ..worker_procs import relay_sockets, worker_pid

pytestmark = pytest.mark.slow

PARTITIONS = 4


# -- the engine's share mode, in process ---------------------------------------------------------------------------

def test_workers_engines_own_their_partitions_and_see_each_others_topic_changes(tmp_path):
    data = str(tmp_path / "data")
    supervisor = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2)))
    with pytest.raises(StorageError, match="in use"):  # a single gateway cannot open it meanwhile
        LogEngine(data, STORAGE_FORMATS)
    w0 = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2), 0, supervisor.clean_start))
    w1 = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2), 1, supervisor.clean_start))
    told: list[tuple[int, str]] = []  # each change made, as the engine reports it for the other workers
    w0.on_shared_change = lambda name: told.append((0, name))
    w1.on_shared_change = lambda name: told.append((1, name))
    topic = w0.create_topic("t", PARTITIONS)
    owners = [partition_leader("t", p, 2) for p in range(PARTITIONS)]
    assert sorted(owners) == [0, 0, 1, 1]  # consecutive partitions on consecutive workers
    assert len(topic.partitions) == PARTITIONS
    assert [p.partition for p in topic.partitions] == [p for p in range(PARTITIONS) if owners[p] == 0]
    foreign = next(p for p in range(PARTITIONS) if owners[p] == 1)
    assert isinstance(w0.partition("t", foreign), ForeignPartition)
    with pytest.raises(PartitionNotOwned, match="served by worker 1"):
        w0.partition("t", foreign).append  # noqa: B018 (an attribute of another worker's partition)

    assert w1.refresh() == [] and len(w1.topic("t").partitions) == PARTITIONS  # created by worker 0
    with pytest.raises(TopicExists):
        w1.create_topic("t", 2)
    w1.create_partitions("t", 6)
    w1.alter_topic_config("t", {"retention.ms": 60000})
    w0.create_topic("u", 2)
    assert w1.refresh(["u", "never-made"]) == [] and "u" in w1.topics_by_name  # only the names a request asked for
    w0.refresh()
    assert len(w0.topic("t").partitions) == 6 and w0.topic("t").config.retention_ms == 60000
    assert [p.partition for p in w0.topic("t").partitions] == [p for p in range(6) if partition_leader("t", p, 2) == 0]
    assert w0.producer_ids.next_id() < WORKER_PRODUCER_IDS <= w1.producer_ids.next_id()  # apart, whatever N
    w0.delete_topic("t")
    assert w1.refresh() == ["t"] and list(w1.topics_by_name) == ["u"]
    assert told == [(0, "t"), (1, "t"), (1, "t"), (0, "u"), (0, "t")]  # the refused creation is not a change
    for engine in (w0, w1):
        engine.close()
    supervisor.close()  # it, not the workers, marks the directory cleanly shut down
    assert os.path.exists(os.path.join(data, ".clean_shutdown"))
    LogEngine(data, STORAGE_FORMATS).close()  # and a single gateway opens it again


def test_each_workers_own_ports_follow_the_configured_ones():
    """Worker i listens on each configured port + i — the admin listener on + 1 + i, its configured port being the
    supervisor's —, on an ephemeral port for the shared native and TANK ones, and where it was when started again."""
    config = load_config(env={}, overrides=["workers=2", "listeners.kafka.port=9092", "listeners.admin.port=9644",
                                            "listeners.native.port=9898", "listeners.tank.enabled=false"])
    assert sorted(worker_overrides(config, 1)) == ["listeners.admin.port=9646", "listeners.kafka.port=9093",
                                                   "listeners.native.port=0"]
    assert "listeners.admin.port=9645" in worker_overrides(config, 0)
    assert "listeners.kafka.port=40001" in worker_overrides(config, 1, {"kafka": 40001})


# -- two worker processes ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gateway = GatewayProcess(str(tmp_path_factory.mktemp("workers") / "data"), "workers=2", "log_level=WARNING",
                             "listeners.tank.enabled=true")
    yield gateway
    gateway.stop()


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def kafka_topic(gw, partitions: int = PARTITIONS, via: str = "kafka") -> str:
    name = "w-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": "%s:%d" % gw.addresses[via]})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(gw, topic: str, values: list[bytes], partitions: int = PARTITIONS) -> None:
    failed = []
    producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 5, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions,
                         on_delivery=lambda err, msg: failed.append(err) if err else None)
    assert producer.flush(30) == 0 and failed == []


def consume(consumer: Consumer, count: int, timeout: float = 30) -> list[tuple[int, int, bytes]]:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert not msg.error(), msg.error()
            out.append((msg.partition(), msg.offset(), msg.value()))
    return out


def test_metadata_has_two_brokers_and_librdkafka_produces_and_fetches_every_partition(gw):
    assert {"kafka", "kafka.1", "admin", "admin.0", "admin.1", "native", "native.0", "native.1", "tank", "tank.0",
            "tank.1"} == set(gw.addresses)
    topic = kafka_topic(gw)
    md = AdminClient({"bootstrap.servers": bootstrap(gw)}).list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {0: gw.addresses["kafka"],
                                                                    1: gw.addresses["kafka.1"]}
    assert md.controller_id == 0
    leaders = {p: md.topics[topic].partitions[p].leader for p in range(PARTITIONS)}
    assert leaders == {p: partition_leader(topic, p, 2) for p in range(PARTITIONS)}
    values = [b"v%d" % i for i in range(400)]
    produce(gw, topic, values)
    consumer = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "check", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = consume(consumer, len(values))
    consumer.close()
    assert sorted(v for _, _, v in got) == sorted(values)
    assert {p: sum(1 for q, _, _ in got if q == p) for p in range(PARTITIONS)} == {p: 100 for p in range(PARTITIONS)}


def test_a_group_commits_once_and_a_new_member_resumes_from_the_committed_offsets(gw):
    topic = kafka_topic(gw)
    produce(gw, topic, [b"first-%d" % i for i in range(40)])
    conf = {"bootstrap.servers": bootstrap(gw), "group.id": "g-" + topic, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10, "session.timeout.ms": 6000}
    first = Consumer(conf)
    first.subscribe([topic])
    assert len(consume(first, 40)) == 40
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in committed] == [10] * PARTITIONS
    first.close()
    produce(gw, topic, [b"second-%d" % i for i in range(40)])
    second = Consumer(conf)
    second.subscribe([topic])
    got = consume(second, 40)
    time.sleep(0.5)
    got += second.consume(100, 0.5)  # nothing more: the first 40 are not read again
    second.close()
    assert sorted(v for _, _, v in got[:40]) == sorted(b"second-%d" % i for i in range(40)) and len(got) == 40
    # The offsets live in worker 0's store only: worker 1 is not the coordinator.
    with KafkaWireClient(*gw.addresses["kafka.1"]) as c:
        found = c.call(G.FIND_COORDINATOR_KEY, 1, G.FindCoordinatorRequest(key="g-" + topic))
        assert (found.error_code, found.node_id, found.port) == (E.NONE, 0, gw.addresses["kafka"][1])
        commit = c.call(O.OFFSET_COMMIT_KEY, 2, O.OffsetCommitRequest(group_id="g-" + topic, topics=[
            O.OffsetCommitRequestTopic(topic, [O.OffsetCommitRequestPartition(0, 5)])]))
        assert commit.topics[0].partitions[0].error_code == E.NOT_COORDINATOR


def test_a_consumer_group_of_the_consumer_protocol_spans_both_workers(gw):
    """KIP-848 (group.protocol=consumer): worker 0 coordinates the group and assigns partitions of both workers,
    the members fetch each partition from its owner, and a topic worker 1 created is known to worker 0 in time."""
    topic = kafka_topic(gw, via="kafka.1")
    produce(gw, topic, [b"cg-%d" % i for i in range(40)])
    conf = {"bootstrap.servers": "%s:%d" % gw.addresses["kafka.1"], "group.id": "cg-" + topic,
            "group.protocol": "consumer", "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10}
    members = [Consumer(conf), Consumer(conf)]
    for m in members:
        m.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        for m in members:
            got += [(msg.partition(), msg.value()) for msg in m.consume(100, 0.2) if not msg.error()]
    assert sorted(v for _, v in got) == sorted(b"cg-%d" % i for i in range(40))
    # The first member may have read everything before the second was given its share: the group goes on
    # reconciling (revoke from one, assign to the other, a heartbeat each) until it is balanced.
    while sorted(len(m.assignment()) for m in members) != [PARTITIONS // 2] * 2 and time.monotonic() < deadline:
        for m in members:
            m.consume(100, 0.2)  # (heartbeats; a record redelivered after a revocation is at-least-once's due)
    assert sorted(len(m.assignment()) for m in members) == [PARTITIONS // 2] * 2
    for m in members:
        m.close()
    # share groups need one worker (their state is one store): not advertised here
    with KafkaWireClient(*gw.addresses["kafka.1"]) as c:
        keys = {k.api_key for k in c.call(18, 3, ApiVersionsRequest()).api_keys}
    assert 68 in keys and not keys & {76, 77, 78, 79, 90, 91, 92}


# -- logway's own Kafka client (what the Spark data source and the pipeline's producer run on) -----------------------

def _owner_port(gw, topic: str, partition: int) -> int:
    return gw.addresses["kafka" if partition_leader(topic, partition, 2) == 0 else "kafka.1"][1]


def _fetched(client, topic: str, partition: int, isolation_level: int = READ_UNCOMMITTED) -> list[bytes]:
    result = client.fetch(topic, partition, 0, 1 << 20, isolation_level=isolation_level)
    return [r.value for r in decode_records(result.records)]


@pytest.mark.parametrize("via", ["kafka", "kafka.1"])
def test_logways_kafka_client_sends_each_call_to_the_broker_that_serves_it(gw, via):
    """`logway.clients.KafkaClient` bootstrapped on either broker, with no retries (a call sent to the wrong broker
    would raise): Produce, Fetch (also the pipelined one) and ListOffsets go to each partition's leader, InitProducerId
    with a transactional id and the transaction's requests to the transaction coordinator, OffsetFetch and
    TxnOffsetCommit to the group coordinator, DeleteTopics to the controller."""
    topic, group = "r-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8]
    tid = "tx-" + topic
    with KafkaClient(KafkaConfig(*gw.addresses[via], retries=0)) as client:
        assert client.create_topic(topic, PARTITIONS) is True
        assert {p: client.for_partition(topic, p).config.port for p in range(PARTITIONS)} == {
            p: _owner_port(gw, topic, p) for p in range(PARTITIONS)}
        assert len({_owner_port(gw, topic, p) for p in range(PARTITIONS)}) == 2  # both brokers lead some
        assert client.for_coordinator(group).config.port == gw.addresses["kafka"][1]
        for p in range(PARTITIONS):
            assert client.produce(topic, p, encode_batch([Record(b"plain-%d" % p)], default_timestamp=1)) == 0
        everything = {(topic, p): LATEST for p in range(PARTITIONS)}
        assert client.list_offsets(everything) == {(topic, p): 1 for p in range(PARTITIONS)}
        assert [_fetched(client, topic, p) for p in range(PARTITIONS)] == [[b"plain-%d" % p] for p in range(PARTITIONS)]
        theirs = next(p for p in range(PARTITIONS) if _owner_port(gw, topic, p) != gw.addresses[via][1])
        assert client.send_fetch(topic, theirs, 0, 1 << 20)
        assert decode_records(client.receive_fetch(topic, theirs, 0, 1 << 20).records)[0].value == b"plain-%d" % theirs

        pid, epoch = client.init_producer_id(tid)
        client.add_partitions_to_txn(tid, pid, epoch, {topic: list(range(PARTITIONS))})
        for p in range(PARTITIONS):
            batch = encode_batch([Record(b"txn-%d" % p)], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=0, transactional=True)
            assert client.produce(topic, p, batch, transactional_id=tid) == 1
        client.add_offsets_to_txn(tid, pid, epoch, group)
        client.txn_offset_commit(tid, group, pid, epoch, {(topic, p): 7 for p in range(PARTITIONS)})
        client.end_txn(tid, pid, epoch, committed=True)
        assert client.offset_fetch(group) == {(topic, p): 7 for p in range(PARTITIONS)}
        assert client.list_offsets(everything, isolation_level=READ_COMMITTED) == {
            (topic, p): 3 for p in range(PARTITIONS)}  # the record, the transaction's, its marker
        assert [_fetched(client, topic, p, READ_COMMITTED) for p in range(PARTITIONS)] == [
            [b"plain-%d" % p, b"txn-%d" % p] for p in range(PARTITIONS)]

        client.delete_topic(topic)
        deadline = time.monotonic() + 10  # the other broker hears of the deletion a moment later
        while client.partition_counts([topic]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.partition_counts([topic]) == {}


def test_logways_kafka_client_looks_its_routes_up_again_when_a_broker_says_they_moved(gw):
    """Routes gone stale — a leader or coordinator moved, as when the gateway restarts with another `workers` —
    are forgotten at the broker's NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR and the call made again where it
    belongs (within `retries`); with no retries the error is the caller's."""
    topic, group = kafka_topic(gw), "g-" + uuid.uuid4().hex[:8]
    theirs = next(p for p in range(PARTITIONS) if partition_leader(topic, p, 2) == 1)
    batch = encode_batch([Record(b"x")], default_timestamp=1)

    def stale(client) -> None:
        client.list_offsets({(topic, theirs): LATEST})  # learns the routes
        client.routes.leaders[Leader(topic, theirs)] = 0
        client.routes.coordinators[Coordinator(group)] = 1

    with KafkaClient(KafkaConfig(*gw.addresses["kafka"], retries=0)) as client:
        stale(client)
        with pytest.raises(KafkaError) as err:
            client.produce(topic, theirs, batch)
        assert err.value.code == E.NOT_LEADER_OR_FOLLOWER
    with KafkaClient(KafkaConfig(*gw.addresses["kafka"], retry_backoff=0.01)) as client:
        stale(client)
        assert client.produce(topic, theirs, batch) == 0
        assert client.routes.leaders[Leader(topic, theirs)] == 1
        client.routes.coordinators[Coordinator(group)] = 1
        assert client.offset_fetch(group) == {}
        assert client.routes.coordinators[Coordinator(group)] == 0


def test_logways_kafka_client_routes_a_topic_it_looked_up_before_it_existed(gw):
    topic = "late-" + uuid.uuid4().hex[:8]
    with KafkaClient(KafkaConfig(*gw.addresses["kafka"], retries=0)) as client:
        with pytest.raises(KafkaError) as err:
            client.list_offsets({(topic, p): LATEST for p in range(PARTITIONS)})
        assert err.value.code == E.UNKNOWN_TOPIC_OR_PARTITION
        client.create_topic(topic, PARTITIONS)
        for p in range(PARTITIONS):  # each at its leader, though the first look found no such topic
            assert client.produce(topic, p, encode_batch([Record(b"x")], default_timestamp=1)) == 0


def test_logways_async_kafka_client_routes_as_the_blocking_one(gw):
    topic, tid = "a-" + uuid.uuid4().hex[:8], "tx-" + uuid.uuid4().hex[:8]

    async def main():
        async with AsyncKafkaClient(KafkaConfig(*gw.addresses["kafka.1"], retries=0)) as client:
            await client.create_topic(topic, PARTITIONS)
            assert {p: (await client.for_partition(topic, p)).config.port for p in range(PARTITIONS)} == {
                p: _owner_port(gw, topic, p) for p in range(PARTITIONS)}
            for p in range(PARTITIONS):
                assert await client.produce(topic, p, encode_batch([Record(b"%d" % p)], default_timestamp=1)) == 0
            assert await client.list_offsets({(topic, p): LATEST for p in range(PARTITIONS)}) == {
                (topic, p): 1 for p in range(PARTITIONS)}
            for p in range(PARTITIONS):
                records = decode_records((await client.fetch(topic, p, 0, 1 << 20)).records)
                assert [r.value for r in records] == [b"%d" % p]
            pid, epoch = await client.init_producer_id(tid)
            await client.add_partitions_to_txn(tid, pid, epoch, {topic: [0]})
            await client.end_txn(tid, pid, epoch, committed=False)
            assert (await client.for_coordinator(tid, TRANSACTION)).config.port == gw.addresses["kafka"][1]

    trio.run(main)


def test_a_request_to_the_wrong_broker_is_not_leader_or_follower(gw):
    topic = kafka_topic(gw)
    owners = {p: partition_leader(topic, p, 2) for p in range(PARTITIONS)}
    batch = encode_batch([Record(b"x")], default_timestamp=1)
    for node, key in ((0, "kafka"), (1, "kafka.1")):
        mine = next(p for p, o in owners.items() if o == node)
        theirs = next(p for p, o in owners.items() if o != node)
        with KafkaWireClient(*gw.addresses[key]) as c:
            assert c.produce(topic, mine, batch) == (E.NONE, 0)
            assert c.produce(topic, theirs, batch)[0] == E.NOT_LEADER_OR_FOLLOWER
            started = time.monotonic()
            fetch = c.call(F.API_KEY, 11, F.FetchRequest(max_wait_ms=5000, min_bytes=1 << 20, topics=[
                F.FetchTopic(topic, [F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                                     for p in (mine, theirs)])]))
            codes = {p.partition_index: p.error_code for p in fetch.responses[0].partitions}
            assert codes == {mine: E.NONE, theirs: E.NOT_LEADER_OR_FOLLOWER}
            assert time.monotonic() - started < 4  # at once, not after max_wait
            listed = c.call(L.API_KEY, 5, L.ListOffsetsRequest(topics=[
                L.ListOffsetsTopic(topic, [L.ListOffsetsPartition(partition_index=p, timestamp=-1)
                                           for p in (mine, theirs)])]))
            assert {p.partition_index: (p.error_code, p.offset) for p in listed.topics[0].partitions} == {
                mine: (E.NONE, 1), theirs: (E.NOT_LEADER_OR_FOLLOWER, -1)}


def test_native_requests_through_any_worker_reach_the_partitions_owner(gw):
    """Native clients connect to the shared port, served by every worker: each relays Produce, Fetch (long-polls
    too), DeleteRecords to the owner and merges DescribeTopic; group offsets live on worker 0, where every other
    worker relays the requests on them. A worker's own listener (what the others relay to) does the same."""
    name = "n-" + uuid.uuid4().hex[:8]
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    theirs = owners.index(1)
    with NativeClient(*gw.native) as c, NativeClient(*gw.native) as waiter:
        c.create_topic(name, PARTITIONS)
        for p in range(PARTITIONS):
            assert c.produce(name, p, [Record(b"%d-a" % p), Record(b"%d-b" % p)]) == [0, 1]
            got = c.fetch(name, p, 0)
            assert [(r.offset, r.value) for r in got.records] == [(0, b"%d-a" % p), (1, b"%d-b" % p)]
            assert got.next_offset == 2
        # a long-poll parked at worker 1 through worker 0, woken by a produce through worker 0 too
        waiter.send(nv.FetchRequest(name, theirs, 2, 1 << 20, None, 10_000, 1))
        time.sleep(0.3)
        assert c.produce(name, theirs, [b"late"]) == [2]
        answer = waiter.receive(timeout=10)
        assert [(r.offset, r.value) for r in answer.records] == [(2, b"late")]
        # offsets committed on worker 0, where a Fetch with group_id resolves them before relaying
        assert c.commit(name, theirs, "g-native", 1)
        assert c.committed(name, theirs, "g-native") == 1
        assert [r.value for r in c.fetch(name, theirs, 0, group_id="g-native").records] == [b"%d-b" % theirs, b"late"]
        assert c.delete_records(name, theirs, 1) == 1
        desc = c.describe_topic(name)
        assert [(s.partition, s.log_start_offset, s.log_end_offset) for s in desc.partitions] == [
            (p, 1 if p == theirs else 0, 3 if p == theirs else 2) for p in range(PARTITIONS)]
        assert [s.segments for s in c.describe_topic(name, details=True).partitions] == [1] * PARTITIONS
        with pytest.raises(NativeError, match="offset out of range"):  # the owner's error, relayed as it is
            c.fetch(name, theirs, 0)
        with pytest.raises(NativeError, match="partition not found"):
            c.fetch(name, PARTITIONS, 0)
        c.ping()
    mine = owners.index(0)
    with NativeClient(*gw.addresses["native.1"]) as direct, NativeClient(*gw.native) as c:
        assert [r.value for r in direct.fetch(name, theirs, 1).records] == [b"%d-b" % theirs, b"late"]
        assert direct.produce(name, mine, [b"x"]) == [2]  # worker 0's partition, relayed by worker 1
        assert [r.value for r in c.fetch(name, mine, 2).records] == [b"x"]
        assert direct.commit(name, mine, "g-via-1", 3) and c.committed(name, mine, "g-via-1") == 3  # on worker 0
        assert direct.committed(name, theirs, "g-native") == 1
        assert [r.value for r in direct.fetch(name, mine, 0, group_id="g-via-1").records] == []  # from offset 3
        assert [(s.partition, s.log_end_offset) for s in direct.describe_topic(name).partitions] == [
            (p, 3) if p in (mine, theirs) else (p, 2) for p in range(PARTITIONS)]
        assert direct.describe_topic(name, partitions=[theirs, mine, PARTITIONS]).partitions == [
            s for s in c.describe_topic(name).partitions if s.partition in (mine, theirs)]
        assert {g.group_id for g in direct.list_groups()} >= {"g-native", "g-via-1"}
        assert direct.delete_topic(name)  # relayed to worker 0: the topic's committed offsets go with it
        assert not {"g-native", "g-via-1"} & {g.group_id for g in c.list_groups()}
        deadline = time.monotonic() + 5  # (a worker is told of another's topic changes: within milliseconds)
        while name in {t.name for t in c.list_topics()}:
            assert time.monotonic() < deadline, "the deleted topic is still listed"
            time.sleep(0.1)


def test_the_shared_native_and_tank_ports_spread_connections_over_the_workers(gw):
    """The kernel spreads the shared port's connections (SO_REUSEPORT, one socket per worker): with 24 of each,
    both workers accept some (a chance of 2 x 2^-23 that one takes them all)."""
    clients = [NativeClient(*gw.native) for _ in range(24)] + [TankClient(*gw.addresses["tank"]) for _ in range(24)]
    try:
        for c in clients[:24]:
            c.ping()
        accepted = {}
        for admin in ("admin.0", "admin.1"):
            text = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses[admin]), timeout=10).read()
            accepted[admin] = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.decode().splitlines()
                               if line.startswith("logway_connections_open{")}
        for proto in ("native", "tank"):
            key = f'logway_connections_open{{listener="{proto}"}}'
            assert all(accepted[a].get(key, 0) >= 1 for a in accepted), (proto, accepted)
    finally:
        for c in clients:
            c.close()


def test_the_supervisors_admin_listener_answers_for_every_worker(gw):
    """`admin` (the configured port) is the supervisor's: /metrics holds each worker's series under its `worker`
    label, /ready waits for both; `admin.0` and `admin.1` are the workers' own."""
    def get(name: str, path: str):
        with urllib.request.urlopen("http://%s:%d%s" % (*gw.addresses[name], path), timeout=10) as answer:
            return answer.status, answer.read().decode()

    status, text = get("admin", "/metrics")
    starts = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith(("logway_start_time_seconds", "logway_worker_up"))}
    for i in (0, 1):
        own = get(f"admin.{i}", "/metrics")[1]
        own_start = next(float(x.split(" ")[1]) for x in own.splitlines() if x.startswith("logway_start_time"))
        assert starts[f'logway_start_time_seconds{{worker="{i}"}}'] == own_start
        assert starts[f'logway_worker_up{{worker="{i}"}}'] == 1
    status, body = get("admin", "/ready")
    assert status == 200 and json.loads(body)["workers"] == {"0": "ready", "1": "ready"}
    assert get("admin.1", "/ready")[0] == 200
    assert "<html" in get("admin.0", "/")[1].lower() and get("admin", "/")[1] == get("admin.0", "/")[1]  # consoles
    with pytest.raises(urllib.error.HTTPError) as caught:
        get("admin", "/api/nothing")
    assert caught.value.code == 404


def test_the_supervisors_console_shows_every_workers_partitions_groups_and_records(gw):
    """The console on the supervisor's admin port: topics with each worker's partitions, worker 0's groups with
    the lag of worker 1's partitions too, rates added up, and the message browser asking the partition's owner."""
    name, group = "console-" + uuid.uuid4().hex[:8], "cg-" + uuid.uuid4().hex[:6]
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    with NativeClient(*gw.native) as c:
        c.create_topic(name, PARTITIONS)
        for p in range(PARTITIONS):
            c.produce(name, p, [b"v%d" % p] * (p + 1))  # log ends 1, 2, 3, 4
            assert c.commit(name, p, group, 1)

    def get(admin: str, path: str):
        with urllib.request.urlopen("http://%s:%d%s" % (*gw.addresses[admin], path), timeout=10) as answer:
            return json.loads(answer.read())

    topic = next(t for t in get("admin", "/api/topics")["topics"] if t["name"] == name)
    assert [(p["partition"], p["worker"], p["log_end_offset"]) for p in topic["partitions"]] == [
        (p, owners[p], p + 1) for p in range(PARTITIONS)]
    assert topic["records"] == sum(range(1, PARTITIONS + 1)) and 0 in owners and 1 in owners
    listed = next(g for g in get("admin", "/api/groups")["groups"] if g["group"] == group)
    assert [(r["partition"], r["end"], r["lag"]) for r in listed["partitions"]] == [
        (p, p + 1, p) for p in range(PARTITIONS)]  # worker 1's ends filled in (worker 0 alone has None there)
    assert listed["lag"] == sum(range(PARTITIONS))
    alone = next(g for g in get("admin.0", "/api/groups")["groups"] if g["group"] == group)
    assert [r["end"] is None for r in alone["partitions"]] == [o == 1 for o in owners]
    theirs = owners.index(1)
    browsed = get("admin", f"/api/topics/{name}/partitions/{theirs}/messages?last=2")
    assert [m["value"]["text"] for m in browsed["messages"]] == [f"v{theirs}"] * min(2, theirs + 1)
    totals = get("admin", "/api/rates")["totals"]["native"]["records_in"]
    assert totals == sum(get(f"admin.{i}", "/api/rates")["totals"]["native"]["records_in"] for i in (0, 1))
    ready = get("admin", "/ready")  # what the console's status badge shows
    assert ready["state"] == "ready" and set(ready["listeners"]) == {"admin.0", "admin.1"}


@pytest.mark.slow
def test_the_supervisors_console_in_headless_chromium(gw, chromium):
    """The console page of the supervisor's admin port, in a browser: every worker's partitions, the lag of worker
    1's partitions, the message browser reading from worker 1, no script error."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    name, group = "web-" + uuid.uuid4().hex[:8], "wg-" + uuid.uuid4().hex[:6]
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    with NativeClient(*gw.native) as c:
        c.create_topic(name, PARTITIONS)
        for p in range(PARTITIONS):
            c.produce(name, p, [b"<i>from %d</i>" % p] * (p + 1))
            assert c.commit(name, p, group, 0)

    def read(what):  # the console re-renders every 2 s: read again while elements are replaced
        return WebDriverWait(chromium, 20, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: (what(d),))[0]

    def rows(d, selector):
        return [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                for r in d.find_elements(By.CSS_SELECTOR, selector)]

    wait = WebDriverWait(chromium, 20)
    chromium.get("http://%s:%d/" % gw.addresses["admin"])
    topic_rows = f'#topics tbody tr[data-topic="{name}"]'
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, topic_rows)) == PARTITIONS)
    assert [r[2:5] for r in read(lambda d: rows(d, topic_rows))] == [
        [str(p), "0", str(p + 1)] for p in range(PARTITIONS)]
    lag_cells = f'#groups tbody tr[data-group="{group}"] td.lag'
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, lag_cells)) == PARTITIONS)
    assert read(lambda d: [c.text for c in d.find_elements(By.CSS_SELECTOR, lag_cells)]) == [
        str(p + 1) for p in range(PARTITIONS)]  # worker 1's partitions too
    theirs = owners.index(1)
    WebDriverWait(chromium, 20, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.CSS_SELECTOR, f'{topic_rows}[data-partition="{theirs}"] button').click() or True)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")) == theirs + 1)
    assert read(lambda d: [r[3] for r in rows(d, "#messages tbody tr")]) == [f"<i>from {theirs}</i>"] * (theirs + 1)
    wait.until(lambda d: d.find_element(By.ID, "status").text == "ready")
    errors = [e for e in chromium.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_the_supervisors_console_acts_through_worker_0(gw):
    """The console's actions on the supervisor's admin port: worker 0's native handler answers them, relaying to
    the worker that owns a partition (a test message to worker 1's partition lands there); the browser guards hold."""
    name = "act-" + uuid.uuid4().hex[:8]

    def act(body: dict, **headers: str) -> tuple[int, dict]:
        request = urllib.request.Request("http://%s:%d/api/request" % gw.addresses["admin"], json.dumps(body).encode(),
                                         {"Content-Type": "application/json", **headers}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=15) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    assert act({"CreateTopic": {"topic": name, "partitions": PARTITIONS}}) == (200, {"CreateTopic": {"created": True}})
    theirs = [partition_leader(name, p, 2) for p in range(PARTITIONS)].index(1)
    status, answer = act({"Produce": {"topic": name, "partition": theirs, "records": [list(b"to worker 1")]}})
    assert (status, answer) == (200, {"Produce": {"offsets": [0]}})
    with NativeClient(*gw.native) as c:
        assert [r.value for r in c.fetch(name, theirs, 0).records] == [b"to worker 1"]
        c.commit(name, theirs, "console-g", 1)
    status, answer = act({"ResetGroupOffsets": {"group_id": "console-g", "to": "earliest"}})
    assert status == 200 and answer["ResetGroupOffsets"]["offsets"][0]["offset"] == 0
    assert act({"CreateTopic": {"topic": name}}) == (400, {"Error": {"message": f"topic already exists: {name}"}})
    assert act({"Ping": {}}, Origin="http://elsewhere.example")[0] == 403
    with urllib.request.urlopen("http://%s:%d/api/console" % gw.addresses["admin"], timeout=15) as answer:
        assert json.load(answer)["actions"] is True


def _values(part, seq=1):
    """The message values of one partition's consume answer."""
    assert part.error in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST), part
    return [bytes(r.value) for r in decode_chunk(part.chunk, part.base_seqnum, min_seq=seq).records]


def test_native_group_admin_sees_every_workers_partitions(gw):
    """Worker 0 keeps the committed offsets; the log bounds of worker 1's partitions, which a group description
    and a reset need, are asked of worker 1, and so is the offset of a timestamp there (its segments)."""
    name, group = "g-" + uuid.uuid4().hex[:8], "ga-" + uuid.uuid4().hex[:6]
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    mine, theirs = owners.index(0), owners.index(1)
    with NativeClient(*gw.native) as c:
        c.create_topic(name, PARTITIONS)
        for p in range(PARTITIONS):
            c.produce(name, p, [b"x"] * (p + 1))  # log ends 1, 2, 3, 4
            assert c.commit(name, p, group, 0)
        described = c.describe_group(group)
        assert [(x.partition, x.committed_offset, x.log_end_offset) for x in described.partitions] == [
            (p, 0, p + 1) for p in range(PARTITIONS)]
        latest = c.reset_group_offsets(group, "latest")
        assert [(o.partition, o.previous_offset, o.offset) for o in latest.offsets] == [
            (p, 0, p + 1) for p in range(PARTITIONS)]
        assert [c.committed(name, p, group) for p in range(PARTITIONS)] == [p + 1 for p in range(PARTITIONS)]
        assert c.delete_records(name, theirs, 1) == 1
        earliest = c.reset_group_offsets(group, "earliest", validate_only=True)
        assert [o.offset for o in earliest.offsets] == [int(p == theirs) for p in range(PARTITIONS)]
        moved = c.reset_group_offsets(group, "offset", 99, topics=[(name, [theirs])])
        assert [(o.partition, o.offset) for o in moved.offsets] == [(theirs, theirs + 1)]  # into its range
        # to a timestamp: each owner searches its own partitions (worker 1's through DescribeTopic's at_timestamp)
        hour = 3_600_000
        later = int(time.time() * 1000) + hour  # after every record so far
        for p in (mine, theirs):  # offsets p + 1 and p + 2
            c.produce(name, p, [Record(b"later", timestamp=later), Record(b"latest", timestamp=later + hour)])
        for at, step in [(0, None), (later - hour // 2, 1), (later, 1), (later + 1, 2), (later + 2 * hour, 3)]:
            planned = c.reset_group_offsets(group, "timestamp", at, topics=[(name, [mine, theirs])],
                                            validate_only=True)
            assert [o.offset for o in planned.offsets] == (
                [0, 1] if step is None else [mine + step, theirs + step]), at  # (theirs starts at 1)
        done = c.reset_group_offsets(group, "timestamp", later + 1, topics=[(name, [mine, theirs])])
        assert done.reset and [c.committed(name, p, group) for p in (mine, theirs)] == [mine + 2, theirs + 2]


def test_tank_requests_spanning_workers_are_split_relayed_and_merged(gw):
    """TANK clients connect to the shared port (any worker): a Produce or Consume naming both workers' partitions is
    split by owner and the answers merged; a long-poll over both parks at both and is answered by the first append,
    wherever it lands; DiscoverPartitions asks the owner. A worker's own listener relays the same way."""
    name = "tk-" + uuid.uuid4().hex[:8]
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    mine, theirs = owners.index(0), owners.index(1)
    everything = {name: [(p, 1, 1 << 20) for p in range(PARTITIONS)]}
    with TankClient(*gw.addresses["tank"]) as c, TankClient(*gw.addresses["tank"]) as waiter:
        assert c.create_topic(name, PARTITIONS) == 0
        assert c.produce_many([(name, p, [b"%d-a" % p]) for p in range(PARTITIONS)]
                              + [(name, p, [b"%d-b" % p]) for p in range(PARTITIONS)]) == [0] * 2 * PARTITIONS
        answer = c.consume(everything)
        assert [p.partition for p in answer.topics[0].partitions] == list(range(PARTITIONS))
        assert [_values(p) for p in answer.topics[0].partitions] == [[b"%d-a" % p, b"%d-b" % p]
                                                                     for p in range(PARTITIONS)]
        assert [(b.first_available, b.high_water_mark) for b in c.discover_partitions(name)] == [(1, 2)] * PARTITIONS
        assert [m.value for m in c.get(name, theirs, 2).messages] == [b"%d-b" % theirs]
        # long-polls at the end of both workers' partitions, woken by an append to either
        at_end = {name: [(mine, 3, 1 << 20), (theirs, 3, 1 << 20)]}
        for target in (theirs, mine):
            rid = waiter.send(consume_request(at_end, max_wait_ms=10_000, min_bytes=1))
            time.sleep(0.3)
            assert c.produce(name, target, [b"woke-%d" % target]) == 0
            woken = waiter.receive(rid, timeout=10)
            parts = {p.partition: p for p in woken.topics[0].partitions}
            assert sorted(parts) == sorted([mine, theirs])
            assert _values(parts[target], 3) == [b"woke-%d" % target]
            at_end = {name: [(mine, 4 if target == mine else 3, 1 << 20), (theirs, 4, 1 << 20)]}
        # an unknown topic and partition next to relayed ones keep their own answers
        mixed = c.consume({name: [(theirs, 1, 1 << 20), (PARTITIONS, 1, 1 << 20)], "no-such-topic": [(0, 1, 100)]})
        assert _values(mixed.topics[0].partitions[0])[:2] == [b"%d-a" % theirs, b"%d-b" % theirs]
        assert mixed.topics[0].partitions[1].error == ConsumeFlags.UNKNOWN_PARTITION
        assert mixed.topics[1].unknown
    with TankClient(*gw.addresses["tank.1"]) as direct:
        assert direct.produce(name, mine, [b"x"]) == 0  # worker 0's partition, relayed by worker 1
        assert [m.value for m in direct.get(name, mine, 1).messages][-1:] == [b"x"]
        assert [m.value for m in direct.get(name, theirs, 1).messages][:2] == [b"%d-a" % theirs, b"%d-b" % theirs]
        assert [b.high_water_mark for b in direct.discover_partitions(name)][mine] == 4  # a, b, woke, x


def test_a_split_consume_past_the_parked_limit_gets_every_owners_watermark_at_once(tmp_path):
    """Past MAX_PARKED_PER_CONNECTION parked consumes, a consume over both workers' partitions is answered at once:
    worker 0's part as its timer would, worker 1's by worker 1 without waiting — its real high-water mark, not 0.
    (Each parked part of worker 1 holds a relay connection from worker 0, outside the connection limits.)"""
    from logway.gateway.protocols.tank import MAX_PARKED_PER_CONNECTION

    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "listeners.tank.enabled=true")
    try:
        name = "pk-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
        mine, theirs = owners.index(0), owners.index(1)
        with TankClient(*gw.addresses["tank"]) as c:
            assert c.create_topic(name, PARTITIONS) == 0
            assert c.produce_many([(name, p, [b"a", b"b"]) for p in (mine, theirs)]) == [0, 0]
            at_end = consume_request({name: [(mine, 3, 1 << 20), (theirs, 3, 1 << 20)]}, max_wait_ms=20_000,
                                     min_bytes=1)
            for _ in range(MAX_PARKED_PER_CONNECTION):
                c.send(at_end)
            t0 = time.monotonic()
            answer = c.receive(c.send(at_end), timeout=15)
            assert time.monotonic() - t0 < 15
            parts = {p.partition: p for p in answer.topics[0].partitions}
            assert {p: (parts[p].error, parts[p].high_water_mark, bytes(parts[p].chunk)) for p in parts} == {
                mine: (ConsumeFlags.OK, 2, b""), theirs: (ConsumeFlags.OK, 2, b"")}
    finally:
        assert gw.stop() == 0


def test_with_a_native_token_the_workers_relay_with_it(tmp_path):
    """`auth.native_token`: each worker's own listener requires it, so the relays authenticate their internal
    connections with it — requests for either worker's partitions succeed through either worker."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "auth.native_token=s3cret")
    try:
        name = "au-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
        mine, theirs = owners.index(0), owners.index(1)
        for via in ("native.0", "native.1"):
            with NativeClient(*gw.addresses[via], token="s3cret") as c:
                if via == "native.0":
                    c.create_topic(name, PARTITIONS)
                for p in (mine, theirs):
                    c.produce(name, p, [via.encode()])
                assert c.commit(name, mine, "g", 1) and c.committed(name, mine, "g") == 1
        with NativeClient(*gw.native, token="s3cret") as c:
            assert [[r.value for r in c.fetch(name, p, 0).records] for p in (mine, theirs)] == [
                [b"native.0", b"native.1"]] * 2
        with pytest.raises(NativeError, match="authentication failed"):
            with NativeClient(*gw.addresses["native.1"], token="wrong") as c:
                c.ping()
    finally:
        assert gw.stop() == 0


def test_without_a_kafka_listener_the_workers_still_relay_to_each_other(tmp_path):
    """The workers' relay and hand-over sockets do not depend on the Kafka brokers: with the Kafka listener off,
    requests for either worker's partitions succeed through either worker."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "listeners.kafka.enabled=false")
    try:
        name = "nk-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
        mine, theirs = owners.index(0), owners.index(1)
        for via in ("native.0", "native.1"):
            with NativeClient(*gw.addresses[via]) as c:
                if via == "native.0":
                    c.create_topic(name, PARTITIONS)
                for p in (mine, theirs):
                    c.produce(name, p, [via.encode()])
        with NativeClient(*gw.native) as c:
            assert [[r.value for r in c.fetch(name, p, 0).records] for p in (mine, theirs)] == [
                [b"native.0", b"native.1"]] * 2
    finally:
        assert gw.stop() == 0


def _knock(tell, names, frame):
    """(as another user) Connect to each relay socket, send a native Ping, tell what came back before it closed."""
    for name in names:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        answer = b""
        try:
            sock.connect("\0" + name[1:])
            sock.sendall(frame)
            while chunk := sock.recv(65536):
                answer += chunk
            tell(f"{name} closed after {len(answer)} bytes")
        except (BrokenPipeError, ConnectionResetError):  # closed before the Ping was all sent
            tell(f"{name} closed after {len(answer)} bytes")
        except OSError as exc:
            tell(f"{name} {type(exc).__name__} after {len(answer)} bytes")
        finally:
            sock.close()


@pytest.mark.skipif(not CAN_SWITCH, reason=WHY_NOT)
def test_a_workers_relay_socket_serves_only_the_gateways_user(gw):
    """Relay and hand-over sockets are abstract Unix-domain sockets, which have no permissions: anyone on the host can
    find and connect to them. A process of another user is closed unserved — a Ping gets no Pong — while the gateway's
    own user is served, and the gateway goes on serving."""
    names = relay_sockets(gw)  # (with the hand-over sockets: `handover.py`, the same check)
    assert sorted(n.rsplit("-", 2)[1:] for n in names) == [[w, p] for w in "01" for p in ("handover", "native",
                                                                                           "tank")]
    frame = nv.NativeConnection("client").send(nv.PingRequest())
    native = [n for n in names if n.endswith("-native")]
    for name in native:  # this user: served
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect("\0" + name[1:])
            sock.sendall(frame)
            assert sock.recv(65536).endswith(b'{"Pong":{}}')
    other = OtherUser(_knock, names, frame)
    heard = [other.heard() for _ in names]
    assert other.wait() == 0
    assert heard == [f"{n} closed after 0 bytes" for n in names]
    with NativeClient(*gw.native) as c:
        c.ping()


def _gauge(gw, admin: str, name: str) -> dict[str, float]:
    """A per-listener gauge of a worker's metrics: {listener: value}."""
    text = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses[admin]), timeout=10).read().decode()
    return {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name + "{")}


def test_relays_reach_tls_listeners_and_stay_outside_the_client_limits(tmp_path):
    """Relays go to the workers' relay sockets, not to their listeners: with TLS on the native and TANK listeners
    they work, and with 4 connections allowed per address, a TANK client's 32 long-polls parked at the other worker
    (a relay connection each) are all answered, a client still gets in, and the metrics count clients only. (A TLS
    connection is never handed over — its TLS state cannot follow the descriptor —: its 32 consumes are relayed.)"""
    cert, key = self_signed(tmp_path, "server")
    tls = ssl.create_default_context(cafile=cert)
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "listeners.tank.enabled=true",
                        f"tls.cert_file={cert}", f"tls.key_file={key}", "listeners.native.tls=true",
                        "listeners.tank.tls=true", "limits.max_connections_per_ip=4")
    try:
        name = "rl-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
        mine, theirs = owners.index(0), owners.index(1)
        with TankClient(*gw.addresses["tank.0"], ssl_context=tls, server_hostname="localhost") as c:
            assert c.create_topic(name, PARTITIONS) == 0
            assert c.produce_many([(name, p, [b"a"]) for p in (mine, theirs)]) == [0, 0]
            waiting = [c.send(consume_request({name: [(theirs, 2, 1 << 20)]}, max_wait_ms=20_000, min_bytes=1))
                       for _ in range(32)]
            time.sleep(0.5)  # parked at worker 1
            assert _gauge(gw, "admin.1", "logway_connections_open").get("tank", 0) == 0  # no client ...
            assert _gauge(gw, "admin.1", "logway_relay_connections_open") == {"native": 0, "tank": 32}  # 32 relays
            with NativeClient(*gw.addresses["native.1"], ssl_context=tls, server_hostname="localhost") as n:
                n.produce(name, theirs, [b"woke"])
            for rid in waiting:
                assert _values(c.receive(rid, timeout=15).topics[0].partitions[0], 2) == [b"woke"]
    finally:
        assert gw.stop() == 0


def test_a_topic_created_through_worker_1_is_served_by_both(gw):
    topic = kafka_topic(gw, via="kafka.1")
    produce(gw, topic, [b"%d" % i for i in range(20)])
    consumer = Consumer({"bootstrap.servers": "%s:%d" % gw.addresses["kafka.1"], "group.id": "check",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    assert len(consume(consumer, 20)) == 20
    consumer.close()


def _txn_producer(gw, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap(gw), "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def _read(gw, topic: str, count: int, isolation: str, timeout: float = 30) -> list[bytes]:
    """The values of `count` records of every partition, read with `isolation`, then nothing more for 1 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "read-" + uuid.uuid4().hex[:6],
                         "enable.auto.commit": False, "isolation.level": isolation, "fetch.queue.backoff.ms": 10})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = consume(consumer, count, timeout)
        got += consume(consumer, 1, 1.0)  # and no more
    finally:
        consumer.close()
    return sorted(value for _, _, value in got)


def test_transactions_span_both_workers_partitions(gw):
    """Worker 0 coordinates; the records go to each partition's leader (both workers); commit and abort end the
    transaction in every partition, so read_committed sees the committed records only, and the consumer offsets
    sent in a transaction are committed with it."""
    topic = kafka_topic(gw)
    owners = [partition_leader(topic, p, 2) for p in range(PARTITIONS)]
    assert set(owners) == {0, 1}
    producer = _txn_producer(gw, "tx-" + uuid.uuid4().hex[:6])
    producer.begin_transaction()
    for i in range(8):
        producer.produce(topic, b"c%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(8):
        producer.produce(topic, b"a%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    producer.abort_transaction(30)
    group = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "txn-g", "enable.auto.commit": False})
    producer.begin_transaction()
    producer.produce(topic, b"last", partition=owners.index(1))
    producer.send_offsets_to_transaction([TopicPartition(topic, p, 5) for p in range(PARTITIONS)],
                                         group.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    producer = None  # (librdkafka's threads stop with it)
    assert _read(gw, topic, 9, "read_committed") == sorted([b"c%d" % i for i in range(8)] + [b"last"])
    assert _read(gw, topic, 17, "read_uncommitted") == sorted([b"c%d" % i for i in range(8)] +
                                                              [b"a%d" % i for i in range(8)] + [b"last"])
    committed = group.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    group.close()
    assert [tp.offset for tp in committed] == [5] * PARTITIONS


def test_transaction_requests_to_worker_1_are_not_coordinator_and_internal_ones_are_refused_to_clients(gw):
    with KafkaWireClient(*gw.addresses["kafka.1"]) as c:
        answer = c.call(A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest(transactional_id="tx-elsewhere",
                                                                          transaction_timeout_ms=10000))
        assert answer.error_code == E.NOT_COORDINATOR
        answer = c.call(X.END_TXN_KEY, 1, X.EndTxnRequest(transactional_id="tx-elsewhere", producer_id=1,
                                                          producer_epoch=0, committed=True))
        assert answer.error_code == E.NOT_COORDINATOR
    topic = kafka_topic(gw)
    with NativeClient(*gw.addresses["native"]) as c:  # a client may not end or ask about transactions
        for internal in (nv.TxnEndRequest(1, 0, True, [(topic, 0)]), nv.TxnQueryRequest(1, 0, topic, 0)):
            with pytest.raises(NativeError, match="^unknown request type: Txn"):
                c.request(internal)
        assert type(c.request(nv.PingRequest())) is nv.PongResponse  # the connection goes on


def _open_transaction(gw) -> tuple[str, Producer]:
    """A new topic, and a transactional producer whose open transaction holds 8 acknowledged records, "0" … "7",
    two in each partition (both workers')."""
    topic = kafka_topic(gw)
    producer = _txn_producer(gw, "tx-" + uuid.uuid4().hex[:6])
    producer.begin_transaction()
    for i in range(8):
        producer.produce(topic, b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return topic, producer


def test_group_admin_ends_every_workers_partition_at_its_last_stable_offset(gw):
    """While a transaction holds records in every partition, a group's description and a reset to latest stop at
    the last stable offset, for worker 1's partitions (asked of it with DescribeTopic details) as for worker 0's."""
    topic, producer = _open_transaction(gw)  # 2 uncommitted records in each partition
    group = "lso-" + uuid.uuid4().hex[:6]
    try:
        with NativeClient(*gw.native) as c:
            described = c.describe_topic(topic, details=True).partitions
            assert [(s.log_end_offset, s.last_stable_offset) for s in described] == [(2, 0)] * PARTITIONS
            for p in range(PARTITIONS):
                assert c.commit(topic, p, group, 0)
            assert [(x.log_end_offset, x.lag) for x in c.describe_group(group).partitions] == [(0, 0)] * PARTITIONS
            latest = c.reset_group_offsets(group, "latest", validate_only=True)
            assert [o.offset for o in latest.offsets] == [0] * PARTITIONS
            producer.commit_transaction(30)
            assert [(x.log_end_offset, x.lag) for x in c.describe_group(group).partitions] == [(3, 3)] * PARTITIONS
    finally:
        producer.flush(10)


def test_a_transaction_open_when_its_partitions_worker_dies_commits_after_it_is_back(tmp_path):
    """Worker 1 is killed while a transaction has records in its partitions: started again, it finds them open
    and asks the coordinator (a single process would have aborted them, knowing no such transaction); the
    producer then commits, and every record is read committed."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR")
    try:
        topic, producer = _open_transaction(gw)
        old = worker_pid(gw, 1)
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:  # worker 1 back (on its own Kafka port)
            try:
                with KafkaWireClient(*gw.addresses["kafka.1"]) as c:
                    c.call(M.API_KEY, 1, M.MetadataRequest(topics=[]))
                if old not in children(gw.pid):
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline, "worker 1 did not come back"
            time.sleep(0.2)
        producer.commit_transaction(60)
        producer = None
        assert _read(gw, topic, 8, "read_committed") == sorted(b"%d" % i for i in range(8))
    finally:
        assert gw.stop() == 0


def test_a_commit_the_coordinator_died_in_is_completed_by_its_next_start(tmp_path):
    """EndTxn reaches worker 0 (PrepareCommit written) while worker 1, owner of half the partitions, is stopped, so
    the completion waits for it; worker 0 is then killed. Started again, worker 0 completes the commit once worker 1
    answers (its start cannot: the other owner is not known yet), and every record is read committed."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR")
    try:
        topic, producer = _open_transaction(gw)
        first, second = children(gw.pid)
        os.kill(second, signal.SIGSTOP)
        try:
            committing = threading.Thread(target=lambda: _try(producer.commit_transaction, 5), daemon=True)
            committing.start()
            prepared = os.path.join(str(tmp_path / "data"), "transactions")
            deadline = time.monotonic() + 30
            while b"PrepareCommit" not in _read_tree(prepared):  # the coordinator's state, written before ending
                assert time.monotonic() < deadline, "no PrepareCommit written"
                time.sleep(0.05)
            os.kill(first, signal.SIGKILL)
            while first in children(gw.pid):
                assert time.monotonic() < deadline
                time.sleep(0.01)
        finally:
            os.kill(second, signal.SIGCONT)
        committing.join(30)
        producer = None
        assert _read(gw, topic, 8, "read_committed", timeout=60) == sorted(b"%d" % i for i in range(8))
    finally:
        assert gw.stop() == 0


def _try(fn, *args) -> None:
    try:
        fn(*args)
    except KafkaException:
        pass  # (the commit's outcome is read back from the log)


def _read_tree(root: str) -> bytes:
    out = b""
    for parent, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(parent, name), "rb") as f:
                out += f.read()
    return out


# -- stopping ------------------------------------------------------------------------------------------------------

def test_sigterm_stops_every_worker_cleanly_and_one_process_reads_their_partitions(tmp_path):
    data = str(tmp_path / "data")
    gw = GatewayProcess(data, "workers=2", "log_level=WARNING")
    try:
        workers = children(gw.pid)
        assert len(workers) == 2
        topic = kafka_topic(gw)
        produce(gw, topic, [b"%d" % i for i in range(80)])
    finally:
        status = gw.stop()
    assert status == 0
    assert not any(alive(pid) for pid in workers)
    assert os.path.exists(os.path.join(data, ".clean_shutdown"))
    single = GatewayProcess(data, "log_level=WARNING")  # workers: 1 over the same directory: every partition
    try:
        consumer = Consumer({"bootstrap.servers": bootstrap(single), "group.id": "check",
                             "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        assert len(consume(consumer, 80)) == 80
        consumer.close()
    finally:
        assert single.stop() == 0


def test_when_the_supervisor_is_killed_every_worker_stops_and_the_directory_starts_again(tmp_path):
    """The supervisor SIGKILLed (say by the OOM killer): each worker sees its control socket close and shuts down on
    its own (its locks released: nothing lingers), and a new gateway on the directory (an unclean start: the
    supervisor wrote no marker) serves every acknowledged record and commit."""
    data, log = str(tmp_path / "data"), tmp_path / "gateway.stderr"
    with open(log, "wb") as err:
        gw = GatewayProcess(data, "workers=2", "log_level=INFO", stderr=err)
    values = [b"%d" % i for i in range(80)]
    try:
        workers = children(gw.pid)
        assert len(workers) == 2
        topic = kafka_topic(gw)
        produce(gw, topic, values)
        with NativeClient(*gw.addresses["native.1"]) as one:
            assert one.commit(topic, 1, "g", 7)
    finally:
        lingering = gw.kill_supervisor(timeout=30)
    assert not lingering, "a worker outlived its supervisor"
    assert not any(alive(pid) for pid in workers)
    text = log.read_text(errors="replace")
    assert all(f"worker {i}: the supervisor went away: shutting down" in text for i in range(2)), text[-2000:]
    assert not os.path.exists(os.path.join(data, ".clean_shutdown"))
    again = GatewayProcess(data, "workers=2", "log_level=WARNING")
    try:
        consumer = Consumer({"bootstrap.servers": bootstrap(again), "group.id": "check",
                             "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        assert sorted(v for _, _, v in consume(consumer, len(values))) == sorted(values)
        consumer.close()
        with NativeClient(*again.addresses["native"]) as client:
            assert client.committed(topic, 1, "g") == 7
    finally:
        assert again.stop() == 0


def test_topic_changes_one_worker_makes_reach_the_other_at_once(tmp_path):
    """With the periodic look at every topic set to 10 minutes, worker 1 still sees the partitions, configuration
    and deletion worker 0 makes within seconds: worker 0 told the supervisor, which told worker 1 (fails without)."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "worker_refresh_ms=600000", "log_level=WARNING")

    def soon(check, what: str) -> None:
        deadline = time.monotonic() + 10
        while not check():
            assert time.monotonic() < deadline, f"worker 1 did not see {what}"
            time.sleep(0.02)

    try:
        name = "told-" + uuid.uuid4().hex[:6]
        with NativeClient(*gw.addresses["native.0"]) as zero, NativeClient(*gw.addresses["native.1"]) as one:
            assert zero.create_topic(name, 2)
            assert len(one.describe_topic(name).partitions) == 2  # (an unknown name is looked up at once anyway)
            zero.create_partitions(name, 4)
            soon(lambda: len(one.describe_topic(name).partitions) == 4, "the new partitions")
            zero.alter_topic_config(name, set={"retention.ms": 123_456})
            soon(lambda: one.describe_topic_config(name, ["retention.ms"])[0].value == 123_456, "the new config")
            assert zero.delete_topic(name)

            def gone() -> bool:
                try:
                    one.describe_topic(name)
                except NativeError as exc:
                    assert "topic not found" in str(exc)
                    return True
                return False
            soon(gone, "the deletion")
    finally:
        assert gw.stop() == 0


def test_a_dead_worker_is_started_again_on_its_ports_with_its_data(tmp_path):
    """SIGKILL of a worker: the supervisor starts it again on the same ports (clients reconnect to the addresses
    they know), it recovers its partitions, what was acknowledged is there; a request relayed to it while it is
    down waits in its relay socket's backlog (the supervisor holds the socket) and is served once it is back, and
    relaying works on; the gateway then stops cleanly. (Relays only: `worker_handover: false`; a hand-over to a
    worker that is down is tests/e2e/test_handover.py's.)"""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "listeners.tank.enabled=true",
                        "worker_handover=false")
    try:
        name = "r-" + uuid.uuid4().hex[:8]
        theirs = [partition_leader(name, p, 2) for p in range(PARTITIONS)].index(1)
        with NativeClient(*gw.addresses["native.0"]) as c:  # worker 0's own listener: it relays to worker 1
            c.create_topic(name, PARTITIONS)
            assert c.produce(name, theirs, [b"before"]) == [0]
        old = worker_pid(gw, 1)
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while old in children(gw.pid):  # reaped by the supervisor, which starts it again
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with NativeClient(*gw.addresses["native.0"], timeout=60) as c:  # relayed to worker 1 while it starts
            assert c.produce(name, theirs, [b"during"]) == [1]
        while True:  # worker 1 back on its native port, with its partition
            try:
                with NativeClient(*gw.addresses["native.1"], timeout=5) as direct:
                    got = direct.fetch(name, theirs, 0)
                break
            except (OSError, NativeError):
                assert time.monotonic() < deadline, "worker 1 did not come back"
                time.sleep(0.2)
        assert [r.value for r in got.records] == [b"before", b"during"]
        assert len(children(gw.pid)) == 2 and old not in children(gw.pid)
        with NativeClient(*gw.addresses["native.0"]) as c:  # relayed by worker 0 to the new worker 1 (its pooled
            assert c.produce(name, theirs, [b"after"]) == [2]  # connection to the old one is dropped, not used)
            assert [r.value for r in c.fetch(name, theirs, 0).records] == [b"before", b"during", b"after"]
        with TankClient(*gw.addresses["tank.0"]) as t:
            assert [m.value for m in t.get(name, theirs, 1).messages] == [b"before", b"during", b"after"]
        # the supervisor's admin listener: every worker's metrics, labelled; worker 1 started again once
        metrics = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses["admin"]), timeout=10).read()
        relays = {line.split(" ")[0]: float(line.split(" ")[1]) for line in metrics.decode().splitlines()
                  if line.startswith(("logway_relay", "logway_worker"))}
        assert relays['logway_relayed_requests_total{protocol="native",worker="0"}'] >= 3  # relayed to worker 1
        assert relays['logway_relayed_requests_total{protocol="tank",worker="0"}'] >= 1
        assert relays['logway_relay_failures_total{protocol="native",worker="0"}'] == 0  # (the stale one unused)
        assert relays['logway_worker_restarts_total{worker="1"}'] == 1
        assert relays['logway_worker_restarts_total{worker="0"}'] == 0
        assert relays['logway_worker_up{worker="1"}'] == 1
    finally:
        assert gw.stop() == 0



def test_a_hung_worker_is_killed_by_the_watchdog_and_started_again(tmp_path):
    """`worker_watchdog_ms`: a ready worker whose event loop stops telling the supervisor it is alive (here: the
    process stopped) is killed after that long and started again like one that died — its partitions served again,
    the other worker serving on meanwhile — and the kill is logged and counted as a restart."""
    log_path = tmp_path / "gateway.log"
    with open(log_path, "wb") as log:
        gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=WARNING", "worker_watchdog_ms=1500",
                            "worker_handover=false", stderr=log)
    try:
        name = "w-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
        ours, theirs = owners.index(0), owners.index(1)
        with NativeClient(*gw.addresses["native.0"]) as c:
            c.create_topic(name, PARTITIONS)
            assert c.produce(name, theirs, [b"before"]) == [0]
        time.sleep(1.0)  # alive messages go on while it runs: not killed
        old = worker_pid(gw, 1)
        assert old in children(gw.pid)
        os.kill(old, signal.SIGSTOP)
        stopped = time.monotonic()
        with NativeClient(*gw.addresses["native.0"], timeout=5) as c:  # worker 0 serves on
            assert c.produce(name, ours, [b"meanwhile"]) == [0]
        deadline = stopped + 30
        while old in children(gw.pid):  # killed, reaped, started again
            assert time.monotonic() < deadline, "the stopped worker was not killed"
            time.sleep(0.02)
        assert time.monotonic() - stopped > 1.0  # not before its watchdog ran out (1.5 s from its last alive: ≤ 0.25 s)
        with NativeClient(*gw.addresses["native.0"], timeout=60) as c:  # relayed to the new worker 1
            assert c.produce(name, theirs, [b"after"]) == [1]
            assert [r.value for r in c.fetch(name, theirs, 0).records] == [b"before", b"after"]
        assert len(children(gw.pid)) == 2
        metrics = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses["admin"]), timeout=10).read()
        assert b'logway_worker_restarts_total{worker="1"} 1.0' in metrics
        assert b'logway_worker_restarts_total{worker="0"} 0.0' in metrics
    finally:
        assert gw.stop() == 0
    logged = log_path.read_text()
    assert "worker 1 (pid %d) said nothing for" % old in logged and "(worker_watchdog_ms): killing it" in logged


def test_nothing_acknowledged_through_any_worker_is_lost_to_a_power_cut(powerfs):
    """`workers: 2`, `flush: always`, the data directory on the power-loss file system (it keeps only what was synced):
    a topic created through worker 0 and grown through worker 1, records acknowledged through native and TANK on the
    shared ports (handed over or relayed to the owner when it is the other worker) and through librdkafka (to each
    partition's leader), and offsets committed through worker 1 (relayed to worker 0, the offsets' owner) survive
    SIGKILL of both workers and the supervisor followed by a power cut, each record at its acknowledged offset."""
    data = os.path.join(powerfs.path, "data")
    settings = ("workers=2", "storage.flush=always", "log_level=ERROR", "listeners.tank.enabled=true")
    name, group = "cut-" + uuid.uuid4().hex[:8], "cut-group"
    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    gw = GatewayProcess(data, *settings)
    try:
        with NativeClient(*gw.addresses["native.0"]) as zero, NativeClient(*gw.addresses["native.1"]) as one:
            assert zero.create_topic(name, 2)
            assert one.create_partitions(name, PARTITIONS) == PARTITIONS
        assert sorted(partition_leader(name, p, 2) for p in range(PARTITIONS)) == [0, 0, 1, 1]
        with NativeClient(*gw.addresses["native"]) as shared:
            for p in range(PARTITIONS):
                for i in range(3):
                    value = b"native %d-%d" % (p, i)
                    assert shared.produce(name, p, [value]) == [len(acked[p])]
                    acked[p].append(value)
        with TankClient(*gw.addresses["tank"]) as tank:
            for p in range(PARTITIONS):
                assert tank.produce(name, p, [b"tank %d" % p]) == 0
                acked[p].append(b"tank %d" % p)
        delivered: list = []
        producer = Producer({"bootstrap.servers": bootstrap(gw), "acks": "all", "linger.ms": 0})
        for p in range(PARTITIONS):
            producer.produce(name, b"kafka %d" % p, partition=p,
                             on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
            assert producer.flush(30) == 0
            assert delivered[-1] == (None, p, len(acked[p]))
            acked[p].append(b"kafka %d" % p)
        with NativeClient(*gw.addresses["native.1"]) as one:
            for p in range(PARTITIONS):
                assert one.commit(name, p, group, p + 1)
    finally:
        gw.kill()  # every worker first: none sees its supervisor go and shuts down (syncing) on its own
    powerfs.cut()
    gw = GatewayProcess(data, *settings)
    try:
        with NativeClient(*gw.addresses["native"]) as shared:
            for p in range(PARTITIONS):
                got = shared.fetch(name, p, 0).records
                assert [(r.offset, r.value) for r in got] == list(enumerate(acked[p])), f"partition {p}"
                assert shared.committed(name, p, group) == p + 1
    finally:
        assert gw.stop() == 0


def test_a_committed_transaction_across_workers_survives_a_power_cut(powerfs):
    """A transaction over both workers' partitions, its commit acknowledged (EndTxn answered), then a second one
    whose records were acknowledged but which never ended; SIGKILL of every process and a power cut: read_committed
    gets exactly the first one's records from every partition, read_uncommitted also has the second's (acknowledged
    appends), and the offsets sent in the committed transaction are the group's."""
    data = os.path.join(powerfs.path, "data")
    settings = ("workers=2", "storage.flush=always", "log_level=ERROR")
    gw = GatewayProcess(data, *settings)
    try:
        topic = kafka_topic(gw)
        assert {partition_leader(topic, p, 2) for p in range(PARTITIONS)} == {0, 1}
        producer = _txn_producer(gw, "cut-tx-" + uuid.uuid4().hex[:6])
        group = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "cut-txn-g", "enable.auto.commit": False})
        producer.begin_transaction()
        for i in range(8):
            producer.produce(topic, b"c%d" % i, partition=i % PARTITIONS)
        producer.send_offsets_to_transaction([TopicPartition(topic, p, 3) for p in range(PARTITIONS)],
                                             group.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, b"open%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
    finally:
        gw.kill()
    powerfs.cut()
    producer = None  # (its transaction is left to the coordinator's timeout)
    gw = GatewayProcess(data, *settings)
    try:
        committed = [b"c%d" % i for i in range(8)]
        assert _read(gw, topic, 8, "read_committed") == sorted(committed)
        assert _read(gw, topic, 12, "read_uncommitted") == sorted(committed + [b"open%d" % i for i in range(4)])
        group.close()
        group = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "cut-txn-g", "enable.auto.commit": False})
        offsets = group.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        group.close()
        assert [tp.offset for tp in offsets] == [3] * PARTITIONS
    finally:
        assert gw.stop() == 0


def test_a_worker_that_keeps_dying_stops_the_others_and_the_supervisor_fails(tmp_path):
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR")
    killed = []
    deadline = time.monotonic() + 90
    while gw.proc.poll() is None:
        assert time.monotonic() < deadline, "the supervisor never gave up"
        workers = children(gw.pid)
        if len(workers) == 2 and workers[-1] not in killed:
            killed.append(workers[-1])
            os.kill(workers[-1], signal.SIGKILL)
        time.sleep(0.05)
    assert gw.proc.wait(30) == 1
    assert len(killed) == 4  # started again 3 times, then given up
    assert not any(alive(pid) for pid in children(gw.pid) + killed)
