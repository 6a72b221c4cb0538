"""The long-poll wake-up path (issue 14): a parked TANK consume, Kafka Fetch or native fetch is answered by the append
itself — built and written in the appending task, before the producer's acknowledgement — with its records counted
for the consumer's protocol; answers the socket cannot take at once are finished by the parked request's task, in
order with the connection's other answers (Kafka and native: a request pipelined behind a parked fetch is answered
after it); transcoded and large reads take the waiting path; a failure met while building the woken answer gets the
protocol's own error. Real sockets, an in-process gateway (so the notifier's counters can be read)."""

from __future__ import annotations

import socket
import struct

import trio
from crc32c import crc32c

from logway.clients.native import NativeClient
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.native import (ErrorResponse, FetchRequest, FetchResponse, NativeConnection, PingRequest,
                                  PongResponse)
from logway.codecs.stream import NEED_DATA
from logway.clients.tank import TankClient, consume_request
from logway.codecs.records import Record
from logway.codecs.tank import (ConsumeFlags, DiscoverPartitionsRequest, TankClientConnection, decode_chunk,
                                encode_bundle, wrap)
from logway.codecs.tank.messages import MsgType
from logway.codecs.tank.responses import parse_response

from ..conftest import long_polls_parked, running_gateway
from ..kafka_wire import KafkaWireClient

MiB = 1024 * 1024


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    def exact(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            data = sock.recv(n - len(out))
            assert data, "closed"
            out += data
        return bytes(out)

    msg_type, length = struct.unpack("<BI", exact(5))
    return msg_type, exact(length)


def _raw_tank(gw, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(gw.addresses["tank"])
    assert _read_frame(sock)[0] == MsgType.PING
    return sock


async def test_a_parked_consume_is_answered_by_the_append_and_counted_for_its_protocol(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        def setup():
            with TankClient(*gw.addresses["tank"]) as tank:
                assert tank.create_topic("tailed", 1) == 0
        await trio.to_thread.run_sync(setup)
        consumer = await trio.to_thread.run_sync(lambda: TankClient(*gw.addresses["tank"]))
        try:
            rid = await trio.to_thread.run_sync(
                lambda: consumer.send(consume_request({"tailed": [(0, 1, MiB)]}, max_wait_ms=10_000)))
            await long_polls_parked(gw)
            before = gw.notifier.answered_at_once
            tank_out = gw.metrics.protocol("tank").records_out
            native_out = gw.metrics.protocol("native").records_out

            def produce():
                with NativeClient(*gw.addresses["native"]) as native:
                    return native.produce("tailed", 0, [b"one", b"two"])
            assert await trio.to_thread.run_sync(produce) == [0, 1]
            response = await trio.to_thread.run_sync(lambda: consumer.receive(rid, timeout=5))
        finally:
            consumer.close()
        p = response.topics[0].partitions[0]
        assert (p.error, p.base_seqnum, p.high_water_mark) == (ConsumeFlags.OK, 1, 2)
        assert [r.value for r in decode_chunk(p.chunk, p.base_seqnum).records] == [b"one", b"two"]
        assert gw.notifier.answered_at_once == before + 1  # by the appending (native) connection's task
        assert gw.metrics.protocol("tank").records_out == tank_out + 2  # counted for the reader's protocol
        assert gw.metrics.protocol("native").records_out == native_out


async def test_an_answer_the_socket_cannot_take_at_once_is_finished_in_order(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        big = encode_bundle([Record(bytes([i % 251]) * 1000, None, 0) for i in range(3000)], codec=0)  # ~3 MB

        def setup():
            with TankClient(*gw.addresses["tank"]) as tank:
                assert tank.create_topic("big", 1) == 0
        await trio.to_thread.run_sync(setup)
        sock = await trio.to_thread.run_sync(lambda: _raw_tank(gw, rcvbuf=64 * 1024))
        codec = TankClientConnection()
        try:
            sock.sendall(codec.send(consume_request({"big": [(0, 1, 64 * MiB)]}, max_wait_ms=10_000)))
            await long_polls_parked(gw)

            def produce():
                with TankClient(*gw.addresses["tank"]) as tank:
                    return tank.produce("big", 0, big)
            assert await trio.to_thread.run_sync(produce) == 0
            # The consumer has not read yet: most of the answer is still waiting in the gateway. Another request
            # on the same connection must come after all of it.
            sock.sendall(codec.send(DiscoverPartitionsRequest(77, "big", None)))
            await trio.sleep(0.3)
            first = await trio.to_thread.run_sync(_read_frame, sock)
            second = await trio.to_thread.run_sync(_read_frame, sock)
        finally:
            sock.close()
        consume = parse_response(*first, lambda rid: None)
        p = consume.topics[0].partitions[0]
        assert p.error == ConsumeFlags.OK and bytes(p.chunk) == wrap(big)
        discover = parse_response(*second, lambda rid: None)
        assert discover.request_id == 77 and discover.partitions[0].high_water_mark == 3000


async def test_a_transcoded_parked_consume_and_several_parked_on_one_connection(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        def setup():
            with NativeClient(*gw.addresses["native"]) as native:
                native.create_topic("kafka-format", 2)  # the default format: a TANK reader transcodes
        await trio.to_thread.run_sync(setup)
        consumer = await trio.to_thread.run_sync(lambda: TankClient(*gw.addresses["tank"]))
        try:
            rids = [await trio.to_thread.run_sync(
                lambda p=p: consumer.send(consume_request({"kafka-format": [(p, 1, MiB)]}, max_wait_ms=10_000)))
                for p in (0, 1)]
            await long_polls_parked(gw, 2)

            def produce():
                with NativeClient(*gw.addresses["native"]) as native:
                    native.produce("kafka-format", 1, [b"p1"])
                    native.produce("kafka-format", 0, [b"p0-a", b"p0-b"])
            await trio.to_thread.run_sync(produce)
            answers = {}
            for rid in reversed(rids):
                answers[rid] = await trio.to_thread.run_sync(lambda rid=rid: consumer.receive(rid, timeout=5))
        finally:
            consumer.close()
        got = []
        for rid in rids:
            p = answers[rid].topics[0].partitions[0]
            got.append([r.value for r in decode_chunk(p.chunk, p.base_seqnum).records])
        assert got == [[b"p0-a", b"p0-b"], [b"p1"]]
        assert gw.notifier.answered_at_once >= 2


def _answers(sock: socket.socket, codec, count: int) -> list:
    """The next `count` events `codec` parses from `sock`."""
    events = []
    while len(events) < count:
        event = codec.next_event()
        if event is NEED_DATA:
            data = sock.recv(65536)
            assert data, "closed"
            codec.receive_data(data)
        else:
            events.append(event)
    return events


async def test_a_parked_kafka_fetch_is_answered_by_the_append_before_a_request_pipelined_behind_it(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        await trio.to_thread.run_sync(lambda: NativeClient(*gw.addresses["native"]).create_topic("kt", 1))
        sock = socket.create_connection(gw.addresses["kafka"], timeout=10)
        codec = KafkaClientConnection()
        try:
            fetch = F.FetchRequest(max_wait_ms=10_000, min_bytes=1, topics=[F.FetchTopic("kt", [F.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=MiB)])])
            sock.sendall(codec.send(KafkaRequest(F.API_KEY, 11, body=fetch)))
            await long_polls_parked(gw)
            sock.sendall(codec.send(KafkaRequest(V.API_KEY, 0, body=V.ApiVersionsRequest())))
            await trio.sleep(0.05)  # read by now if the gateway read past the parked fetch (it must not)
            before = gw.notifier.answered_at_once
            kafka_out = gw.metrics.protocol("kafka").records_out

            def produce():
                with NativeClient(*gw.addresses["native"]) as native:
                    return native.produce("kt", 0, [b"k1", b"k2"])
            assert await trio.to_thread.run_sync(produce) == [0, 1]
            first, second = await trio.to_thread.run_sync(_answers, sock, codec, 2)
        finally:
            sock.close()
        assert first.api_key == F.API_KEY and second.api_key == V.API_KEY  # in request order
        part = first.body.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 2
        assert [r.value for r in decode_records(part.records)] == [b"k1", b"k2"]
        assert gw.notifier.answered_at_once == before + 1
        assert gw.metrics.protocol("kafka").records_out == kafka_out + 2


async def test_a_parked_native_fetch_is_answered_by_the_append_and_a_failure_gets_the_native_error(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        await trio.to_thread.run_sync(lambda: NativeClient(*gw.addresses["native"]).create_topic("nt", 2))
        sock = socket.create_connection(gw.addresses["native"], timeout=10)
        codec = NativeConnection("client")
        try:
            sock.sendall(codec.send(FetchRequest("nt", 0, 0, max_bytes=MiB, max_wait_ms=10_000)))
            await long_polls_parked(gw)
            sock.sendall(codec.send(PingRequest()))
            await trio.sleep(0.05)
            before = gw.notifier.answered_at_once

            def produce():
                with NativeClient(*gw.addresses["native"]) as native:
                    return native.produce("nt", 0, [b"n1"])
            assert await trio.to_thread.run_sync(produce) == [0]
            first, second = await trio.to_thread.run_sync(_answers, sock, codec, 2)
            assert type(first) is FetchResponse and type(second) is PongResponse
            assert [r.value for r in first.records] == [b"n1"] and first.next_offset == 1
            assert gw.notifier.answered_at_once == before + 1

            # A batch whose CRC holds but whose records do not decode (the produce path checks header and CRC
            # only): the woken fetch cannot be built — the appending task leaves it to the parked one, which
            # answers with the native error text, and the connection goes on.
            sock.sendall(codec.send(FetchRequest("nt", 1, 0, max_bytes=MiB, max_wait_ms=10_000)))
            await long_polls_parked(gw)
            batch = bytearray(encode_batch([Record(b"x" * 40)], default_timestamp=1))
            batch[61:] = b"\xff" * (len(batch) - 61)  # the records, past the 61-byte header: garbage
            struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))

            def produce_garbage():
                with KafkaWireClient(*gw.addresses["kafka"]) as kafka:
                    return kafka.produce("nt", 1, bytes(batch))
            assert await trio.to_thread.run_sync(produce_garbage) == (0, 0)
            (failed,) = await trio.to_thread.run_sync(_answers, sock, codec, 1)
            sock.sendall(codec.send(PingRequest()))
            (pong,) = await trio.to_thread.run_sync(_answers, sock, codec, 1)
        finally:
            sock.close()
        assert type(failed) is ErrorResponse and failed.message.startswith("invalid record"), failed
        assert type(pong) is PongResponse
