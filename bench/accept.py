"""`logway bench accept`: what a new connection's first answer costs (issue 35). Native clients of the RustLog kind
may connect per request, and every client pays it once per connection: the time from the client's connect() to
the first answer in hand, with the gateway accepting the connection, setting it up, reading and answering inside it.

Each case opens `--connections` connections one after another (plus `--warmup` first, not counted) to a fresh
gateway (`GatewayProcess`, a subprocess, 127.0.0.1) with a plain blocking socket and a request frame built before
the clock starts, and times connect → request sent → the whole answer received; the connection is then closed by
the client (FIN). The first answer of each case is parsed and checked with the client codec, and every later one
must be the same bytes (the cases' answers do not change during a run):

- `native-ping`: a native Ping, answered Pong;
- `kafka-apiversions-v3`: Kafka ApiVersions v3, with a client software name and version (what librdkafka sends
  first), and `kafka-apiversions-v0` (what kafka-python and older clients send first);
- `tank-ping`: nothing sent: the TANK broker's greeting Ping, the first thing a TANK client waits for;
- `tank-status`: a TANK Status request (no arguments: TANK's cheapest request) sent at once, answered after
  the greeting;
- `tank-p2c`: as `tank-cli bm p2c -s 11 -c 1` times it: connect, park a Consume at the tail of a partition (seq =
  the next message's), produce one `--message-bytes` message on another connection (kept open for the whole
  case), until the Consume's answer holding it is in. A Consume the timer answers empty although the message was
  produced (a missed wake-up) is counted, asked again, and its sample keeps the whole delay.

Per case: p50/p90/p99/max in µs, and the gateway's CPU per connection over the counted connections (its threads'
schedstat, as `bench requests` reads it) — the whole life of each connection, its close included. The client is
Python too: its own share (socket creation, connect, send, receive) is in every sample; `--cases` picks cases.
`--floor` adds the native-ping case against minimal Python servers (`logway.bench.floor`'s accept-floor: a bare
epoll loop, and trio with a task per connection), which answer every read with a Pong and do nothing else: what
the same client measures before any gateway work. Timings on a shared machine move by tens of percent between
runs; `--count-calls` has the gateway count its event loop's function calls (`count_calls: true`,
`gateway/admin/calls.py`) and reports them per connection instead of CPU — a figure that moves only with the code
path, for before/after comparisons (the latencies then say nothing).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from .registry import Benchmark
from .requests import CALLS, cpu_delta_ns, gateway_cpu_ns, metric_readings

__all__ = ["BENCHMARKS", "CASES", "AcceptReport", "bench_accept"]

CASES = ("native-ping", "kafka-apiversions-v3", "kafka-apiversions-v0", "tank-ping", "tank-status", "tank-p2c")
TOPIC = "accept"
#: Every socket wait is bounded: a gateway that stops answering fails the run instead of hanging it.
TIMEOUT_S = 15.0
#: A parked Consume's wait: far longer than a produce takes to reach it, so an empty answer is a missed wake-up.
MAX_WAIT_MS = 2_000
_BE_U32 = struct.Struct(">I")  # the native and Kafka frames' size prefix
_TANK_HEADER = struct.Struct("<BI")  # a TANK frame's msg_type and payload length


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=2000, help="connections timed per case")
    parser.add_argument("--warmup", type=int, default=200, help="connections opened first per case, not counted")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases, of {', '.join(CASES)}")
    parser.add_argument("--message-bytes", type=int, default=11, help="tank-p2c: bytes of the produced message")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--floor", action="store_true",
                        help="also time native-ping against minimal Python servers (bare epoll, trio)")
    parser.add_argument("--count-calls", action="store_true",
                        help="the gateway counts its function calls: calls per connection instead of CPU (slower)")


def run(args: argparse.Namespace) -> int:
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"logway bench accept: unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    print(bench_accept(cases, args.connections, args.warmup, args.message_bytes, args.flush,
                       count_calls=args.count_calls, floor=args.floor).format())
    return 0


BENCHMARKS = [
    Benchmark("accept", "a new connection's first answer: connect → native Ping, Kafka ApiVersions, TANK greeting, "
              "Status and p2c (gateway in a subprocess)", add_arguments, run),
]


@dataclass
class CaseResult:
    name: str
    latencies_us: list[float]  # sorted
    cpu_us_per_connection: float  # (the gateway's, all threads)
    calls_per_connection: float | None = None  # (`--count-calls`) its event loop's function calls
    missed: int = 0  # (tank-p2c) Consumes answered empty by the timer although the message was produced

    def pct(self, q: float) -> float:
        lat = self.latencies_us
        return lat[min(len(lat) - 1, int(q * len(lat)))]


@dataclass
class AcceptReport:
    connections: int
    warmup: int
    flush: str
    message_bytes: int
    results: list[CaseResult]
    count_calls: bool = False

    def format(self) -> str:
        lines = [f"accept (flush: {self.flush}): {self.connections:,} new connections per case (after "
                 f"{self.warmup} warm-up), connect → first answer in hand, µs"
                 + (" (the gateway counting its calls: the latencies say nothing)" if self.count_calls else "")]
        width = max(len(r.name) for r in self.results)
        for r in self.results:
            who = "server" if r.name.startswith("floor") else "gateway"
            cost = (f"{who} CPU {r.cpu_us_per_connection:6.1f} µs/connection" if r.calls_per_connection is None
                    else f"{who} calls {r.calls_per_connection:7.1f}/connection")
            extra = f"; missed wake-ups {r.missed}" if r.name == "tank-p2c" else ""
            lines.append(f"  {r.name:<{width}}  p50 {r.pct(0.50):7.1f}  p90 {r.pct(0.90):7.1f}  p99 "
                         f"{r.pct(0.99):7.1f}  max {r.latencies_us[-1]:8.1f}  {cost}{extra}")
        return "\n".join(lines)


class _GatewayCost:
    """The gateway's CPU (and, when it counts them, function calls) from `start()` to `per_connection(n)`."""

    def __init__(self, gw, count_calls: bool) -> None:
        self.gw = gw
        self.count_calls = count_calls
        self.scrape_calls = 0.0
        if count_calls:  # what one scrape of /metrics itself costs in calls (subtracted)
            first = metric_readings(gw.addresses["admin"])
            second = metric_readings(gw.addresses["admin"])
            if CALLS not in first:
                raise SystemExit("logway bench accept: the gateway does not count calls (an older gateway?)")
            self.scrape_calls = second[CALLS][0] - first[CALLS][0]

    def start(self) -> None:
        self._cpu = gateway_cpu_ns(self.gw.pid)
        self._calls = metric_readings(self.gw.addresses["admin"])[CALLS][0] if self.count_calls else 0.0

    def per_connection(self, n: int) -> tuple[float, float | None]:
        """(CPU µs, calls or None) per connection since `start()`."""
        cpu = cpu_delta_ns(self._cpu, gateway_cpu_ns(self.gw.pid)) / 1000 / max(n, 1)
        if not self.count_calls:
            return cpu, None
        calls = metric_readings(self.gw.addresses["admin"])[CALLS][0] - self._calls - self.scrape_calls
        return cpu, calls / max(n, 1)


# -- the wire ------------------------------------------------------------------------------------------------------

def _connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.connect(address)
    return sock


def _receive_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise SystemExit(f"logway bench accept: the gateway closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _size_prefixed(sock: socket.socket) -> bytes:
    """One native or Kafka frame (a big-endian u32 size, then that many bytes), whole."""
    head = _receive_exactly(sock, 4)
    return head + _receive_exactly(sock, _BE_U32.unpack(head)[0])


def _tank_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One TANK frame: (msg_type, payload)."""
    msg_type, length = _TANK_HEADER.unpack(_receive_exactly(sock, _TANK_HEADER.size))
    return msg_type, _receive_exactly(sock, length)


def _tank_answer(sock: socket.socket) -> bytes:
    """The greeting Ping's frame and the answer's after it, as received."""
    frames = []
    for _ in range(2):
        msg_type, payload = _tank_frame(sock)
        frames.append(_TANK_HEADER.pack(msg_type, len(payload)) + payload)
    return b"".join(frames)


def _tank_greeting(sock: socket.socket) -> bytes:
    msg_type, payload = _tank_frame(sock)
    return _TANK_HEADER.pack(msg_type, len(payload)) + payload


@dataclass(frozen=True)
class _Exchange:
    """One case of a single request: the listener, the request frame (b"": none), how a whole answer is read, and
    how the first answer is checked (raises SystemExit when wrong)."""

    listener: str
    request: bytes
    read: Callable[[socket.socket], bytes]
    check: Callable[[bytes], None]


def _native_ping() -> _Exchange:
    from logway.codecs.native import events as nv
    from logway.codecs.native.connection import NativeConnection

    codec = NativeConnection("client")

    def check(answer: bytes) -> None:
        codec.receive_data(answer)
        event = codec.next_event()
        if not isinstance(event, nv.PongResponse):
            raise SystemExit(f"logway bench accept: a native Ping answered {event!r:.200}")

    return _Exchange("native", codec.send(nv.PingRequest()), _size_prefixed, check)


def _kafka_api_versions(version: int) -> _Exchange:
    from logway.codecs.kafka.api import api_versions
    from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest

    codec = KafkaClientConnection()
    body = (api_versions.ApiVersionsRequest("librdkafka", "2.3.0") if version >= 3
            else api_versions.ApiVersionsRequest())
    frame = codec.send(KafkaRequest(api_versions.API_KEY, version, body=body, client_id="rdkafka"))

    def check(answer: bytes) -> None:
        codec.receive_data(answer)
        response = codec.next_event()
        if getattr(response.body, "error_code", None) != 0 or not response.body.api_keys:
            raise SystemExit(f"logway bench accept: ApiVersions v{version} answered {response!r:.200}")

    return _Exchange("kafka", frame, _size_prefixed, check)


def _tank_checker(want: type | None) -> Callable[[bytes], None]:
    from logway.codecs.tank import MsgType
    from logway.codecs.tank.responses import parse_response

    def check(answer: bytes) -> None:
        msg_type, length = _TANK_HEADER.unpack_from(answer)
        if msg_type != MsgType.PING:
            raise SystemExit(f"logway bench accept: the TANK broker's first frame has type {msg_type:#04x}")
        rest = answer[_TANK_HEADER.size + length:]
        if want is not None:
            msg_type, length = _TANK_HEADER.unpack_from(rest)
            response = parse_response(msg_type, rest[_TANK_HEADER.size:], lambda _rid: None)
            if not isinstance(response, want):
                raise SystemExit(f"logway bench accept: a TANK {want.__name__} expected, got {response!r:.200}")

    return check


def _tank_ping() -> _Exchange:
    return _Exchange("tank", b"", _tank_greeting, _tank_checker(None))


def _tank_status() -> _Exchange:
    from logway.codecs.tank import StatusRequest, StatusResponse
    from logway.codecs.tank.connection import TankClientConnection

    frame = TankClientConnection().send(StatusRequest(1))
    return _Exchange("tank", frame, _tank_answer, _tank_checker(StatusResponse))


_EXCHANGES = {"native-ping": _native_ping, "kafka-apiversions-v3": lambda: _kafka_api_versions(3),
              "kafka-apiversions-v0": lambda: _kafka_api_versions(0), "tank-ping": _tank_ping,
              "tank-status": _tank_status}


def _exchange_case(gw, cost: _GatewayCost, name: str, connections: int, warmup: int,
                   label: str | None = None) -> CaseResult:
    exchange = _EXCHANGES[name]()
    address = gw.addresses[exchange.listener]
    expected = None
    latencies = []
    perf_counter = time.perf_counter
    for i in range(warmup + connections):
        if i == warmup:
            cost.start()
        t0 = perf_counter()
        sock = _connect(address)
        try:
            if exchange.request:
                sock.sendall(exchange.request)
            answer = exchange.read(sock)
            t1 = perf_counter()
        finally:
            sock.close()
        if expected is None:
            exchange.check(answer)
            expected = answer
        elif answer != expected:
            raise SystemExit(f"logway bench accept: {name}: connection {i} answered {answer!r:.200}, not "
                             f"{expected!r:.200}")
        if i >= warmup:
            latencies.append((t1 - t0) * 1e6)
    cpu, calls = cost.per_connection(connections)
    latencies.sort()
    return CaseResult(label or name, latencies, cpu, calls)


def _p2c_case(gw, cost: _GatewayCost, connections: int, warmup: int, message_bytes: int) -> CaseResult:
    from logway.clients.tank import TankClient, consume_request
    from logway.codecs.records import Record
    from logway.codecs.tank import (ConsumeFlags, MsgType, ProduceEntry, ProduceRequest, count_messages,
                                    encode_bundle)
    from logway.codecs.tank.connection import TankClientConnection
    from logway.codecs.tank.responses import parse_response

    address = gw.addresses["tank"]
    payload = os.urandom(message_bytes)
    latencies = []
    missed = 0
    with TankClient(*address, timeout=TIMEOUT_S) as producer:
        err = producer.create_topic(TOPIC, 1)
        if err:
            raise SystemExit(f"logway bench accept: CreateTopic answered error {err}")
        seq = 1  # the empty partition's tail
        for i in range(warmup + connections):
            bundle = encode_bundle([Record(payload, None, time.time_ns() // 1_000_000)], codec=0)
            prid, pframe = producer.prepare(ProduceRequest(0, [ProduceEntry(TOPIC, 0, bundle)]))
            request = consume_request({TOPIC: [(0, seq, 1 << 20)]}, max_wait_ms=MAX_WAIT_MS)
            request.request_id = 1
            cframe = TankClientConnection().send(request)
            if i == warmup:
                cost.start()
            t0 = time.perf_counter()
            sock = _connect(address)
            try:
                sock.sendall(cframe)
                producer.send_raw(pframe)
                while True:
                    msg_type, body = _tank_frame(sock)
                    if msg_type == MsgType.PING:
                        continue
                    t1 = time.perf_counter()
                    p = parse_response(msg_type, body, lambda _rid: None).topics[0].partitions[0]
                    if p.error not in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST):
                        raise SystemExit(f"logway bench accept: a tail Consume at seq {seq} answered err_flags "
                                         f"{p.error:#04x}")
                    if len(p.chunk):
                        break
                    missed += 1  # answered empty by the timer although the message was produced
                    sock.sendall(cframe)
            finally:
                sock.close()
            counted = count_messages(p.chunk, p.base_seqnum, min_seq=seq, max_seq=p.high_water_mark)
            if counted.messages != 1:
                raise SystemExit(f"logway bench accept: a tail Consume at seq {seq} delivered {counted.messages} "
                                 f"messages")
            seq = counted.next_seq
            ack = producer.receive(prid, timeout=TIMEOUT_S)
            if ack.results[0].error:
                raise SystemExit(f"logway bench accept: produce answered error {ack.results[0].error}")
            if i >= warmup:
                latencies.append((t1 - t0) * 1e6)
    cpu, calls = cost.per_connection(connections)  # (the producer's requests included: one per connection)
    latencies.sort()
    return CaseResult("tank-p2c", latencies, cpu, calls, missed)


class _FloorServer:
    """An accept-floor server of `logway.bench.floor` (`mode`: epoll or trio) in a subprocess, as the native
    listener of a gateway-like object (`addresses`, `pid`)."""

    def __init__(self, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "logway.bench.floor", f"accept-{mode}"],
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        try:
            self.addresses = {"native": ("127.0.0.1", int(self.proc.stdout.readline()))}
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> "_FloorServer":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def bench_accept(cases: list[str], connections: int, warmup: int, message_bytes: int, flush: str, *,
                 count_calls: bool = False, floor: bool = False) -> AcceptReport:
    from .launcher import GatewayProcess

    results = []
    with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
        with GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={flush}", "log_level=WARNING",
                            "listeners.tank.enabled=true", *(("count_calls=true",) if count_calls else ())) as gw:
            cost = _GatewayCost(gw, count_calls)
            for name in cases:
                if name == "tank-p2c":
                    results.append(_p2c_case(gw, cost, connections, warmup, message_bytes))
                else:
                    results.append(_exchange_case(gw, cost, name, connections, warmup))
    if floor:
        from .floor import MODES

        for mode in MODES:
            with _FloorServer(mode) as server:
                results.append(_exchange_case(server, _GatewayCost(server, False), "native-ping", connections,
                                              warmup, f"floor ({mode}): native-ping"))
    return AcceptReport(connections, warmup, flush, message_bytes, results, count_calls)
