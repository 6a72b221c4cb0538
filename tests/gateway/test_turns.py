"""Data requests take turns (`gateway/turns.py`, `limits.data_requests_per_pass`): under a backlog of produce, fetch
and consume requests the gateway starts at most that many per pass of its event loop, in arrival order, while
control requests (native Ping, Kafka ApiVersions, TANK DiscoverPartitions) are answered in the pass they arrive in;
a quiet gateway never makes a request wait; while passes run longer than `limits.data_pass_ms`, fewer start per
pass; 0 turns the limit off.

An in-process gateway on real sockets: the test sends every request in one synchronous step (the gateway cannot run
in between, so they all arrive in the same pass), then looks at its sockets once per pass of the same event loop
and notes in which pass each answer was there."""

from __future__ import annotations

import socket

import trio

from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.native import (FetchRequest, NativeConnection, PingRequest, PongResponse, ProduceRequest,
                                  ProduceResponse)
from logway.codecs.records import Record
from logway.codecs.stream import NEED_DATA
from logway.clients.native import NativeClient
from logway.clients.tank import consume_request
from logway.codecs.tank import DiscoverPartitionsRequest, TankClientConnection

from ..conftest import running_gateway
from logway.gateway.transcoded import STEP_BYTES

from .test_admin_http import scrape, value

PER_PROTOCOL = 12  # data requests per protocol
MiB = 1024 * 1024


class Conn:
    """A raw client socket and its codec; `answers` holds (pass seen, event)."""

    def __init__(self, gw, protocol: str) -> None:
        self.sock = socket.create_connection(gw.addresses[protocol], timeout=10)
        self.codec = {"native": lambda: NativeConnection("client"), "kafka": KafkaClientConnection,
                      "tank": TankClientConnection}[protocol]()
        self.protocol = protocol
        self.answers: list[tuple[int, object]] = []

    def send(self, event) -> None:
        self.sock.sendall(self.codec.send(event))

    def first_answer(self):
        """Blocking: the next event (used before the test, to know the gateway reads this connection)."""
        while True:
            event = self.codec.next_event()
            if event is not NEED_DATA:
                return event
            data = self.sock.recv(65536)
            assert data, "closed"
            self.codec.receive_data(data)

    def poll(self, pass_no: int) -> None:
        """Non-blocking: note the answers that are there."""
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            assert data, "closed"
            self.codec.receive_data(data)
        while (event := self.codec.next_event()) is not NEED_DATA:
            self.answers.append((pass_no, event))

    def close(self) -> None:
        self.sock.close()


def _data_request(protocol: str, i: int):
    if protocol == "native":
        return ProduceRequest("turns", 0, [Record(b"v%d" % i)])
    if protocol == "kafka":
        return KafkaRequest(F.API_KEY, 11, body=F.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[F.FetchTopic(
            "turns", [F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=MiB)])]))
    return consume_request({"turns": [(0, 0, MiB)]}, max_wait_ms=0)


def _control_request(protocol: str):
    return {"native": PingRequest(), "kafka": KafkaRequest(V.API_KEY, 0, body=V.ApiVersionsRequest()),
            "tank": DiscoverPartitionsRequest(1, "turns", None)}[protocol]


async def _open(gw, protocol: str) -> Conn:
    """A connection the gateway has served once (so it is waiting for this connection's next request)."""
    def connect():
        conn = Conn(gw, protocol)
        conn.send(_control_request(protocol))
        conn.first_answer()
        conn.sock.setblocking(False)  # from now on only `poll` reads it (`sendall` of a small frame never waits)
        return conn
    return await trio.to_thread.run_sync(connect)


async def _burst(gw) -> tuple[list[Conn], list[Conn]]:
    """Send PER_PROTOCOL data requests per protocol, each on its own connection, then one control request per
    protocol, all in one step; return (data connections, control connections) once every answer is in."""
    await trio.to_thread.run_sync(lambda: NativeClient(*gw.addresses["native"]).create_topic("turns", 1))
    data = [await _open(gw, p) for p in ("native", "kafka", "tank") for _ in range(PER_PROTOCOL)]
    control = [await _open(gw, p) for p in ("native", "kafka", "tank")]
    try:
        for i, conn in enumerate(data):  # no checkpoint from here to the first poll: the gateway cannot run
            conn.send(_data_request(conn.protocol, i))
        for conn in control:
            conn.send(_control_request(conn.protocol))
        pass_no = 0
        with trio.fail_after(10):
            while any(not c.answers for c in data + control):
                await trio.lowlevel.checkpoint()  # one step per pass of the event loop
                pass_no += 1
                for conn in data + control:
                    conn.poll(pass_no)
    finally:
        for conn in data + control:
            conn.close()
    return data, control


async def test_data_requests_take_turns_while_control_requests_are_answered_at_once(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "listeners.tank.enabled=true",
                               "limits.data_requests_per_pass=2") as gw:
        waited = gw.turns.waited
        data, control = await _burst(gw)
        deferred = gw.turns.waited - waited
        data_passes = sorted(c.answers[0][0] for c in data)
        control_passes = [c.answers[0][0] for c in control]
        # Every control request was answered in the first passes, ahead of most data requests ...
        assert max(control_passes) <= 2, (control_passes, data_passes)
        assert sum(p > max(control_passes) for p in data_passes) >= len(data) - 6
        # ... which went two per pass: spread over about len(data) / 2 passes, every one answered.
        assert data_passes[-1] - data_passes[0] >= len(data) // 2 - 3, data_passes
        assert deferred >= len(data) - 2
        assert value(await scrape(gw), "logway_data_requests_deferred_total") == gw.turns.waited
        # Connections whose request waited take their next turn before reading (`pump.py`): those find nothing
        # to read and wait for their sockets; no turn stays waited for.
        with trio.fail_after(10):
            while gw.turns.waiting:
                await trio.sleep(0.01)
        for conn in data:
            event = conn.answers[0][1]
            if conn.protocol == "native":
                assert type(event) is ProduceResponse
            elif conn.protocol == "kafka":
                assert event.body.responses[0].partitions[0].error_code == 0
        assert all(type(c.answers[0][1]) is PongResponse for c in control if c.protocol == "native")
        # The protocols name these requests as their `data_requests` do.
        for protocol, name in (("native", "Produce"), ("kafka", "Fetch"), ("tank", "Consume")):
            assert name in gw.protocols[protocol].data_requests
            assert gw.metrics.protocol(protocol).named(name).count == PER_PROTOCOL


async def test_without_a_limit_every_request_of_the_burst_is_served_in_one_pass(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "listeners.tank.enabled=true",
                               "limits.data_requests_per_pass=0") as gw:
        assert gw.turns is None
        data, control = await _burst(gw)
        passes = {c.answers[0][0] for c in data + control}
        assert max(passes) <= 2, passes  # the contrast with the test above: no turns, one long pass


async def test_a_quiet_gateway_never_makes_a_request_wait(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "limits.data_requests_per_pass=1") as gw:
        def one_at_a_time():
            with NativeClient(*gw.addresses["native"]) as client:
                client.create_topic("quiet", 1)
                for i in range(50):
                    client.produce("quiet", 0, [b"q%d" % i])
                return len(client.fetch("quiet", 0, 0, max_bytes=MiB).records)
        assert await trio.to_thread.run_sync(one_at_a_time) == 50
        assert gw.turns.waited == 0
        assert gw.turns.active


async def _heavy_burst(gw, count: int) -> list[int]:
    """`count` native fetches, one per connection, sent in one step, each of a batch of records decoded whole
    (the transcode cache is off) for an answer of one (max_bytes): heavy work, small answers — as heavy as one read
    does on the event loop (a larger slice is transcoded in a worker thread: `steps.py`). The pass in which each
    answer was seen."""
    records = STEP_BYTES * 9 // 10 // 220  # (a record of 200 bytes takes ~220 in its batch)

    def fill():
        with NativeClient(*gw.addresses["native"]) as client:
            client.create_topic("heavy", 1)
            client.produce("heavy", 0, [b"h" * 200] * records)  # one Kafka batch
    await trio.to_thread.run_sync(fill)
    conns = [await _open(gw, "native") for _ in range(count)]
    try:
        for conn in conns:
            conn.send(FetchRequest("heavy", 0, 0, max_bytes=300))
        pass_no = 0
        with trio.fail_after(30):
            while any(not c.answers for c in conns):
                await trio.lowlevel.checkpoint()
                pass_no += 1
                for conn in conns:
                    conn.poll(pass_no)
    finally:
        for conn in conns:
            conn.close()
    for conn in conns:
        assert len(conn.answers[0][1].records) == 1
    return sorted(c.answers[0][0] for c in conns)


async def test_fewer_heavy_data_requests_start_per_pass_while_passes_run_long(tmp_path):
    settings = ("storage.flush=none", "storage.transcode_cache_bytes=0", "limits.data_requests_per_pass=8")
    async with running_gateway(tmp_path / "fixed", *settings, "limits.data_pass_ms=0") as gw:
        fixed = await _heavy_burst(gw, 24)
    async with running_gateway(tmp_path / "adaptive", *settings, "limits.data_pass_ms=1") as gw:
        adaptive = await _heavy_burst(gw, 24)
    # Eight per pass when the limit is fixed: three passes' worth. With passes of ~8 heavy reads far over 1 ms,
    # the turns drop to one per pass after the first pass.
    assert fixed[-1] - fixed[0] <= 5, fixed
    assert adaptive[-1] - adaptive[0] >= 12, adaptive


async def test_a_saturated_connection_takes_its_turn_before_reading_and_loses_no_request(tmp_path):
    """Under a backlog, a connection whose last requests were data requests waits for its next turn before it reads
    (`pump.py`: one scheduler pass per deferred request); whatever it reads then — a data request, or a control
    request sent after them — is answered, in order, and no turn stays taken."""
    async with running_gateway(tmp_path / "data", "storage.flush=none", "limits.data_requests_per_pass=2") as gw:
        await trio.to_thread.run_sync(lambda: NativeClient(*gw.addresses["native"]).create_topic("turns", 1))
        conns = [await _open(gw, "native") for _ in range(16)]
        script = [lambda i: ProduceRequest("turns", 0, [Record(b"a%d" % i)]),
                  lambda i: ProduceRequest("turns", 0, [Record(b"b%d" % i)]), lambda i: PingRequest(),
                  lambda i: ProduceRequest("turns", 0, [Record(b"c%d" % i)])]
        waited = gw.turns.waited
        try:
            for i, conn in enumerate(conns):  # the first round at once: a backlog
                conn.send(script[0](i))
            pass_no = 0
            with trio.fail_after(20):
                while any(len(c.answers) < len(script) for c in conns):
                    await trio.lowlevel.checkpoint()
                    pass_no += 1
                    for i, conn in enumerate(conns):
                        had = len(conn.answers)
                        conn.poll(pass_no)
                        if had < len(conn.answers) < len(script):  # answered: the next request at once
                            conn.send(script[len(conn.answers)](i))
                while gw.turns.waiting:
                    await trio.sleep(0.01)
        finally:
            for conn in conns:
                conn.close()
        assert gw.turns.waited - waited >= len(conns)  # it was saturated
        for conn in conns:
            assert [type(e) for _, e in conn.answers] == [ProduceResponse, ProduceResponse, PongResponse,
                                                          ProduceResponse]
        with NativeClient(*gw.addresses["native"]) as client:
            got = await trio.to_thread.run_sync(lambda: client.fetch("turns", 0, 0, max_bytes=MiB).records)
        assert sorted(r.value for r in got) == sorted(b"%s%d" % (k, i) for k in (b"a", b"b", b"c") for i in range(16))
