"""Handing a client's connection to the worker that owns its partitions (`workers: 2`, gateway/handover.py).

Through real `logway serve` workers: native and TANK connections on worker 0's own listeners whose requests are
worker 1's are handed to worker 1 and served there (pipelined requests, long-polls, the session's token, no second
TANK greeting), counted on both sides, never handed back; requests spanning workers are relayed; a stopped worker
that never greeted a link gets the request relayed instead, one with a link takes it once it runs again; the taking
side refuses every malformed hand-over message, and one a stalled giver leaves unfinished after `TAKE_TIMEOUT`, and
goes on serving. In process, the giving side against a peer of
the test's own on a real socket: the message's bytes and descriptor, a link reused, and what the giver does when
the peer refuses, hesitates and closes, or never greets.
"""

from __future__ import annotations

import array
import os
import signal
import socket
import threading
import time
import urllib.request
import uuid

import orjson
import pytest
import trio

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient, consume_request, make_bundle
from logway.codecs import native as nv
from logway.codecs.records import Record
from logway.codecs.tank import ProduceEntry, ProduceRequest, TankServerConnection
from logway.gateway.cluster import handover
from logway.gateway.cluster.handover import ACK, HEADER, HELLO, MAGIC, MAX_META, HandOvers
from logway.gateway.cluster.ownership import partition_leader
from logway.gateway.cluster.relays import RELAYS_SUPPORTED
from logway.gateway.protocols.tank import _encoded
from logway.gateway.pump import HandOver, Session

from ..worker_procs import relay_sockets, worker_pid

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not RELAYS_SUPPORTED, reason="workers need Linux")]
PARTITIONS = 4


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    where = tmp_path_factory.mktemp("handover")
    with open(where / "gateway.log", "wb") as log:
        gateway = GatewayProcess(str(where / "data"), "workers=2", "log_level=WARNING", "listeners.tank.enabled=true",
                                 stderr=log)
        gateway.log_path = where / "gateway.log"
        yield gateway
        assert gateway.stop() == 0


def _topic(client, name: str) -> tuple[int, int]:
    """Create `name` through `client`; (a partition of worker 0, a partition of worker 1)."""
    created = client.create_topic(name, PARTITIONS)
    assert created in (True, 0)
    owners = [partition_leader(name, p, 2) for p in range(PARTITIONS)]
    return owners.index(0), owners.index(1)


def _metrics(gw, worker: int, token: str | None = None) -> dict[str, float]:
    """Worker `worker`'s hand-over, relay and connection figures, by sample name (with the access token, on a
    gateway that requires logins: it wants one for its metrics too)."""
    request = urllib.request.Request("http://%s:%d/metrics" % tuple(gw.addresses[f"admin.{worker}"]),
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    text = urllib.request.urlopen(request, timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(("logway_connections_handed_over", "logway_relayed_requests",
                                "logway_connections_open"))}


def _handed(gw, worker: int, protocol: str, way: str, token: str | None = None) -> float:
    return _metrics(gw, worker, token).get(
        f'logway_connections_handed_over_total{{protocol="{protocol}",way="{way}"}}', 0.0)


def _relayed(gw, worker: int, protocol: str) -> float:
    return _metrics(gw, worker).get(f'logway_relayed_requests_total{{protocol="{protocol}"}}', 0.0)


def _open(gw, worker: int, protocol: str) -> float:
    return _metrics(gw, worker).get(f'logway_connections_open{{listener="{protocol}"}}', 0.0)


def test_a_native_connection_for_the_other_workers_partition_is_served_there_from_then_on(gw):
    """Worker 0's own listener, a partition of worker 1: the first request hands the connection over with the two
    requests pipelined behind it (answered in order), and from then on worker 1 serves it — a long-poll parked
    there and woken — while worker 0 relays nothing. A request for worker 0's partition on it is relayed back by
    worker 1, not handed back: a connection is handed over once."""
    name = "hn-" + uuid.uuid4().hex[:8]
    before = {w: (_handed(gw, w, "native", "out"), _handed(gw, w, "native", "in"), _relayed(gw, w, "native"))
              for w in (0, 1)}
    with NativeClient(*gw.addresses["native.0"]) as admin:
        mine, theirs = _topic(admin, name)
    with NativeClient(*gw.addresses["native.0"]) as c, NativeClient(*gw.addresses["native.0"]) as other:
        c.stream.send_all(b"".join(c.prepare(ev) for ev in (
            nv.ProduceRequest(name, theirs, [Record(b"one")]), nv.ProduceRequest(name, theirs, [Record(b"two")]),
            nv.FetchRequest(name, theirs, 0, 1 << 20, None, 0, 1))))
        assert c.receive().offsets == [0]
        assert c.receive().offsets == [1]
        assert [r.value for r in c.receive().records] == [b"one", b"two"]
        assert _open(gw, 1, "native") >= 1
        c.send(nv.FetchRequest(name, theirs, 2, 1 << 20, None, 10_000, 1))  # parked at worker 1
        time.sleep(0.3)
        assert other.produce(name, theirs, [b"late"]) == [2]  # (other: handed over too)
        assert [r.value for r in c.receive(timeout=10).records] == [b"late"]
        assert c.produce(name, mine, [b"home"]) == [0]  # worker 0's partition: relayed by worker 1
        c.ping()
    after = {w: (_handed(gw, w, "native", "out"), _handed(gw, w, "native", "in"), _relayed(gw, w, "native"))
             for w in (0, 1)}
    assert after[0][0] - before[0][0] == 2 and after[1][1] - before[1][1] == 2  # c and other, given and taken
    assert after[1][0] == before[1][0] and after[0][1] == before[0][1]  # never the other way
    assert after[0][2] == before[0][2]  # worker 0 relayed none of it
    assert after[1][2] - before[1][2] == 1  # worker 1 relayed the request for worker 0's partition


def test_the_native_token_session_goes_with_the_connection(tmp_path):
    """`auth.native_token`: a connection that authenticated at worker 0 is handed over authenticated — worker 1
    answers its requests without a second Auth —, and one that did not is closed before anything is handed."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "auth.native_token=s3cret")
    try:
        name = "ht-" + uuid.uuid4().hex[:8]
        with NativeClient(*gw.addresses["native.0"]) as c:
            c.authenticate("s3cret")
            _, theirs = _topic(c, name)
            assert c.produce(name, theirs, [b"a"]) == [0]
            assert [r.value for r in c.fetch(name, theirs, 0).records] == [b"a"]
        assert _handed(gw, 0, "native", "out", "s3cret") == 1 and _handed(gw, 1, "native", "in", "s3cret") == 1
        with NativeClient(*gw.addresses["native.0"], raise_errors=False) as c:
            answer = c.request(nv.ProduceRequest(name, theirs, [Record(b"b")]))
            assert isinstance(answer, nv.ErrorResponse) and "authentication required" in answer.message
        assert _handed(gw, 0, "native", "out", "s3cret") == 1
    finally:
        assert gw.stop() == 0


def test_a_tank_connection_is_handed_over_without_a_second_greeting_and_spanning_requests_are_relayed(gw):
    """TANK on worker 0's own listener: a produce for worker 1's partition hands the connection over; worker 1
    answers it and the consumes after it (a long-poll parked there and woken), and the client saw one Ping, the
    greeting at connect. A produce spanning both workers is split and relayed, never handed over."""
    name = "htk-" + uuid.uuid4().hex[:8]
    with TankClient(*gw.addresses["tank.0"]) as admin:
        mine, theirs = _topic(admin, name)
        given = _handed(gw, 0, "tank", "out")
        relayed = _relayed(gw, 0, "tank")
        assert admin.produce_many([(name, mine, [b"m"]), (name, theirs, [b"t"])]) == [0, 0]  # spanning: relayed
        assert _handed(gw, 0, "tank", "out") == given and _relayed(gw, 0, "tank") == relayed + 1
    with TankClient(*gw.addresses["tank.0"]) as c, TankClient(*gw.addresses["tank.0"]) as other:
        assert c.produce(name, theirs, [b"u"]) == 0
        assert [m.value for m in c.get(name, theirs, 1).messages] == [b"t", b"u"]
        waiting = c.send(consume_request({name: [(theirs, 3, 1 << 20)]}, max_wait_ms=10_000, min_bytes=1))
        time.sleep(0.3)
        assert other.produce(name, theirs, [b"v"]) == 0
        answer = c.receive(waiting, timeout=10)  # woken at worker 1
        assert answer.topics[0].partitions[0].chunk and [m.value for m in c.get(name, theirs, 3).messages] == [b"v"]
        assert c.pings_received == 1
    assert _handed(gw, 0, "tank", "out") == given + 2 and _relayed(gw, 0, "tank") == relayed + 1


def test_a_stopped_owner_gets_the_request_relayed_or_takes_it_once_it_runs_again(tmp_path):
    """Worker 1 stopped (SIGSTOP) before worker 0 has a link to it: it does not greet the new link, so after
    `CONNECT_TIMEOUT` worker 0 relays the request instead — which waits in worker 1's relay socket until it runs
    again —, and the link that worker 1 then finds in its backlog, its giver gone, carries no descriptor. Once a
    link is open, a hand-over to a stopped worker waits for it, as a relayed request would, and is taken when it
    runs again. A link to a worker that died is dropped, not used: the worker started again gets a new one."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR")
    try:
        name = "hs-" + uuid.uuid4().hex[:8]
        with NativeClient(*gw.addresses["native.0"]) as admin:
            _, theirs = _topic(admin, name)
        worker1 = worker_pid(gw, 1)

        def while_stopped(c, value: bytes, seconds: float) -> list:
            answers: list = []
            os.kill(worker1, signal.SIGSTOP)
            try:
                thread = threading.Thread(target=lambda: answers.append(c.produce(name, theirs, [value])))
                thread.start()
                time.sleep(seconds)
                assert not answers  # waiting for worker 1
            finally:
                os.kill(worker1, signal.SIGCONT)
            thread.join(30)
            return answers

        with NativeClient(*gw.addresses["native.0"], timeout=30) as c:
            assert while_stopped(c, b"stopped, no link", handover.CONNECT_TIMEOUT + 1.0) == [[0]]
            assert c.produce(name, theirs, [b"relayed"]) == [1]  # tried once: relayed from now on
        assert (_handed(gw, 0, "native", "refused"), _handed(gw, 0, "native", "out")) == (1, 0)
        assert _relayed(gw, 0, "native") == 2
        with NativeClient(*gw.addresses["native.0"]) as c:
            assert c.produce(name, theirs, [b"handed over"]) == [2]  # a link now
        with NativeClient(*gw.addresses["native.0"], timeout=30) as c:
            assert while_stopped(c, b"stopped, a link", 1.0) == [[3]]
            assert c.produce(name, theirs, [b"at the owner"]) == [4]
        assert (_handed(gw, 0, "native", "refused"), _handed(gw, 0, "native", "out")) == (1, 2)
        assert _handed(gw, 1, "native", "in") == 2 and _relayed(gw, 0, "native") == 2
        # Worker 1 killed and started again: worker 0's idle link to it has ended, and is not used; a new one is.
        os.kill(worker1, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            try:
                if worker_pid(gw, 1) != worker1:
                    with NativeClient(*gw.addresses["native.1"], timeout=5) as direct:
                        direct.ping()
                    break
            except (OSError, KeyError):
                pass
            assert time.monotonic() < deadline, "worker 1 did not come back"
            time.sleep(0.1)
        with NativeClient(*gw.addresses["native.0"]) as c:
            assert c.produce(name, theirs, [b"after a restart"]) == [5]
        assert (_handed(gw, 0, "native", "refused"), _handed(gw, 0, "native", "out")) == (1, 3)
    finally:
        assert gw.stop() == 0


def test_a_worker_at_its_connection_limit_refuses_hand_overs_and_the_giver_relays(tmp_path):
    """`limits.max_connections: 2` per worker, worker 1 holding two clients: a connection handed over would be its
    third, so it refuses and worker 0 keeps the connection and relays its requests; once one of worker 1's clients
    left, the next connection is handed over."""
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "limits.max_connections=2")
    try:
        name = "hl-" + uuid.uuid4().hex[:8]
        with NativeClient(*gw.addresses["native.0"]) as admin:
            _, theirs = _topic(admin, name)
        held = [NativeClient(*gw.addresses["native.1"]) for _ in range(2)]
        try:
            for c in held:
                c.ping()  # admitted: worker 1 is full
            with NativeClient(*gw.addresses["native.0"]) as c:
                assert c.produce(name, theirs, [b"relayed"]) == [0]
                assert c.produce(name, theirs, [b"relayed too"]) == [1]
            assert (_handed(gw, 0, "native", "refused"), _handed(gw, 1, "native", "in")) == (1, 0)
            assert _relayed(gw, 0, "native") == 2
        finally:
            held.pop().close()
        deadline = time.monotonic() + 10
        while _open(gw, 1, "native") > 1:  # (released as the pump sees the end of the connection)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with NativeClient(*gw.addresses["native.0"]) as c:
            assert c.produce(name, theirs, [b"handed over"]) == [2]
        assert (_handed(gw, 0, "native", "out"), _handed(gw, 1, "native", "in")) == (1, 1)
        held[0].close()
    finally:
        assert gw.stop() == 0


# -- the taking side's bounds ------------------------------------------------------------------------------------
def _handover_name(gw, worker: int) -> str:
    """Worker `worker`'s hand-over socket, as any local process of this user can find it."""
    found = [n for n in relay_sockets(gw) if n.endswith(f"-{worker}-handover")]
    assert len(found) == 1, found
    return "\0" + found[0][1:]


def _offer(address: str, head: bytes, fds: list[int], rest: bytes = b"") -> bytes:
    """Connect to a hand-over socket, wait for its HELLO, send `head` with `fds` and then `rest`; what it answered
    before closing (b"" when it refused)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(address)
        assert sock.recv(1) == HELLO
        sock.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])
        try:
            sock.sendall(rest)
            sock.shutdown(socket.SHUT_WR)  # (all of it: a message cut short ends here)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was read
        out = b""
        try:
            while chunk := sock.recv(16):
                out += chunk
        except ConnectionResetError:
            pass
        return out


def test_the_taking_worker_refuses_every_malformed_hand_over_and_goes_on(gw):
    """Worker 1's hand-over socket, offered by this process (same user): a wrong magic, no descriptor, two, a descriptor
    that is not a TCP socket, meta over `MAX_META` or not JSON, an unknown or un-handed protocol, data over the
    protocol's bound, a message cut short or longer than it declares — each refused for its reason (closed without
    `ACK`, every descriptor received closed); then a real hand-over still works."""
    address = _handover_name(gw, 1)
    listener = socket.create_server(("127.0.0.1", 0))
    tcp = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    r, w = os.pipe()
    unix = socket.socket(socket.AF_UNIX)
    try:
        meta = orjson.dumps({"protocol": "native", "state": {}})
        frame = nv.NativeConnection("client").send(nv.PingRequest())

        def head(magic=MAGIC, meta=meta, size=len(frame)) -> bytes:
            return HEADER.pack(magic, len(meta), size) + meta

        fd = peer.fileno()
        cases = {  # what is offered: the reason logged
            (head(magic=b"XXXX"), (fd,), frame): "not a hand-over (magic b'XXXX', 1 descriptor(s))",
            (head(), (), frame): "not a hand-over (magic b'LWH1', 0 descriptor(s))",
            (head(), (fd, fd), frame): "not a hand-over (magic b'LWH1', 2 descriptor(s))",
            (head(), (r,), frame): "the descriptor is not a TCP connection",
            (head(), (unix.fileno(),), frame): "the descriptor is not a TCP connection",
            (HEADER.pack(MAGIC, MAX_META + 1, len(frame)) + b"{" * (MAX_META + 1), (fd,), frame):
                f"meta of {MAX_META + 1} bytes exceeds {MAX_META}",
            (head(meta=b"{nope"), (fd,), frame): "unreadable meta, or a protocol this worker does not serve",
            (head(meta=orjson.dumps({"protocol": "kafka", "state": {}})), (fd,), frame):
                "kafka connections are not handed over",
            (head(meta=orjson.dumps({"protocol": "x", "state": {}})), (fd,), frame):
                "unreadable meta, or a protocol this worker does not serve",
            (head(meta=orjson.dumps({"protocol": "native", "state": []})), (fd,), frame):
                "a session state that is not an object",
            (head(size=2**32 - 1), (fd,), frame): "data of 4294967295 bytes exceeds",
            (head(size=len(frame) + 10), (fd,), b""): "the giving worker closed the hand-over",
            (head() + frame + b"extra", (fd,), b""): "5 bytes more than the message declares",
        }
        for (first, fds, rest), reason in cases.items():
            logged = gw.log_path.read_text().count(reason)
            assert _offer(address, first, list(fds), rest) == b"", reason
            deadline = time.monotonic() + 5
            while gw.log_path.read_text().count(reason) == logged:  # refused, for this reason
                assert time.monotonic() < deadline, reason
                time.sleep(0.02)
        peer.close()  # the test's copy: the connection ends only if no worker kept one
        tcp.settimeout(5)
        assert tcp.recv(1) == b""  # no worker served the connection offered, nor kept its descriptor
    finally:
        for s in (listener, tcp, peer, unix):
            s.close()
        os.close(r)
        os.close(w)
    name = "hb-" + uuid.uuid4().hex[:8]
    with NativeClient(*gw.addresses["native.0"]) as c:
        _, theirs = _topic(c, name)
        taken = _handed(gw, 1, "native", "in")
        assert c.produce(name, theirs, [b"still"]) == [0]
        assert _handed(gw, 1, "native", "in") == taken + 1


def test_a_hand_over_cut_short_by_a_stalled_giver_is_refused_after_the_take_timeout_and_serving_goes_on(gw):
    """A giver that sends a message's first part (the descriptor, the header, the meta) and then neither the rest
    nor its end: worker 1 serves its other connections meanwhile, and after `TAKE_TIMEOUT` refuses the message —
    the link closed without `ACK`, the descriptor closed (the connection offered ends once this test's copy does)."""
    address = _handover_name(gw, 1)
    reason = "hand-over refused: TooSlowError"
    logged = gw.log_path.read_text().count(reason)
    listener = socket.create_server(("127.0.0.1", 0))
    tcp = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    meta = orjson.dumps({"protocol": "native", "state": {}})
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as link:
            link.settimeout(handover.TAKE_TIMEOUT + 10)
            link.connect(address)
            assert link.recv(1) == HELLO
            link.sendmsg([HEADER.pack(MAGIC, len(meta), 64) + meta + b"\0" * 10],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [peer.fileno()]))])
            started = time.monotonic()
            with NativeClient(*gw.addresses["native.1"], timeout=2) as other:  # not held up by the stalled one
                other.ping()
                assert time.monotonic() - started < handover.TAKE_TIMEOUT / 2
            assert link.recv(16) == b""  # refused: closed without ACK
            waited = time.monotonic() - started
        assert handover.TAKE_TIMEOUT - 0.5 < waited < handover.TAKE_TIMEOUT + 5, waited
        deadline = time.monotonic() + 5
        while gw.log_path.read_text().count(reason) == logged:
            assert time.monotonic() < deadline, reason
            time.sleep(0.02)
        peer.close()
        tcp.settimeout(5)
        assert tcp.recv(1) == b""  # the worker closed the descriptor it received
    finally:
        for s in (listener, tcp, peer):
            s.close()


# -- the giving side, against a peer of this test's -------------------------------------------------------------
async def _client_and_server() -> tuple[trio.SocketStream, trio.SocketStream]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    client = await trio.open_tcp_stream(*listeners[0].socket.getsockname()[:2])
    server = await listeners[0].accept()
    await listeners[0].aclose()
    return client, server


def _giver(address: str) -> HandOvers:
    return HandOvers("native", lambda: [None, address], nv.NativeConnection("client").send, 1 << 20)


async def _owner(listener: trio.SocketListener, behaviour: str, seen: list) -> None:
    """The owner's end as the test plays it, on the one link it accepts: `take` (read each message, answer the
    client through the descriptor, ACK), `refuse` (read it, close), `hesitant` (read it, wait, close), `mute`
    (never greet)."""
    link = await listener.accept()
    async with link:
        if behaviour == "mute":
            await trio.sleep_forever()
        await link.send_all(HELLO)
        while True:
            head, ancillary, _, _ = await link.socket.recvmsg(HEADER.size, socket.CMSG_SPACE(4))
            if not head:
                return
            message = {"header": HEADER.unpack(head)}
            fds = [fd for _, _, data in ancillary for fd in array.array("i", data)]
            message["fds"] = len(fds)
            rest = b""
            while len(rest) < message["header"][1] + message["header"][2]:
                rest += await link.receive_some(1 << 16)
            message["meta"] = orjson.loads(rest[:message["header"][1]])
            message["data"] = rest[message["header"][1]:]
            seen.append(message)
            with socket.socket(fileno=fds[0]) as taken:
                if behaviour != "take":
                    if behaviour == "hesitant":
                        await trio.sleep(0.3)
                    return
                taken.sendall(nv.NativeConnection("server").send(nv.PongResponse()))
                await link.send_all(ACK)


@pytest.mark.parametrize("behaviour, expected", [("take", True), ("refuse", False), ("hesitant", False),
                                                 ("mute", False)])
async def test_the_giver_sends_the_request_and_the_unread_bytes_and_acts_on_the_owners_answer(
        behaviour, expected, monkeypatch):
    """`take`: the message holds the magic, the meta (protocol, session state), the request re-encoded and the bytes
    the codec had not framed yet, with the connection's descriptor, through which the owner answers the client; a
    second hand-over goes over the same link. `refuse`, `hesitant` (no answer for a while, then the link's end):
    not given (the caller relays). `mute` (no HELLO in `CONNECT_TIMEOUT`: the owner is down): not given, nothing
    sent."""
    monkeypatch.setattr(handover, "CONNECT_TIMEOUT", 0.5)
    address = f"\0logway-test-{uuid.uuid4().hex}"
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(address)
    sock.listen(4)
    listener = trio.SocketListener(sock)
    request = nv.ProduceRequest("t", 1, [Record(b"x")])
    pipelined = nv.NativeConnection("client").send(nv.PingRequest())
    giver = _giver(address)
    seen: list = []
    streams = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_owner, listener, behaviour, seen)
        for _ in range(2 if expected else 1):
            client, server = await _client_and_server()
            streams += [client, server]
            codec = nv.NativeConnection("server")
            codec.receive_data(nv.NativeConnection("client").send(request) + pipelined[:3])
            assert codec.next_event() == request
            given = await giver.give(HandOver(1, request, None), server, codec, Session(None, codec))
            assert given is expected
            if expected:
                answer = nv.NativeConnection("client")
                answer.receive_data(await client.receive_some(1 << 16))
                assert isinstance(answer.next_event(), nv.PongResponse)
        nursery.cancel_scope.cancel()
    assert (giver.given, giver.refused) == ((2, 0) if expected else (0, 1))
    assert len(seen) == (0 if behaviour == "mute" else 2 if expected else 1)  # (the owner accepted one link)
    for message in seen:
        assert message["header"][0] == MAGIC and message["fds"] == 1
        assert message["meta"] == {"protocol": "native", "state": {}}
        assert message["data"] == nv.NativeConnection("client").send(request) + pipelined[:3]
    for stream in streams:
        await stream.aclose()
    await listener.aclose()


async def test_a_client_that_closed_its_side_an_unknown_worker_or_an_overlong_request_is_not_handed_over():
    """EOF already received (its last answers are written from where it is), no hand-over socket known for the
    worker, or a request whose re-encoding is longer than the owner's codec takes: not given, the owner not even
    asked (nothing counted as refused)."""
    client, server = await _client_and_server()
    codec = nv.NativeConnection("server")
    request = nv.PingRequest()
    codec.receive_data(nv.NativeConnection("client").send(request))
    codec.receive_data(b"")
    assert codec.next_event() == request
    giver = _giver("\0logway-test-nobody")
    assert await giver.give(HandOver(1, request, None), server, codec, Session(None, codec)) is False
    assert await giver.give(HandOver(5, request, None), server, nv.NativeConnection("server"),
                            Session(None, codec)) is False
    fresh = nv.NativeConnection("server")
    big = nv.ProduceRequest("t", 1, [Record(b"x" * 100)])
    fresh.receive_data(nv.NativeConnection("client").send(big))
    assert fresh.next_event() == big
    small = HandOvers("native", lambda: [None, "\0logway-test-nobody"], nv.NativeConnection("client").send, 64)
    assert await small.give(HandOver(1, big, None), server, fresh, Session(None, fresh)) is False
    assert (giver.given, giver.refused, small.given, small.refused) == (0, 0, 0, 0)
    for stream in (client, server):
        await stream.aclose()


def test_tank_requests_are_re_encoded_as_a_client_sends_them():
    """What `HandOvers` sends for TANK is the client codec's frame: the server codec reads back the same request."""
    request = ProduceRequest(7, [ProduceEntry("t", 3, make_bundle([b"x", b"y"]))], client_id=b"test")
    server = TankServerConnection()
    server.receive_data(_encoded(request))
    assert server.next_event() == request
