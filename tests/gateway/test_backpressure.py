"""Back-pressure: a client that pipelines requests but never reads its answers makes the gateway stop reading
from it (each protocol answers one request at a time per connection, TANK parks at most 256 long-polls), so the
bytes held for that connection stay bounded (by the kernel's socket buffers, not by what the client sends), the
gateway's memory does not grow, and other clients are served meanwhile and afterwards."""

from __future__ import annotations

import select
import socket
import time

import pytest

from logway.bench.launcher import GatewayProcess
from logway.bench.proc import rss_mib
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.native import FetchRequest, NativeConnection, PingRequest, PongResponse
from logway.codecs.tank import TankClientConnection

#: The test fails if the gateway accepts this many pipelined request bytes without the client reading: its
#: socket buffers (a few MiB at most on Linux) would have stopped a gateway that stops reading long before.
MAX_ACCEPTED_BYTES = 256 * 1024 * 1024
#: "Blocked": the socket stayed unwritable for this long.
BLOCKED_FOR = 1.5


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("backpressure") / "data")
    with GatewayProcess(data, "storage.flush=none", "log_level=WARNING") as gw:
        with NativeClient(*gw.native) as c:
            c.create_topic("bp", 1)
            c.produce("bp", 0, [b"x" * 100])  # small answers: many of them fit the buffers before the block
        yield gw


def _kafka_requests(n: int) -> bytes:
    codec = KafkaClientConnection()
    body = F.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        F.FetchTopic("bp", [F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return b"".join(codec.send(KafkaRequest(1, 11, body=body)) for _ in range(n))


def _native_requests(n: int) -> bytes:
    codec = NativeConnection("client")
    return b"".join(codec.send(FetchRequest("bp", 0, 0, 1 << 20)) for _ in range(n))


def _tank_requests(n: int) -> bytes:
    codec = TankClientConnection()
    frames = []
    for i in range(n):
        request = TankClient.consume_request({"bp": [(0, 1, 4096)]})
        request.request_id = i + 1
        frames.append(codec.send(request))
    return b"".join(frames)


def _send_until_blocked(sock: socket.socket, chunk: bytes) -> int:
    """Send `chunk` again and again until the socket stays unwritable for BLOCKED_FOR; the bytes sent."""
    sock.setblocking(False)
    sent = 0
    view = memoryview(chunk)
    pos = 0
    while sent < MAX_ACCEPTED_BYTES:
        _, writable, _ = select.select([], [sock], [], BLOCKED_FOR)
        if not writable:
            sock.setblocking(True)
            return sent
        try:
            n = sock.send(view[pos:])
        except BlockingIOError:
            continue
        sent += n
        pos = (pos + n) % len(chunk)
    raise AssertionError(f"the gateway read {sent} bytes of requests from a client that reads no answers")


def _assert_others_are_served(gw) -> None:
    start = time.monotonic()
    with NativeClient(*gw.native, timeout=10) as c:
        assert isinstance(c.request(PingRequest()), PongResponse)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("protocol", ["kafka", "native", "tank"])
def test_a_client_that_does_not_read_is_not_read_either(gw, protocol):
    rss_before = rss_mib(gw.pid)
    sock = socket.create_connection(gw.addresses[protocol], timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    if protocol == "kafka":
        chunk = _kafka_requests(500)
    elif protocol == "native":
        chunk = _native_requests(500)
    else:
        assert sock.recv(64)  # TANK's greeting Ping
        chunk = _tank_requests(500)
    sent = _send_until_blocked(sock, chunk)
    assert sent > len(chunk)  # it did serve a good number of requests before the buffers filled
    _assert_others_are_served(gw)
    assert rss_mib(gw.pid) - rss_before < 64, "the gateway buffered what the client did not read"
    sock.close()
    _assert_others_are_served(gw)
