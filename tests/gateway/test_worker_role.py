"""One gateway process as worker 1 of 2 (`WorkerRole`, gateway/workers.py), in this trio run, with the test as its
supervisor on the other end of a real control socket (JSON lines) and worker 0 an engine in this process over the
same data directory: what the join does. The workers as real processes under a real supervisor are in
tests/e2e/test_workers.py."""

from __future__ import annotations

import json
import socket

import trio

from logway.gateway.cluster.ownership import leaders
from logway.gateway.cluster.workers import WorkerRole
from logway.gateway.formats import STORAGE_FORMATS
from logway.gateway.server import Gateway
from logway.storage import LogEngine
from logway.storage.engine import Share

from ..conftest import gateway_config


class Supervisor:
    """The test's end of a worker's control socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        self.buffer = b""

    async def receive(self) -> dict:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(65536)
            assert data, "the worker closed its control socket"
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    async def send(self, message: dict) -> None:
        await self.stream.send_all(json.dumps(message).encode() + b"\n")


async def test_a_topic_change_made_while_a_worker_starts_is_seen_once_it_joined(tmp_path):
    """Worker 0 grows a topic and changes its configuration after worker 1's engine opened and before the
    supervisor counts worker 1 among those it tells of changes (it has not sent it the brokers yet): no `refresh`
    message will come for it, and the periodic look is 10 minutes away — the look at the join finds it."""
    data = str(tmp_path / "data")
    supervisor_engine = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2)))
    zero = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2), 0, supervisor_engine.clean_start))
    zero.create_topic("grown", 2)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    role = WorkerRole(1, 2, supervisor_engine.clean_start, control_fd=theirs.detach())
    gw = Gateway(gateway_config(data, "worker_refresh_ms=600000"), worker=role)
    supervisor = Supervisor(ours)
    try:
        async with trio.open_nursery() as nursery:
            async def play_supervisor() -> None:
                listening = await supervisor.receive()
                assert set(listening["listening"]) >= {"native", "kafka", "tank"}
                assert len(gw.engine.topic("grown").partitions) == 2  # its engine is open: it saw the creation
                zero.create_partitions("grown", 4)
                zero.alter_topic_config("grown", {"retention.ms": 123_456})
                await supervisor.send({"brokers": [["127.0.0.1", 1], listening["kafka"]],
                                       "native": [None, None], "tank": [None, None]})
                assert await supervisor.receive() == {"ready": True}

            nursery.start_soon(play_supervisor)
            await nursery.start(gw.run)  # (returns once joined)
            topic = gw.engine.topic("grown")
            assert len(topic.partitions) == 4 and topic.config.retention_ms == 123_456
            gw.request_shutdown()
    finally:
        await supervisor.stream.aclose()
        zero.close()
        supervisor_engine.close()
