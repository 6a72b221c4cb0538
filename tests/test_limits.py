"""Limits that keep one client from exhausting the gateway: slow requests, connections per address, parked
long-polls — each enforced on every protocol while other connections keep being served."""

from __future__ import annotations

import struct

import pytest
import trio

from logway.codecs import native as nv

from .conftest import AsyncNative, running_gateway


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
        await trio.sleep(0.05)
        c = await AsyncNative.connect(gw)
        assert await c.request(nv.PingRequest()) == nv.PongResponse()
        for s in (a, c, refused):
            await s.aclose()


async def test_max_waiters_answers_extra_long_polls_at_once(tmp_path):
    async with running_gateway(tmp_path / "data", "limits.max_waiters=2") as gw:
        admin = await AsyncNative.connect(gw)
        await admin.request(nv.CreateTopicRequest("w", 1))
        clients = [await AsyncNative.connect(gw) for _ in range(3)]
        done = []

        async def poll(c):
            t0 = trio.current_time()
            await c.request(nv.FetchRequest("w", 0, 0, 100, max_wait_ms=2000))
            done.append(trio.current_time() - t0)

        async with trio.open_nursery() as nursery:
            for c in clients:
                nursery.start_soon(poll, c)
        assert sorted(done)[0] < 0.5 and sorted(done)[-1] >= 1.9  # one was refused a wait slot
        for c in clients + [admin]:
            await c.aclose()
