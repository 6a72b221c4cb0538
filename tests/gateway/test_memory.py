"""The in-memory tier: the real gateway — pump, sessions, handlers, steps, storage — with no socket in between.
`Gateway(listen=False).connect(protocol)` hands out the client end of a trio memory stream served by the same pump
as a TCP connection, so protocol behaviour is tested in milliseconds; the real-socket tests cover the listeners."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from logway.codecs import native as nv
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.records import Record
from logway.codecs.stream import NEED_DATA
from logway.codecs.tank import (ConsumePartition, ConsumeRequest, ConsumeTopic, ProduceEntry,
                                ProduceRequest, TankClientConnection, decode_chunk, encode_bundle)
from logway.codecs.tank.messages import CreateTopicRequest as TankCreateTopic
from logway.codecs.tank.messages import StatusRequest, StatusResponse
from logway.gateway.config import load_config
from logway.gateway.server import Gateway


@asynccontextmanager
async def memory_gateway(data_dir, *overrides):
    config = load_config(None, env={}, overrides=[f"data_dir={data_dir}", "log_level=WARNING", *overrides])
    gw = Gateway(config, listen=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        try:
            yield gw
        finally:
            gw.request_shutdown()


class Peer:
    """A codec's client side over one in-memory connection."""

    def __init__(self, stream, codec) -> None:
        self.stream = stream
        self.codec = codec

    async def send(self, event) -> None:
        await self.stream.send_all(self.codec.send(event))

    async def receive(self):
        while True:
            event = self.codec.next_event()
            if event is NEED_DATA:
                self.codec.receive_data(await self.stream.receive_some(1 << 20))
                continue
            return event

    async def request(self, event):
        await self.send(event)
        return await self.receive()


def values_of(part) -> list[bytes]:
    """The message values of one partition of a TANK consume answer."""
    return [r.value for r in decode_chunk(bytes(part.chunk), part.base_seqnum, max_seq=part.high_water_mark).records]


@pytest.fixture
async def gw(tmp_path):
    async with memory_gateway(tmp_path / "data", "storage.flush=always") as gateway:
        yield gateway


async def test_one_log_through_all_three_protocols_without_a_socket(gw):
    native = Peer(await gw.connect("native"), nv.NativeConnection("client"))
    kafka = Peer(await gw.connect("kafka"), KafkaClientConnection())
    tank = Peer(await gw.connect("tank"), TankClientConnection())
    assert await native.request(nv.CreateTopicRequest("mem", 1)) == nv.CreateTopicResponse(True)
    produced = await native.request(nv.ProduceRequest("mem", 0, [Record(b"from native")]))
    assert produced.offsets == [0]
    batch = encode_batch([Record(b"from kafka")], default_timestamp=1)
    answer = await kafka.request(KafkaRequest(P.API_KEY, 7, body=P.ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=1000,
        topic_data=[P.TopicProduceData(name="mem", partition_data=[P.PartitionProduceData(index=0, records=batch)])])))
    assert answer.body.responses[0].partition_responses[0].base_offset == 1
    assert tank.codec.pings_received == 0
    consumed = await tank.request(ConsumeRequest(1, 0, 0, [ConsumeTopic("mem", [ConsumePartition(0, 1, 1 << 20)])]))
    assert tank.codec.pings_received == 1  # the greeting, sent on connect
    assert values_of(consumed.topics[0].partitions[0]) == [b"from native", b"from kafka"]
    fetched = await kafka.request(KafkaRequest(F.API_KEY, 11, body=F.FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F.FetchTopic(topic="mem", partitions=[F.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")))
    records = fetched.body.responses[0].partitions[0].records
    assert [r.value for r in decode_records(records)] == [b"from native", b"from kafka"]


async def test_a_parked_tank_consume_is_answered_after_a_later_request(gw):
    tank = Peer(await gw.connect("tank"), TankClientConnection())
    assert (await tank.request(TankCreateTopic(1, "tail", 1, b""))).error == 0
    await tank.send(ConsumeRequest(2, 5_000, 1, [ConsumeTopic("tail", [ConsumePartition(0, 1, 1 << 20)])]))
    status = await tank.request(StatusRequest(3))  # answered while the consume stays parked: out of order
    assert isinstance(status, StatusResponse) and status.request_id == 3
    await tank.send(ProduceRequest(4, [ProduceEntry("tail", 0, encode_bundle([Record(b"woke it")],
                                                                            default_timestamp=1))]))
    answers = {r.request_id: r for r in [await tank.receive(), await tank.receive()]}
    assert sorted(answers) == [2, 4]
    assert values_of(answers[2].topics[0].partitions[0]) == [b"woke it"]


async def test_a_native_protocol_error_is_answered_and_the_connection_stays_open(gw):
    stream = await gw.connect("native")
    codec = nv.NativeConnection("client")
    await stream.send_all(b"\x00\x00\x00\x07{nope!}")
    peer = Peer(stream, codec)
    error = await peer.receive()
    assert isinstance(error, nv.ErrorResponse) and "invalid JSON" in error.message
    assert await peer.request(nv.PingRequest()) == nv.PongResponse()


async def test_a_malformed_kafka_request_closes_only_its_own_connection(gw):
    bad = await gw.connect("kafka")
    await bad.send_all(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x09")  # client_id runs past the frame
    assert await bad.receive_some(100) == b""
    good = Peer(await gw.connect("kafka"), KafkaClientConnection())
    answer = await good.request(KafkaRequest(V.API_KEY, 2, body=V.ApiVersionsRequest()))
    assert answer.body.error_code == E.NONE and any(k.api_key == P.API_KEY for k in answer.body.api_keys)


async def test_acks_0_gets_no_answer_and_the_next_request_does(gw):
    await Peer(await gw.connect("native"), nv.NativeConnection("client")).request(nv.CreateTopicRequest("q", 1))
    kafka = Peer(await gw.connect("kafka"), KafkaClientConnection())
    await kafka.send(KafkaRequest(P.API_KEY, 7, body=P.ProduceRequest(
        transactional_id=None, acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(
            name="q", partition_data=[P.PartitionProduceData(index=0, records=encode_batch(
                [Record(b"fire and forget")], default_timestamp=1))])])))
    answer = await kafka.request(KafkaRequest(V.API_KEY, 2, body=V.ApiVersionsRequest()))
    assert answer.body.error_code == E.NONE  # the first answer on the wire is the second request's


async def test_shutdown_closes_idle_memory_connections(tmp_path):
    async with memory_gateway(tmp_path / "data") as gw:
        stream = await gw.connect("native")
        assert gw.connections.count == 1
        gw.request_shutdown()
        with trio.fail_after(5):
            assert await stream.receive_some(10) == b""
    assert gw.connections.count == 0


async def test_connect_needs_a_running_protocol(tmp_path):
    async with memory_gateway(tmp_path / "data", "listeners.tank.enabled=false") as gw:
        with pytest.raises(RuntimeError, match="tank"):
            await gw.connect("tank")
