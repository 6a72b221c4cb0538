"""KIP-932 share groups at the byte level, through a gateway process: ShareGroupHeartbeat (joining, the shared
assignment, leaving), share sessions (epochs, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, closing),
ShareFetch and ShareAcknowledge (acquired ranges and delivery counts, accept / release / reject / gap, records of
another member refused, locks that expire, the delivery count limit, a wait for new records), group configs
(share.auto.offset.reset, share.record.lock.duration.ms), the offset admin APIs and ShareGroupDescribe, and share
groups beside the other group types."""

from __future__ import annotations

import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import share_groups as S
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.records import Record

from ..kafka_wire import KafkaWireClient
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic

ACCEPT, RELEASE, REJECT, GAP = S.ACK_ACCEPT, S.ACK_RELEASE, S.ACK_REJECT, S.ACK_GAP


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("share") / "data")
    g = GatewayProcess(data, "log_level=ERROR", "kafka.group_share_session_timeout_ms=1500",
                       "kafka.group_share_heartbeat_interval_ms=200", "kafka.group_share_delivery_count_limit=3",
                       "kafka.share_auto_offset_reset=earliest")
    yield g
    g.stop()


def topic_id(client, name) -> bytes:
    resp = client.call(3, 12, M.MetadataRequest(topics=[M.MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=False))
    return resp.topics[0].topic_id


def produce(client, topic, values, partition=0):
    assert client.produce(topic, partition, encode_batch([Record(v) for v in values], default_timestamp=1))[0] == 0


class Member:
    """A share group member: heartbeats, and one share session on the gateway."""

    def __init__(self, client, group, topics):
        self.client, self.group, self.topics = client, group, topics
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.session = 0
        self.assigned: dict[bytes, list[int]] = {}

    def beat(self, epoch=None):
        resp = self.client.call(76, 1, S.ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            subscribed_topic_names=self.topics if (self.epoch if epoch is None else epoch) == 0 else None))
        if resp.error_code == E.NONE:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.assigned = {tp.topic_id: tp.partitions for tp in resp.assignment.topic_partitions}
        return resp

    def fetch(self, partitions=(), acks=(), *, epoch=None, max_records=100, wait=0, forget=()):
        """partitions: [(topic id, partition)]; acks: [(topic id, partition, first, last, types)]."""
        topics: dict[bytes, dict[int, S.ShareFetchPartition]] = {}
        for tid, p in partitions:
            topics.setdefault(tid, {}).setdefault(p, S.ShareFetchPartition(p))
        for tid, p, first, last, types in acks:
            topics.setdefault(tid, {}).setdefault(p, S.ShareFetchPartition(p)).acknowledgement_batches.append(
                S.AcknowledgementBatch(first, last, list(types)))
        resp = self.client.call(78, 1, S.ShareFetchRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.session if epoch is None else epoch, max_wait_ms=wait, min_bytes=1,
            max_records=max_records, batch_size=max_records,
            topics=[S.ShareFetchTopic(t, list(ps.values())) for t, ps in topics.items()],
            forgotten_topics_data=[S.ForgottenShareTopic(t, [p]) for t, p in forget]))
        if resp.error_code == E.NONE and epoch is None:
            self.session += 1
        return resp

    def acknowledge(self, acks, *, epoch=None):
        topics: dict[bytes, dict[int, S.ShareAcknowledgePartition]] = {}
        for tid, p, first, last, types in acks:
            topics.setdefault(tid, {}).setdefault(p, S.ShareAcknowledgePartition(p)).acknowledgement_batches.append(
                S.AcknowledgementBatch(first, last, list(types)))
        resp = self.client.call(79, 1, S.ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.session if epoch is None else epoch,
            topics=[S.ShareAcknowledgeTopic(t, list(ps.values())) for t, ps in topics.items()]))
        if resp.error_code == E.NONE and epoch is None:
            self.session = self.session + 1 if self.session >= 0 else self.session
        return resp


def got(resp):
    """{(topic id, partition): ([(first, last, count)], values, ack error, error)} of a ShareFetch answer."""
    out = {}
    for t in resp.responses:
        for p in t.partitions:
            values = [r.value for r in decode_records(p.records)] if p.records else []
            out[(t.topic_id, p.partition_index)] = (
                [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records], values,
                p.acknowledge_error_code, p.error_code)
    return out


def test_acquire_acknowledge_release_reject_and_redeliver(gw, client):
    name = new_topic(gw, 1)
    tid = topic_id(client, name)
    produce(client, name, [b"a", b"b", b"c", b"d"])
    group = "sg-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [name])
    joined = m.beat()
    assert (joined.error_code, joined.member_epoch, joined.heartbeat_interval_ms) == (E.NONE, 1, 200)
    assert m.assigned == {tid: [0]}
    first = m.fetch([(tid, 0)])
    assert first.acquisition_lock_timeout_ms == 30000
    assert got(first) == {(tid, 0): ([(0, 3, 1)], [b"a", b"b", b"c", b"d"], 0, 0)}
    # accept a, release b, reject c, and d stays acquired; the release comes back with delivery count 2
    again = m.fetch(acks=[(tid, 0, 0, 2, [ACCEPT, RELEASE, REJECT])])
    assert got(again)[(tid, 0)][0] == [(1, 1, 2)] and got(again)[(tid, 0)][2] == E.NONE
    other = Member(client, group, [name])
    other.beat()
    other.fetch([(tid, 0)])  # opens its session: nothing left to acquire (b and d are m's)
    stolen = other.fetch(acks=[(tid, 0, 3, 3, [ACCEPT])])
    assert got(stolen)[(tid, 0)][2] == E.INVALID_RECORD_STATE  # d is not other's to acknowledge
    assert m.acknowledge([(tid, 0, 1, 1, [ACCEPT]), (tid, 0, 3, 3, [ACCEPT])]).error_code == E.NONE
    offsets = client.call(90, 0, S.DescribeShareGroupOffsetsRequest(groups=[
        S.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])).groups[0]
    assert [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in offsets.topics] == [
        (name, [(0, 4)])]  # everything done: the share-partition starts at 4
    produce(client, name, [b"e"])
    waited = m.fetch(wait=5000)  # parks until... the record is there already: answered at once
    assert got(waited)[(tid, 0)][:2] == ([(4, 4, 1)], [b"e"])


def test_share_sessions_epochs_and_closing(gw, client):
    name = new_topic(gw, 2)
    tid = topic_id(client, name)
    produce(client, name, [b"x"], partition=1)
    group = "sgs-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [name])
    assert Member(client, group, [name]).fetch([(tid, 0)]).error_code == E.UNKNOWN_MEMBER_ID  # not a member
    m.beat()
    assert m.fetch([(tid, 0)], epoch=3).error_code == E.SHARE_SESSION_NOT_FOUND
    opened = m.fetch([(tid, 0), (tid, 1)])
    assert got(opened)[(tid, 1)][1] == [b"x"]
    assert m.fetch(epoch=7).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert m.acknowledge([(tid, 1, 0, 0, [RELEASE])]).error_code == E.NONE  # the session's next epoch
    redelivered = m.fetch()  # no partition named: the session's partitions
    assert got(redelivered)[(tid, 1)][0] == [(0, 0, 2)]
    closed = m.fetch(epoch=-1, acks=[(tid, 1, 0, 0, [GAP])])  # closing, with a last acknowledgement
    assert closed.error_code == E.NONE and got(closed)[(tid, 1)][2] == E.NONE
    assert m.fetch(epoch=1).error_code == E.SHARE_SESSION_NOT_FOUND
    acks_on_open = m.fetch([(tid, 0)], epoch=0, acks=[(tid, 0, 0, 0, [ACCEPT])])
    assert got(acks_on_open)[(tid, 0)][2] == E.INVALID_SHARE_SESSION_EPOCH  # acknowledgements cannot open one


def test_locks_expire_and_the_delivery_count_limit_archives(gw, client):
    name = new_topic(gw, 1)
    tid = topic_id(client, name)
    produce(client, name, [b"poison", b"ok"])
    group = "sgl-" + uuid.uuid4().hex[:8]
    altered = client.call(44, 1, C.IncrementalAlterConfigsRequest(resources=[C.IncrementalAlterConfigsResource(
        resource_type=C.ConfigResourceType.GROUP, resource_name=group, configs=[
            C.IncrementalAlterableConfig("share.record.lock.duration.ms", C.AlterConfigOp.SET, "1000")])]))
    assert altered.responses[0].error_code == E.NONE
    described = client.call(32, 4, C.DescribeConfigsRequest(resources=[C.DescribeConfigsResource(
        resource_type=C.ConfigResourceType.GROUP, resource_name=group, configuration_keys=None)])).results[0]
    assert {c.name: (c.value, c.config_source) for c in described.configs} == {
        "share.auto.offset.reset": ("earliest", C.ConfigSource.DEFAULT_CONFIG),
        "share.record.lock.duration.ms": ("1000", C.ConfigSource.DYNAMIC_GROUP_CONFIG)}
    m = Member(client, group, [name])
    m.beat()
    assert got(m.fetch([(tid, 0)], max_records=1))[(tid, 0)][0] == [(0, 1, 1)]  # a whole batch
    assert m.fetch().acquisition_lock_timeout_ms == 1000
    counts = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(counts) < 2:
        time.sleep(0.3)
        m.beat()  # (a member silent for its session would be removed)
        acquired = got(m.fetch()).get((tid, 0), ([], [], 0, 0))[0]
        counts += [c for _, _, c in acquired]
    assert counts == [2, 3]  # each lock expired and the records came back, one delivery more each time
    time.sleep(1.2)
    m.beat()
    assert got(m.fetch()) == {}  # the third delivery was the limit: archived, never delivered again
    start = client.call(90, 0, S.DescribeShareGroupOffsetsRequest(groups=[
        S.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            S.DescribeShareGroupOffsetsRequestTopic(name, [0])])])).groups[0].topics[0].partitions[0]
    assert start.start_offset == 2
    bad = client.call(44, 1, C.IncrementalAlterConfigsRequest(resources=[C.IncrementalAlterConfigsResource(
        resource_type=C.ConfigResourceType.GROUP, resource_name=group, configs=[
            C.IncrementalAlterableConfig("share.auto.offset.reset", C.AlterConfigOp.SET, "sometime")])]))
    assert bad.responses[0].error_code == E.INVALID_CONFIG


def test_members_share_partitions_and_a_silent_member_releases_what_it_held(gw, client):
    name = new_topic(gw, 1)
    tid = topic_id(client, name)
    produce(client, name, [b"1", b"2"])
    group = "sgm-" + uuid.uuid4().hex[:8]
    holder, waiter = Member(client, group, [name]), Member(client, group, [name])
    holder.beat()
    waiter.beat()
    holder.beat()
    assert holder.assigned == waiter.assigned == {tid: [0]}  # more members than partitions: shared
    assert got(holder.fetch([(tid, 0)]))[(tid, 0)][0] == [(0, 1, 1)]
    assert got(waiter.fetch([(tid, 0)])) == {}
    described = client.call(77, 1, S.ShareGroupDescribeRequest(group_ids=[group])).groups[0]
    assert (described.group_state, described.assignor_name, len(described.members)) == ("Stable", "simple", 2)
    assert described.members[0].assignment.topic_partitions[0].topic_name == name
    deadline = time.monotonic() + 10  # holder goes silent: its session expires, its records are released
    taken = []
    while not taken and time.monotonic() < deadline:
        time.sleep(0.2)
        waiter.beat()
        taken = got(waiter.fetch()).get((tid, 0), ([],))[0]
    assert taken == [(0, 1, 2)]
    assert holder.beat().error_code == E.UNKNOWN_MEMBER_ID


def test_offset_admin_apis_need_an_empty_group_and_groups_of_other_types_refuse(gw, client):
    name = new_topic(gw, 1)
    tid = topic_id(client, name)
    produce(client, name, [b"r%d" % i for i in range(5)])
    group = "sga-" + uuid.uuid4().hex[:8]
    m = Member(client, group, [name])
    m.beat()
    refused = client.call(91, 0, S.AlterShareGroupOffsetsRequest(group_id=group, topics=[
        S.AlterShareGroupOffsetsRequestTopic(name, [S.AlterShareGroupOffsetsRequestPartition(0, 3)])]))
    assert refused.error_code == E.NON_EMPTY_GROUP
    assert m.beat(epoch=-1).member_epoch == -1
    altered = client.call(91, 0, S.AlterShareGroupOffsetsRequest(group_id=group, topics=[
        S.AlterShareGroupOffsetsRequestTopic(name, [S.AlterShareGroupOffsetsRequestPartition(0, 3),
                                                    S.AlterShareGroupOffsetsRequestPartition(7, 0)])]))
    assert [(p.partition_index, p.error_code) for p in altered.responses[0].partitions] == [
        (0, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    again = Member(client, group, [name])
    again.beat()
    assert got(again.fetch([(tid, 0)]))[(tid, 0)][0] == [(3, 4, 1)]  # from the altered start
    again.beat(epoch=-1)
    deleted = client.call(92, 0, S.DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        S.DeleteShareGroupOffsetsRequestTopic(name)]))
    assert deleted.error_code == E.NONE and deleted.responses[0].error_code == E.NONE
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state)
              for g in client.call(16, 5, G.ListGroupsRequest(types_filter=["share"])).groups}
    assert listed[group] == ("share", "share", "Empty")
    classic = "sgc-" + uuid.uuid4().hex[:8]
    first = client.call(11, 9, G.JoinGroupRequest(group_id=classic, session_timeout_ms=10000,
                                                  rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                                                  protocols=[G.JoinGroupRequestProtocol("range", b"")]))
    client.call(11, 9, G.JoinGroupRequest(group_id=classic, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                          member_id=first.member_id, protocol_type="consumer",
                                          protocols=[G.JoinGroupRequestProtocol("range", b"")]))
    refused = Member(client, classic, [name]).beat()
    assert (refused.error_code, refused.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                           f"Group {classic} is not a share group.")
    described = client.call(77, 1, S.ShareGroupDescribeRequest(group_ids=[classic])).groups[0]
    assert described.error_code == E.GROUP_ID_NOT_FOUND
    assert client.call(42, 2, G.DeleteGroupsRequest(groups_names=[group])).results[0].error_code == E.NONE
