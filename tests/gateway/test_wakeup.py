"""The long-poll wake-up path (issue 14): a parked TANK consume is answered by the append itself — built and written
in the appending task, before the producer's acknowledgement — with its records counted for the consumer's
protocol; answers the socket cannot take at once are finished by the parked request's task, in order with the
connection's other answers; transcoded and large reads take the waiting path. Real sockets, an in-process gateway
(so the notifier's counters can be read)."""

from __future__ import annotations

import socket
import struct

import trio

from logway.clients.native import NativeClient
from logway.clients.tank import TankClient, consume_request
from logway.codecs.records import Record
from logway.codecs.tank import (ConsumeFlags, DiscoverPartitionsRequest, TankClientConnection, decode_chunk,
                                encode_bundle, wrap)
from logway.codecs.tank.messages import MsgType
from logway.codecs.tank.responses import parse_response

from ..conftest import running_gateway

MiB = 1024 * 1024


async def _parked(gw, count: int = 1) -> None:
    with trio.fail_after(5):
        while gw.notifier.waiting < count:
            await trio.sleep(0.005)


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
            await _parked(gw)
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
            await _parked(gw)

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
            await _parked(gw, 2)

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
