"""The KIP-848 and KIP-932 messages, which kafka-python 3.0.12 does not know, against golden frames captured from
librdkafka 2.16 (confluent-kafka 2.16.1, see fixtures/kafka/wire/README.md): each parses through the server
connection to the fields the client meant, whole and one byte at a time, and our client encodes the same body to
the same bytes. (Their layouts were also checked against Kafka's and franz-go's message definitions.)"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.api import share_groups as SG
from logway.codecs.kafka.connection import NEED_DATA, KafkaClientConnection, KafkaRequest, KafkaServerConnection

WIRE = Path(__file__).resolve().parent.parent.parent / "fixtures" / "kafka" / "wire"

SHARE_MEMBER = "pVdMAH8QSjepTiWwo047UA"
EVENTS_ID = bytes.fromhex("aff5ca34d20b419ca607a0b211dffd98")  # the topic id of "events" on the gateway of the capture

GOLDEN = {
    "consumer-group-heartbeat-v1-librdkafka216.bin": (68, 1, CG.ConsumerGroupHeartbeatRequest(
        group_id="cg-golden", member_id="Z4ztdBbSQ4igQp2IIlgiSA", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=300000, subscribed_topic_names=["events"], subscribed_topic_regex="",
        server_assignor=None, topic_partitions=[])),
    "consumer-group-describe-v0-librdkafka216.bin": (69, 0, CG.ConsumerGroupDescribeRequest(
        group_ids=["cg-golden"], include_authorized_operations=False)),
    "share-group-heartbeat-v1-librdkafka216.bin": (76, 1, SG.ShareGroupHeartbeatRequest(
        group_id="sg-golden", member_id=SHARE_MEMBER, member_epoch=0, rack_id=None, subscribed_topic_names=["events"])),
    "share-fetch-v1-librdkafka216.bin": (78, 1, SG.ShareFetchRequest(
        group_id="sg-golden", member_id=SHARE_MEMBER, share_session_epoch=0, max_wait_ms=500, min_bytes=1,
        max_bytes=52428800, max_records=500, batch_size=500,
        topics=[SG.ShareFetchTopic(topic_id=EVENTS_ID, partitions=[SG.ShareFetchPartition(0, [])])],
        forgotten_topics_data=[])),
    "share-acknowledge-v1-librdkafka216.bin": (79, 1, SG.ShareAcknowledgeRequest(
        group_id="sg-golden", member_id=SHARE_MEMBER, share_session_epoch=1, topics=[SG.ShareAcknowledgeTopic(
            topic_id=EVENTS_ID, partitions=[SG.ShareAcknowledgePartition(0, [SG.AcknowledgementBatch(0, 1, [1])])])])),
}


def events(server, data: bytes, one_at_a_time: bool) -> list:
    out = []
    chunks = [data[i:i + 1] for i in range(len(data))] if one_at_a_time else [data]
    for chunk in chunks:
        server.receive_data(chunk)
        while (event := server.next_event()) is not NEED_DATA:
            out.append(event)
    return out


@pytest.mark.parametrize("one_at_a_time", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("fixture", sorted(GOLDEN))
def test_golden_librdkafka_requests_parse_and_encode_back(fixture, one_at_a_time):
    key, version, body = GOLDEN[fixture]
    frame = (WIRE / fixture).read_bytes()
    (request,) = events(KafkaServerConnection(), frame, one_at_a_time)
    assert (request.api_key, request.api_version, request.client_id) == (key, version, "rdkafka")
    assert request.body == body
    cid = struct.unpack_from(">i", frame, 8)[0]
    assert KafkaClientConnection().send(KafkaRequest(key, version, cid, "rdkafka", body)) == frame
