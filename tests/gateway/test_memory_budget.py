"""The memory budget (`gateway/memory.py`, `limits.memory_bytes`) and the deadlines that keep what a client holds
from being held for good: who may take more, `/ready` while the budget is exhausted, a client that never takes its
answers, and the frames a client may send before it has authenticated."""

from __future__ import annotations

import math
import socket
import struct

import orjson
import trio
import trio.testing

from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.gateway.connections import Connection
from logway.gateway.memory import SMALL_FRAME_BYTES, MemoryBudget

from ..conftest import running_gateway
from .test_admin_http import get

MiB = 1024 * 1024


def conn(address: str) -> Connection:
    c = Connection("native", f"{address}:1")
    c.address = address
    return c


def test_anyone_takes_memory_below_the_soft_limit_and_fair_shares_decide_above_it():
    budget = MemoryBudget(100 * MiB)  # soft limit: 75 MiB
    a1, a2, b = conn("10.0.0.1"), conn("10.0.0.1"), conn("10.0.0.2")
    budget.take(a1, 60 * MiB)
    assert budget.fits("10.0.0.1", 15 * MiB)  # below the soft limit: anyone
    budget.take(a2, 15 * MiB)
    # Above it, an address holding less than its fair share may go on: alone, address a's share is the whole.
    assert budget.fits("10.0.0.1", 1 * MiB)
    assert budget.fits("10.0.0.2", 20 * MiB)  # with b, two addresses share it: 50 MiB each
    assert not budget.fits("10.0.0.2", 26 * MiB)  # past the hard limit: nobody
    budget.take(b, 20 * MiB)
    assert not budget.fits("10.0.0.1", 1 * MiB)  # a holds 75 MiB, over its 50
    assert budget.fits("10.0.0.2", 5 * MiB)
    assert (budget.used, a1.memory, a2.memory, b.memory) == (95 * MiB, 60 * MiB, 15 * MiB, 20 * MiB)
    assert budget.exhausted
    budget.release(a1, 60 * MiB)
    assert budget.fits("10.0.0.1", 30 * MiB) and not budget.exhausted
    budget.release(a2, 15 * MiB)
    budget.release(b, 20 * MiB)
    assert budget.used == 0 and not budget._by_address


def test_a_frame_larger_than_the_budget_runs_alone():
    budget = MemoryBudget(100 * MiB)
    assert budget.fits("10.0.0.1", 150 * MiB)
    budget.take(conn("10.0.0.2"), 1)
    assert not budget.fits("10.0.0.1", 150 * MiB)


async def test_waiters_take_their_memory_once_it_is_given_back():
    budget = MemoryBudget(100 * MiB)
    holder, waiter = conn("10.0.0.1"), conn("10.0.0.1")
    budget.take(holder, 90 * MiB)
    got = trio.Event()

    async def wait():
        await budget.acquire(waiter, 50 * MiB)
        got.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not got.is_set() and budget.waits == 1
        budget.release(holder, 90 * MiB)
        await got.wait()
    assert waiter.memory == 50 * MiB and budget.used == 50 * MiB


async def _answer(stream: trio.abc.Stream) -> object:
    """The next native answer on `stream`, or CLOSED."""
    codec = nv.NativeConnection("client")
    while (event := codec.next_event()) is nv.NEED_DATA:
        codec.receive_data(await stream.receive_some(65536))
    return event


async def test_clients_that_do_not_take_their_answers_are_closed_and_ready_says_unready_meanwhile(tmp_path):
    """Native fetches of 4 MiB never read, on enough connections to exhaust a 32 MiB budget: `/ready` answers 503
    while the answers are held; each connection is closed once it took nothing for `limits.request_timeout_ms`, and
    the budget is whole again."""
    async with running_gateway(tmp_path / "data", f"limits.memory_bytes={32 * MiB}",
                               "limits.request_timeout_ms=1500", "storage.transcode_cache_bytes=0") as gw:
        def fill():
            with NativeClient(*gw.addresses["native"]) as client:
                client.create_topic("big", 1)
                for _ in range(32):  # (a native Produce of 64 KiB costs 5 MiB to decode: under this budget's 8)
                    client.produce("big", 0, [b"x" * 64 * 1024])
        await trio.to_thread.run_sync(fill)
        frame = nv.NativeConnection("client").send(nv.FetchRequest("big", 0, 0, 4 * MiB, None))
        streams = []
        for _ in range(12):
            sock = trio.socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await sock.connect(gw.addresses["native"])
            stream = trio.SocketStream(sock)
            await stream.send_all(frame * 4)
            streams.append(stream)
        try:
            with trio.fail_after(20):
                while not gw.memory.exhausted:
                    await trio.sleep(0.05)
            assert (await get(gw, "/ready"))[0] == 503
            with trio.fail_after(20):  # the deadline closes them: the budget comes back
                while gw.memory.used or gw.connections.clients:
                    await trio.sleep(0.05)
            assert (await get(gw, "/ready"))[0] == 200
        finally:
            for stream in streams:
                await stream.aclose()


async def test_a_connection_that_has_not_authenticated_may_not_send_a_large_frame(tmp_path):
    """With a native token, a frame declaring more than `limits.auth_max_frame_bytes` before Auth is refused from its
    four length bytes; after Auth, the same length is read."""
    async with running_gateway(tmp_path / "data", "auth.native_token=t0ken", "limits.auth_max_frame_bytes=4096") as gw:
        stream = await trio.open_tcp_stream(*gw.addresses["native"])
        with trio.fail_after(5):
            await stream.send_all(struct.pack(">I", 5000))  # the body never comes: the length alone is refused
            assert await _answer(stream) == nv.ErrorResponse("max frame size exceeded")
            assert await stream.receive_some() == b""
        await stream.aclose()

        def after_auth():
            with NativeClient(*gw.addresses["native"], token="t0ken") as client:
                client.create_topic("t", 1)
                return client.produce("t", 0, [b"y" * 6000])
        assert await trio.to_thread.run_sync(after_auth) == [0]


async def test_connections_that_do_not_authenticate_in_time_are_closed(tmp_path):
    async with running_gateway(tmp_path / "data", "auth.native_token=t0ken", "limits.auth_timeout_ms=300") as gw:
        late = await trio.open_tcp_stream(*gw.addresses["native"])
        on_time = await trio.open_tcp_stream(*gw.addresses["native"])
        codec = nv.NativeConnection("client")
        await on_time.send_all(codec.send(nv.AuthRequest("t0ken")))
        assert (await _answer(on_time)).authenticated
        with trio.fail_after(5):
            assert await late.receive_some() == b""
        assert all(c.auth_deadline == math.inf for c in gw.connections._live)
        await trio.sleep(0.4)
        await on_time.send_all(codec.send(nv.PingRequest()))
        assert await _answer(on_time) == nv.PongResponse()  # authenticated in time: kept
        await late.aclose()
        await on_time.aclose()


async def test_a_large_frame_waits_for_memory_and_is_read_once_it_is_given_back(tmp_path):
    """A native Produce over the small-frame size takes its decode cost from the budget before its body is read:
    while another connection holds the budget it waits — the gateway does not read it — and once that memory is
    given back it is read and appended."""
    async with running_gateway(tmp_path / "data", f"limits.memory_bytes={64 * MiB}") as gw:
        await trio.to_thread.run_sync(lambda: NativeClient(*gw.addresses["native"]).create_topic("t", 1))
        holder = conn("127.0.0.1")
        gw.memory.take(holder, 60 * MiB)
        records = [list(b"z" * 1000)] * 200
        payload = orjson.dumps({"Produce": {"topic": "t", "partition": 0, "records": records}})
        assert len(payload) > SMALL_FRAME_BYTES
        stream = await trio.open_tcp_stream(*gw.addresses["native"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.send_all, struct.pack(">I", len(payload)) + payload)
            with trio.fail_after(5):
                while not gw.memory.waits:
                    await trio.sleep(0.01)
            gw.memory.release(holder, 60 * MiB)
            with trio.fail_after(10):
                assert await _answer(stream) == nv.ProduceResponse(list(range(200)))
        await stream.aclose()
        assert gw.memory.used == 0
