"""Limits that keep one client from exhausting the gateway: slow requests, connections per address, parked
long-polls — each enforced on every protocol while other connections keep being served."""

from __future__ import annotations

import struct

import pytest
import trio

from logway.codecs import native as nv
from logway.codecs.kafka.api import ApiVersionsRequest
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.connection import NEED_DATA, KafkaClientConnection, KafkaRequest

from ..conftest import AsyncNative, long_polls_parked, running_gateway, until


async def _closed_within(stream: trio.SocketStream, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        try:
            while await stream.receive_some(4096):
                pass
        except trio.BrokenResourceError:
            pass
        return True
    return False


@pytest.mark.parametrize("protocol, first_bytes", [
    ("native", struct.pack(">I", 100) + b'{"Pi'),
    ("kafka", struct.pack(">i", 100) + b"\x00\x12"),
    ("tank", b"\x0a\x20\x00\x00\x00\x01"),
])
async def test_slow_loris_is_dropped_but_others_are_served(tmp_path, protocol, first_bytes):
    async with running_gateway(tmp_path / "data", "limits.request_timeout_ms=300") as gw:
        slow = await trio.open_tcp_stream(*gw.addresses[protocol])
        await slow.send_all(first_bytes)
        t0 = trio.current_time()

        async def trickle():  # one byte every 100 ms: each receive is quick, the frame never completes
            with trio.move_on_after(3):
                while True:
                    await trio.sleep(0.1)
                    try:
                        await slow.send_all(b"x")
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            assert await _closed_within(slow, 3), "a slow request was not dropped"
            nursery.cancel_scope.cancel()
        assert 0.25 <= trio.current_time() - t0 < 2.5
        c = await AsyncNative.connect(gw)
        assert await c.request(nv.PingRequest()) == nv.PongResponse()
        await c.aclose()
        await slow.aclose()


async def test_connections_per_address(tmp_path):
    async with running_gateway(tmp_path / "data", "limits.max_connections_per_ip=2") as gw:
        a = await AsyncNative.connect(gw)
        b = await AsyncNative.connect(gw)
        refused = await trio.open_tcp_stream(*gw.addresses["kafka"])  # the limit spans every listener
        assert await _closed_within(refused, 3)
        assert await a.request(nv.PingRequest()) == nv.PongResponse()
        await b.aclose()
        await until(lambda: gw.connections.clients == 1, "the closed connection released")
        c = await AsyncNative.connect(gw)
        assert await c.request(nv.PingRequest()) == nv.PongResponse()
        for s in (a, c, refused):
            await s.aclose()


async def _kafka_call(stream: trio.SocketStream, codec: KafkaClientConnection, key: int, version: int, body):
    await stream.send_all(codec.send(KafkaRequest(key, version, body=body)))
    while (event := codec.next_event()) is NEED_DATA:
        codec.receive_data(await stream.receive_some(1 << 16))
    return event.body


async def test_max_waiters_answers_extra_long_polls_at_once(tmp_path):
    """Two long-polls park (the limit); a third one of every protocol is answered at once, normally, and its
    connection stays usable."""
    async with running_gateway(tmp_path / "data", "limits.max_waiters=2") as gw:
        admin = await AsyncNative.connect(gw)
        await admin.request(nv.CreateTopicRequest("w", 1))
        parked = [await AsyncNative.connect(gw) for _ in range(2)]
        done = []

        async def poll(c):
            t0 = trio.current_time()
            answer = await c.request(nv.FetchRequest("w", 0, 0, 100, max_wait_ms=2000))
            done.append((trio.current_time() - t0, answer))

        async def extra_native():
            c = await AsyncNative.connect(gw)
            await poll(c)
            assert isinstance(await c.request(nv.PingRequest()), nv.PongResponse)
            await c.aclose()

        async def extra_kafka():
            stream = await trio.open_tcp_stream(*gw.addresses["kafka"])
            codec = KafkaClientConnection()
            t0 = trio.current_time()
            body = F.FetchRequest(max_wait_ms=2000, min_bytes=1, topics=[
                F.FetchTopic("w", [F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)])])
            answer = await _kafka_call(stream, codec, 1, 11, body)
            done.append((trio.current_time() - t0, answer.responses[0].partitions[0].error_code))
            assert (await _kafka_call(stream, codec, 18, 2, ApiVersionsRequest())).error_code == 0
            await stream.aclose()

        async with trio.open_nursery() as nursery:
            for c in parked:
                nursery.start_soon(poll, c)
            await long_polls_parked(gw, 2)  # both parked: the limit is reached
            nursery.start_soon(extra_native)
            nursery.start_soon(extra_kafka)
        times = sorted(t for t, _ in done)
        assert times[:2] < [0.5, 0.5] and times[-2:] >= [1.9, 1.9], done  # the two extra ones were not parked
        assert all(a == 0 or isinstance(a, nv.FetchResponse) for _, a in done), done
        assert gw.notifier.refused == 2
        for c in parked + [admin]:
            await c.aclose()
