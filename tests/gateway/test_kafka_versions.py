"""The Kafka 4 versions at the byte level, through a gateway process: ListOffsets' special timestamps (-3, -4, -5)
answered as Kafka answers them, ApiVersions v3+ (the client's software kept for the metrics), ListGroups v4/v5
filters and DescribeGroups v6, topic ids (made with the topic, kept across restarts, used by Metadata, Produce,
Fetch, CreateTopics and DeleteTopics; UNKNOWN_TOPIC_ID for an id no topic has), KIP-360 epoch bumps
(InitProducerId v3+), OffsetFetch v8+ (several groups, require_stable), AddPartitionsToTxn v4+ and EndTxn v5."""

from __future__ import annotations

import re
import socket
import struct
import urllib.request
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.primitives import ZERO_UUID
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.records import Record

from ..kafka_wire import KafkaWireClient
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("versions") / "data")
    g = GatewayProcess(data, "log_level=ERROR", "kafka.group_initial_rebalance_delay_ms=0")
    yield g
    g.stop()


def produce(client, topic, records, *, partition=0):
    code, base = client.produce(topic, partition, encode_batch(records, default_timestamp=1))
    assert code == E.NONE
    return base


def list_offset(client, topic, timestamp, *, version=9, isolation=0):
    body = L.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    part = client.call(2, version, body).topics[0].partitions[0]
    assert part.error_code == E.NONE
    return part.offset, part.timestamp


# -- ListOffsets --------------------------------------------------------------------------------------------------

def test_list_offsets_special_timestamps_as_kafka_answers_them(gw, client):
    topic = new_topic(gw)
    assert list_offset(client, topic, L.MAX_TIMESTAMP) == (-1, -1)  # an empty partition has none
    produce(client, topic, [Record(b"a", timestamp=1000), Record(b"b", timestamp=5000),
                            Record(b"c", timestamp=3000)])
    produce(client, topic, [Record(b"d", timestamp=5000), Record(b"e", timestamp=2000)])  # a tie: the first wins
    for version in (7, 9, 10):
        assert list_offset(client, topic, L.MAX_TIMESTAMP, version=version) == (1, 5000)
    assert list_offset(client, topic, L.EARLIEST_LOCAL_TIMESTAMP) == (0, -1)  # no tiered storage: the log start
    assert list_offset(client, topic, L.LATEST_TIERED_TIMESTAMP) == (-1, -1)  # nothing is tiered
    assert list_offset(client, topic, L.LATEST_TIMESTAMP) == (5, -1)
    assert list_offset(client, topic, L.EARLIEST_TIMESTAMP) == (0, -1)
    assert list_offset(client, topic, 2500) == (1, 5000)  # the first record at or after
    assert list_offset(client, topic, 6000) == (-1, -1)
    # a client sending -3 at an older version (librdkafka does) gets the same answer, not a timestamp search
    assert list_offset(client, topic, L.MAX_TIMESTAMP, version=5) == (1, 5000)
    # DeleteRecords moves the (local) log start: -4 follows it
    client.call(21, 2, A.DeleteRecordsRequest(topics=[A.DeleteRecordsTopic(name=topic, partitions=[
        A.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=5000))
    assert list_offset(client, topic, L.EARLIEST_LOCAL_TIMESTAMP) == (2, -1)


def test_list_offsets_max_timestamp_read_committed_stays_below_the_last_stable_offset(gw, client):
    topic = new_topic(gw)
    produce(client, topic, [Record(b"a", timestamp=100)])
    pid, epoch = begin_transaction(client, "lo-" + topic, [(topic, 0)])
    batch = encode_batch([Record(b"open", timestamp=900)], default_timestamp=1, producer_id=pid,
                         producer_epoch=epoch, base_sequence=0, transactional=True)
    assert client.produce(topic, 0, batch)[0] == E.NONE
    assert list_offset(client, topic, L.MAX_TIMESTAMP) == (1, 900)  # read_uncommitted sees the open record
    assert list_offset(client, topic, L.MAX_TIMESTAMP, isolation=1) == (-1, -1)  # read_committed does not
    assert list_offset(client, topic, 500, isolation=1) == (-1, -1)


# -- ApiVersions v3+ ----------------------------------------------------------------------------------------------

def _metrics(gw) -> str:
    return urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses["admin"]), timeout=10).read().decode()


def test_api_versions_v3_client_software_is_kept_for_the_metrics(gw):
    def hello(name: bytes, version: bytes) -> socket.socket:
        frame = (struct.pack(">hhih", 18, 3, 1, 4) + b"test\x00" + bytes([len(name) + 1]) + name
                 + bytes([len(version) + 1]) + version + b"\x00")
        s = socket.create_connection(gw.addresses["kafka"], timeout=5)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        assert struct.unpack_from(">ih", s.recv(size, socket.MSG_WAITALL)) == (1, 0)
        return s

    conns = [hello(b"my-lib", b"1.2.3"), hello(b"my-lib", b"1.2.3"), hello(b"-bad name", b"1")]
    text = _metrics(gw)
    assert re.search(r'^logway_client_software_connections\{listener="kafka",software="my-lib/1.2.3"\} 2\.0$', text,
                     re.M), text
    assert re.search(r'software="unknown"\} 1\.0$', text, re.M)  # outside KIP-511's rule: not a label as sent
    for s in conns:
        s.close()


# -- ListGroups v4/v5, DescribeGroups v6 ---------------------------------------------------------------------------

def test_list_groups_filters_by_state_and_type_and_describe_groups_v6_says_not_found(gw, client):
    group = "lg-" + uuid.uuid4().hex[:8]
    first = client.call(11, 9, G.JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                                  member_id="", protocol_type="consumer",
                                                  protocols=[G.JoinGroupRequestProtocol("range", b"")]))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = client.call(11, 9, G.JoinGroupRequest(group_id=group, session_timeout_ms=30000,
                                                   rebalance_timeout_ms=30000, member_id=first.member_id,
                                                   protocol_type="consumer",
                                                   protocols=[G.JoinGroupRequestProtocol("range", b"")]))
    assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (E.NONE, "consumer", "range")

    def listed(version, states=(), types=()):
        resp = client.call(16, version, G.ListGroupsRequest(states_filter=list(states), types_filter=list(types)))
        return {g.group_id: g for g in resp.groups}

    mine = listed(5)[group]
    assert (mine.protocol_type, mine.group_state, mine.group_type) == ("consumer", "CompletingRebalance", "classic")
    assert group in listed(4, states=["completingrebalance"])  # case-insensitive, as Kafka
    assert group not in listed(4, states=["Stable", "Empty"])
    assert group in listed(5, types=["Classic"]) and group not in listed(5, types=["consumer", "share"])
    assert group in listed(3) and group in listed(2)
    described = client.call(15, 6, G.DescribeGroupsRequest(groups=[group, "no-such-group"])).groups
    assert (described[0].error_code, described[0].group_state) == (E.NONE, "CompletingRebalance")
    assert (described[1].error_code, described[1].error_message) == (E.GROUP_ID_NOT_FOUND,
                                                                     "Group no-such-group not found.")
    old = client.call(15, 5, G.DescribeGroupsRequest(groups=["no-such-group"])).groups[0]
    assert (old.error_code, old.group_state) == (E.NONE, "Dead")  # before v6: Dead, no error
    client.call(13, 5, G.LeaveGroupRequest(group_id=group, members=[G.MemberIdentity(first.member_id,
                                                                                       reason="done")]))


def test_find_coordinator_v4_answers_each_key(gw, client):
    resp = client.call(10, 6, G.FindCoordinatorRequest(key_type=G.COORDINATOR_GROUP, coordinator_keys=["a", "b"]))
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [("a", 0, 0), ("b", 0, 0)]
    assert resp.coordinators[0].port == gw.addresses["kafka"][1]
    bad = client.call(10, 6, G.FindCoordinatorRequest(key_type=7, coordinator_keys=["a"])).coordinators[0]
    assert bad.error_code == E.INVALID_REQUEST


# -- topic ids ----------------------------------------------------------------------------------------------------

def metadata_topic(client, name=None, topic_id=ZERO_UUID, version=12):
    resp = client.call(3, version, M.MetadataRequest(topics=[M.MetadataRequestTopic(name=name, topic_id=topic_id)],
                                                     allow_auto_topic_creation=False))
    assert resp.error_code == E.NONE
    return resp.topics[0]


def test_topic_ids_in_metadata_create_produce_fetch_and_delete(gw, client):
    name = "ids-" + uuid.uuid4().hex[:8]
    created = client.call(19, 7, A.CreateTopicsRequest(topics=[A.CreatableTopic(
        name=name, num_partitions=2, replication_factor=-1, configs=[A.CreatableTopicConfig("retention.ms", "1234")])],
        timeout_ms=5000)).topics[0]
    assert created.error_code == E.NONE and created.topic_id != ZERO_UUID
    assert (created.num_partitions, created.replication_factor) == (2, 1)
    assert {c.name: c.value for c in created.configs}["retention.ms"] == "1234"
    topic_id = created.topic_id
    by_name = metadata_topic(client, name)
    assert by_name.topic_id == topic_id and len(by_name.partitions) == 2
    by_id = metadata_topic(client, None, topic_id)
    assert (by_id.error_code, by_id.name, by_id.topic_id) == (E.NONE, name, topic_id)
    unknown = metadata_topic(client, None, uuid.uuid4().bytes)
    assert (unknown.error_code, unknown.name) == (E.UNKNOWN_TOPIC_ID, None)
    assert metadata_topic(client, name, version=9).name == name  # before v10: no ids, names as ever
    # Produce v13 and Fetch v13+ name the topic by id
    batch = encode_batch([Record(b"by-id")], default_timestamp=1)
    produced = client.call(0, 13, P.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(topic_id=topic_id, partition_data=[P.PartitionProduceData(1, batch)]),
        P.TopicProduceData(topic_id=uuid.uuid4().bytes, partition_data=[P.PartitionProduceData(0, batch)])]))
    assert [(r.topic_id, r.partition_responses[0].error_code) for r in produced.responses] == [
        (topic_id, E.NONE), (produced.responses[1].topic_id, E.UNKNOWN_TOPIC_ID)]
    for version in (13, 16, 18):
        fetched = client.call(1, version, F.FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
            F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(partition=1, fetch_offset=0,
                                                                         partition_max_bytes=1 << 20)]),
            F.FetchTopic(topic_id=uuid.uuid4().bytes, partitions=[F.FetchPartition(partition=0)])]))
        known, missing = fetched.responses
        assert known.topic_id == topic_id and known.partitions[0].error_code == E.NONE
        assert [r.value for r in decode_records(known.partitions[0].records)] == [b"by-id"]
        assert missing.partitions[0].error_code == E.UNKNOWN_TOPIC_ID
    # DeleteTopics v6 by id; an unknown id is UNKNOWN_TOPIC_ID
    deleted = client.call(20, 6, A.DeleteTopicsRequest(topics=[A.DeleteTopicState(topic_id=topic_id),
                                                               A.DeleteTopicState(topic_id=uuid.uuid4().bytes)],
                                                       timeout_ms=5000)).responses
    assert [(d.name, d.error_code) for d in deleted] == [(name, E.NONE), (None, E.UNKNOWN_TOPIC_ID)]
    assert metadata_topic(client, None, topic_id).error_code == E.UNKNOWN_TOPIC_ID


def test_topic_ids_are_kept_across_restarts(tmp_path):
    data = str(tmp_path / "data")
    with GatewayProcess(data, "log_level=ERROR") as g, KafkaWireClient(*g.addresses["kafka"]) as c:
        topic = new_topic(g)
        before = metadata_topic(c, topic).topic_id
    with GatewayProcess(data, "log_level=ERROR") as g, KafkaWireClient(*g.addresses["kafka"]) as c:
        assert metadata_topic(c, topic).topic_id == before != ZERO_UUID
        assert metadata_topic(c, None, before).name == topic


# -- transactions: KIP-360, AddPartitionsToTxn v4+, EndTxn v5, OffsetFetch require_stable ---------------------------

def begin_transaction(client, tid, partitions, *, version=4):
    init = client.call(22, version, A.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000))
    assert init.error_code == E.NONE
    topics = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    added = client.call(24, 3, X.AddPartitionsToTxnRequest(
        transactional_id=tid, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
        topics=[X.AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()]))
    assert all(r.error_code == E.NONE for t in added.results for r in t.results)
    return init.producer_id, init.producer_epoch


def test_init_producer_id_v3_bumps_the_epoch_of_the_producer_it_names(gw, client):
    topic = new_topic(gw)
    tid = "kip360-" + topic
    pid, epoch = begin_transaction(client, tid, [(topic, 0)])

    def init(version, current):
        return client.call(22, version, A.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                                                producer_id=current[0], producer_epoch=current[1]))

    bumped = init(4, (pid, epoch))  # after an abortable error: same id, next epoch, the open transaction aborted
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (E.NONE, pid, epoch + 1)
    again = init(4, (pid, epoch))  # the bump's answer was lost: the retry gets the same answer
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert init(4, (pid + 1, epoch + 1)).error_code == E.PRODUCER_FENCED  # another producer's id
    bumped2 = init(5, (pid, epoch + 1))
    assert (bumped2.producer_id, bumped2.producer_epoch) == (pid, epoch + 2)
    assert init(4, (pid, epoch)).error_code == E.PRODUCER_FENCED  # two bumps behind: fenced
    assert init(3, (pid, epoch)).error_code == E.INVALID_PRODUCER_EPOCH  # v3 predates PRODUCER_FENCED
    ended = client.call(26, 5, X.EndTxnRequest(tid, pid, epoch + 2, committed=False))
    assert ended.error_code == E.INVALID_TXN_STATE  # nothing open after the bump
    idem = client.call(22, 5, A.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0,
                                                      producer_id=pid, producer_epoch=3))
    assert idem.error_code == E.NONE and idem.producer_id != pid and idem.producer_epoch == 0


def test_add_partitions_v4_verifies_or_adds_and_end_txn_v5_answers_the_producer(gw, client):
    topic = new_topic(gw, 2)
    tid = "apt4-" + topic
    pid, epoch = begin_transaction(client, tid, [(topic, 0)])

    def add(verify_only, partitions):
        resp = client.call(24, 5, X.AddPartitionsToTxnRequest(transactions=[X.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
            topics=[X.AddPartitionsToTxnTopic(topic, partitions)])]))
        assert resp.error_code == E.NONE and resp.results_by_transaction[0].transactional_id == tid
        return {r.partition_index: r.error_code for r in resp.results_by_transaction[0].topic_results[0].results}

    assert add(True, [0, 1]) == {0: E.NONE, 1: E.INVALID_TXN_STATE}  # 1 is not in the transaction
    assert add(False, [1]) == {1: E.NONE}
    assert add(True, [0, 1]) == {0: E.NONE, 1: E.NONE}
    ended = client.call(26, 5, X.EndTxnRequest(tid, pid, epoch, committed=True))
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.NONE, pid, epoch)


def test_offset_fetch_v8_several_groups_and_require_stable_with_a_transaction_pending(gw, client):
    topic = new_topic(gw)
    produce(client, topic, [Record(b"x")] * 3)
    plain, txn_group = "of-" + topic, "oft-" + topic
    commit = client.call(8, 9, O.OffsetCommitRequest(group_id=plain, topics=[O.OffsetCommitRequestTopic(
        topic, [O.OffsetCommitRequestPartition(partition_index=0, committed_offset=2, committed_metadata="m")])]))
    assert commit.topics[0].partitions[0].error_code == E.NONE
    tid = "oft-" + topic
    pid, epoch = begin_transaction(client, tid, [])
    assert client.call(25, 4, X.AddOffsetsToTxnRequest(tid, pid, epoch, txn_group)).error_code == E.NONE
    committed = client.call(28, 5, X.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=txn_group, producer_id=pid, producer_epoch=epoch,
        topics=[X.TxnOffsetCommitRequestTopic(topic, [X.TxnOffsetCommitRequestPartition(0, 3)])]))
    assert committed.topics[0].partitions[0].error_code == E.NONE

    def fetch(require_stable):
        wanted = [O.OffsetFetchRequestTopic(topic, [0])]
        resp = client.call(9, 9, O.OffsetFetchRequest(require_stable=require_stable, groups=[
            O.OffsetFetchRequestGroup(group_id=plain, topics=wanted),
            O.OffsetFetchRequestGroup(group_id=txn_group, topics=None)]))
        return {g.group_id: [(t.name, p.partition_index, p.committed_offset, p.error_code)
                             for t in g.topics for p in t.partitions] for g in resp.groups}

    assert fetch(False) == {plain: [(topic, 0, 2, E.NONE)], txn_group: []}
    stable = fetch(True)
    assert stable[plain] == [(topic, 0, 2, E.NONE)]
    old = client.call(9, 7, O.OffsetFetchRequest(group_id=txn_group, topics=[O.OffsetFetchRequestTopic(topic, [0])],
                                                 require_stable=True))
    assert old.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT  # until the transaction ends
    assert client.call(26, 3, X.EndTxnRequest(tid, pid, epoch, committed=True)).error_code == E.NONE
    assert fetch(True)[txn_group] == [(topic, 0, 3, E.NONE)]
