"""`logway bench floor`: the round trip of the smallest Python relay on this machine — the floor under the
produce→consume latency that `logway bench tank-tail` (and `kafka-tail`) measure.

A relay process (this module run as `python -m logway.bench.floor MODE`, on 127.0.0.1) accepts two connections
and copies what arrives on the first to the second: one wait until readable, one read, one write, nothing else.
The client does what tank-tail does with one message: it sleeps `--gap-ms` (the relay goes idle, as a gateway
whose consumer is parked does), sends 40 bytes on the first connection and stops the clock when they arrive on the
second. MODE `epoll` waits with a bare `select.epoll`, `trio` with `trio.lowlevel.wait_readable` in `trio.run`,
as the gateway's transport does. A gateway's answer to a parked consumer costs this much before it does any work
of its own (parse, append, wake, build, encode); figures in BENCHMARKS.md.

`logway bench accept --floor` times its native-ping case against an accept-floor server (`python -m
logway.bench.floor accept-MODE`): it accepts connections until killed and answers every read with a native Pong,
nothing else — what a new connection's first answer costs a Python server before any gateway work.

`logway bench load-floor` does for `logway bench load` what `floor` does for tank-tail: a server process
(`python -m logway.bench.floor serve-MODE N`) accepts N connections (default 1,000, as `load` opens) and answers
every read with a 64-byte reply, nothing else — `epoll` in one bare `select.epoll` loop, `trio` with one task per
connection waiting with `trio.lowlevel.wait_readable` and writing with `os.writev`, as the gateway's transport does
— while this process drives every connection closed loop (one 64-byte request in flight each) for `--seconds`.
Reported per server: requests/s and the server's CPU µs per request (its `time.process_time()` over the run): what
a request costs before the gateway parses, handles and encodes anything.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import time

from .proc import raise_fd_limit
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_floor", "bench_load_floor"]

MODES = ("epoll", "trio")
MESSAGE = b"x" * 40
TIMEOUT = 10.0  # every socket wait of the client and the relay's start


def _relay(mode: str) -> None:
    """The relay process: print the port, accept two connections, copy the first's bytes to the second until EOF."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    listener.settimeout(TIMEOUT)
    src, _ = listener.accept()
    dst, _ = listener.accept()
    listener.close()
    src.setblocking(False)
    fd_in, fd_out = src.fileno(), dst.fileno()
    if mode == "epoll":
        poller = select.epoll()
        poller.register(fd_in, select.EPOLLIN)
        while True:
            if not poller.poll(TIMEOUT):
                return
            data = os.read(fd_in, 65536)
            if not data:
                return
            os.writev(fd_out, [data])
    import trio

    async def copy() -> None:
        while True:
            with trio.move_on_after(TIMEOUT):
                await trio.lowlevel.wait_readable(src)
                data = os.read(fd_in, 65536)
                if not data:
                    return
                os.writev(fd_out, [data])
                continue
            return

    trio.run(copy)


def bench_floor(mode: str, samples: int, warmup: int, gap_ms: float) -> list[float]:
    """Round trips in µs (sorted) through a relay of `mode`."""
    proc = subprocess.Popen([sys.executable, "-m", "logway.bench.floor", mode], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        producer = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        consumer = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        with producer, consumer:
            for s in (producer, consumer):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for i in range(warmup + samples):
                time.sleep(gap_ms / 1000)
                t0 = time.perf_counter()
                producer.sendall(MESSAGE)
                got = 0
                while got < len(MESSAGE):
                    chunk = consumer.recv(len(MESSAGE) - got)
                    if not chunk:
                        raise SystemExit("logway bench floor: the relay closed the connection")
                    got += len(chunk)
                t1 = time.perf_counter()
                if i >= warmup:
                    rtts.append((t1 - t0) * 1e6)
        proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rtts.sort()
    return rtts


# --- the accept floor: a new connection per request -----------------------------------------------------------------

#: What the accept-floor server answers every read with: a native Pong frame (`logway bench accept --floor`).
PONG = b'\x00\x00\x00\x0b{"Pong":{}}'


def _backlog(listener: socket.socket):
    """The connections waiting in a non-blocking listener's backlog, each made non-blocking."""
    while True:
        try:
            sock, _ = listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        yield sock


def _accept_serve(mode: str) -> None:
    """The accept-floor server process: print the port, then accept connections until killed, answering every read
    with `PONG` and closing a connection at its EOF — `epoll` in one bare `select.epoll` loop, `trio` with one task
    per connection as the gateway has (the first read tried before waiting, `os.write`, the socket closed at EOF)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    if mode == "epoll":
        poller = select.epoll()
        poller.register(listener.fileno(), select.EPOLLIN)
        by_fd: dict[int, socket.socket] = {}
        while True:
            for fd, _ in poller.poll():
                if fd == listener.fileno():
                    for sock in _backlog(listener):
                        by_fd[sock.fileno()] = sock
                        poller.register(sock.fileno(), select.EPOLLIN)
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    os.write(fd, PONG)
                    continue
                poller.unregister(fd)
                by_fd.pop(fd).close()
    import trio

    async def answer(sock: socket.socket) -> None:
        fd = sock.fileno()
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(sock)
                    continue
                if not data:
                    return
                os.write(fd, PONG)
        finally:
            trio.lowlevel.notify_closing(sock)
            sock.close()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            while True:
                await trio.lowlevel.wait_readable(listener)
                for sock in _backlog(listener):
                    nursery.start_soon(answer, sock)

    trio.run(main)


# --- the load floor: many connections, closed loop -------------------------------------------------------------------

REQUEST = b"q" * 64
MAX_SECONDS = 3600  # the longest --seconds
REPLY = b"a" * 64


def _serve(mode: str, connections: int) -> None:
    """The load-floor server process: print the port, accept `connections` connections, answer every read with
    `REPLY` until each one closed, then print this process's CPU seconds."""
    raise_fd_limit(connections + 16, "logway bench load-floor")
    listener = socket.create_server(("127.0.0.1", 0), backlog=connections)
    print(listener.getsockname()[1], flush=True)
    listener.settimeout(TIMEOUT)
    socks = []
    for _ in range(connections):
        sock, _ = listener.accept()
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append(sock)
    listener.close()
    start = time.process_time()
    if mode == "epoll":
        poller = select.epoll()
        by_fd = {s.fileno(): s for s in socks}
        for fd in by_fd:
            poller.register(fd, select.EPOLLIN)
        while by_fd:
            events = poller.poll(TIMEOUT)
            if not events:
                break
            for fd, _ in events:
                data = os.read(fd, 65536)
                if data:
                    os.writev(fd, [REPLY])
                    continue
                poller.unregister(fd)
                by_fd.pop(fd).close()
    else:
        import trio

        async def answer(sock: socket.socket) -> None:
            fd = sock.fileno()
            with sock:
                while True:
                    await trio.lowlevel.wait_readable(sock)
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    os.writev(fd, [REPLY])

        async def main() -> None:
            with trio.move_on_after(MAX_SECONDS + TIMEOUT):  # (the client closes every connection before)
                async with trio.open_nursery() as nursery:
                    for sock in socks:
                        nursery.start_soon(answer, sock)

        trio.run(main)
    print(f"{time.process_time() - start:.6f}", flush=True)


def bench_load_floor(mode: str, connections: int, seconds: float) -> tuple[int, float, float]:
    """Drive a load-floor server of `mode` with `connections` closed-loop connections for `seconds`: (requests
    answered, wall seconds, the server's CPU seconds)."""
    raise_fd_limit(connections + 16, "logway bench load-floor")
    proc = subprocess.Popen([sys.executable, "-m", "logway.bench.floor", f"serve-{mode}", str(connections)],
                            stdout=subprocess.PIPE, text=True)
    socks: dict[int, socket.socket] = {}
    try:
        port = int(proc.stdout.readline())
        for _ in range(connections):
            sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            socks[sock.fileno()] = sock
        poller = select.epoll()
        got = dict.fromkeys(socks, 0)
        for fd in socks:
            poller.register(fd, select.EPOLLIN)
        answered = 0
        start = time.perf_counter()
        end = start + seconds
        for fd in socks:
            os.write(fd, REQUEST)
        while socks:
            events = poller.poll(TIMEOUT)
            if not events:
                raise SystemExit(f"logway bench load-floor: no answer for {TIMEOUT:g} s")
            now = time.perf_counter()
            for fd, _ in events:
                data = os.read(fd, 65536)
                if not data:
                    raise SystemExit("logway bench load-floor: the server closed a connection")
                got[fd] += len(data)
                if got[fd] < len(REPLY):
                    continue
                got[fd] = 0
                answered += 1
                if now < end:
                    os.write(fd, REQUEST)
                else:
                    poller.unregister(fd)
                    socks.pop(fd).close()
        wall = time.perf_counter() - start
        cpu = float(proc.stdout.readline())
        proc.wait(TIMEOUT)
    finally:
        for sock in socks.values():
            sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return answered, wall, cpu


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=2000, help="round trips counted per relay")
    parser.add_argument("--warmup", type=int, default=100, help="round trips taken first and not counted")
    parser.add_argument("--gap-ms", type=float, default=1.0, help="pause before each send (the relay goes idle)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated relays to run: epoll, trio")


def _modes(text: str, name: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        raise SystemExit(f"logway bench {name}: --modes takes {', '.join(MODES)}")
    return modes


def run(args: argparse.Namespace) -> int:
    modes = _modes(args.modes, "floor")
    if args.samples < 1:
        raise SystemExit("logway bench floor: --samples must be positive")
    print(f"floor: one {len(MESSAGE)}-byte message through a minimal Python relay, {args.samples:,} samples (after "
          f"{args.warmup} warm-up), {args.gap_ms:g} ms idle before each")
    for mode in modes:
        rtts = bench_floor(mode, args.samples, args.warmup, args.gap_ms)
        n = len(rtts)
        pct = {q: rtts[min(n - 1, int(q * n))] for q in (0.5, 0.9, 0.99)}
        print(f"  {mode:6s} relay: p50 {pct[0.5]:.0f} µs, p90 {pct[0.9]:.0f} µs, p99 {pct[0.99]:.0f} µs")
    return 0


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=1000, help="closed-loop connections (bench load's 1,000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the connections send")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated servers to run: epoll, trio")


def run_load(args: argparse.Namespace) -> int:
    modes = _modes(args.modes, "load-floor")
    if not 1 <= args.connections <= 10_000 or not 0 < args.seconds <= MAX_SECONDS:
        raise SystemExit("logway bench load-floor: --connections takes 1-10000 and --seconds 0-3600")
    print(f"load-floor: {args.connections:,} connections, one {len(REQUEST)}-byte request at a time each, answered "
          f"{len(REPLY)} bytes by a minimal Python server, {args.seconds:g} s")
    for mode in modes:
        answered, wall, cpu = bench_load_floor(mode, args.connections, args.seconds)
        print(f"  {mode:6s} server: {answered / wall:,.0f} requests/s, {cpu / max(answered, 1) * 1e6:.1f} µs of "
              f"server CPU per request ({answered:,} requests)")
    return 0


BENCHMARKS = [Benchmark("floor", "the round trip of a minimal Python relay (bare epoll, trio): the floor under "
                                 "tank-tail's produce→consume latency", add_arguments, run),
              Benchmark("load-floor", "requests/s and CPU per request of a minimal Python server (bare epoll, trio) "
                                      "with bench load's 1,000 closed-loop connections: the floor under bench load",
                        add_load_arguments, run_load)]

if __name__ == "__main__":
    if sys.argv[1].startswith("accept-"):
        _accept_serve(sys.argv[1][len("accept-"):])
    elif sys.argv[1].startswith("serve-"):
        _serve(sys.argv[1][len("serve-"):], int(sys.argv[2]))
    else:
        _relay(sys.argv[1])
