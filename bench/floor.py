"""`logway bench floor`: the round trip of the smallest Python relay on this machine — the floor under the
produce→consume latency that `logway bench tank-tail` (and `kafka-tail`) measure.

A relay process (this module run as `python -m logway.bench.floor MODE`, on 127.0.0.1) accepts two connections
and copies what arrives on the first to the second: one wait until readable, one read, one write, nothing else.
The client does what tank-tail does with one message: it sleeps `--gap-ms` (the relay goes idle, as a gateway
whose consumer is parked does), sends 40 bytes on the first connection and stops the clock when they arrive on the
second. MODE `epoll` waits with a bare `select.epoll`, `trio` with `trio.lowlevel.wait_readable` in `trio.run`,
as the gateway's transport does. A gateway's answer to a parked consumer costs this much before it does any work
of its own (parse, append, wake, build, encode); figures in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import time

from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_floor"]

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=2000, help="round trips counted per relay")
    parser.add_argument("--warmup", type=int, default=100, help="round trips taken first and not counted")
    parser.add_argument("--gap-ms", type=float, default=1.0, help="pause before each send (the relay goes idle)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated relays to run: epoll, trio")


def run(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes or args.samples < 1:
        raise SystemExit(f"logway bench floor: --modes takes {', '.join(MODES)} and --samples must be positive")
    print(f"floor: one {len(MESSAGE)}-byte message through a minimal Python relay, {args.samples:,} samples (after "
          f"{args.warmup} warm-up), {args.gap_ms:g} ms idle before each")
    for mode in modes:
        rtts = bench_floor(mode, args.samples, args.warmup, args.gap_ms)
        n = len(rtts)
        pct = {q: rtts[min(n - 1, int(q * n))] for q in (0.5, 0.9, 0.99)}
        print(f"  {mode:6s} relay: p50 {pct[0.5]:.0f} µs, p90 {pct[0.9]:.0f} µs, p99 {pct[0.99]:.0f} µs")
    return 0


BENCHMARKS = [Benchmark("floor", "the round trip of a minimal Python relay (bare epoll, trio): the floor under "
                                 "tank-tail's produce→consume latency", add_arguments, run)]

if __name__ == "__main__":
    _relay(sys.argv[1])
