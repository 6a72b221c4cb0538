"""`logway bench workers`: Kafka throughput with `workers: 1` and `workers: 2` (docs/scaling.md; figures there).

For each worker count (`--workers`, default "1,2") a gateway is started (`GatewayProcess`, a subprocess, fresh
temporary data directory, 127.0.0.1 only, `storage.flush: none` unless `--flush`) and, one after the other:

- produce: librdkafka (confluent-kafka) produces `--records` records of `--record-bytes` bytes round-robin over
  the `--partitions` partitions of a new topic (idempotent, acks=all, linger 5 ms); the clock runs from the first
  produce() to the end of flush(). librdkafka sends each partition's batches to its leader, so with 2 workers
  both processes work.
- consume: a consumer assigned every partition from offset 0 (fetch.queue.backoff.ms=10) reads them all back;
  the clock runs until the last record arrived (the count is checked).
- loop: the Kafka share of a load test, in a form that routes to partition leaders (`logway bench load` speaks to
  one Kafka address, so it cannot drive several workers): `--loop-connections` connections, each on one
  partition of a `--loop-partitions`-partition topic, connected to that partition's leader, in a closed loop for
  `--loop-seconds` — one request at a time, produce (one RecordBatch of 10 × 100 B, acks=1) or fetch (16 KiB
  from the connection's cursor) at random — through the lean wire of `bench/requests.py`, from one epoll loop in
  this process. `--loop-seconds 0` skips it.

Each phase reports seconds, records (or requests) per second, the gateway's CPU per record (or request) in µs, and
the CPU seconds each gateway process used (the supervisor and every worker; `proc_cpu_seconds`) and this process
(the clients: librdkafka's threads, the loop). On a machine with fewer free
cores than workers + clients the figures say more about the machine than about the design.
"""

from __future__ import annotations

import argparse
import os
import random
import selectors
import socket
import tempfile
import time

from .proc import gateway_processes, proc_cpu_seconds
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_workers", "gateway_processes"]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    parser.add_argument("--records", type=int, default=1_000_000, help="records produced, then consumed")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the produce/consume topic")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--loop-seconds", type=float, default=10.0, help="length of the closed loop (0: skip it)")
    parser.add_argument("--loop-connections", type=int, default=32, help="connections of the closed loop")
    parser.add_argument("--loop-partitions", type=int, default=8, help="partitions of the closed loop's topic")


class _Cpu:
    """CPU seconds of the gateway's processes and of this one over a phase."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
        self.client = time.process_time()

    def used(self) -> dict[str, float]:
        out = {name: proc_cpu_seconds(pid) - self.start[name] for name, pid in self.pids.items()}
        out["client"] = time.process_time() - self.client
        return out


def bench_workers(counts: list[int], records: int, record_bytes: int, partitions: int, flush: str,
                  loop_seconds: float, loop_connections: int, loop_partitions: int) -> list[dict]:
    """One row per (worker count, phase): workers, phase, seconds, rate (records/s; requests/s for the loop),
    MB/s, errors, cpu ({process: seconds})."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from .launcher import GatewayProcess

    rows = []
    payload = os.urandom(record_bytes)
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="logway-bench-workers-") as tmp:
            gw = GatewayProcess(os.path.join(tmp, "data"), f"workers={count}", f"storage.flush={flush}",
                                "log_level=WARNING")
            try:
                pids = gateway_processes(gw.pid)
                bootstrap = "%s:%d" % gw.addresses["kafka"]
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(15)

                failed = []
                producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                     "queue.buffering.max.messages": 1_000_000,
                                     "queue.buffering.max.kbytes": 1 << 21})
                cpu = _Cpu(pids)
                start = time.perf_counter()
                for i in range(records):
                    while True:
                        try:
                            producer.produce("bench", payload, partition=i % partitions,
                                             on_delivery=lambda err, msg: err and failed.append(err))
                            break
                        except BufferError:  # the local queue is full: let deliveries drain it
                            producer.poll(0.05)
                left = producer.flush(300)
                seconds = time.perf_counter() - start
                rows.append(_row(count, "produce", seconds, records, record_bytes, len(failed) + left, cpu))
                del producer  # (gone before the gateway stops: no reconnection attempts in the output)

                consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit":
                                     False, "fetch.queue.backoff.ms": 10})
                consumer.assign([TopicPartition("bench", p, 0) for p in range(partitions)])
                cpu = _Cpu(pids)
                start = time.perf_counter()
                got, errors, deadline = 0, 0, time.monotonic() + 300
                while got < records and time.monotonic() < deadline:
                    for msg in consumer.consume(10000, 0.5):
                        if msg.error():
                            errors += 1
                        else:
                            got += 1
                seconds = time.perf_counter() - start
                consumer.close()
                rows.append(_row(count, "consume", seconds, got, record_bytes, errors + records - got, cpu))

                if loop_seconds > 0:
                    admin.create_topics([NewTopic("loop", loop_partitions, 1)])["loop"].result(15)
                    md = admin.list_topics("loop", timeout=10)
                    brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
                    leaders = {p: brokers[info.leader] for p, info in md.topics["loop"].partitions.items()}
                    cpu = _Cpu(pids)
                    done, errors, seconds = closed_loop("loop", leaders, loop_connections, loop_seconds)
                    rows.append(_row(count, "loop", seconds, done, 0, errors, cpu))
                del admin
            finally:
                gw.stop()
    return rows


def _row(workers: int, phase: str, seconds: float, count: int, record_bytes: int, errors: int, cpu: _Cpu) -> dict:
    used = cpu.used()
    gateway = sum(v for k, v in used.items() if k != "client")
    return {"workers": workers, "phase": phase, "seconds": seconds, "rate": count / seconds,
            "mbps": count * record_bytes / seconds / 1e6, "errors": errors, "cpu": used,
            "gateway_us": gateway / count * 1e6 if count else float("nan")}


def closed_loop(topic: str, leaders: dict[int, tuple[str, int]], connections: int,
                seconds: float) -> tuple[int, int, float]:
    """(requests answered, errors, seconds) of `connections` connections, each on partition i % len(leaders)
    at its leader, sending produce or fetch (at random) one at a time for `seconds`."""
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record

    from .requests import KafkaWire

    batch = encode_batch([Record(os.urandom(100)) for _ in range(10)], default_timestamp=int(time.time() * 1000))
    selector = selectors.DefaultSelector()
    conns = []
    rng = random.Random(1)
    for c in range(connections):
        partition = c % len(leaders)
        sock = socket.create_connection(leaders[partition], timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _LoopConn(sock, KafkaWire(topic, partition, batch), rng)
        conns.append(conn)
        selector.register(sock, selectors.EVENT_READ, conn)
    start = time.perf_counter()
    deadline = start + seconds
    for conn in conns:
        conn.send_next()
    done = errors = 0
    while True:
        now = time.perf_counter()
        if now >= deadline:
            break
        for key, _ in selector.select(min(deadline - now, 0.5)):
            answered, failed = key.data.receive()
            done += answered
            errors += failed
    elapsed = time.perf_counter() - start
    for conn in conns:
        selector.unregister(conn.sock)
        conn.sock.close()
    selector.close()
    return done, errors, elapsed


class _LoopConn:
    """One connection of the closed loop: one request in flight, produce or fetch at random."""

    def __init__(self, sock: socket.socket, wire, rng: random.Random) -> None:
        self.sock, self.wire, self.rng = sock, wire, rng
        self.buffer = bytearray()
        self.cursor = 0
        self.kind = ""

    def send_next(self) -> None:
        self.kind = "produce" if self.rng.random() < 0.5 else "fetch"
        frame = self.wire.produce_frame() if self.kind == "produce" else self.wire.fetch_frame(self.cursor)
        self.sock.setblocking(True)
        self.sock.sendall(frame)
        self.sock.setblocking(False)

    def receive(self) -> tuple[int, int]:
        """(answers handled, errors) after the socket became readable."""
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return 0, 0
        if not data:
            raise ConnectionError("the gateway closed a connection of the loop")
        self.buffer += data
        buf = self.buffer
        if len(buf) < 4 or len(buf) < self.wire.frame_size(buf, 0):
            return 0, 0
        end = self.wire.frame_size(buf, 0)
        failed = 0
        try:
            if self.kind == "produce":
                self.wire.produce_answer(buf, 0, end)
            else:
                _, self.cursor, _ = self.wire.fetch_answer(buf, 0, end, self.cursor)
        except Exception:  # an error answer (counted; the loop goes on)
            failed = 1
        del buf[:end]
        self.send_next()
        return 1, failed


def run(args: argparse.Namespace) -> int:
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    rows = bench_workers(counts, args.records, args.record_bytes, args.partitions, args.flush, args.loop_seconds,
                         args.loop_connections, args.loop_partitions)
    print(f"workers: {args.records:,} records x {args.record_bytes} B over {args.partitions} partitions "
          f"(librdkafka, idempotent, acks=all), flush={args.flush}; loop: {args.loop_connections} connections "
          f"x {args.loop_seconds:g} s over {args.loop_partitions} partitions; {os.cpu_count()} CPUs")
    print(f"  {'workers':>7} {'phase':<8} {'seconds':>8} {'rate/s':>12} {'MB/s':>7} {'errors':>6} "
          f"{'gw µs/op':>8}  CPU seconds")
    for r in rows:
        unit = "req" if r["phase"] == "loop" else "rec"
        cpu = "  ".join(f"{name} {value:.2f}" for name, value in r["cpu"].items())
        mbps = f"{r['mbps']:7.1f}" if r["phase"] != "loop" else f"{'':>7}"
        print(f"  {r['workers']:>7} {r['phase']:<8} {r['seconds']:8.2f} {r['rate']:>8,.0f} {unit} {mbps} "
              f"{r['errors']:>6} {r['gateway_us']:8.1f}  {cpu}")
    return 1 if any(r["errors"] for r in rows) else 0


BENCHMARKS = [Benchmark("workers", "Kafka produce, consume and a closed loop at workers 1 and 2 (librdkafka)",
                        arguments, run)]
