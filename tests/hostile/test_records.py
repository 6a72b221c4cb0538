"""Stored records and counts the store refuses, through every protocol (the shared gateway: see `conftest.py`).

- Poisoned records: a batch whose framing, header and CRC are right but whose records are garbage. The produce
  path stores batches as sent without decoding their records (design: Kafka's CRC and TANK's header are checked,
  nothing more), so such a batch reaches the log. Every reader must then get its protocol's error for that
  partition (or the bytes verbatim, in the topic's own format), never a crashed connection: native Fetch, Kafka
  Fetch at several versions and ListOffsets by timestamp, TANK Consume. Also a Kafka record TANK cannot carry
  (a key over 255 bytes).
- Absurd partition counts, refused by every protocol's create before anything is made on disk.
- Reads with the group ids the offset store refuses (empty, over 32767 bytes): nothing committed is found.
"""

from __future__ import annotations

import os
import struct

import pytest

from logway.codecs import native as nv
from logway.codecs import tank as tk
from logway.codecs.kafka.api import admin as KA
from logway.codecs.kafka.api import list_offsets as KL
from logway.codecs.kafka.api import produce as KP
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record

from .wire import (KT, TS, KafkaSock, NativeSock, assert_all_alive, assert_kafka_alive, assert_native_alive,
                   assert_nothing_escaped, assert_tank_alive, kafka_body, kafka_errors, log_state, tank_client,
                   tank_responses_for)

pytestmark = pytest.mark.usefixtures("gw")


# ============================================================================================ poisoned records

def _poisoned_kafka_batch(kind: str) -> bytes:
    from crc32c import crc32c

    if kind == "record-length-past-the-end":
        batch = bytearray(encode_batch([Record(b"0123456789abcdef")], default_timestamp=TS))
        batch[61] = 0x7E  # the first record's length varint: 63 bytes, more than the batch holds
    else:  # "gzip-garbage": codec 1 (gzip) over bytes that are no gzip stream
        batch = bytearray(encode_batch([Record(b"0123456789abcdef" * 4)], default_timestamp=TS))
        struct.pack_into(">h", batch, 21, 1)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


#: A plain bundle of one message whose content length runs past the bundle.
_POISONED_BUNDLE = b"\x04" + b"\x00" + struct.pack("<Q", TS) + b"\x7fabc"


def _native_fetch(topic: str):
    with NativeSock() as n:
        return n.request(nv.FetchRequest(topic, 0, 0, 1 << 20))


def _kafka_fetch(topic: str, version: int):
    with KafkaSock() as k:
        body = k.call(1, version, kafka_body(1, version, topic=topic)).body
    return body.responses[0].partitions[0]


def _tank_consume(topic: str):
    request = tk.ConsumeRequest(7, 0, 0, [tk.ConsumeTopic(topic, [tk.ConsumePartition(0, 1, 1 << 20)])])
    resp = tank_responses_for(request)
    assert len(resp) == 1 and isinstance(resp[0], tk.ConsumeResponse), resp
    return resp[0].topics[0].partitions[0]


@pytest.fixture(scope="module")
def poisoned_topics(gw):
    """Topics whose partition 0 holds one poisoned batch, in each storage format, by how it got there."""
    topics = {}
    with NativeSock() as n:
        for kind in ("record-length-past-the-end", "gzip-garbage"):
            name = f"hpk-{kind}"
            assert n.request(nv.CreateTopicRequest(name, 1)) == nv.CreateTopicResponse(True)
            topics[f"kafka-{kind}"] = name
    with KafkaSock() as k:
        for kind in ("record-length-past-the-end", "gzip-garbage"):
            body = KP.ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                KP.TopicProduceData(name=f"hpk-{kind}", partition_data=[
                    KP.PartitionProduceData(index=0, records=_poisoned_kafka_batch(kind))])])
            part = k.call(0, 8, body).body.responses[0].partition_responses[0]
            assert part.error_code in (E.NONE, E.CORRUPT_MESSAGE, E.INVALID_RECORD), part
    with tank_client() as t:
        assert t.create_topic("hpt", 1) == tk.CreateTopicError.OK
        assert t.produce("hpt", 0, _POISONED_BUNDLE) in (tk.ProduceError.OK, tk.ProduceError.SYSTEM_ERROR)
        topics["tank-message-past-the-end"] = "hpt"
    return topics


POISONS = ["kafka-record-length-past-the-end", "kafka-gzip-garbage", "tank-message-past-the-end"]


@pytest.mark.parametrize("poison", POISONS)
def test_poisoned_partition_read_over_native(poisoned_topics, poison):
    answer = _native_fetch(poisoned_topics[poison])
    assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith("invalid record"), answer
    assert_native_alive()


def _kafka_poison_params():
    params = []
    for poison in POISONS:
        for version in (0, 3, 4, 11):
            params.append(pytest.param(poison, version, id=f"{poison}-v{version}"))
    return params


@pytest.mark.parametrize("poison, version", _kafka_poison_params())
def test_poisoned_partition_read_over_kafka(poisoned_topics, poison, version):
    part = _kafka_fetch(poisoned_topics[poison], version)
    decodes = version < 4 or poison.startswith("tank-")  # the answer must be built from decoded records
    assert part.error_code == (E.CORRUPT_MESSAGE if decodes else E.NONE), part
    assert_kafka_alive()


@pytest.mark.parametrize("poison", POISONS)
def test_poisoned_partition_read_over_tank(poisoned_topics, poison):
    part = _tank_consume(poisoned_topics[poison])
    assert part.error in (tk.ConsumeFlags.OK, tk.ConsumeFlags.SYSTEM_ERROR), part
    assert_tank_alive()


@pytest.mark.parametrize("poison", POISONS)
def test_poisoned_partition_timestamp_lookup_over_kafka(poisoned_topics, poison):
    body = KL.ListOffsetsRequest(replica_id=-1, topics=[KL.ListOffsetsTopic(
        name=poisoned_topics[poison], partitions=[KL.ListOffsetsPartition(partition_index=0, timestamp=0)])])
    with KafkaSock() as k:
        part = k.call(2, 5, body).body.topics[0].partitions[0]
    assert part.error_code == E.CORRUPT_MESSAGE, part
    assert_kafka_alive()


def test_tank_consume_of_a_kafka_record_with_a_key_tank_cannot_carry(gw):
    """A Kafka record whose key is over 255 bytes cannot be a TANK message: the partition answers a system
    error (refused, never truncated or dropped silently); native and Kafka readers still get the record."""
    topic = "hkey300"
    with NativeSock() as n:
        assert n.request(nv.CreateTopicRequest(topic, 1)) == nv.CreateTopicResponse(True)
        assert n.request(nv.ProduceRequest(topic, 0, [Record(b"v", key=b"k" * 300)])).offsets == [0]
        assert [r.key for r in n.request(nv.FetchRequest(topic, 0, 0, 1 << 20)).records] == [b"k" * 300]
    part = _tank_consume(topic)
    assert part.error == tk.ConsumeFlags.SYSTEM_ERROR, part
    assert_all_alive()


# ============================================================================================ absurd partition counts

def test_absurd_partition_counts_are_refused_by_every_protocol(gw):
    """Each partition is a directory and open files: counts beyond the engine's bound are refused up front,
    before anything is made on disk, with each protocol's error."""
    before = log_state()
    with NativeSock() as n:
        for count in (1001, 2**31 - 1):
            answer = n.request(nv.CreateTopicRequest("hparts", count))
            assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith("invalid request"), answer
    with KafkaSock() as k:
        for count in (0, 1001, 2**31 - 1, -2):
            body = KA.CreateTopicsRequest(timeout_ms=5000, topics=[KA.CreatableTopic(name="hparts",
                                                                                     num_partitions=count)])
            assert kafka_errors(k.call(19, 4, body).body) == {E.INVALID_PARTITIONS}, count
    with tank_client() as t:
        for count in (0, 1001, 65535):
            assert t.create_topic("hparts", count) == tk.CreateTopicError.INVALID_REQUEST, count
    assert log_state() == before
    assert os.listdir(os.path.join(gw.data_dir, "tmp")) == []
    assert_nothing_escaped()
    assert_all_alive()


# ============================================================================================ refused group ids

@pytest.mark.parametrize("group", ["", "g" * 32768], ids=["empty", "overlong-32768"])
def test_native_reads_with_a_group_id_the_store_cannot_hold(group):
    """Reading never writes: an OffsetFetch or a Fetch with such a group id finds nothing committed."""
    with NativeSock() as n:
        assert n.request(nv.OffsetFetchRequest(KT, 0, group)) == nv.OffsetFetchResponse(None)
        fetched = n.request(nv.FetchRequest(KT, 0, 0, 1 << 20, group_id=group))
        assert isinstance(fetched, nv.FetchResponse) and fetched.records[0].offset == 0, fetched
    if not group:  # (a Kafka string cannot be over 32767 bytes)
        with KafkaSock() as k:
            fetched = k.call(9, 5, kafka_body(9, 5, group=group)).body
            assert {p.committed_offset for p in fetched.topics[0].partitions} == {-1}, fetched
    assert_all_alive()
