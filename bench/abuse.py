"""`logway bench abuse`: hostile and broken clients run against a real gateway, each beside a well-behaved probe.

Every attack of issue 33 is one `Attack`: the gateway settings it needs (`--set` overrides), what it does to the
gateway (`run(target, scale)`, bounded in time and size, returning one line saying what the gateway did to it)
and an optional `setup`. `run_attack` starts a fresh gateway (`GatewayProcess`, a temporary data directory) for
it, a `Probe` — a native client sending a Ping every `PROBE_INTERVAL_S` on its own connection and timing the
answers — and a `Sampler` of the gateway's resident memory and open descriptors (/proc), runs the attack, checks
the gateway still serves every protocol afterwards (`assert_serving`), and returns the figures (`Outcome`).

The same functions are the tests' attacks (`tests/hostile/test_abuse.py`, at a small `scale`): the tests hold the
gateway to bounds on the probe's latency, memory and descriptors, the benchmark prints the figures. `scale` 1.0 is
the size the attack had when it was found (the issue's figures); a test runs a tenth or less.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .registry import Benchmark

__all__ = ["ATTACKS", "Attack", "BENCHMARKS", "Outcome", "Probe", "Sampler", "Target", "assert_serving",
           "run_attack"]

MiB = 1024 * 1024
#: How often the probe pings the gateway.
PROBE_INTERVAL_S = 0.02
#: The probe's wait for one answer: far above the latency goal, so a stall is measured rather than cut short.
PROBE_TIMEOUT_S = 60.0
#: How often the sampler reads the gateway's memory and descriptors.
SAMPLE_INTERVAL_S = 0.02
#: Every blocking socket operation of an attack.
SOCKET_TIMEOUT_S = 30.0
TOKEN = "abuse-token"
USER, PASSWORD = "alice", "alice-secret"


# ============================================================================================ the gateway

@dataclass
class Target:
    """The gateway an attack runs against: its addresses by protocol, its pid and data directory, the native
    token and the SASL user it was started with."""

    addresses: dict[str, tuple[str, int]]
    pid: int
    data_dir: str
    token: str | None = TOKEN  # (None: the gateway requires no authentication)

    def connect(self, protocol: str, source: str | None = None) -> socket.socket:
        """A blocking socket to `protocol`'s listener (from the local address `source`, e.g. 127.0.0.2)."""
        s = socket.create_connection(self.addresses[protocol], timeout=SOCKET_TIMEOUT_S,
                                     source_address=(source, 0) if source else None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def native(self):
        """An authenticated native client."""
        from logway.clients.native import NativeClient

        return NativeClient(*self.addresses["native"], timeout=SOCKET_TIMEOUT_S, token=self.token)


def gateway_settings(extra: tuple[str, ...] = (), auth: bool = True) -> tuple[str, ...]:
    """What every attacked gateway runs with: authentication on for native and Kafka (as in the attack review,
    unless `auth` is False), warnings only in its log; then `extra`. The logged-in user and TANK's clients
    (User:ANONYMOUS) are super users: the attacks are on resources, not on the ACLs (tests/gateway/test_*authz*,
    test_acls.py)."""
    secured = (f"auth.native_token={TOKEN}", "auth.kafka_sasl_plain=true", f"auth.users.{USER}={PASSWORD}",
               f"auth.super_users=User:{USER};User:ANONYMOUS")
    return ("log_level=WARNING", *(secured if auth else ()), *extra)


def fds_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def rss_of(pid: int) -> float:
    """Resident MiB of `pid` (NaN when gone)."""
    from .proc import rss_mib

    try:
        return rss_mib(pid)
    except OSError:
        return float("nan")


# ============================================================================================ the probe

class Probe(threading.Thread):
    """A well-behaved native client beside the attack: a Ping every `PROBE_INTERVAL_S` on one connection, each
    answer timed (`latencies`, seconds). A failed ping (an error, a closed connection) is counted in `failures`
    and the probe connects again."""

    def __init__(self, target: Target) -> None:
        super().__init__(name="abuse-probe", daemon=True)
        self.target = target
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        client = None
        while not self._halt.is_set():
            try:
                if client is None:
                    client = self.target.native()
                    client.timeout = PROBE_TIMEOUT_S
                t0 = time.perf_counter()
                client.ping()
                self.latencies.append(time.perf_counter() - t0)
            except Exception as exc:  # counted (its wait too: a stall that outlasts the probe's patience); goes on
                if client is not None:
                    self.latencies.append(time.perf_counter() - t0)
                self.failures.append(f"{type(exc).__name__}: {exc}")
                if client is not None:
                    client.close()
                client = None
            self._halt.wait(PROBE_INTERVAL_S)
        if client is not None:
            client.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(PROBE_TIMEOUT_S + 5)

    def percentile(self, q: float) -> float:
        """The q-quantile of the latencies in ms (NaN with none)."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class Sampler(threading.Thread):
    """The gateway's resident memory (MiB) and open descriptors, every `SAMPLE_INTERVAL_S`: the peaks."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="abuse-sampler", daemon=True)
        self.pid = pid
        self.rss_peak = self.rss_start = rss_of(pid)
        self.fds_peak = self.fds_start = fds_of(pid)
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(SAMPLE_INTERVAL_S):
            self.rss_peak = max(self.rss_peak, rss_of(self.pid))
            self.fds_peak = max(self.fds_peak, fds_of(self.pid))

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


# ============================================================================================ running one

@dataclass(frozen=True)
class Attack:
    name: str
    help: str  # one line: what the attacker does
    run: Callable[[Target, float], str]  # (target, scale) -> what the gateway did to the attacker
    settings: tuple[str, ...] = ()  # `--set` overrides beyond `gateway_settings()`
    setup: Callable[[Target, float], None] | None = None  # before the probe starts (topics, data)
    auth: bool = True  # the gateway requires authentication (native token, SASL); False: open listeners


@dataclass
class Outcome:
    attack: str
    result: str  # what the attack saw
    probe_p50_ms: float
    probe_p99_ms: float
    probe_worst_ms: float
    probe_failures: list[str]
    rss_start_mib: float
    rss_peak_mib: float
    fds_start: int
    fds_peak: int
    seconds: float
    serving_after: str = "yes"
    extra: dict = field(default_factory=dict)

    def line(self) -> str:
        fails = f", {len(self.probe_failures)} probe failures" if self.probe_failures else ""
        return (f"{self.attack:<26} probe p50 {self.probe_p50_ms:7.1f} ms  p99 {self.probe_p99_ms:8.1f} ms  worst "
                f"{self.probe_worst_ms:8.1f} ms{fails} | RSS {self.rss_start_mib:6.0f} → {self.rss_peak_mib:6.0f} MiB"
                f" | fds {self.fds_start:5d} → {self.fds_peak:5d} | {self.seconds:5.1f} s | {self.result}"
                f" | serving after: {self.serving_after}")


def run_attack(attack: Attack, scale: float = 1.0, *, workdir: str | None = None,
               settings: tuple[str, ...] = ()) -> Outcome:
    """Run `attack` at `scale` against a fresh gateway (with `settings` beyond the attack's own); its figures."""
    from .launcher import GatewayProcess

    with tempfile.TemporaryDirectory(prefix="logway-abuse-", dir=workdir) as tmp:
        data_dir = os.path.join(tmp, "data")
        with GatewayProcess(data_dir, *gateway_settings(attack.settings + settings, attack.auth)) as gw:
            target = Target(gw.addresses, gw.pid, data_dir, TOKEN if attack.auth else None)
            if attack.setup is not None:
                attack.setup(target, scale)
            sampler = Sampler(gw.pid)
            probe = Probe(target)
            sampler.start()
            probe.start()
            time.sleep(0.2)  # the probe's baseline before the attack
            t0 = time.perf_counter()
            try:
                result = attack.run(target, scale)
            except Exception as exc:  # what the gateway did to the attacker, when it broke the attack's script
                result = f"the attack ended with {type(exc).__name__}: {exc}"
            finally:
                seconds = time.perf_counter() - t0
                time.sleep(0.2)
                probe.stop()
                sampler.stop()
            try:
                assert_serving(target)
                serving = "yes"
            except Exception as exc:
                serving = f"NO: {type(exc).__name__}: {exc}"
            return Outcome(attack.name, result, probe.percentile(0.5), probe.percentile(0.99),
                           max(probe.latencies, default=float("nan")) * 1000, probe.failures, sampler.rss_start,
                           sampler.rss_peak, sampler.fds_start, sampler.fds_peak, seconds, serving)


def assert_serving(target: Target) -> None:
    """Every protocol answers a fresh connection: native Ping and a produce/fetch round trip, Kafka ApiVersions
    (and SASL), TANK's greeting and a topic's creation."""
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.tank import TankClient

    with target.native() as client:
        client.ping()
        name = f"alive{time.monotonic_ns()}"
        client.create_topic(name, 1)
        assert client.produce(name, 0, [b"still here"]) == [0]
        assert [r.value for r in client.fetch(name, 0, 0).records] == [b"still here"]
    host, port = target.addresses["kafka"]
    sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_username=USER, sasl_password=PASSWORD) if target.token else {}
    kafka = KafkaClient(KafkaConfig.parse(f"{host}:{port}", retries=0, **sasl))
    try:
        kafka.api_versions()
    finally:
        kafka.close()
    host, port = target.addresses["tank"]
    with TankClient(host, port, timeout=SOCKET_TIMEOUT_S) as tank:
        tank.create_topic(f"alive-tank-{time.monotonic_ns()}", 1)


# ============================================================================================ socket helpers

def closed_within(s: socket.socket, seconds: float) -> float | None:
    """Seconds until the gateway closed `s` (reading and dropping what it sends), or None if it had not within
    `seconds`."""
    t0 = time.monotonic()
    deadline = t0 + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            if not s.recv(65536):
                return time.monotonic() - t0
        except socket.timeout:
            return None
        except OSError:
            return time.monotonic() - t0


def send_until_closed(s: socket.socket, data, chunk: int = MiB, stall: float = 2.0) -> int:
    """Send `data` (bytes, or an iterable of byte chunks) until done, the gateway closes, or it takes nothing for
    `stall` seconds (it stopped reading: back-pressure); bytes sent."""
    sent = 0
    view_chunks = ([memoryview(data)[i:i + chunk] for i in range(0, len(data), chunk)]
                   if isinstance(data, (bytes, bytearray)) else data)
    s.settimeout(stall)
    try:
        for piece in view_chunks:
            view = memoryview(piece)
            while view:
                n = s.send(view)
                sent += n
                view = view[n:]
    except OSError:  # (socket.timeout included)
        pass
    finally:
        s.settimeout(SOCKET_TIMEOUT_S)
    return sent


def _kafka_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)  # client_id null
    return struct.pack(">i", len(header) + len(body)) + header + body


def _native_frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _held(seconds: float) -> None:
    """Hold what the attack opened for `seconds` (the probe and the sampler watch meanwhile)."""
    time.sleep(seconds)


# ============================================================================================ the attacks
# Each returns one line: what the gateway did to the attacker. Sizes scale with `scale` (1.0: the issue's).

def _sent_before_auth(target: Target, protocol: str, frame: bytes) -> str:
    """Send `frame` on a fresh, unauthenticated connection of `protocol`: how much went, and when it was closed."""
    with target.connect(protocol) as s:
        t0 = time.monotonic()
        sent = send_until_closed(s, frame)
        closed = closed_within(s, SOCKET_TIMEOUT_S)
        took = time.monotonic() - t0
    state = "not closed" if closed is None else f"closed after {took:.1f} s"
    return f"sent {sent / MiB:.1f} of {len(frame) / MiB:.1f} MiB, {state}"


def kafka_preauth_metadata(target: Target, scale: float) -> str:
    """A Kafka Metadata v0 request of empty topic names, before SASL (99 MiB at scale 1)."""
    names = max(1024, int(99 * MiB * scale) // 2)
    return _sent_before_auth(target, "kafka", _kafka_frame(3, 0, struct.pack(">i", names) + bytes(2 * names)))


def native_preauth_frame(target: Target, scale: float) -> str:
    """A native Produce frame of one-byte records before Auth (10 MiB at scale 1)."""
    head, tail = b'{"Produce":{"topic":"t","partition":0,"records":[', b"]}}"
    count = max(1000, int((10 * MiB - len(head) - len(tail)) * min(scale, 1.0)) // 4)
    return _sent_before_auth(target, "native", _native_frame(head + b",".join([b"[1]"] * count) + tail))


def unauthenticated_keepalive(target: Target, scale: float) -> str:
    """Kafka ApiVersions every 100 ms without ever authenticating, and a native connection that never sends Auth,
    for up to 10 s (at scale 1; at least 3 s): closed by the authentication deadline?"""
    from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
    from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest

    seconds = max(3.0, 10 * scale)
    codec = KafkaClientConnection()
    kafka, native = target.connect("kafka"), target.connect("native")
    t0 = time.monotonic()
    closed = {}
    try:
        while time.monotonic() - t0 < seconds and len(closed) < 2:
            if "kafka" not in closed:
                try:
                    kafka.sendall(codec.send(KafkaRequest(18, 0, body=ApiVersionsRequest())))
                    kafka.settimeout(5)
                    if not kafka.recv(65536):
                        closed["kafka"] = time.monotonic() - t0
                except OSError:
                    closed["kafka"] = time.monotonic() - t0
            if "native" not in closed and closed_within(native, 0.1) is not None:
                closed["native"] = time.monotonic() - t0
    finally:
        kafka.close()
        native.close()
    return ", ".join(f"{p}: " + (f"closed after {closed[p]:.1f} s" if p in closed else f"open after {seconds:.0f} s")
                     for p in ("kafka", "native"))


def _zeros(count: int, chunk: int = MiB):
    """`count` zero bytes in chunks of at most `chunk` (one buffer, sent again and again)."""
    zeros = bytes(chunk)
    while count > 0:
        yield zeros[:count] if count < chunk else zeros
        count -= chunk


def _partial_frames(target: Target, protocol: str, count: int, size: int, head: Callable[[int], tuple[bytes, bytes]],
                    hold: float) -> str:
    """`count` connections each declaring a `size`-byte frame body and sending all of it but the last byte, held
    for `hold` seconds (a Kafka connection authenticates first). `head(size)`: the frame's size prefix and the
    start of its body."""
    socks = []
    sent = 0
    t0 = time.monotonic()
    try:
        for _ in range(count):
            if protocol == "kafka":
                s = kafka_session(target)[0]
            else:
                s = target.connect(protocol)
                if protocol == "tank":
                    s.recv(5)  # the greeting
            socks.append(s)
            prefix, start = head(size)
            sent += send_until_closed(s, [prefix + start, *_zeros(size - 1 - len(start))])
        _held(hold)
        alive = sum(closed_within(s, 0.01) is None for s in socks)
    finally:
        for s in socks:
            s.close()
    return (f"{count} × {size / MiB:.0f} MiB declared, {sent / MiB:.0f} MiB sent in {time.monotonic() - t0:.1f} s, "
            f"{alive} of {count} still open")


def kafka_partial_frames(target: Target, scale: float) -> str:
    """8 authenticated Kafka connections (at scale 1), each 100 MiB of a Produce request sent but its last byte,
    held 2 s."""
    return _partial_frames(target, "kafka", max(1, round(8 * scale)), 100 * MiB - 1,
                           lambda n: (struct.pack(">i", n), struct.pack(">hhih", 0, 3, 1, -1)), 2.0)  # Produce v3


def tank_partial_frames(target: Target, scale: float) -> str:
    """4 TANK connections (at scale 1), each 256 MiB of a request sent but its last byte, held 2 s."""
    return _partial_frames(target, "tank", max(1, round(4 * scale)), 256 * MiB - 1,
                           lambda n: (struct.pack("<BI", 2, n), b""), 2.0)


def kafka_session(target: Target):
    """A raw Kafka socket authenticated with SASL/PLAIN, and its client codec."""
    from logway.codecs.kafka.api import sasl as S
    from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest

    codec = KafkaClientConnection()
    s = target.connect("kafka")
    for key, version, body in ((S.SASL_HANDSHAKE_KEY, 1, S.SaslHandshakeRequest("PLAIN")),
                               (S.SASL_AUTHENTICATE_KEY, 0,
                                S.SaslAuthenticateRequest(f"\0{USER}\0{PASSWORD}".encode()))):
        s.sendall(codec.send(KafkaRequest(key, version, body=body)))
        while (answer := codec.next_event()).__class__.__name__ != "KafkaResponse":
            data = s.recv(65536)
            if not data:
                raise ConnectionError("the gateway closed the connection during SASL")
            codec.receive_data(data)
        assert answer.body.error_code == 0, answer.body
    return s, codec


#: The topic the read attacks read: `kafka` format, filled by `_fill`.
BIG = "big"


def _fill(target: Target, scale: float, *, mib: float = 64, fmt: str = "kafka") -> None:
    """A one-partition topic `BIG` of `mib` × `scale` MiB (at least 4) in records of 64 KiB, through the native
    protocol (a `tank` format topic through TANK)."""
    from logway.clients.tank import TankClient

    total = max(4, int(mib * scale)) * MiB
    value = os.urandom(64 * 1024)
    batch = [value] * 8  # 512 KiB per request
    if fmt == "tank":
        with TankClient(*target.addresses["tank"], timeout=SOCKET_TIMEOUT_S) as tank:
            tank.create_topic(BIG, 1)
            for _ in range(total // (512 * 1024)):
                tank.produce(BIG, 0, batch)
        return
    with target.native() as client:
        client.create_topic(BIG, 1)
        for _ in range(total // (512 * 1024)):
            client.produce(BIG, 0, batch)


def _unread(socks: list[socket.socket], frame_of: Callable[[int], bytes], hold: float) -> str:
    """On every socket of `socks`, requests (`frame_of(i)`) pipelined as fast as the gateway takes them and never
    an answer read, for `hold` seconds in all; what was sent."""
    sent = 0
    t0 = time.monotonic()
    for s in socks:
        s.setblocking(False)
    stuck: set[int] = set()
    try:
        while time.monotonic() - t0 < hold and len(stuck) < len(socks):
            for n, s in enumerate(socks):
                if n in stuck:
                    continue
                try:
                    s.send(frame_of(sent))  # a short write of a frame leaves it cut: the gateway waits for the rest
                    sent += 1
                except (BlockingIOError, InterruptedError):
                    stuck.add(n)  # its buffers are full: the gateway stopped reading it
                except OSError:
                    stuck.add(n)  # closed
        took = time.monotonic() - t0
        _held(max(0.0, hold - took))
    finally:
        for s in socks:
            s.close()
    return f"{sent} requests on {len(socks)} connections, {len(stuck)} no longer read after {took:.1f} s"


def _connections(scale: float) -> int:
    """How many connections an unread-answers attack opens: 64 at scale 1."""
    return max(4, round(64 * scale))


def kafka_fetch_v0_unread(target: Target, scale: float) -> str:
    """64 Kafka connections (at scale 1) pipelining Fetch v0 requests (down-converted answers) for the whole of a
    64 MiB topic and never reading an answer, for 5 s (at least 2 s)."""
    from logway.codecs.kafka.api import fetch as KF
    from logway.codecs.kafka.connection import KafkaRequest

    partition = KF.FetchPartition(0, fetch_offset=0, partition_max_bytes=64 * MiB)
    body = KF.FetchRequest(max_wait_ms=0, topics=[KF.FetchTopic(BIG, [partition])])
    socks, frames = [], []
    for _ in range(_connections(scale)):
        s, codec = kafka_session(target)
        socks.append(s)
        frames.append(codec.send(KafkaRequest(1, 0, body=body, correlation_id=1000)))
    return _unread(socks, lambda i: frames[0], max(2.0, 5 * scale))


def tank_consume_transcoded_unread(target: Target, scale: float) -> str:
    """64 TANK connections (at scale 1) pipelining consumes of a 64 MiB `kafka` format topic (each answer
    transcoded) and never reading an answer, for 5 s (at least 2 s)."""
    from logway.clients.tank import consume_request
    from logway.codecs.tank import TankClientConnection

    socks = []
    for _ in range(_connections(scale)):
        s = target.connect("tank")
        s.recv(5)  # the greeting
        socks.append(s)
    codec = TankClientConnection()

    def frame(i: int) -> bytes:
        request = consume_request({BIG: [(0, 1, 64 * MiB)]})
        request.request_id = i + 1
        return codec.send(request)

    return _unread(socks, frame, max(2.0, 5 * scale))


def native_fetch_unread(target: Target, scale: float) -> str:
    """256 native connections (at scale 1) pipelining 2 MiB Fetch requests and never reading an answer, for 5 s
    (at least 2 s)."""
    from logway.codecs import native as nv

    clients = [target.native() for _ in range(min(200, 4 * _connections(scale)))]  # (under 256 per address)
    frame = clients[0].prepare(nv.FetchRequest(BIG, 0, 0, 2 * MiB, None))
    return _unread([c.stream.sock for c in clients], lambda i: frame, max(2.0, 5 * scale))


def native_huge_produce(target: Target, scale: float) -> str:
    """One native Produce of 3 M one-byte records in one 10 MiB frame (at scale 1): is it answered, and how many
    records does the partition hold afterwards?"""
    from logway.codecs import native as nv

    count = max(10_000, int(3_000_000 * scale))
    payload = (b'{"Produce":{"topic":"tiny","partition":0,"records":[' + b",".join([b"[1]"] * count) + b"]}}")
    with target.native() as client:
        client.create_topic("tiny", 1)
        send_until_closed(client.stream.sock, _native_frame(payload))
        try:
            answer = client.receive(timeout=SOCKET_TIMEOUT_S * 2)
        except Exception as exc:
            answer = f"{type(exc).__name__}: {exc}"
    with target.native() as client:
        end = client.describe_topic("tiny").partitions[0].log_end_offset
    what = (f"acknowledged {len(answer.offsets)} offsets" if isinstance(answer, nv.ProduceResponse)
            else f"answered {str(answer)[:80]}")
    return f"{count} records in {len(payload) / MiB:.1f} MiB: {what}; the partition holds {end} records"


def _http(target: Target, path: str, headers: dict[str, str] | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET `path` from the admin listener on a fresh connection: (status, body)."""
    import http.client

    host, port = target.addresses["admin"]
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def idle_lockout(target: Target, scale: float) -> str:
    """256 idle native connections from each of 127.0.0.2 … 127.0.0.5 (at scale 1: the default limits' 1,024),
    then clients from 127.0.0.6 and 127.0.0.7: are they served?"""
    from .proc import raise_fd_limit

    raise_fd_limit(4096)
    per = max(8, round(256 * scale))
    socks = []
    try:
        for a in range(2, 6):
            for _ in range(per):
                try:
                    socks.append(target.connect("native", f"127.0.0.{a}"))
                except OSError:
                    break
        time.sleep(0.3)  # the gateway has accepted (or refused) them
        alive = sum(closed_within(s, 0.001) is None for s in socks)
        served = {}
        for source in ("127.0.0.6", "127.0.0.7"):
            try:
                with target.connect("native", source) as s:
                    from logway.codecs import native as nv

                    codec = nv.NativeConnection("client")
                    s.sendall(codec.send(nv.AuthRequest(target.token)) + codec.send(nv.PingRequest()))
                    s.settimeout(5)
                    while (event := codec.next_event()) is nv.NEED_DATA or isinstance(event, nv.AuthResponse):
                        if event is nv.NEED_DATA:
                            data = s.recv(65536)
                            codec.receive_data(data)
                    served[source] = type(event).__name__ if event is not nv.CLOSED else "closed"
            except OSError as exc:
                served[source] = type(exc).__name__
    finally:
        for s in socks:
            s.close()
    return f"{alive} of {len(socks)} idle connections open; new clients: " + ", ".join(
        f"{k}: {v}" for k, v in served.items())


def admin_idle(target: Target, scale: float) -> str:
    """64 idle admin connections (at scale 1), then /health and /ready on a new one."""
    socks = []
    try:
        for _ in range(max(8, round(64 * scale))):
            socks.append(target.connect("admin"))
        time.sleep(0.3)
        answers = {}
        for path in ("/health", "/ready"):
            try:
                answers[path] = _http(target, path, timeout=5)[0]
            except OSError as exc:
                answers[path] = type(exc).__name__
    finally:
        for s in socks:
            s.close()
    return f"{len(socks)} idle admin connections; " + ", ".join(f"{k}: {v}" for k, v in answers.items())


def admin_big_header(target: Target, scale: float) -> str:
    """An admin request with a 20,000-byte header (README promises 431 above 16 KiB)."""
    status, _ = _http(target, "/health", {"X-Big": "x" * 20_000})
    return f"answered {status}"


def _many_partitions(target: Target, scale: float) -> None:
    """3,000 partitions (at scale 1: 300 topics of 10) and 200 groups with a committed offset each."""
    with target.native() as client:
        for t in range(max(10, round(300 * scale))):
            client.create_topic(f"many-{t}", 10)
        for g in range(max(10, round(200 * scale))):
            client.commit("many-0", g % 10, f"group-{g}", 0)


def metrics_scrape(target: Target, scale: float) -> str:
    """/metrics scraped back to back for 5 s (at scale 1; at least 2 s) with 3,000 partitions and 200 groups."""
    t0 = time.monotonic()
    scrapes = size = 0
    while time.monotonic() - t0 < max(2.0, 5 * scale):
        status, body = _http(target, "/metrics", timeout=30)
        assert status == 200, status
        scrapes += 1
        size = len(body)
    return f"{scrapes} scrapes of {size / 1024:.0f} KiB in {time.monotonic() - t0:.1f} s"


def _huge_group_ids(target: Target, scale: float) -> None:
    """5,000 groups (at scale 1) whose ids are 32 KB long, each with one committed offset."""
    with target.native() as client:
        client.create_topic("g", 1)
        for g in range(max(50, round(5000 * scale))):
            client.commit("g", 0, f"{g:08d}" + "x" * 32_000, 0)


def list_huge_groups(target: Target, scale: float) -> str:
    """Native ListGroups and Kafka ListGroups over 5,000 groups of 32 KB ids (at scale 1)."""
    from logway.codecs import native as nv
    from logway.codecs.kafka.api import groups as KG
    from logway.codecs.kafka.connection import KafkaRequest

    with target.native() as client:
        try:
            native = f"{len(client.list_groups())} groups"  # (page after page)
        except Exception as exc:
            native = f"{type(exc).__name__}: {str(exc)[:80]}"
    s, codec = kafka_session(target)
    with s:
        s.sendall(codec.send(KafkaRequest(16, 0, body=KG.ListGroupsRequest())))
        s.settimeout(SOCKET_TIMEOUT_S)
        while (event := codec.next_event()) is nv.NEED_DATA:
            data = s.recv(1 << 20)
            if not data:
                event = None
                break
            codec.receive_data(data)
    kafka = "closed" if event is None else f"{len(event.body.groups)} groups (error {event.body.error_code})"
    return f"native: {native}; kafka: {kafka}"


def kafka_list_groups_offsets_only(target: Target, scale: float) -> str:
    """Groups that only committed offsets (through the native protocol): listed by Kafka's ListGroups?"""
    from logway.codecs import native as nv
    from logway.codecs.kafka.api import groups as KG
    from logway.codecs.kafka.connection import KafkaRequest

    with target.native() as client:
        client.create_topic("o", 1)
        client.commit("o", 0, "offsets-only", 0)
    s, codec = kafka_session(target)
    with s:
        s.sendall(codec.send(KafkaRequest(16, 0, body=KG.ListGroupsRequest())))
        s.settimeout(SOCKET_TIMEOUT_S)
        while (event := codec.next_event()) is nv.NEED_DATA:
            codec.receive_data(s.recv(65536))
    return "listed" if any(g.group_id == "offsets-only" for g in event.body.groups) else "not listed"


# -- the storage side's attacks (`abuse_storage`), on a gateway without authentication ----------------------------

def tiny_segments(target: Target, scale: float) -> str:
    """20,000 produces (at scale 1) into a topic whose segments roll every 1 KiB: a segment each."""
    from .abuse_storage import tiny_segments as attack

    _, out = attack(target.addresses["native"], max(200, int(20_000 * scale)))
    segments = sum(name.endswith(".log") for _, _, names in os.walk(os.path.join(target.data_dir, "topics"))
                   for name in names)
    return (f"{out.accepted} produces accepted, {len(out.refused)} refused; {segments} segments on disk, "
            f"{fds_of(target.pid)} descriptors open")


def tank_many_partitions(target: Target, scale: float) -> str:
    """TANK CreateTopic (no authentication in TANK) of 5 topics of 1,000 partitions each (at scale 1)."""
    from .abuse_storage import tank_create_topics

    _, codes = tank_create_topics(target.addresses["tank"], 5, max(10, int(1000 * scale)))
    return "error codes " + ", ".join(str(c) for c in codes)


def auto_created_topics(target: Target, scale: float) -> str:
    """Kafka Metadata naming 6,600 unknown topics (at scale 1), with auto-creation on."""
    from collections import Counter

    from .abuse_storage import auto_create_topics

    codes = auto_create_topics(target.addresses["kafka"], max(100, int(6600 * scale)))
    return "error codes: " + ", ".join(f"{code} × {n}" for code, n in sorted(Counter(codes.values()).items()))


def tiny_records_many_partitions(target: Target, scale: float) -> str:
    """One one-byte record into each of 64 partitions (at scale 1): the disk they reserve."""
    from .abuse_storage import tiny_records_many_partitions as attack
    from .proc import allocated_bytes

    _, out = attack(target.addresses["native"], max(8, int(64 * scale)))
    return f"{out.accepted} records; the data directory takes {allocated_bytes(target.data_dir) / MiB:.1f} MiB of disk"


def seqnum_near_the_end(target: Target, scale: float) -> str:
    """TANK ProduceWithSeqnum at sequence number 2^63 − 2 into a `tank` topic, then an ordinary produce."""
    from logway.clients.tank import TankClient

    from .abuse_storage import seqnum_jump

    with TankClient(*target.addresses["tank"]) as c:
        c.create_topic("jump", 1)
    code = seqnum_jump(target.addresses["tank"], "jump")
    with TankClient(*target.addresses["tank"]) as c:
        after = c.produce("jump", 0, [b"after"])
    return f"the jump got error code {code:#x}; a produce after it got {after:#x}"


def retention_overflow(target: Target, scale: float) -> str:
    """TANK CreateTopic with log.retention.secs = 10^30."""
    from .abuse_storage import tank_retention_overflow

    _, code = tank_retention_overflow(target.addresses["tank"])
    return f"error code {code}"


def long_topic_names(target: Target, scale: float) -> str:
    """Topics named with 247, 248 and 249 characters, created, written and deleted through native and Kafka."""
    from .abuse_storage import long_names

    out = long_names(target.addresses["native"], target.addresses["kafka"])
    bad = sorted(f"{protocol} {length}" for (protocol, length), answer in out.items() if answer != "ok")
    reasons = sorted({"File name too long" if "File name too long" in answer else answer[:60]
                      for answer in out.values() if answer != "ok"})
    return "every step ok" if not bad else f"failed: {', '.join(bad)} ({'; '.join(reasons)})"


ATTACKS = [
    Attack("kafka-preauth", kafka_preauth_metadata.__doc__, kafka_preauth_metadata),
    Attack("native-preauth", native_preauth_frame.__doc__, native_preauth_frame),
    Attack("unauthenticated-keepalive", unauthenticated_keepalive.__doc__, unauthenticated_keepalive),
    Attack("kafka-partial-frames", kafka_partial_frames.__doc__, kafka_partial_frames),
    Attack("tank-partial-frames", tank_partial_frames.__doc__, tank_partial_frames),
    Attack("kafka-fetch-v0-unread", kafka_fetch_v0_unread.__doc__, kafka_fetch_v0_unread, setup=_fill),
    Attack("tank-transcoded-unread", tank_consume_transcoded_unread.__doc__, tank_consume_transcoded_unread,
           setup=_fill),
    Attack("native-fetch-unread", native_fetch_unread.__doc__, native_fetch_unread, setup=_fill),
    Attack("native-huge-produce", native_huge_produce.__doc__, native_huge_produce),
    Attack("idle-lockout", idle_lockout.__doc__, idle_lockout),
    Attack("admin-idle", admin_idle.__doc__, admin_idle),
    Attack("admin-big-header", admin_big_header.__doc__, admin_big_header),
    Attack("metrics-scrape", metrics_scrape.__doc__, metrics_scrape, setup=_many_partitions),
    Attack("list-huge-groups", list_huge_groups.__doc__, list_huge_groups, setup=_huge_group_ids),
    Attack("kafka-list-groups", kafka_list_groups_offsets_only.__doc__, kafka_list_groups_offsets_only),
    Attack("tiny-segments", tiny_segments.__doc__, tiny_segments, auth=False),
    Attack("tank-many-partitions", tank_many_partitions.__doc__, tank_many_partitions, auth=False),
    Attack("auto-created-topics", auto_created_topics.__doc__, auto_created_topics,
           settings=("kafka.auto_create_topics=true",), auth=False),
    Attack("tiny-records-many-partitions", tiny_records_many_partitions.__doc__, tiny_records_many_partitions,
           auth=False),
    Attack("seqnum-near-the-end", seqnum_near_the_end.__doc__, seqnum_near_the_end, auth=False),
    Attack("retention-overflow", retention_overflow.__doc__, retention_overflow, auth=False),
    Attack("long-topic-names", long_topic_names.__doc__, long_topic_names, auth=False),
]


# ============================================================================================ the benchmark

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attack", action="append", choices=[a.name for a in ATTACKS],
                        help="run only this attack (repeatable); default: every one")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="size of each attack relative to the one found in the attack review")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="a gateway setting for every attack (repeatable)")


def run(args: argparse.Namespace) -> int:
    chosen = [a for a in ATTACKS if not args.attack or a.name in args.attack]
    print(f"logway bench abuse: {len(chosen)} attacks at scale {args.scale}, each against a fresh gateway with a "
          f"native Ping probe every {PROBE_INTERVAL_S * 1000:.0f} ms")
    worst = 0
    for attack in chosen:
        outcome = run_attack(attack, args.scale, settings=tuple(args.settings))
        print(outcome.line(), flush=True)
        worst = max(worst, outcome.serving_after != "yes")
    return 1 if worst else 0


BENCHMARKS = [Benchmark("abuse", "hostile clients against a gateway: the probe's latency, memory and descriptors "
                                 "per attack", add_arguments, run)]
