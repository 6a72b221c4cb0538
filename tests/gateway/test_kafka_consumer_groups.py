"""KIP-848 consumer groups at the byte level, through a gateway process: ConsumerGroupHeartbeat (joining, the
server-side assignment, incremental revocation before reassignment, member epochs and fencing, static members,
leaving, session and revocation timeouts, the refusals) and ConsumerGroupDescribe; OffsetCommit v9 / OffsetFetch v9
with member epochs; classic and consumer groups side by side (ListGroups types, one namespace of group ids,
DeleteGroups)."""

from __future__ import annotations

import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.error_codes import ErrorCode as E

from ..kafka_wire import KafkaWireClient
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic

SESSION_MS = 1500


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("cg") / "data")
    g = GatewayProcess(data, "log_level=ERROR", f"kafka.group_consumer_session_timeout_ms={SESSION_MS}",
                       "kafka.group_consumer_heartbeat_interval_ms=200")
    yield g
    g.stop()


def topic_id(client, name) -> bytes:
    resp = client.call(3, 12, M.MetadataRequest(topics=[M.MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=False))
    return resp.topics[0].topic_id


class Member:
    """One consumer group member speaking ConsumerGroupHeartbeat v1 as librdkafka does: the full request to join,
    then its epoch and what it owns."""

    def __init__(self, client, group, topics, *, member_id=None, instance_id=None, assignor=None, regex=None):
        self.client, self.group, self.topics = client, group, topics
        self.member_id = member_id or uuid.uuid4().hex
        self.instance_id, self.assignor, self.regex = instance_id, assignor, regex
        self.epoch = 0
        self.owned: dict[bytes, list[int]] = {}

    def beat(self, *, epoch=None, owned=None, full=False, version=1):
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0 or full
        req = CG.ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=10000 if joining else -1,
            subscribed_topic_names=list(self.topics) if joining and self.topics is not None else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=self.assignor,
            topic_partitions=[CG.HeartbeatTopicPartitions(t, sorted(ps)) for t, ps in
                              (self.owned if owned is None else owned).items()])
        resp = self.client.call(68, version, req)
        if resp.error_code == E.NONE:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}
        return resp

    def partitions(self, tid) -> list[int]:
        return self.owned.get(tid, [])


def test_join_assign_rebalance_with_incremental_revocation(gw, client):
    name = new_topic(gw, 4)
    tid = topic_id(client, name)
    group = "cg-" + uuid.uuid4().hex[:8]
    m1 = Member(client, group, [name])
    r = m1.beat()
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, m1.member_id, 1, 200)
    assert m1.partitions(tid) == [0, 1, 2, 3]
    assert m1.beat().assignment is None  # unchanged: not sent again
    m2 = Member(client, group, [name])
    r2 = m2.beat()
    assert r2.member_epoch == 2 and m2.partitions(tid) == []  # its partitions are still m1's: unreleased
    # m1 learns its target: it keeps two partitions, gives up two, still at epoch 1 until it has revoked them
    r1 = m1.beat()
    kept = m1.partitions(tid)
    assert r1.member_epoch == 1 and len(kept) == 2
    described = client.call(69, 1, CG.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Reconciling", 2, 2)
    revoking = {m.member_id: m for m in described.members}[m1.member_id]
    assert sorted(revoking.assignment.topic_partitions[0].partitions) == kept
    assert len(revoking.target_assignment.topic_partitions[0].partitions) == 2
    assert m2.beat().assignment is None  # nothing released yet
    m1.beat()  # now reporting only the two it keeps: revoked, it moves to epoch 2
    assert m1.epoch == 2 and m1.partitions(tid) == kept
    r2 = m2.beat()
    assert r2.member_epoch == 2 and sorted(m2.partitions(tid)) == sorted(set(range(4)) - set(kept))
    described = client.call(69, 1, CG.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    assert described.group_state == "Stable" and described.assignor_name == "uniform"
    assert {m.member_type for m in described.members} == {1}
    assert {m.assignment.topic_partitions[0].topic_name for m in described.members} == {name}
    listed = {g.group_id: g for g in client.call(16, 5, G.ListGroupsRequest()).groups}
    assert (listed[group].group_type, listed[group].group_state, listed[group].protocol_type) == (
        "consumer", "Stable", "consumer")
    # m2 leaves: m1 gets everything back at the next epoch
    assert m2.beat(epoch=-1).member_epoch == -1
    m1.beat()
    assert (m1.epoch, m1.partitions(tid)) == (3, [0, 1, 2, 3])


def test_member_epochs_fencing_and_refusals(gw, client):
    name = new_topic(gw, 2)
    group = "cgf-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [name])
    m.beat()
    assert m.beat(epoch=m.epoch + 1).error_code == E.FENCED_MEMBER_EPOCH  # ahead of the coordinator
    other = Member(client, group, [name])
    other.beat()
    m.beat()
    m.beat()  # revoked what it must: at the group's epoch now
    assert m.epoch == 2
    stale = m.beat(epoch=1, owned={})  # the epoch just before (a lost answer), owning nothing extra: accepted
    assert stale.error_code == E.NONE and stale.member_epoch == 2
    assert m.beat(epoch=0, owned={}).error_code == E.NONE  # a fenced member rejoins under its own id
    assert Member(client, group, [name], member_id="ghost").beat(epoch=5).error_code == E.UNKNOWN_MEMBER_ID
    assert Member(client, "no-group-" + group, [name]).beat(epoch=3).error_code == E.GROUP_ID_NOT_FOUND
    assert Member(client, group, [name], assignor="sticky").beat().error_code == E.UNSUPPORTED_ASSIGNOR
    bad_regex = Member(client, group, None, regex="t[")
    resp = bad_regex.beat()
    assert resp.error_code == E.INVALID_REGULAR_EXPRESSION and resp.error_message
    empty_id = CG.ConsumerGroupHeartbeatRequest(group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=1,
                                                subscribed_topic_names=[name], topic_partitions=[])
    assert client.call(68, 1, empty_id).error_code == E.INVALID_REQUEST  # v1: the client makes its id up
    v0 = client.call(68, 0, empty_id)
    assert v0.error_code == E.NONE and v0.member_id  # v0: the broker makes it up
    no_subscription = Member(client, group, None)
    assert no_subscription.beat().error_code == E.INVALID_REQUEST


def test_regex_subscriptions_and_range_assignor(gw, client):
    prefix = "rx" + uuid.uuid4().hex[:6]
    a = new_topic(gw, 2, prefix=prefix + "-a-")
    b = new_topic(gw, 1, prefix=prefix + "-b-")
    group = "cgr-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [], regex=prefix + "-.*", assignor="range")
    m.beat()
    assert sorted(m.owned) == sorted([topic_id(client, a), topic_id(client, b)])
    c = new_topic(gw, 1, prefix=prefix + "-c-")  # a new matching topic joins the assignment
    m.beat()
    assert topic_id(client, c) in m.owned and m.epoch == 2
    described = client.call(69, 0, CG.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    assert described.assignor_name == "range" and described.members[0].subscribed_topic_regex == prefix + "-.*"


def test_static_members_keep_their_place_and_partitions_across_a_restart(gw, client):
    name = new_topic(gw, 3)
    tid = topic_id(client, name)
    group = "cgs-" + uuid.uuid4().hex[:8]
    first = Member(client, group, [name], instance_id="i-1")
    first.beat()
    other = Member(client, group, [name])
    other.beat()
    first.beat()
    first.beat()
    other.beat()
    mine = first.partitions(tid)
    assert mine and other.partitions(tid)
    impostor = Member(client, group, [name], instance_id="i-1")
    assert impostor.beat().error_code == E.UNRELEASED_INSTANCE_ID  # the place is taken
    assert first.beat(epoch=-2).member_epoch == -2  # leaves for now: the place and partitions are kept
    epoch = client.call(69, 1, CG.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0].group_epoch
    again = Member(client, group, [name], instance_id="i-1")
    again.beat()
    assert again.partitions(tid) == mine  # the same partitions, under a new member id
    assert client.call(69, 1, CG.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0].group_epoch == epoch
    assert first.beat().error_code == E.FENCED_INSTANCE_ID  # the old incarnation is fenced


def test_a_silent_member_is_removed_after_its_session(gw, client):
    name = new_topic(gw, 2)
    tid = topic_id(client, name)
    group = "cgt-" + uuid.uuid4().hex[:8]
    live, silent = Member(client, group, [name]), Member(client, group, [name])
    live.beat()
    silent.beat()
    live.beat()
    live.beat()
    silent.beat()
    assert len(live.partitions(tid)) == 1 and len(silent.partitions(tid)) == 1
    deadline = time.monotonic() + 10
    while len(live.partitions(tid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        live.beat()
    assert live.partitions(tid) == [0, 1]  # the silent one timed out; its partition came back
    assert silent.beat().error_code == E.UNKNOWN_MEMBER_ID


def test_offset_commit_v9_checks_member_epochs_and_offset_fetch_v9_too(gw, client):
    name = new_topic(gw, 1)
    group = "cgo-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [name])
    m.beat()

    def commit(epoch, member_id=m.member_id, version=9):
        resp = client.call(8, version, O.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
            topics=[O.OffsetCommitRequestTopic(name, [O.OffsetCommitRequestPartition(0, 5, committed_metadata="")])]))
        return resp.topics[0].partitions[0].error_code

    assert commit(m.epoch) == E.NONE
    assert commit(m.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit(m.epoch + 1) == E.FENCED_MEMBER_EPOCH
    assert commit(m.epoch, member_id="nobody") == E.UNKNOWN_MEMBER_ID
    assert commit(-1, member_id="") == E.UNKNOWN_MEMBER_ID  # an outsider, while the group has members
    assert commit(m.epoch, version=8) == E.UNSUPPORTED_VERSION  # members of the consumer protocol use v9+

    def fetch(member_id, epoch):
        resp = client.call(9, 9, O.OffsetFetchRequest(groups=[O.OffsetFetchRequestGroup(
            group_id=group, member_id=member_id, member_epoch=epoch, topics=[O.OffsetFetchRequestTopic(name, [0])])]))
        g = resp.groups[0]
        return g.error_code, [p.committed_offset for t in g.topics for p in t.partitions]

    assert fetch(m.member_id, m.epoch) == (E.NONE, [5])
    assert fetch(m.member_id, m.epoch - 1) == (E.STALE_MEMBER_EPOCH, [])
    assert fetch(None, -1) == (E.NONE, [5])  # an admin's fetch
    m.beat(epoch=-1)
    assert commit(-1, member_id="") == E.NONE  # empty now: anyone may commit


def test_classic_and_consumer_groups_side_by_side_in_one_namespace(gw, client):
    name = new_topic(gw, 1)
    consumer_group, classic_group = "cgx-" + uuid.uuid4().hex[:8], "clx-" + uuid.uuid4().hex[:8]
    m = Member(client, consumer_group, [name])
    m.beat()

    def join(group):
        req = G.JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                 member_id="", protocol_type="consumer",
                                 protocols=[G.JoinGroupRequestProtocol("range", b"")])
        return client.call(11, 9, req)

    assert join(consumer_group).error_code == E.INCONSISTENT_GROUP_PROTOCOL  # in use by the consumer protocol
    first = join(classic_group)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    req = G.JoinGroupRequest(group_id=classic_group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                             member_id=first.member_id, protocol_type="consumer",
                             protocols=[G.JoinGroupRequestProtocol("range", b"")])
    assert client.call(11, 9, req).error_code == E.NONE
    refused = Member(client, classic_group, [name]).beat()
    assert (refused.error_code, refused.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                           f"Group {classic_group} is not a consumer group.")
    types = {g.group_id: g.group_type for g in client.call(16, 5, G.ListGroupsRequest()).groups}
    assert (types[consumer_group], types[classic_group]) == ("consumer", "classic")
    only_consumer = client.call(16, 5, G.ListGroupsRequest(types_filter=["consumer"])).groups
    assert consumer_group in {g.group_id for g in only_consumer} and classic_group not in {
        g.group_id for g in only_consumer}
    described = client.call(15, 6, G.DescribeGroupsRequest(groups=[consumer_group])).groups[0]
    assert (described.error_code, described.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                                f"Group {consumer_group} is not a classic group.")
    other = client.call(69, 1, CG.ConsumerGroupDescribeRequest(group_ids=[classic_group, "never-" + name])).groups
    assert [(g.error_code, g.error_message) for g in other] == [
        (E.GROUP_ID_NOT_FOUND, f"Group {classic_group} is not a consumer group."),
        (E.GROUP_ID_NOT_FOUND, f"Group never-{name} not found.")]
    deleted = client.call(42, 2, G.DeleteGroupsRequest(groups_names=[consumer_group])).results[0]
    assert deleted.error_code == E.NON_EMPTY_GROUP
    m.beat(epoch=-1)
    assert client.call(42, 2, G.DeleteGroupsRequest(groups_names=[consumer_group])).results[0].error_code == E.NONE
    # an empty group of either type gives its id over to the other protocol
    again = Member(client, consumer_group, [name])
    assert again.beat().error_code == E.NONE
    again.beat(epoch=-1)
    assert join(consumer_group).error_code == E.MEMBER_ID_REQUIRED
