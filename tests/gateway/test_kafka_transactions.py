"""The transactional Kafka APIs on the wire, request by request, with the exact error each misuse gets: unknown
partitions, a producer id that is not the transactional id's, fenced epochs, requests out of order, transactional
batches outside a transaction, control batches from a client; and what read_committed Fetch and ListOffsets return
(the LSO, the aborted-transactions list, the control batches in the log)."""

from __future__ import annotations

import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import admin, fetch, list_offsets
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import encode_batch, encode_control_batch, iter_batches, parse_header
from logway.codecs.records import Record

from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic as _new_topic


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("txwire") / "data")
    g = GatewayProcess(data, "log_level=ERROR")
    yield g
    g.stop()


def new_topic(gw, partitions=1) -> str:
    return _new_topic(gw, partitions, prefix="x-")


class Txn:
    """One transactional producer spoken by hand."""

    def __init__(self, client, tid=None, timeout_ms=60000):
        self.client = client
        self.tid = tid or "t-" + uuid.uuid4().hex[:8]
        resp = client.call(22, 1, admin.InitProducerIdRequest(transactional_id=self.tid,
                                                               transaction_timeout_ms=timeout_ms))
        assert resp.error_code == E.NONE
        self.pid, self.epoch = resp.producer_id, resp.producer_epoch
        self.seq: dict = {}

    def add(self, topic, *partitions, version=2, pid=None, epoch=None):
        resp = self.client.call(24, version, X.AddPartitionsToTxnRequest(
            transactional_id=self.tid, producer_id=self.pid if pid is None else pid,
            producer_epoch=self.epoch if epoch is None else epoch,
            topics=[X.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]))
        return [r.error_code for t in resp.results for r in t.results]

    def batch(self, topic, partition, *values, epoch=None):
        seq = self.seq.get((topic, partition), 0)
        self.seq[(topic, partition)] = seq + len(values)
        return encode_batch([Record(v) for v in values], default_timestamp=1, producer_id=self.pid,
                            producer_epoch=self.epoch if epoch is None else epoch, base_sequence=seq,
                            transactional=True)

    def produce(self, topic, partition, *values, epoch=None):
        return self.client.produce(topic, partition, self.batch(topic, partition, *values, epoch=epoch))

    def end(self, committed, *, version=2, epoch=None, pid=None):
        return self.client.call(26, version, X.EndTxnRequest(
            transactional_id=self.tid, producer_id=self.pid if pid is None else pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=committed)).error_code

    def add_offsets(self, group, epoch=None):
        return self.client.call(25, 2, X.AddOffsetsToTxnRequest(
            transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch if epoch is None else epoch,
            group_id=group)).error_code

    def commit_offsets(self, group, topic, partition, offset, metadata=None):
        resp = self.client.call(28, 2, X.TxnOffsetCommitRequest(
            transactional_id=self.tid, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
            topics=[X.TxnOffsetCommitRequestTopic(name=topic, partitions=[X.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata)])]))
        return resp.topics[0].partitions[0].error_code


def fetch_part(client, topic, offset=0, *, isolation=1, version=11):
    body = fetch.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                              topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                                  partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    return client.call(1, version, body).responses[0].partitions[0]


def latest(client, topic, isolation):
    body = list_offsets.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        list_offsets.ListOffsetsTopic(name=topic, partitions=[
            list_offsets.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return client.call(2, 2, body).topics[0].partitions[0].offset


def test_commit_writes_a_control_batch_and_moves_the_lso(gw, client):
    topic = new_topic(gw)
    t = Txn(client)
    assert t.add(topic, 0) == [E.NONE]
    assert t.produce(topic, 0, b"a", b"b") == (E.NONE, 0)
    part = fetch_part(client, topic)
    assert (part.high_watermark, part.last_stable_offset) == (2, 0)
    assert len(part.records or b"") == 0  # read_committed: nothing below the LSO yet
    assert latest(client, topic, 1) == 0 and latest(client, topic, 0) == 2
    assert t.end(True) == E.NONE
    assert t.end(True) == E.NONE  # a retried EndTxn of a completed commit succeeds again
    part = fetch_part(client, topic)
    assert (part.high_watermark, part.last_stable_offset, part.aborted_transactions) == (3, 3, [])
    headers = [parse_header(b) for b in iter_batches(bytes(part.records))]
    assert [(h.is_transactional, h.is_control, h.producer_id) for h in headers] == [(True, False, t.pid),
                                                                                    (True, True, t.pid)]
    assert latest(client, topic, 1) == 3


def test_abort_is_listed_for_read_committed_fetches(gw, client):
    topic = new_topic(gw)
    t = Txn(client)
    t.add(topic, 0)
    t.produce(topic, 0, b"x")
    assert t.end(False) == E.NONE
    part = fetch_part(client, topic)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(t.pid, 0)]
    assert fetch_part(client, topic, isolation=0).aborted_transactions == []  # read_uncommitted: no list
    assert t.end(True) == E.INVALID_TXN_STATE  # nothing open to commit
    # legacy fetches (message sets, v0-v3) are read_uncommitted by definition; no marker is ever shown
    with NativeClient(*gw.native) as c:
        assert c.fetch(topic, 0, 0, max_wait_ms=0).records == []


def test_add_partitions_errors(gw, client):
    topic = new_topic(gw, 2)
    t = Txn(client)
    assert t.add(topic, 0, 5) == [E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert t.add("no-such-topic", 0) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert t.add(topic, 0, pid=t.pid + 12345) == [E.INVALID_PRODUCER_ID_MAPPING]
    assert t.add(topic, 0, epoch=t.epoch + 1) == [E.INVALID_PRODUCER_ID_MAPPING]
    newer = Txn(client, t.tid)  # fences t
    assert newer.epoch == t.epoch + 1
    assert t.add(topic, 0) == [E.PRODUCER_FENCED]
    assert t.add(topic, 0, version=1) == [E.INVALID_PRODUCER_EPOCH]
    assert newer.add(topic, 0, 1) == [E.NONE, E.NONE]


def test_produce_outside_a_transaction_and_control_batches_are_refused(gw, client):
    topic = new_topic(gw)
    t = Txn(client)
    assert t.produce(topic, 0, b"not-added")[0] == E.INVALID_TXN_STATE
    t.add(topic, 0)
    assert t.produce(topic, 0, b"old", epoch=t.epoch - 1 if t.epoch else -5)[0] in (E.INVALID_PRODUCER_EPOCH,
                                                                                    E.INVALID_PRODUCER_ID_MAPPING)
    stranger = encode_batch([Record(b"s")], default_timestamp=1, producer_id=987654, producer_epoch=0,
                            base_sequence=0, transactional=True)
    assert client.produce(topic, 0, stranger)[0] == E.INVALID_PRODUCER_ID_MAPPING
    marker = encode_control_batch(t.pid, t.epoch, committed=True, timestamp_ms=1)
    assert client.produce(topic, 0, marker)[0] == E.INVALID_RECORD
    mixed = t.batch(topic, 0, b"a") + encode_batch([Record(b"plain")], default_timestamp=1)
    assert client.produce(topic, 0, mixed)[0] == E.INVALID_RECORD


def test_fenced_producer_cannot_produce_or_end(gw, client):
    topic = new_topic(gw)
    old = Txn(client)
    old.add(topic, 0)
    assert old.produce(topic, 0, b"zombie")[0] == E.NONE
    new = Txn(client, old.tid)  # aborts the zombie's transaction
    assert old.produce(topic, 0, b"late", epoch=old.epoch)[0] == E.INVALID_PRODUCER_EPOCH
    assert old.end(True) == E.PRODUCER_FENCED
    assert old.end(True, version=1) == E.INVALID_PRODUCER_EPOCH
    part = fetch_part(client, topic)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(old.pid, 0)]
    assert part.last_stable_offset == part.high_watermark == 2  # the zombie's record + the ABORT marker
    assert new.end(True) == E.INVALID_TXN_STATE  # the new producer has nothing open


def test_txn_offsets_visible_only_at_commit(gw, client):
    topic = new_topic(gw)
    group = "g-" + uuid.uuid4().hex[:6]
    t = Txn(client)
    assert t.commit_offsets(group, topic, 0, 5) == E.INVALID_TXN_STATE  # the group was not added
    assert t.add_offsets(group) == E.NONE
    assert t.add_offsets("") == E.INVALID_GROUP_ID
    assert t.commit_offsets(group, topic, 0, 5) == E.NONE
    assert t.commit_offsets(group, topic, 9, 5) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert t.commit_offsets(group, topic, 0, -3) == E.INVALID_REQUEST
    assert t.commit_offsets(group, topic, 0, 5, "m" * 5000) == E.OFFSET_METADATA_TOO_LARGE
    with NativeClient(*gw.native) as c:
        assert c.committed(topic, 0, group) is None
        assert t.end(True) == E.NONE
        assert c.committed(topic, 0, group) == 5
    t.add_offsets(group)
    t.commit_offsets(group, topic, 0, 9)
    assert t.end(False) == E.NONE
    with NativeClient(*gw.native) as c:
        assert c.committed(topic, 0, group) == 5  # aborted: never visible


def test_init_producer_id_aborts_the_open_transaction_and_keeps_the_id(gw, client):
    topic = new_topic(gw)
    t = Txn(client)
    t.add(topic, 0)
    t.produce(topic, 0, b"open")
    again = Txn(client, t.tid)
    assert again.pid == t.pid and again.epoch == t.epoch + 1
    assert fetch_part(client, topic).last_stable_offset == 2  # ended: the record + its ABORT marker
    assert again.end(False) == E.INVALID_TXN_STATE


def test_producer_state_rebuilt_after_a_restart_skips_markers(tmp_path):
    """A transactional producer's sequences continue across a restart: the rebuild from the log tail ignores the
    control batches (they carry no sequence)."""
    from logway.gateway.formats import KAFKA, STORAGE_FORMATS
    from logway.gateway.protocols.kafka.producers import BatchSeq, rebuild
    from logway.gateway.steps import Steps
    from logway.codecs.kafka.records import parse_header
    from logway.storage import LogEngine, TopicConfig

    eng = LogEngine(tmp_path, STORAGE_FORMATS, TopicConfig())
    plog = eng.create_topic("t", 1).partitions[0]
    pid, epoch = 42, 3

    def batch(seq, n=2):
        return encode_batch([Record(b"v")] * n, default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=True)

    plog.append(batch(0), producer=(pid, epoch))
    plog.end_transaction(pid, epoch, committed=True, marker=KAFKA.transaction_marker(pid, epoch, True, 1))
    state = rebuild(Steps.stored_tail(plog, 1 << 20, 1 << 20))
    assert state.check(BatchSeq.of(parse_header(batch(2))))[0] == E.NONE  # the next sequence is accepted
    assert state.check(BatchSeq.of(parse_header(batch(5))))[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    eng.close()
