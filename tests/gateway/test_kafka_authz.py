"""Every Kafka API under ACLs, at the byte level, against a real gateway process with SASL (PLAIN and SCRAM): what a
principal may do is served, what it may not is answered as a Kafka broker answers it (TOPIC_ / GROUP_ / CLUSTER_ /
TRANSACTIONAL_ID_AUTHORIZATION_FAILED per partition, topic, group, resource or request), lists show only what it may
Describe, auto-creation needs Create — and each refusal is counted in the metrics."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import KafkaError
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.api import scram_credentials as S
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record

TOKEN = "adm-token"
OK = E.NONE


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("kafka-authz") / "data")
    g = GatewayProcess(data, "auth.kafka_sasl_plain=true", "auth.kafka_sasl_scram=true", "auth.users.admin=adm",
                       "auth.users.alice=alice-pw", "auth.users.bob=bob-pw", "auth.super_users=User:admin",
                       f"auth.native_token={TOKEN}", "kafka.auto_create_topics=true", "log_level=ERROR")
    with NativeClient(*g.native, token=TOKEN) as c:  # alice: everything under mine-, nothing else
        c.create_acls([nv.AclEntry(rtype, "mine-", "PREFIXED", "User:alice", "*", "All", "Allow")
                       for rtype in ("Topic", "Group", "TransactionalId")])
    yield g
    g.stop()


def kafka(gw, user="alice", password=None, mechanism="SCRAM-SHA-256") -> KafkaClient:
    host, port = gw.addresses["kafka"]
    client = KafkaClient(KafkaConfig(host, port, connect_timeout=10, timeout=10, retries=0,
                                     security_protocol="SASL_PLAINTEXT", sasl_username=user,
                                     sasl_password=password or f"{user}-pw", sasl_mechanism=mechanism))
    client.connect()
    return client


@pytest.fixture
def alice(gw):
    with kafka(gw) as c:
        yield c


def topics(gw, *prefixes):
    names = [p + uuid.uuid4().hex[:8] for p in prefixes]
    with NativeClient(*gw.native, token=TOKEN) as c:
        for name in names:
            c.create_topic(name, 1)
    return names


def call(client, key, version, body):
    return client.call(key, version, body).body


def batch(*values: bytes) -> bytes:
    return encode_batch([Record(v) for v in values], default_timestamp=int(time.time() * 1000))


def errors(answer, topics_attr, name_attr, parts_attr) -> dict[str, list[int]]:
    return {getattr(t, name_attr): [p.error_code for p in getattr(t, parts_attr)]
            for t in getattr(answer, topics_attr)}


# -- records -------------------------------------------------------------------------------------------------------

def test_produce_fetch_and_list_offsets_serve_what_may_be_done_and_refuse_the_rest(gw, alice):
    mine, theirs = topics(gw, "mine-", "theirs-")
    body = P.ProduceRequest(None, -1, 10000, [P.TopicProduceData(t, [P.PartitionProduceData(0, batch(b"x"))])
                                               for t in (mine, theirs)])
    answer = call(alice, P.API_KEY, 8, body)
    assert errors(answer, "responses", "name", "partition_responses") == {mine: [OK],
                                                                         theirs: [E.TOPIC_AUTHORIZATION_FAILED]}
    fetch = F.FetchRequest(-1, 0, 1, 1 << 20, 0, 0, -1, [F.FetchTopic(t, [F.FetchPartition(0, -1, 0, -1, 1 << 20)])
                                                        for t in (mine, theirs)])
    answer = call(alice, F.API_KEY, 11, fetch)
    assert errors(answer, "responses", "topic", "partitions") == {mine: [OK], theirs: [E.TOPIC_AUTHORIZATION_FAILED]}
    only_theirs = F.FetchRequest(-1, 5000, 1, 1 << 20, 0, 0, -1, [F.FetchTopic(theirs, [F.FetchPartition(0, -1, 0, -1,
                                                                                                      1 << 20)])])
    assert errors(call(alice, F.API_KEY, 11, only_theirs), "responses", "topic", "partitions") == {
        theirs: [E.TOPIC_AUTHORIZATION_FAILED]}  # (at once: nothing to wait for)
    offsets = L.ListOffsetsRequest(-1, 0, [L.ListOffsetsTopic(t, [L.ListOffsetsPartition(0, -1, -1)])
                                           for t in (mine, theirs)])
    assert errors(call(alice, L.API_KEY, 5, offsets), "topics", "name", "partitions") == {
        mine: [OK], theirs: [E.TOPIC_AUTHORIZATION_FAILED]}


def test_a_transactional_produce_needs_write_on_its_transactional_id(gw, alice):
    (mine,) = topics(gw, "mine-")
    body = P.ProduceRequest("not-mine", -1, 10000, [P.TopicProduceData(mine, [P.PartitionProduceData(0, batch(b"x"))])])
    assert errors(call(alice, P.API_KEY, 8, body), "responses", "name", "partition_responses") == {
        mine: [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]}


def test_metadata_lists_what_may_be_described_and_auto_creation_needs_create(gw, alice):
    mine, theirs = topics(gw, "mine-", "theirs-")
    listed = {t.name for t in call(alice, M.API_KEY, 8, M.MetadataRequest(None, False)).topics}
    assert mine in listed and theirs not in listed and all(n.startswith("mine-") for n in listed)
    named = call(alice, M.API_KEY, 8, M.MetadataRequest([M.MetadataRequestTopic(theirs),
                                                         M.MetadataRequestTopic(mine)], True))
    assert {t.name: t.error_code for t in named.topics} == {theirs: E.TOPIC_AUTHORIZATION_FAILED, mine: OK}
    assert {t.name: t.error_code for t in call(alice, M.API_KEY, 8, M.MetadataRequest(
        [M.MetadataRequestTopic(theirs)], True)).topics} == {theirs: E.TOPIC_AUTHORIZATION_FAILED}
    new_mine, new_theirs = "mine-" + uuid.uuid4().hex[:8], "theirs-" + uuid.uuid4().hex[:8]
    answer = call(alice, M.API_KEY, 8, M.MetadataRequest([M.MetadataRequestTopic(new_mine),
                                                          M.MetadataRequestTopic(new_theirs)], True))
    assert {t.name: t.error_code for t in answer.topics} == {new_mine: OK,  # Create (All) on mine-: auto-created
                                                             new_theirs: E.TOPIC_AUTHORIZATION_FAILED}
    with NativeClient(*gw.native, token=TOKEN) as c:
        names = {t.name for t in c.list_topics()}
    assert new_mine in names and new_theirs not in names


# -- groups and offsets --------------------------------------------------------------------------------------------

def test_group_apis_need_the_group(gw, alice):
    mine, theirs = topics(gw, "mine-", "theirs-")
    commit = O.OffsetCommitRequest("theirs-g", -1, "", None, -1, [O.OffsetCommitRequestTopic(
        mine, [O.OffsetCommitRequestPartition(0, 1, -1, -1, "")])])
    assert errors(call(alice, O.OFFSET_COMMIT_KEY, 7, commit), "topics", "name", "partitions") == {
        mine: [E.GROUP_AUTHORIZATION_FAILED]}
    commit = O.OffsetCommitRequest("mine-g", -1, "", None, -1, [O.OffsetCommitRequestTopic(
        t, [O.OffsetCommitRequestPartition(0, 1, -1, -1, "")]) for t in (mine, theirs)])
    assert errors(call(alice, O.OFFSET_COMMIT_KEY, 7, commit), "topics", "name", "partitions") == {
        mine: [OK], theirs: [E.TOPIC_AUTHORIZATION_FAILED]}
    fetched = call(alice, O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest("theirs-g", None))
    assert fetched.error_code == E.GROUP_AUTHORIZATION_FAILED
    fetched = call(alice, O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest("mine-g", None))
    assert fetched.error_code == OK and {t.name for t in fetched.topics} == {mine}
    found = call(alice, G.FIND_COORDINATOR_KEY, 2, G.FindCoordinatorRequest("theirs-g", 0))
    assert found.error_code == E.GROUP_AUTHORIZATION_FAILED and found.node_id == -1
    found = call(alice, G.FIND_COORDINATOR_KEY, 2, G.FindCoordinatorRequest("not-mine", 1))
    assert found.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert call(alice, G.FIND_COORDINATOR_KEY, 2, G.FindCoordinatorRequest("mine-g", 0)).error_code == OK
    join = G.JoinGroupRequest("theirs-g", 10000, 10000, "", None, "consumer",
                              [G.JoinGroupRequestProtocol("range", b"")])
    assert call(alice, G.JOIN_GROUP_KEY, 5, join).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert call(alice, G.HEARTBEAT_KEY, 3, G.HeartbeatRequest("theirs-g", 1, "m")).error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    described = call(alice, G.DESCRIBE_GROUPS_KEY, 4, G.DescribeGroupsRequest(["mine-g", "theirs-g"]))
    assert {g.group_id: g.error_code for g in described.groups} == {"mine-g": OK,
                                                                   "theirs-g": E.GROUP_AUTHORIZATION_FAILED}
    with kafka(gw, "admin", "adm", "PLAIN") as admin:  # a group alice may not see
        admin_commit = O.OffsetCommitRequest("theirs-g", -1, "", None, -1, [O.OffsetCommitRequestTopic(
            theirs, [O.OffsetCommitRequestPartition(0, 1, -1, -1, "")])])
        assert errors(call(admin, O.OFFSET_COMMIT_KEY, 7, admin_commit), "topics", "name", "partitions") == {
            theirs: [OK]}
    deleted = call(alice, G.DELETE_GROUPS_KEY, 1, G.DeleteGroupsRequest(["theirs-g"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("theirs-g", E.GROUP_AUTHORIZATION_FAILED)]
    assert call(alice, O.OFFSET_DELETE_KEY, 0, O.OffsetDeleteRequest("theirs-g", [O.OffsetDeleteRequestTopic(
        theirs, [O.OffsetDeleteRequestPartition(0)])])).error_code == E.GROUP_AUTHORIZATION_FAILED


def test_list_groups_shows_only_the_groups_it_may_describe(gw, alice):
    (mine,) = topics(gw, "mine-")
    with kafka(gw, "admin", "adm") as admin:
        for group in ("mine-listed", "theirs-listed"):
            join = G.JoinGroupRequest(group, 10000, 10000, "", None, "consumer",
                                      [G.JoinGroupRequestProtocol("range", b"")])
            member = call(admin, G.JOIN_GROUP_KEY, 5, join).member_id  # (v4+: join again with the id given)
            call(admin, G.JOIN_GROUP_KEY, 5, G.JoinGroupRequest(group, 10000, 10000, member, None, "consumer",
                                                                 [G.JoinGroupRequestProtocol("range", b"")]))
        everything = {g.group_id for g in call(admin, G.LIST_GROUPS_KEY, 2, G.ListGroupsRequest()).groups}
        assert {"mine-listed", "theirs-listed"} <= everything
    listed = {g.group_id for g in call(alice, G.LIST_GROUPS_KEY, 2, G.ListGroupsRequest()).groups}
    assert "mine-listed" in listed and "theirs-listed" not in listed


# -- topics, configs, the cluster ----------------------------------------------------------------------------------

def test_topic_admin_needs_the_topic(gw, alice):
    mine, theirs = topics(gw, "mine-", "theirs-")
    created = call(alice, A.CREATE_TOPICS_KEY, 4, A.CreateTopicsRequest(
        [A.CreatableTopic("theirs-" + uuid.uuid4().hex[:6], 1, -1, [], [])], 10000, False))
    assert [t.error_code for t in created.topics] == [E.TOPIC_AUTHORIZATION_FAILED]
    deleted = call(alice, A.DELETE_TOPICS_KEY, 3, A.DeleteTopicsRequest([theirs], 10000))
    assert [(r.name, r.error_code) for r in deleted.responses] == [(theirs, E.TOPIC_AUTHORIZATION_FAILED)]
    records = call(alice, A.DELETE_RECORDS_KEY, 1, A.DeleteRecordsRequest([A.DeleteRecordsTopic(
        theirs, [A.DeleteRecordsPartition(0, 0)])], 10000))
    assert errors(records, "topics", "name", "partitions") == {theirs: [E.TOPIC_AUTHORIZATION_FAILED]}
    grown = call(alice, A.CREATE_PARTITIONS_KEY, 1, A.CreatePartitionsRequest(
        [A.CreatePartitionsTopic(t, 2, None) for t in (mine, theirs)], 10000, False))
    assert {r.name: r.error_code for r in grown.results} == {mine: OK, theirs: E.TOPIC_AUTHORIZATION_FAILED}
    with NativeClient(*gw.native, token=TOKEN) as c:
        assert theirs in {t.name for t in c.list_topics()}  # still there


def test_configs_need_describe_or_alter_configs(gw, alice):
    mine, theirs = topics(gw, "mine-", "theirs-")
    described = call(alice, C.DESCRIBE_CONFIGS_KEY, 3, C.DescribeConfigsRequest(
        [C.DescribeConfigsResource(2, mine, None), C.DescribeConfigsResource(2, theirs, None),
         C.DescribeConfigsResource(4, "0", None)], False))
    assert {r.resource_name: r.error_code for r in described.results} == {
        mine: OK, theirs: E.TOPIC_AUTHORIZATION_FAILED, "0": E.CLUSTER_AUTHORIZATION_FAILED}
    altered = call(alice, C.ALTER_CONFIGS_KEY, 1, C.AlterConfigsRequest(
        [C.AlterConfigsResource(2, theirs, [C.AlterableConfig("retention.ms", "1000")])], False))
    assert [r.error_code for r in altered.responses] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert call(alice, K.DESCRIBE_LOG_DIRS_KEY, 1, K.DescribeLogDirsRequest(None)).results == []


def test_producer_ids_and_transactions_need_their_transactional_id(gw, alice):
    assert call(alice, A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest("not-mine", 60000)).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert call(alice, A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest("mine-tx", 60000)).error_code == OK
    assert call(alice, A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest(None, 60000)).error_code == OK  # (Write on
    with kafka(gw, "bob") as bob:  # some topic: mine-) — bob has none, and no IdempotentWrite
        assert call(bob, A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest(None, 60000)).error_code == \
            E.CLUSTER_AUTHORIZATION_FAILED
    mine, theirs = topics(gw, "mine-", "theirs-")
    added = call(alice, X.ADD_PARTITIONS_TO_TXN_KEY, 2, X.AddPartitionsToTxnRequest(
        "mine-tx", 0, 0, [X.AddPartitionsToTxnTopic(t, [0]) for t in (mine, theirs)]))
    assert errors(added, "results", "name", "results") == {mine: [E.OPERATION_NOT_ATTEMPTED],
                                                          theirs: [E.TOPIC_AUTHORIZATION_FAILED]}
    added = call(alice, X.ADD_PARTITIONS_TO_TXN_KEY, 2, X.AddPartitionsToTxnRequest(
        "not-mine", 0, 0, [X.AddPartitionsToTxnTopic(mine, [0])]))
    assert errors(added, "results", "name", "results") == {mine: [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]}
    assert call(alice, X.ADD_OFFSETS_TO_TXN_KEY, 2, X.AddOffsetsToTxnRequest("mine-tx", 0, 0, "theirs-g")) \
        .error_code == E.GROUP_AUTHORIZATION_FAILED
    assert call(alice, X.END_TXN_KEY, 2, X.EndTxnRequest("not-mine", 0, 0, True)).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    committed = call(alice, X.TXN_OFFSET_COMMIT_KEY, 2, X.TxnOffsetCommitRequest(
        "mine-tx", "theirs-g", 0, 0, [X.TxnOffsetCommitRequestTopic(mine, [X.TxnOffsetCommitRequestPartition(0, 1)])]))
    assert errors(committed, "topics", "name", "partitions") == {mine: [E.GROUP_AUTHORIZATION_FAILED]}


def test_the_security_apis_need_the_cluster(gw, alice):
    assert call(alice, ACL.DESCRIBE_ACLS_KEY, 3, ACL.DescribeAclsRequest(1, None, 1, None, None, 1, 1)).error_code == \
        E.CLUSTER_AUTHORIZATION_FAILED
    created = call(alice, ACL.CREATE_ACLS_KEY, 3, ACL.CreateAclsRequest([ACL.AclCreation(
        2, "theirs-", 4, "User:alice", "*", 2, 3)]))
    assert [r.error_code for r in created.results] == [E.CLUSTER_AUTHORIZATION_FAILED]
    deleted = call(alice, ACL.DELETE_ACLS_KEY, 3, ACL.DeleteAclsRequest([ACL.DeleteAclsFilter(1, None, 1, None, None,
                                                                                              1, 1)]))
    assert [r.error_code for r in deleted.filter_results] == [E.CLUSTER_AUTHORIZATION_FAILED]
    assert call(alice, S.DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0, S.DescribeUserScramCredentialsRequest(None)) \
        .error_code == E.CLUSTER_AUTHORIZATION_FAILED
    altered = call(alice, S.ALTER_USER_SCRAM_CREDENTIALS_KEY, 0, S.AlterUserScramCredentialsRequest(
        [], [S.ScramCredentialUpsertion("alice", 1, 4096, b"s" * 16, b"p" * 32)]))
    assert [(r.user, r.error_code) for r in altered.results] == [("alice", E.CLUSTER_AUTHORIZATION_FAILED)]
    assert call(alice, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest([], False)).error_code == \
        E.CLUSTER_AUTHORIZATION_FAILED
    with NativeClient(*gw.native, token=TOKEN) as c:  # nothing changed
        assert not [a for a in c.describe_acls() if a.name == "theirs-"]


def test_refusals_are_counted(gw, alice):
    (theirs,) = topics(gw, "theirs-")
    body = P.ProduceRequest(None, -1, 10000, [P.TopicProduceData(theirs, [P.PartitionProduceData(0, batch(b"x"))])])
    call(alice, P.API_KEY, 8, body)
    host, port = gw.addresses["admin"]
    with urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/metrics",
                                                       headers={"Authorization": f"Bearer {TOKEN}"})) as r:
        text = r.read().decode()
    line = next(line for line in text.splitlines() if line.startswith(
        'logway_authorization_denied_total{operation="WRITE",protocol="kafka",resource_type="TOPIC"}'))
    assert float(line.split()[-1]) >= 1


# -- logging in ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_every_mechanism_logs_in_and_a_wrong_password_does_not(gw, mechanism):
    with kafka(gw, "alice", mechanism=mechanism) as c:
        assert call(c, M.API_KEY, 8, M.MetadataRequest([], False)).brokers
    with pytest.raises(KafkaError) as refused:
        kafka(gw, "alice", "wrong", mechanism=mechanism)
    assert refused.value.code == E.SASL_AUTHENTICATION_FAILED
    with pytest.raises(KafkaError):
        kafka(gw, "nobody", "x", mechanism=mechanism)


# -- the APIs and versions of Kafka 4 ------------------------------------------------------------------------------

def test_kafka_4_apis_and_versions_are_held_to_the_acls(gw, alice):
    """KIP-848 and KIP-932 groups, topics named by id, and the requests that carry several groups or keys: each
    group, key and topic checked as in the classic APIs."""
    from logway.codecs.kafka.api import consumer_groups as CG
    from logway.codecs.kafka.api import share_groups as SG

    mine, theirs = topics(gw, "mine-", "theirs-")
    with kafka(gw, "admin", "adm", "PLAIN") as admin:
        ids = {t.name: t.topic_id for t in call(admin, M.API_KEY, 12, M.MetadataRequest(
            [M.MetadataRequestTopic(name=n) for n in (mine, theirs)], False)).topics}
    # Metadata by id: only what it may Describe
    by_id = call(alice, M.API_KEY, 12, M.MetadataRequest([M.MetadataRequestTopic(name=None, topic_id=ids[t])
                                                          for t in (mine, theirs)], False))
    assert sorted((t.name, t.error_code) for t in by_id.topics if t.error_code) == [
        (theirs, E.TOPIC_AUTHORIZATION_FAILED)]
    # FindCoordinator v4: each key
    found = call(alice, G.FIND_COORDINATOR_KEY, 4, G.FindCoordinatorRequest(key_type=0, coordinator_keys=[
        "mine-g4", "theirs-g4"]))
    assert {c.key: c.error_code for c in found.coordinators} == {"mine-g4": OK,
                                                                "theirs-g4": E.GROUP_AUTHORIZATION_FAILED}
    # OffsetFetch v8: each group
    fetched = call(alice, O.OFFSET_FETCH_KEY, 8, O.OffsetFetchRequest(groups=[
        O.OffsetFetchRequestGroup("mine-g4", topics=None), O.OffsetFetchRequestGroup("theirs-g4", topics=None)]))
    assert {g.group_id: g.error_code for g in fetched.groups} == {"mine-g4": OK,
                                                                 "theirs-g4": E.GROUP_AUTHORIZATION_FAILED}
    # KIP-848 consumer groups
    heartbeat = CG.ConsumerGroupHeartbeatRequest(group_id="theirs-cg", member_id="m1", member_epoch=0,
                                                 rebalance_timeout_ms=10000, subscribed_topic_names=[mine],
                                                 topic_partitions=[])
    assert call(alice, CG.CONSUMER_GROUP_HEARTBEAT_KEY, 1, heartbeat).error_code == E.GROUP_AUTHORIZATION_FAILED
    heartbeat.group_id = "mine-cg"
    assert call(alice, CG.CONSUMER_GROUP_HEARTBEAT_KEY, 1, heartbeat).error_code == OK
    described = call(alice, CG.CONSUMER_GROUP_DESCRIBE_KEY, 1, CG.ConsumerGroupDescribeRequest(
        group_ids=["mine-cg", "theirs-cg"]))
    assert {g.group_id: g.error_code for g in described.groups} == {"mine-cg": OK,
                                                                   "theirs-cg": E.GROUP_AUTHORIZATION_FAILED}
    # KIP-932 share groups
    share = SG.ShareGroupHeartbeatRequest(group_id="theirs-sg", member_id="s1", member_epoch=0,
                                          subscribed_topic_names=[mine])
    assert call(alice, SG.SHARE_GROUP_HEARTBEAT_KEY, 1, share).error_code == E.GROUP_AUTHORIZATION_FAILED
    fetch = SG.ShareFetchRequest(group_id="theirs-sg", member_id="s1", share_session_epoch=0, max_wait_ms=0)
    assert call(alice, SG.SHARE_FETCH_KEY, 1, fetch).error_code == E.GROUP_AUTHORIZATION_FAILED
    fetch = SG.ShareFetchRequest(group_id="mine-sg", member_id="s1", share_session_epoch=0, max_wait_ms=0,
                                 topics=[SG.ShareFetchTopic(topic_id=ids[theirs], partitions=[
                                     SG.ShareFetchPartition(0)])])
    assert call(alice, SG.SHARE_FETCH_KEY, 1, fetch).error_code == E.TOPIC_AUTHORIZATION_FAILED
    described = call(alice, SG.SHARE_GROUP_DESCRIBE_KEY, 1, SG.ShareGroupDescribeRequest(group_ids=["theirs-sg"]))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("theirs-sg", E.GROUP_AUTHORIZATION_FAILED)]
    offsets = call(alice, SG.DESCRIBE_SHARE_GROUP_OFFSETS_KEY, 0, SG.DescribeShareGroupOffsetsRequest(groups=[
        SG.DescribeShareGroupOffsetsRequestGroup(group_id="theirs-sg")]))
    assert [(g.group_id, g.error_code) for g in offsets.groups] == [("theirs-sg", E.GROUP_AUTHORIZATION_FAILED)]
    assert call(alice, SG.DELETE_SHARE_GROUP_OFFSETS_KEY, 0, SG.DeleteShareGroupOffsetsRequest(
        group_id="theirs-sg")).error_code == E.GROUP_AUTHORIZATION_FAILED
    # DeleteTopics v6 by id, and a broker's AddPartitionsToTxn v4
    deleted = call(alice, A.DELETE_TOPICS_KEY, 6, A.DeleteTopicsRequest(
        topics=[A.DeleteTopicState(name=None, topic_id=ids[theirs])], timeout_ms=10000))
    assert [(r.name, r.error_code) for r in deleted.responses] == [(theirs, E.TOPIC_AUTHORIZATION_FAILED)]
    verify = call(alice, X.ADD_PARTITIONS_TO_TXN_KEY, 4, X.AddPartitionsToTxnRequest(transactions=[
        X.AddPartitionsToTxnTransaction("mine-tx", 1, 0, True, [])]))
    assert verify.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    with NativeClient(*gw.native, token=TOKEN) as c:
        assert theirs in {t.name for t in c.list_topics()}  # still there


def _bits(*codes: int) -> int:
    return sum(1 << code for code in codes)


#: Kafka's AclOperation codes.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
OMITTED = -2147483648


def test_authorized_operations_are_answered_when_asked(gw, alice):
    """Metadata v8-v12, DescribeGroups, ConsumerGroupDescribe, DescribeCluster: the bit field of what the ACLs allow
    (alice: All on mine-*, nothing on the cluster), Kafka's "omitted" where not asked or refused."""
    from logway.codecs.kafka.api import consumer_groups as CG

    mine, theirs = topics(gw, "mine-", "theirs-")
    every_topic_op = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    for version in (8, 10, 12):
        answer = call(alice, M.API_KEY, version, M.MetadataRequest(
            [M.MetadataRequestTopic(mine), M.MetadataRequestTopic(theirs)], False, True, True))
        assert {t.name: t.topic_authorized_operations for t in answer.topics} == {mine: every_topic_op,
                                                                                 theirs: OMITTED}
        assert answer.cluster_authorized_operations == (0 if version <= 10 else OMITTED)  # no Describe: none
    every = call(alice, M.API_KEY, 9, M.MetadataRequest(None, False, False, True))
    assert {t.topic_authorized_operations for t in every.topics} == {every_topic_op}
    assert every.cluster_authorized_operations == OMITTED
    unasked = call(alice, M.API_KEY, 9, M.MetadataRequest([M.MetadataRequestTopic(mine)], False))
    assert unasked.topics[0].topic_authorized_operations == OMITTED
    groups = call(alice, G.DESCRIBE_GROUPS_KEY, 5, G.DescribeGroupsRequest(["mine-ops", "theirs-ops"], True))
    assert {g.group_id: (g.error_code, g.authorized_operations) for g in groups.groups} == {
        "mine-ops": (OK, _bits(READ, DESCRIBE, DELETE)), "theirs-ops": (E.GROUP_AUTHORIZATION_FAILED, OMITTED)}
    heartbeat = CG.ConsumerGroupHeartbeatRequest(group_id="mine-ops-cg", member_id="m1", member_epoch=0,
                                                 rebalance_timeout_ms=10000, subscribed_topic_names=[mine],
                                                 topic_partitions=[])
    assert call(alice, CG.CONSUMER_GROUP_HEARTBEAT_KEY, 1, heartbeat).error_code == OK
    for asked, expected in ((True, _bits(READ, DESCRIBE, DELETE)), (False, OMITTED)):
        described = call(alice, CG.CONSUMER_GROUP_DESCRIBE_KEY, 1, CG.ConsumerGroupDescribeRequest(
            ["mine-ops-cg"], asked))
        assert [(g.error_code, g.authorized_operations) for g in described.groups] == [(OK, expected)]
    cluster = call(alice, K.DESCRIBE_CLUSTER_KEY, 1, K.DescribeClusterRequest(True, K.ENDPOINT_BROKERS))
    assert cluster.error_code == OK and cluster.cluster_authorized_operations == 0
    with kafka(gw, "admin", "adm", "PLAIN") as admin:  # a super user: every operation of the cluster
        cluster = call(admin, K.DESCRIBE_CLUSTER_KEY, 0, K.DescribeClusterRequest(True))
        assert cluster.cluster_authorized_operations == _bits(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
                                                              DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)
        assert call(admin, K.DESCRIBE_CLUSTER_KEY, 0, K.DescribeClusterRequest(False)).cluster_authorized_operations \
            == OMITTED
