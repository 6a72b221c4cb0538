"""The Kafka listener at the byte level: version fallbacks, legacy message formats, every produce/fetch/admin
error answer, and hostile frames that must close only their own connection."""

from __future__ import annotations

import os
import re
import socket
import struct
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import admin, fetch, metadata, offsets, produce
from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
from logway.codecs.kafka.api.registry import SUPPORTED
from logway.codecs.kafka.legacy import decode_message_set
from logway.codecs.kafka.records import decode_records, encode_batch, parse_header
from logway.codecs.records import Record

from ..kafka_wire import KafkaWireClient
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic as _new_topic

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "kafka"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("wire") / "data")
    g = GatewayProcess(data, "log_level=ERROR", "storage.max_batch_bytes=65536")
    yield g
    g.stop()


def new_topic(gw, partitions=1) -> str:
    return _new_topic(gw, partitions, prefix="w-")


def raw_exchange(gw, data: bytes, *, read: bool = True, eof: bool = False) -> bytes:
    """Send raw bytes on a fresh connection (then EOF, with `eof`), then read until the gateway closes it (or 5 s
    pass)."""
    s = socket.create_connection(gw.addresses["kafka"], timeout=5)
    s.sendall(data)
    if eof:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while read and (chunk := s.recv(65536)):
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return out


def still_serving(gw) -> bool:
    with KafkaWireClient(*gw.addresses["kafka"]) as c:
        return c.call(18, 2, ApiVersionsRequest()).error_code == 0


# -- ApiVersions -----------------------------------------------------------------------------------------------

def test_api_versions_advertises_every_key_from_zero(client):
    resp = client.call(18, 2, ApiVersionsRequest())
    assert resp.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == served_versions()
    # from 0, but the share-group APIs, which Kafka 4.1 serves from v1
    assert all(lo == 0 for key, (lo, _) in served_versions().items() if key not in (76, 77, 78, 79))


def _api_versions_frame(version: int, software: bytes = b"lib") -> bytes:
    # Header v2: api_key, api_version, correlation_id, client_id (int16 string), empty tagged fields; body with
    # compact strings client_software_name/version and an empty tag section, as kafka-python/librdkafka send.
    header = struct.pack(">hhih", 18, version, 99, 4) + b"test" + b"\x00"
    return header + bytes([len(software) + 1]) + software + b"\x022" + b"\x00"


def _exchange_one(gw, frame: bytes) -> bytes:
    s = socket.create_connection(gw.addresses["kafka"], timeout=5)
    s.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    payload = s.recv(size, socket.MSG_WAITALL)
    s.close()
    return payload


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_flexible_requests_are_answered_in_their_layout(gw, version):
    """KIP-511: ApiVersions v3/v4 name the client's software; the answer is the flexible layout (compact key list,
    each key and the body with an empty tag section) after a response header v0."""
    payload = _exchange_one(gw, _api_versions_frame(version))
    correlation, error, count = struct.unpack_from(">ihB", payload)
    assert (correlation, error) == (99, 0)
    keys = [struct.unpack_from(">hhhB", payload, 7 + 7 * i) for i in range(count - 1)]
    assert {k: (lo, hi) for k, lo, hi, tags in keys} == served_versions() and not any(k[3] for k in keys)
    assert len(payload) == 7 + 7 * (count - 1) + 4 + 1 and payload[-1] == 0  # throttle time, empty tags


def test_api_versions_beyond_what_we_serve_gets_v0_error_35_and_the_key_list(gw):
    payload = _exchange_one(gw, _api_versions_frame(5))
    correlation, error, count = struct.unpack_from(">ihi", payload)
    assert (correlation, error) == (99, 35)
    keys = [struct.unpack_from(">hhh", payload, 10 + 6 * i) for i in range(count)]
    assert {k: (lo, hi) for k, lo, hi in keys} == served_versions()
    assert len(payload) == 10 + 6 * count  # v0 layout: no throttle time, no tags


# -- hostile frames ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("frame", [
    struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 8,  # larger than max_request_bytes
    struct.pack(">i", 4) + b"\x00\x12\x00\x00",  # shorter than a request header
    struct.pack(">i", 10) + struct.pack(">hhih", 42, 0, 1, -1),  # an API key we do not implement
    struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 1, -1),  # Produce at an unsupported version
    struct.pack(">i", 20) + struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x00" * 6,
    struct.pack(">i", 14) + struct.pack(">hhih", 3, 1, 1, 50) + b"abcd",  # client id overruns the frame
])
def test_hostile_frames_close_only_their_connection(gw, frame):
    assert raw_exchange(gw, frame) == b""
    assert still_serving(gw)


def test_truncated_request_then_eof(gw):
    frame = struct.pack(">hhih", 18, 2, 1, -1)
    started = time.monotonic()
    assert raw_exchange(gw, struct.pack(">i", 100) + frame, eof=True) == b""
    assert time.monotonic() - started < 4  # closed at the EOF, not by a timeout
    assert still_serving(gw)


# -- produce -----------------------------------------------------------------------------------------------------

def test_produce_errors(gw, client):
    topic = new_topic(gw)
    good = encode_batch([Record(b"ok")], default_timestamp=1)
    assert client.produce("missing-" + topic, 0, good)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce(topic, 7, good)[0] == 3
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    assert client.produce(topic, 0, bytes(bad))[0] == 2  # CORRUPT_MESSAGE (CRC)
    assert client.produce(topic, 0, good[:40])[0] == 2  # truncated batch
    big = encode_batch([Record(os.urandom(70_000))], default_timestamp=1)
    assert client.produce(topic, 0, big)[0] == 10  # MESSAGE_TOO_LARGE (max_batch_bytes 64 KiB here)
    body = produce.ProduceRequest(transactional_id=None, acks=5, timeout_ms=1000, topic_data=[
        produce.TopicProduceData(name=topic, partition_data=[produce.PartitionProduceData(index=0, records=good)])])
    assert client.call(0, 8, body).responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS
    assert client.produce(topic, 0, good) == (0, 0)  # nothing bad was stored


def test_legacy_message_set_is_converted_up_and_down(gw, client):
    topic = new_topic(gw)
    legacy_set = (FIXTURES / "librdkafka216-messageset-magic0.bin").read_bytes()
    expected = decode_message_set(legacy_set)
    body = produce.ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        produce.TopicProduceData(name=topic, partition_data=[
            produce.PartitionProduceData(index=0, records=legacy_set)])])
    resp = client.call(0, 1, body)  # Produce v1: magic 0
    assert resp.responses[0].partition_responses[0].error_code == 0
    stored = os.path.join(gw.data_dir, "topics", topic, "0", f"{0:020d}.log")
    with open(stored, "rb") as f:
        assert parse_header(f.read(61)).magic == 2  # converted up to RecordBatch v2 on the way in
    modern = _fetch(client, topic, 0, version=11)
    assert [r.value for r in decode_records(modern)] == [r.value for r in expected]
    old = _fetch(client, topic, 0, version=3)  # Fetch < 4: converted down to magic 1
    assert old[16] == 1
    assert [(r.offset, r.value) for r in decode_message_set(old)] == [
        (i, r.value) for i, r in enumerate(expected)]


def _fetch(client, topic, offset, *, version=11, max_bytes=1 << 20, partition=0):
    body = fetch.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                              topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                                  partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    part = client.call(1, version, body).responses[0].partitions[0]
    if part.error_code:
        return part.error_code
    return part.records


def test_fetch_returns_the_stored_bytes_and_errors(gw, client):
    topic = new_topic(gw)
    batches = [encode_batch([Record(b"r%d-%d" % (i, j)) for j in range(3)], default_timestamp=5) for i in range(4)]
    for b in batches:
        client.produce(topic, 0, b)
    stored = Path(gw.data_dir, "topics", topic, "0", f"{0:020d}.log").read_bytes()
    assert _fetch(client, topic, 0) == stored  # sendfile of the segment bytes, nothing decoded
    assert _fetch(client, topic, 4) == stored[len(batches[0]):]  # from the batch holding offset 4
    assert _fetch(client, topic, 0, max_bytes=10) == stored[:len(batches[0])]  # at least one whole batch
    assert _fetch(client, topic, 12) in (b"", None)  # at the end: empty
    assert _fetch(client, topic, 13) == 1  # OFFSET_OUT_OF_RANGE
    assert _fetch(client, topic, 0, partition=3) == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_idempotence_state_survives_a_restart(tmp_path):
    data = str(tmp_path / "data")
    with GatewayProcess(data, "log_level=ERROR") as g:
        with NativeClient(*g.native) as n:
            n.create_topic("idem", 1)
        with KafkaWireClient(*g.addresses["kafka"]) as c:
            pid, epoch = c.init_producer_id()
            first = encode_batch([Record(b"a"), Record(b"b")], default_timestamp=1, producer_id=pid,
                                 producer_epoch=epoch, base_sequence=0)
            assert c.produce("idem", 0, first) == (0, 0)
            c.produce("idem", 0, encode_batch([Record(b"c")], default_timestamp=1))  # a non-idempotent one
    with GatewayProcess(data, "log_level=ERROR") as g:
        with KafkaWireClient(*g.addresses["kafka"]) as c:
            assert c.produce("idem", 0, first) == (0, 0)  # recognised from the log: not appended again
            nxt = encode_batch([Record(b"d")], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                               base_sequence=2)
            assert c.produce("idem", 0, nxt) == (0, 3)
            assert c.init_producer_id()[0] > pid  # producer ids are never reused
        with NativeClient(*g.native) as n:
            assert [r.value for r in n.fetch("idem", 0, 0).records] == [b"a", b"b", b"c", b"d"]



def test_an_idle_producers_idempotence_state_expires_and_an_active_ones_does_not(tmp_path):
    """`kafka.producer_id_expiration_ms`: a producer that wrote nothing to a partition for that long is forgotten
    there (a retry of its batch is then appended again, as Kafka does after producer.id.expiration.ms), while one
    that keeps writing keeps its state (its retry answered with the original offset)."""
    with GatewayProcess(str(tmp_path / "data"), "log_level=ERROR", "kafka.producer_id_expiration_ms=1000") as g:
        with NativeClient(*g.native) as n:
            n.create_topic("exp", 1)
        with KafkaWireClient(*g.addresses["kafka"]) as c:
            idle, busy = (c.init_producer_id() for _ in range(2))

            def batch(producer, seq: int) -> bytes:
                return encode_batch([Record(b"%d-%d" % (producer[0], seq))], default_timestamp=1,
                                    producer_id=producer[0], producer_epoch=producer[1], base_sequence=seq)

            first = batch(idle, 0)
            assert c.produce("exp", 0, first) == (0, 0)
            assert c.produce("exp", 0, first) == (0, 0)  # a retry: recognised, not appended again
            def expired() -> bool:  # (the gateway looks for expired states every second)
                metrics = urllib.request.urlopen("http://%s:%d/metrics" % tuple(g.addresses["admin"]),
                                                 timeout=10).read()
                return re.search(rb'^logway_expired_total\{what="producer_states"\} [1-9]', metrics, re.M) is not None

            seq, deadline = 0, time.monotonic() + 15
            while True:  # a batch of the busy producer every 100 ms, until the idle one's state has expired
                offset = c.produce("exp", 0, batch(busy, seq))[1]
                seq += 1
                if expired():
                    break
                assert time.monotonic() < deadline, "no producer state expired"
                time.sleep(0.1)
            assert c.produce("exp", 0, batch(busy, seq - 1)) == (0, offset)  # still known: its original offset
            assert c.produce("exp", 0, first) == (0, offset + 1)  # forgotten: taken as a new producer's batch
            assert c.produce("exp", 0, first) == (0, offset + 1)  # ... and known again from then on


# -- metadata and admin --------------------------------------------------------------------------------------------

def test_metadata_auto_creation_rules(gw, client, tmp_path):
    name = "auto-" + uuid.uuid4().hex[:6]
    for allow in (False, True):  # off by default (kafka.auto_create_topics): a typo does not make a topic
        resp = client.call(3, 8, metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=name)],
                                                          allow_auto_topic_creation=allow))
        assert resp.topics[0].error_code == 3
    with GatewayProcess(str(tmp_path / "data"), "log_level=ERROR", "kafka.auto_create_topics=true") as auto, \
            KafkaWireClient(*auto.addresses["kafka"]) as other:
        resp = other.call(3, 8, metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=name)],
                                                         allow_auto_topic_creation=False))
        assert resp.topics[0].error_code == 3
        resp = other.call(3, 8, metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=name)],
                                                         allow_auto_topic_creation=True))
        t = resp.topics[0]
        assert (t.error_code, len(t.partitions), t.partitions[0].leader_id) == (0, 1, 0)
        assert resp.controller_id == 0 and resp.brokers[0].port == auto.addresses["kafka"][1]
    name = new_topic(gw)
    bad = client.call(3, 8, metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name="bad/name")]))
    assert bad.topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    everything = client.call(3, 1, metadata.MetadataRequest(topics=None))
    assert name in {t.name for t in everything.topics}
    none = client.call(3, 1, metadata.MetadataRequest(topics=[]))
    assert none.topics == []


def test_create_topics_errors_and_validate_only(gw, client):
    name = "ct-" + uuid.uuid4().hex[:6]

    def create(version=4, validate_only=False, **kw):
        t = admin.CreatableTopic(name=kw.pop("name", name), num_partitions=kw.pop("num_partitions", 2),
                                 replication_factor=kw.pop("replication_factor", 1),
                                 assignments=[admin.CreatableReplicaAssignment(p, brokers)
                                              for p, brokers in kw.pop("assignments", [])],
                                 configs=[admin.CreatableTopicConfig(name=k, value=v)
                                          for k, v in kw.pop("configs", {}).items()])
        r = client.call(19, version, admin.CreateTopicsRequest(topics=[t], timeout_ms=1000,
                                                               validate_only=validate_only))
        return r.topics[0].error_code

    assert create(validate_only=True) == 0
    assert name not in {t.name for t in client.call(3, 1, metadata.MetadataRequest(topics=None)).topics}
    assert create(name="no/slash") == 17
    assert create(num_partitions=0) == 37
    assert create(replication_factor=3) == 38
    assert create(configs={"no.such.config": "1"}) == 40
    assert create(configs={"retention.ms": "abc"}) == 40
    assert create(configs={"retention.ms": "60000"}) == 0
    assert create() == 36
    assert create(name=name + "-d", num_partitions=-1, replication_factor=-1) == 0  # v4 defaults
    manual = dict(num_partitions=-1, replication_factor=-1)
    assert create(name=name + "-a", assignments=[(0, [0]), (0, [0])], **manual) == 39  # partition 0 twice
    assert create(name=name + "-a", assignments=[(0, [0]), (2, [0])], **manual) == 39  # a gap
    assert create(name=name + "-a", assignments=[(0, [1])], **manual) == 38  # broker 1 does not exist
    assert create(name=name + "-a", assignments=[(0, [0])]) == 42  # with num_partitions too
    assert create(name=name + "-a", assignments=[(1, [0]), (0, [0])], **manual) == 0
    assert [len(t.partitions) for t in client.call(3, 1, metadata.MetadataRequest(
        topics=[metadata.MetadataRequestTopic(name + "-a")])).topics] == [2]
    deleted = client.call(20, 3, admin.DeleteTopicsRequest(topic_names=[name, name + "-d", name + "-x"],
                                                           timeout_ms=1000))
    assert [r.error_code for r in deleted.responses] == [0, 0, 3]


def test_offsets_committed_over_kafka_are_the_native_ones(gw, client):
    topic = new_topic(gw, 2)
    body = offsets.OffsetCommitRequest(group_id="shared", generation_id_or_member_epoch=-1, member_id="",
                                       topics=[offsets.OffsetCommitRequestTopic(name=topic, partitions=[
                                           offsets.OffsetCommitRequestPartition(partition_index=1,
                                                                                committed_offset=42,
                                                                                committed_metadata="m")])])
    assert client.call(8, 7, body).topics[0].partitions[0].error_code == 0
    with NativeClient(*gw.native) as n:
        assert n.committed(topic, 1, "shared") == 42
        n.commit(topic, 0, "shared", 7)
    everything = client.call(9, 5, offsets.OffsetFetchRequest(group_id="shared", topics=None))
    got = {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in everything.topics
           for p in t.partitions}
    assert got[(topic, 1)] == (42, "m") and got[(topic, 0)][0] == 7
    unknown = offsets.OffsetCommitRequest(group_id="shared", generation_id_or_member_epoch=-1, member_id="",
                                          topics=[offsets.OffsetCommitRequestTopic(name=topic, partitions=[
                                              offsets.OffsetCommitRequestPartition(partition_index=9,
                                                                                   committed_offset=1)])])
    assert client.call(8, 7, unknown).topics[0].partitions[0].error_code == 3


def test_transactional_ids_keep_their_producer_id_and_fence_older_epochs(gw, client):
    from logway.codecs.kafka.api import admin as adm

    topic = new_topic(gw)

    def init(name, timeout_ms=1000):
        resp = client.call(22, 1, adm.InitProducerIdRequest(transactional_id=name, transaction_timeout_ms=timeout_ms))
        return resp.error_code, resp.producer_id, resp.producer_epoch

    code, pid, epoch = init("writer-a")
    assert code == 0
    assert init("writer-a") == (0, pid, epoch + 1)  # the same id, the next epoch: the first producer is fenced
    assert init("writer-b")[1] != pid
    assert init("writer-c", timeout_ms=0)[0] == 50  # INVALID_TRANSACTION_TIMEOUT
    assert init("writer-c", timeout_ms=10**9)[0] == 50
    assert init("")[0] == 42  # INVALID_REQUEST: an empty transactional id
    # Idempotent batches under the transactional producer id (outside a transaction): sequence rules apply.
    epoch += 1
    batches = [encode_batch([Record(b"%d" % i)], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                            base_sequence=i) for i in range(8)]
    assert [client.produce(topic, 0, b) for b in batches] == [(0, i) for i in range(8)]
    assert client.produce(topic, 0, batches[0])[0] == 46  # older than the 5-batch window: DUPLICATE_SEQUENCE
    assert client.produce(topic, 0, batches[6]) == (0, 6)  # inside the window: its original offset
    gap = encode_batch([Record(b"x")], default_timestamp=1, producer_id=pid, producer_epoch=epoch, base_sequence=20)
    assert client.produce(topic, 0, gap)[0] == 45
    old = encode_batch([Record(b"x")], default_timestamp=1, producer_id=pid, producer_epoch=epoch - 1,
                       base_sequence=8)
    assert client.produce(topic, 0, old)[0] == 47  # INVALID_PRODUCER_EPOCH: the fenced epoch
    assert len(decode_records(_fetch(client, topic, 0))) == 8  # nothing appended twice


# -- keys the codec knows and the broker does not handle -------------------------------------------------------

def served_versions() -> dict[int, tuple[int, int]]:
    """What the gateway advertises: the codec's versions of the keys the broker handles, plus SASL (17, 36)."""
    from logway.codecs.kafka.api.registry import advertised
    from logway.gateway.protocols.kafka.broker import HANDLERS

    return advertised(set(HANDLERS) | {17, 36})


def test_only_handled_keys_are_advertised_and_a_request_for_another_closes_only_its_connection(gw, client):
    from logway.codecs.kafka.api.registry import request_type
    from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
    from logway.gateway.protocols.kafka.broker import HANDLERS

    resp = client.call(18, 2, ApiVersionsRequest())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == served_versions() and set(advertised) <= set(HANDLERS) | {17, 36}
    assert all(advertised[k] == SUPPORTED[k] for k in advertised)  # each served key over the codec's full range
    # A key the codec can parse but no handler answers is treated as Kafka treats a key it does not implement:
    # the connection is closed, nothing is answered, other connections go on.
    for key in sorted(set(SUPPORTED) - set(advertised)):
        frame = KafkaClientConnection().send(KafkaRequest(key, SUPPORTED[key][0], body=request_type(key)()))
        assert raw_exchange(gw, frame) == b"", key
    assert still_serving(gw)
    assert client.call(18, 2, ApiVersionsRequest()).error_code == 0  # the first connection too
