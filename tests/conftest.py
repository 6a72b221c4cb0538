"""Shared test fixtures: an in-process gateway on ephemeral 127.0.0.1 ports and a small async native client."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from logway.codecs import native as nv
from logway.gateway.config import load_config
from logway.gateway.server import Gateway


def gateway_config(data_dir, *overrides: str):
    return load_config(None, env={}, overrides=[f"data_dir={data_dir}", "listeners.native.port=0",
                                                "listeners.kafka.port=0", "listeners.tank.port=0",
                                                "log_level=WARNING", *overrides])


@asynccontextmanager
async def running_gateway(data_dir, *overrides: str):
    """Run a Gateway in this trio run; on exit ask for a graceful shutdown and wait for it."""
    gw = Gateway(gateway_config(data_dir, *overrides))
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        try:
            yield gw
        finally:
            gw.request_shutdown()


class AsyncNative:
    """A trio client for the native protocol: one request at a time, like the real clients."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.codec = nv.NativeConnection("client")

    @classmethod
    async def connect(cls, gw: Gateway) -> "AsyncNative":
        host, port = gw.addresses["native"]
        return cls(await trio.open_tcp_stream(host, port))

    async def request(self, event):
        await self.stream.send_all(self.codec.send(event))
        return await self.receive()

    async def receive(self):
        while True:
            event = self.codec.next_event()
            if event is nv.NEED_DATA:
                self.codec.receive_data(await self.stream.receive_some(1 << 20))
                continue
            return event

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def produce(self, topic, partition, values):
        from logway.codecs.records import Record

        return await self.request(nv.ProduceRequest(topic, partition, [
            v if isinstance(v, Record) else Record(bytes(v)) for v in values]))

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.fixture
async def gateway(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=always") as gw:
        yield gw


@pytest.fixture
async def client(gateway):
    c = await AsyncNative.connect(gateway)
    yield c
    await c.aclose()


@pytest.fixture
def fuse():
    """Skip, saying what is missing, where the power-loss file system (FUSE) cannot run; with REQUIRE_FUSE=1
    (CI) that is a failure instead."""
    import os

    from logway.bench.powerfs import fuse_problem

    problem = fuse_problem()
    if problem:
        if os.environ.get("REQUIRE_FUSE") == "1":
            pytest.fail(f"REQUIRE_FUSE=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture
def powerfs(fuse, tmp_path):
    """A power-loss file system (logway.bench.powerfs) mounted at tmp_path/mnt."""
    from logway.bench.powerfs import PowerFSMount

    mount = PowerFSMount(tmp_path / "backing", tmp_path / "mnt").start()
    try:
        yield mount
    finally:
        mount.stop()
