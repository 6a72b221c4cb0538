"""`logway bench kafka-produce | kafka-throughput | kafka-tail`: the Kafka listener with librdkafka
(confluent-kafka) and, for kafka-tail, optionally kafka-python (figures in BENCHMARKS.md, never in tests).

- `kafka-produce` (issue 12): an idempotent producer next to a transactional one. Both produce `--records`
  records of `--record-bytes` bytes to one partition with acks=all, linger 5 ms and librdkafka's default batching;
  the transactional producer commits a transaction every `--txn-records` records (begin, produce,
  commit_transaction — which waits for every record's acknowledgement and the coordinator's markers). The clock
  runs from the first produce() to the last acknowledgement (idempotent: flush(); transactional: the last commit).
  A read_committed consumer then reads the topic back, checking the count (no aborted or lost record), untimed.
- `kafka-throughput`: 1,000,000 × 100 B produced by one librdkafka producer tuned for throughput (batches up to
  1 MB, linger 10 ms, acks=1, no idempotence, the whole run fitting its local queue, delivery reports for errors
  only), timed from the first produce() to the end of flush(); then consumed back from offset 0 by one assigned
  consumer (no group), timed from the first message to the last, the count checked and any error fatal. Targets
  ≥ 1,000,000 records/s each way. The consumer runs with fetch.queue.backoff.ms = 10: librdkafka stops fetching
  whenever its local queue is full (queued.min.messages / queued.max.messages.kbytes) and by default waits 1 s
  before asking again, which a broker faster than the application trips at once — the figure would then measure
  that pause. consume() takes 500 records a call by default (batches of 10,000 cost the calling thread about
  twice the CPU per record). Per phase: the gateway's CPU seconds (/proc utime+stime), its RSS, the Kafka
  requests it answered (its /metrics), and this process's CPU (librdkafka's threads included) and the calling
  thread's — with one Python producer, produce() itself (~1–1.5 µs a call) is the ceiling; `--producers N`
  spreads the records over N producer processes. `--profile DIR` samples the gateway with py-spy per phase.
  `--backend both` runs local files, then the postgres backend, side by side; `--gateways 1,2` runs the postgres
  backend with one gateway and with two in cluster mode over one database (`bench/gateways.py`: the clients are
  given every gateway, librdkafka sends each partition's requests to its leader — use `--partitions` ≥ the
  gateways so each leads some; CPU, memory and requests are summed over the gateways, and the report ends with
  two gateways' rates relative to one's: issue 36's goal that two serve more).
- `kafka-tail`: produce→consume latency through Kafka long-poll fetches: a consumer assigned at the log end
  (fetch.wait.max.ms 500, fetch.min.bytes 1) and a producer with linger.ms 0, acks=1; one message at a time,
  carrying its sequence number; each sample runs from the produce() call to the consumer holding the message,
  the consumer polling with a short timeout (a blocking wait on librdkafka's queue, woken by the message).
  Warm-up samples are not counted; p50/p90/p99/max are printed, with the messages that came late (after ~the
  fetch wait: a long-poll answered by its timer, a missed wake-up) or never. `--client kafka-python` uses
  kafka-python's KafkaConsumer instead (the producer stays librdkafka).

Each run starts its own gateway (`GatewayProcess`, a subprocess) with a fresh temporary data directory, 127.0.0.1
only, and stops it at the end; every wait is bounded. confluent-kafka and kafka-python are test dependencies
(`pip install -e .[test]`), imported only when a benchmark runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .gateways import Database, postgres_server
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_produce", "bench_throughput", "bench_tail", "key_values"]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="records per producer")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--txn-records", type=int, default=1000, help="records per transaction")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--mode", default="both", choices=("both", "idempotent", "transactional"),
                        help="which producer(s) to measure")


def bench_produce(records: int, record_bytes: int, txn_records: int, flush: str, mode: str) -> dict:
    """{mode: (seconds, records/s, MB/s)} for the producers asked for."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from .launcher import GatewayProcess

    results = {}
    payload = os.urandom(record_bytes)
    with tempfile.TemporaryDirectory(prefix="logway-bench-kafka-") as tmp:
        gw = GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={flush}", "log_level=WARNING")
        try:
            bootstrap = "%s:%d" % gw.addresses["kafka"]
            modes = ("idempotent", "transactional") if mode == "both" else (mode,)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for m in modes:
                admin.create_topics([NewTopic(m, 1, 1)])[m].result(10)
            for m in modes:
                conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21}
                if m == "transactional":
                    conf["transactional.id"] = "bench-" + os.urandom(4).hex()
                producer = Producer(conf)
                if m == "transactional":
                    producer.init_transactions(30)
                start = time.perf_counter()
                if m == "idempotent":
                    for i in range(records):
                        _produce(producer, m, payload)
                    producer.flush(120)
                else:
                    for first in range(0, records, txn_records):
                        producer.begin_transaction()
                        for i in range(first, min(first + txn_records, records)):
                            _produce(producer, m, payload)
                        producer.commit_transaction(120)
                seconds = time.perf_counter() - start
                results[m] = (seconds, records / seconds, records * record_bytes / seconds / 1e6)
            for m in modes:  # read back (untimed): every record once, nothing aborted
                consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit":
                                     False, "isolation.level": "read_committed", "fetch.queue.backoff.ms": 10})
                consumer.assign([TopicPartition(m, 0, 0)])
                count, deadline = 0, time.monotonic() + 120
                while count < records and time.monotonic() < deadline:
                    for msg in consumer.consume(10000, 0.5):
                        if not msg.error():
                            count += 1
                consumer.close()
                if count != records:
                    raise RuntimeError(f"{m}: read back {count} of {records} records")
        finally:
            gw.stop()
    return results


def _produce(producer, topic: str, payload: bytes) -> None:
    while True:
        try:
            producer.produce(topic, payload, partition=0)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)


def run(args: argparse.Namespace) -> int:
    results = bench_produce(args.records, args.record_bytes, args.txn_records, args.flush, args.mode)
    print(f"kafka-produce: {args.records:,} records x {args.record_bytes} B, one partition, acks=all, "
          f"flush={args.flush}, librdkafka (confluent-kafka)")
    for mode, (seconds, rate, mbps) in results.items():
        extra = f" (transactions of {args.txn_records:,})" if mode == "transactional" else ""
        print(f"  {mode:<13} {seconds:7.2f} s  {rate:12,.0f} records/s  {mbps:7.1f} MB/s{extra}")
    return 0


# -- kafka-throughput --------------------------------------------------------------------------------------------

#: records/s the issues ask of each phase, by backend (issue 36: the postgres backend's produce ≥ 0.5 M/s).
TARGETS = {"local": {"produce": 1_000_000, "consume": 1_000_000},
           "postgres": {"produce": 500_000, "consume": 1_000_000}}
MiB = 1024 * 1024


def throughput_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="records produced, then consumed")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value (no key)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of the topic (records spread round-robin, all consumed by one consumer)")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--acks", default="1", choices=("0", "1", "all"), help="the producer's acks")
    parser.add_argument("--linger-ms", type=float, default=10, help="the producer's linger.ms")
    parser.add_argument("--batch-bytes", type=int, default=1_000_000,
                        help="the producer's batch.size (bytes of one RecordBatch)")
    parser.add_argument("--batch-messages", type=int, default=100_000, help="the producer's batch.num.messages")
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="the producer's compression.type")
    parser.add_argument("--fetch-backoff-ms", type=int, default=10,
                        help="the consumer's fetch.queue.backoff.ms (librdkafka's default is 1000)")
    parser.add_argument("--consume-batch", type=int, default=500,
                        help="num_messages per consume() call (batches of a few hundred cost the calling thread about "
                             "half the CPU per record of batches of 10,000)")
    parser.add_argument("--producer-set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra librdkafka producer setting (repeatable), e.g. socket.send.buffer.bytes=0")
    parser.add_argument("--consumer-set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra librdkafka consumer setting (repeatable), e.g. queued.min.messages=1000000")
    parser.add_argument("--producers", type=int, default=1,
                        help="producer processes sharing the records (each its own librdkafka producer and "
                             "connection; 1: one producer in this process)")
    parser.add_argument("--backend", default="local", choices=("local", "postgres", "both"),
                        help="the gateway's storage.backend; both: local, then postgres, side by side")
    parser.add_argument("--gateways", default="1",
                        help="comma-separated gateway counts of the postgres runs, side by side: 1 is one gateway "
                             "(storage.postgres.cluster off), 2 or more run in cluster mode over one database, each "
                             "leading its share of the partitions (use --partitions ≥ the count), e.g. 1,2")
    parser.add_argument("--dsn", default="",
                        help="with the postgres backend, a database to use (a fresh schema per run, dropped after); "
                             "empty: a throwaway PostgreSQL server of its own (Debian's postgresql, initdb in a "
                             "temporary directory)")
    parser.add_argument("--runs", type=int, default=1, help="repeat on fresh gateways and report each run")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds each phase may take at most")
    parser.add_argument("--profile", default="", metavar="DIR",
                        help="sample the gateway with py-spy during each phase into DIR/<phase>.txt and print the "
                             "busiest functions (the figures of a profiled run are not comparable); empty: off")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy executable, for --profile")


def key_values(items: list[str]) -> dict[str, str]:
    """`--producer-set`/`--consumer-set` items (KEY=VALUE) as a dict of librdkafka settings."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"logway bench: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def producer_config(bootstrap: str, acks: str = "1", linger_ms: float = 10, batch_bytes: int = 1_000_000,
                    batch_messages: int = 100_000, compression: str = "none", records: int = 1_000_000,
                    extra: dict | None = None) -> dict:
    """The throughput producer's librdkafka settings (callbacks added by the caller)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "linger.ms": linger_ms,
        "batch.size": batch_bytes,
        "batch.num.messages": batch_messages,
        "compression.type": compression,
        # Room for the whole run: produce() never blocks on a full local queue (BufferError is still handled).
        "queue.buffering.max.messages": max(records, 100_000),
        "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        "delivery.report.only.error": True,  # no per-record report to serve: errors only
    }
    conf.update(extra or {})
    return conf


def consumer_config(bootstrap: str, fetch_backoff_ms: int = 10, extra: dict | None = None) -> dict:
    """The throughput consumer's librdkafka settings (assigned partitions, no group membership)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "logway-bench-throughput",  # required by librdkafka; assign() alone never joins the group
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": fetch_backoff_ms,
        "fetch.max.bytes": 50 * MiB,
        "max.partition.fetch.bytes": 16 * MiB,
        "fetch.wait.max.ms": 100,
        "fetch.min.bytes": 1,
        "queued.max.messages.kbytes": 256 * 1024,
    }
    conf.update(extra or {})
    return conf


class _Phase:
    """The wall clock's companions over a phase: the CPU seconds of the gateways and of this process (librdkafka's
    threads included), the Kafka requests the gateways answered and the bytes they moved (their admin listeners'
    metrics; empty without them), and the gateways' RSS at the end — each summed over the gateways."""

    def __init__(self, pids: list[int], admins: list[tuple[str, int]] = (), db_cpu=None) -> None:
        """`db_cpu`: a function giving the database server's CPU seconds so far (None: no database)."""
        self.pids = pids
        self.admins = admins
        self._db_cpu = db_cpu
        self.db_cpu = None

    def __enter__(self) -> "_Phase":
        self.counters0 = _kafka_counters(self.admins)
        self.db_cpu0 = self._db_cpu() if self._db_cpu is not None else None
        self.gw_cpu0 = _cpu(self.pids)
        self.me_cpu0 = time.process_time()
        self.thread_cpu0 = time.thread_time()
        return self

    def __exit__(self, *exc) -> None:
        from .proc import summed_mib

        self.gw_cpu = _cpu(self.pids) - self.gw_cpu0
        if self._db_cpu is not None:
            self.db_cpu = self._db_cpu() - self.db_cpu0
        self.me_cpu = time.process_time() - self.me_cpu0
        self.thread_cpu = time.thread_time() - self.thread_cpu0
        self.rss = summed_mib(self.pids, "VmRSS")
        self.peak_rss = summed_mib(self.pids, "VmHWM")
        after = _kafka_counters(self.admins)
        self.counters = {k: v - self.counters0.get(k, 0) for k, v in after.items()}


def _cpu(pids: list[int]) -> float:
    from .proc import proc_cpu_seconds

    return sum(proc_cpu_seconds(pid) for pid in pids)


def _kafka_counters(admins: list[tuple[str, int]]) -> dict[str, float]:
    """The gateways' Kafka counters from their /metrics, summed: requests per type ("Produce", "Fetch", …),
    "bytes_in", "bytes_out"; a gateway without an admin listener, or that does not answer (within 5 s), adds
    nothing."""
    import re
    import urllib.request

    out: dict[str, float] = {}
    for admin in admins:
        try:
            with urllib.request.urlopen("http://%s:%d/metrics" % admin, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            continue
        for m in re.finditer(r'^logway_requests_total\{protocol="kafka",request="(\w+)"\} (\S+)$', text, re.M):
            out[m[1]] = out.get(m[1], 0.0) + float(m[2])
        for name, key in (("bytes_received", "bytes_in"), ("bytes_sent", "bytes_out")):
            m = re.search(rf'^logway_{name}_total\{{protocol="kafka"\}} (\S+)$', text, re.M)
            if m:
                out[key] = out.get(key, 0.0) + float(m[1])
    return out


class _Spy:
    """With `profile` = (py-spy executable, directory): py-spy samples process `pid` (500 Hz, raw collapsed
    stacks, not pausing it) into <directory>/<name>.txt while the block runs; it is given a second to attach
    first. Without `profile`, nothing."""

    def __init__(self, pid: int, name: str, profile: tuple[str, str] | None) -> None:
        self.pid = pid
        self.file = os.path.join(profile[1], f"{name}.txt") if profile else None
        self.profile = profile
        self.proc = None

    def __enter__(self) -> "_Spy":
        if self.profile:
            import subprocess

            os.makedirs(self.profile[1], exist_ok=True)
            self.proc = subprocess.Popen([self.profile[0], "record", "-r", "500", "-f", "raw", "--nonblocking",
                                          "-o", self.file, "-p", str(self.pid)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            import signal
            import subprocess

            self.proc.send_signal(signal.SIGINT)  # py-spy writes its file and exits
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def profile_summary(path: str, top: int = 15) -> str:
    """The functions of a py-spy raw profile (collapsed stacks, `frame;frame;... count`) with the most samples,
    by self time and by inclusive time, as text; percentages of the samples taken (idle threads are not sampled,
    so these are shares of the gateway's busy time)."""
    from collections import Counter

    self_n: Counter = Counter()
    incl: Counter = Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [_function(frame) for frame in stack.split(";")]
            self_n[frames[-1]] += n
            for frame in set(frames):
                incl[frame] += n
    if not total:
        return f"  {path}: no samples"
    lines = [f"  {path}: {total:,} samples"]
    for title, counter in (("self", self_n), ("inclusive", incl)):
        lines.append(f"  by {title} time:")
        for frame, n in counter.most_common(top):
            lines.append(f"    {n / total:6.1%}  {frame}")
    return "\n".join(lines)


def _function(frame: str) -> str:
    """`func (path/to/file.py:123)` → `func (file.py)`: a function's lines counted together."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = path.split("/")
    return f"{name} ({'/'.join(parts[-2:])})" if path else name


def bench_throughput(records: int = 1_000_000, record_bytes: int = 100, partitions: int = 1, flush: str = "none",
                     acks: str = "1", linger_ms: float = 10, batch_bytes: int = 1_000_000,
                     batch_messages: int = 100_000, compression: str = "none", fetch_backoff_ms: int = 10,
                     consume_batch: int = 500, producer_extra: dict | None = None,
                     consumer_extra: dict | None = None, timeout: float = 120.0,
                     profile: tuple[str, str] | None = None, producers: int = 1,
                     backend: tuple[str, ...] = (), db_cpu=None, gateways: int = 1) -> dict:
    """Produce then consume `records` records on a fresh gateway. Returns {"producer": conf, "consumer": conf,
    "produce": phase, "consume": phase}, each phase a dict: records, seconds, rate, mbps, gateway_cpu, client_cpu,
    client_thread_cpu (the producing/consuming threads'), rss, peak_rss (MiB), counters (the gateway's Kafka
    requests and bytes), profile (py-spy's file or None); produce also high_watermark (summed over the partitions).
    `profile` = (py-spy executable, directory): sample the gateway with py-spy during each phase. `producers` > 1:
    that many producer processes share the records, each with its own librdkafka producer and connection.
    `backend`: the gateway's storage settings beyond flush (`storage.backend=postgres`, …); `db_cpu`: a function
    giving the database server's CPU seconds, reported per phase as db_cpu. `gateways` > 1 (postgres only): that
    many gateways in cluster mode over the database, the clients bootstrapped with all of them; the gateways' CPU,
    memory and requests are summed; "leaders" in the result: how many partitions each gateway led."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from .gateways import Gateways

    if profile and gateways > 1:
        raise SystemExit("logway bench kafka-throughput: --profile samples one gateway: use it with one")
    topic = "throughput"
    payload = os.urandom(record_bytes)
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="logway-bench-kafka-") as tmp:
        gws = Gateways(tmp, gateways, f"storage.flush={flush}", "log_level=WARNING", *backend)
        try:
            bootstrap, pids, admins = gws.bootstrap, gws.pids, gws.admins
            _create_topic(bootstrap, topic, partitions)
            if gateways > 1:
                led = gws.settle(topic, partitions)
                result["leaders"] = {node: led.count(node) for node in sorted(set(led))}

            # -- produce
            conf = producer_config(bootstrap, acks, linger_ms, batch_bytes, batch_messages, compression,
                                   -(-records // producers), producer_extra)
            result["producer"] = dict(conf)
            with _Spy(pids[0], "produce", profile) as spy:
                if producers == 1:
                    share = _ProducerShare(conf, topic, partitions, payload, 0, records)
                    with _Phase(pids, admins, db_cpu) as phase:
                        start = time.perf_counter()
                        share.run(timeout)
                        seconds = time.perf_counter() - start
                    share.close()
                    client = None
                else:
                    phase, seconds, client = _produce_in_processes(pids, admins, conf, topic, partitions,
                                                                   record_bytes, records, producers, timeout, db_cpu)
            result["produce"] = _phase_figures(phase, records, record_bytes, seconds)
            if client is not None:  # the producer processes' CPU, and the main threads' among it
                result["produce"]["client_cpu"], result["produce"]["client_thread_cpu"] = client
            result["produce"]["profile"] = spy.file

            # -- consume
            conf = consumer_config(bootstrap, fetch_backoff_ms, consumer_extra)
            result["consumer"] = dict(conf)
            errors: list = []
            consumer = Consumer({**conf, "error_cb": errors.append})
            try:
                hwm = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                          for p in range(partitions))
                result["produce"]["high_watermark"] = hwm
                if hwm != records:
                    raise RuntimeError(f"kafka-throughput: high-water mark {hwm} after producing {records} records")
                with _Spy(pids[0], "consume", profile) as spy:
                    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
                    consume = consumer.consume
                    count = 0
                    deadline = time.monotonic() + timeout
                    # consume(n, timeout) returns once it has n records or the timeout passed: never more than
                    # the records left, so the last call does not sit out its timeout
                    while count == 0:  # the clock starts with the first message
                        if time.monotonic() > deadline:
                            raise RuntimeError("kafka-throughput: no record consumed in time")
                        first = consume(min(consume_batch, records), 0.5)
                        count = _count(first, KafkaError)
                    with _Phase(pids, admins, db_cpu) as phase:
                        start = time.perf_counter()
                        while count < records:
                            msgs = consume(min(consume_batch, records - count), 0.5)
                            if msgs:
                                count += _count(msgs, KafkaError)
                            elif time.monotonic() > deadline:
                                break
                        seconds = time.perf_counter() - start
            finally:
                consumer.close()
            if errors:
                raise RuntimeError(f"kafka-throughput: {len(errors)} consumer errors, the first: {errors[0]}")
            if count != records:
                raise RuntimeError(f"kafka-throughput: consumed {count} of {records} records")
            # the first batch is outside the clock: the rate is over the others
            result["consume"] = _phase_figures(phase, count - len(first), record_bytes, seconds)
            result["consume"]["records_total"] = count
            result["consume"]["profile"] = spy.file
        finally:
            gws.stop()
    return result


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    del admin


def _count(msgs, KafkaError) -> int:
    n = len(msgs)
    for m in msgs:  # an error is a message too: any but the end of a partition is fatal
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                n -= 1
                continue
            raise RuntimeError(f"kafka-throughput: consume error: {err}")
    return n


class _ProducerShare:
    """One librdkafka producer sending `count` records, record i (counting from `first`) to partition
    i % partitions; connected (metadata fetched) when made, so `run` times the producing only."""

    def __init__(self, conf: dict, topic: str, partitions: int, payload: bytes, first: int, count: int) -> None:
        from confluent_kafka import Producer

        self.errors: list = []

        def on_delivery(err, msg) -> None:  # errors only (delivery.report.only.error)
            if err is not None:
                self.errors.append(err)

        self.producer = Producer({**conf, "on_delivery": on_delivery, "error_cb": self.errors.append})
        self.producer.list_topics(topic, 10)
        self.topic, self.partitions, self.payload, self.first, self.count = topic, partitions, payload, first, count

    def run(self, timeout: float) -> None:
        """produce() every record, then flush(): returns once every one is acknowledged; raises on an error."""
        producer, topic, payload, partitions = self.producer, self.topic, self.payload, self.partitions
        produce = producer.produce
        if partitions == 1:
            for _ in range(self.count):
                try:
                    produce(topic, payload, None, 0)
                except BufferError:
                    _produce_when_room(producer, topic, payload, 0)
        else:
            for i in range(self.first, self.first + self.count):
                try:
                    produce(topic, payload, None, i % partitions)
                except BufferError:
                    _produce_when_room(producer, topic, payload, i % partitions)
        left = producer.flush(timeout)
        if left:
            raise RuntimeError(f"kafka-throughput: {left} records not delivered in {timeout:g} s")
        if self.errors:
            raise RuntimeError(f"kafka-throughput: {len(self.errors)} produce errors, the first: {self.errors[0]}")

    def close(self) -> None:
        """Destroy librdkafka's handle now: its callbacks refer to this share, a cycle the collector frees only
        some time later — meanwhile the handle would go on reconnecting to a stopped gateway."""
        self.producer = None


def _produce_when_room(producer, topic: str, payload: bytes, partition: int) -> None:
    while True:
        producer.poll(0.01)
        try:
            producer.produce(topic, payload, None, partition)
            return
        except BufferError:
            continue


def _produce_in_processes(pids: list[int], admins: list[tuple[str, int]], conf: dict, topic: str, partitions: int,
                          record_bytes: int, records: int, producers: int, timeout: float,
                          db_cpu=None) -> tuple[_Phase, float, tuple[float, float]]:
    """`producers` processes (spawned: librdkafka's threads do not survive a fork) share the records; the clock
    runs from the signal to start to the last one's flush() returning. (phase, seconds, (their CPU seconds, their
    producing threads' CPU seconds))."""
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [records // producers + (i < records % producers) for i in range(producers)]
    firsts = [sum(shares[:i]) for i in range(producers)]
    procs = [ctx.Process(target=_producer_child, daemon=True, name=f"kafka-bench-producer-{i}",
                         args=(conf, topic, partitions, record_bytes, firsts[i], shares[i], timeout, ready, go,
                               results)) for i in range(producers)]
    try:
        for proc in procs:
            proc.start()
        try:
            for _ in procs:
                problem = ready.get(timeout=60)
                if problem:
                    raise RuntimeError(f"kafka-throughput: a producer process failed: {problem}")
            with _Phase(pids, admins, db_cpu) as phase:
                start = time.perf_counter()
                go.set()
                outs = [results.get(timeout=timeout + 30) for _ in procs]
                seconds = max(out[1] for out in outs) - start
        except queue.Empty:
            raise RuntimeError("kafka-throughput: the producer processes did not answer in time") from None
        problems = [out[3] for out in outs if out[3]]
        if problems:
            raise RuntimeError(f"kafka-throughput: {len(problems)} producer process(es) failed: {problems[0]}")
        for proc in procs:
            proc.join(30)
        return phase, seconds, (sum(out[2] for out in outs), sum(out[4] for out in outs))
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _producer_child(conf: dict, topic: str, partitions: int, record_bytes: int, first: int, count: int,
                    timeout: float, ready, go, results) -> None:
    """A producer process of `_produce_in_processes`: connect, say ready, wait for the go, produce its share and
    report (start, end, CPU seconds, problem or None, main thread's CPU seconds)."""
    try:
        share = _ProducerShare(conf, topic, partitions, os.urandom(record_bytes), first, count)
    except BaseException as exc:
        ready.put(repr(exc) or "failed")
        return
    ready.put(None)
    if not go.wait(timeout):
        results.put((0.0, 0.0, 0.0, "no signal to start", 0.0))
        return
    # process_time, not os.times: clock ticks (10 ms) read a small share's CPU as 0
    t0, c0, th0 = time.perf_counter(), time.process_time(), time.thread_time()
    try:
        share.run(timeout)
        problem = None
    except BaseException as exc:
        problem = repr(exc)
    t1, c1, th1 = time.perf_counter(), time.process_time(), time.thread_time()
    share.close()
    results.put((t0, t1, c1 - c0, problem, th1 - th0))


def _phase_figures(phase: _Phase, records: int, record_bytes: int, seconds: float) -> dict:
    return {"records": records, "seconds": seconds, "rate": records / seconds,
            "mbps": records * record_bytes / seconds / 1e6, "gateway_cpu": phase.gw_cpu,
            "client_cpu": phase.me_cpu, "client_thread_cpu": phase.thread_cpu, "rss": phase.rss,
            "peak_rss": phase.peak_rss, "counters": phase.counters, "db_cpu": phase.db_cpu}


def _wrapped(text: str, width: int = 118) -> None:
    """Print `text` wrapped at `width`, continuation lines indented."""
    import textwrap

    print("\n".join(textwrap.wrap(text, width, subsequent_indent="    ", break_on_hyphens=False)))


def _show(conf: dict, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={conf[k]}" for k in keys if k in conf)


def run_throughput(args: argparse.Namespace) -> int:
    met_all = True
    backends = ("local", "postgres") if args.backend == "both" else (args.backend,)
    counts = _gateway_counts(args.gateways, args.partitions, "postgres" in backends)
    rates: dict[int, list[dict]] = {}  # postgres runs by gateway count
    with postgres_server("postgres" in backends and not args.dsn) as server:
        for backend in backends:
            for gateways in (counts if backend == "postgres" else (1,)):
                for run_no in range(args.runs):
                    with Database(backend, args.dsn, server, run_no) as (settings, db_cpu):
                        r = bench_throughput(args.records, args.record_bytes, args.partitions, args.flush,
                                             args.acks, args.linger_ms, args.batch_bytes, args.batch_messages,
                                             args.compression, args.fetch_backoff_ms, args.consume_batch,
                                             key_values(args.producer_set), key_values(args.consumer_set),
                                             args.timeout, (args.py_spy, args.profile) if args.profile else None,
                                             args.producers, settings, db_cpu, gateways)
                    if run_no == 0:
                        _header(args, backend, gateways, r)
                    met_all &= _report(r, backend, run_no, gateways)
                    if backend == "postgres":
                        rates.setdefault(gateways, []).append(r)
    targets = "; ".join(f"{b}: produce ≥ {TARGETS[b]['produce']:,}, consume ≥ {TARGETS[b]['consume']:,}"
                        for b in backends)
    print(f"  targets ({targets} records/s{', one gateway' if len(counts) > 1 else ''}): "
          f"{'met' if met_all else 'NOT met'}")
    _compare_gateways(rates)
    return 0


def _gateway_counts(text: str, partitions: int, postgres: bool) -> tuple[int, ...]:
    """The gateway counts of `--gateways` (the postgres runs'), checked against the partitions."""
    try:
        counts = tuple(int(n) for n in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise SystemExit(f"logway bench kafka-throughput: --gateways takes gateway counts like 1,2, not {text!r}")
    if counts != (1,) and not postgres:
        raise SystemExit("logway bench kafka-throughput: several gateways need the postgres backend (--backend "
                         "postgres or both)")
    if partitions < max(counts):
        raise SystemExit(f"logway bench kafka-throughput: --gateways {max(counts)} needs --partitions "
                         f"{max(counts)} or more, so that every gateway leads some")
    return counts


def _compare_gateways(rates: dict[int, list[dict]]) -> None:
    """Issue 36's goal: more gateways serve more (each phase's best run, relative to one gateway)."""
    if 1 not in rates or len(rates) < 2:
        return

    def best(n: int, phase: str) -> float:
        return max(r[phase]["rate"] for r in rates[n])

    for n in sorted(rates):
        if n == 1:
            continue
        ratios = ", ".join(f"{phase} {best(n, phase) / best(1, phase):.2f}×" for phase in ("produce", "consume"))
        more = all(best(n, phase) > best(1, phase) for phase in ("produce", "consume"))
        print(f"  postgres, {n} gateways vs 1 (records/s, best run): {ratios} "
              f"[{'more' if more else 'NOT more'} than one gateway]")


def _header(args: argparse.Namespace, backend: str, gateways: int, r: dict) -> None:
    target = TARGETS[backend]
    cluster = ""
    if gateways > 1:
        led = ", ".join(f"member {node} {n}" for node, n in r["leaders"].items())
        cluster = f", {gateways} gateways (storage.postgres.cluster; partitions led: {led})"
    _wrapped(f"kafka-throughput: {args.records:,} records x {args.record_bytes} B, {args.partitions} "
             f"partition(s), {args.producers} producer(s), storage.backend={backend}"
             f"{f', flush={args.flush}' if backend == 'local' else ' (acknowledged once committed)'}{cluster}, "
             f"librdkafka "
             f"(confluent-kafka); targets: produce ≥ {target['produce']:,}, consume ≥ {target['consume']:,} "
             f"records/s")
    pkeys = ("acks", "linger.ms", "batch.size", "batch.num.messages", "compression.type",
             "queue.buffering.max.messages", "queue.buffering.max.kbytes", "delivery.report.only.error")
    extra = tuple(k for k in key_values(args.producer_set) if k not in pkeys)
    _wrapped("  producer: " + _show(r["producer"], pkeys + extra))
    ckeys = ("fetch.queue.backoff.ms", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.wait.max.ms",
             "queued.max.messages.kbytes", "enable.auto.commit")
    extra = tuple(k for k in key_values(args.consumer_set) if k not in ckeys)
    _wrapped("  consumer: " + _show(r["consumer"], ckeys + extra) +
             f", assign() from offset 0, consume({args.consume_batch:,})")
    _wrapped(f"  (fetch.queue.backoff.ms={args.fetch_backoff_ms}: librdkafka pauses fetching for that long "
             f"whenever its local queue is full; its 1,000 ms default is tripped by a fast broker)")


def _report(r: dict, backend: str, run_no: int, gateways: int = 1) -> bool:
    """Print one run's figures; whether both phases met their targets (which are one gateway's: with more, always
    True — `_compare_gateways` judges them)."""
    met_all = True
    summed = f" (summed over {gateways} gateways)" if gateways > 1 else ""
    for name in ("produce", "consume"):
        f = r[name]
        met = f["rate"] >= TARGETS[backend][name]
        if gateways == 1:
            met_all &= met
        threads = "the producing thread(s)" if name == "produce" else "the consuming thread"
        print(f"  {name:<8} {f['seconds']:7.3f} s {f['rate']:12,.0f} records/s {f['mbps']:7.1f} MB/s  "
              f"[{'met' if met else 'NOT met'}{'' if gateways == 1 else ' (the goal is one gateway’s)'}]")
        print(f"           gateway CPU{summed} {f['gateway_cpu']:.2f} s ({f['gateway_cpu'] / f['seconds']:.0%} of a "
              f"core, {f['gateway_cpu'] / f['records'] * 1e6:.2f} µs/record), RSS {f['rss']:.0f} MiB (peak "
              f"{f['peak_rss']:.0f})")
        if f.get("db_cpu") is not None:
            print(f"           PostgreSQL CPU {f['db_cpu']:.2f} s ({f['db_cpu'] / f['seconds']:.0%} of a core)")
        print(f"           client CPU {f['client_cpu']:.2f} s, {f['client_thread_cpu']:.2f} s of it in {threads}")
        c = f["counters"]
        key, moved = ("Produce", "bytes_in") if name == "produce" else ("Fetch", "bytes_out")
        if c.get(key):
            print(f"           {c[key]:,.0f} {key} requests, {c.get(moved, 0) / c[key] / 1024:,.0f} KiB each on "
                  f"average, {f['gateway_cpu'] / c[key] * 1e3:.2f} ms of gateway CPU each")
    if r["consume"]["records"] != r["consume"]["records_total"]:
        print(f"           (consume: the first batch of {r['consume']['records_total'] - r['consume']['records']:,}"
              f" records is outside the clock, which starts when it arrives)")
    for name in ("produce", "consume"):
        if r[name].get("profile"):
            print(f"  py-spy profile of the gateway during {name} (run {run_no + 1}):")
            print(profile_summary(r[name]["profile"]))
    return met_all


# -- kafka-tail --------------------------------------------------------------------------------------------------

def tail_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=2000, help="produce→consume samples counted")
    parser.add_argument("--warmup", type=int, default=100, help="samples taken first and not counted")
    parser.add_argument("--record-bytes", type=int, default=32, help="bytes of each record's value (≥ 8)")
    parser.add_argument("--client", default="confluent", choices=("confluent", "kafka-python"),
                        help="the consumer's client library (the producer is librdkafka either way)")
    parser.add_argument("--fetch-wait-ms", type=int, default=500,
                        help="the consumer's fetch.wait.max.ms: how long a fetch at the log end parks")
    parser.add_argument("--gap-ms", type=float, default=1.0,
                        help="pause after each receipt before the next produce, so the next fetch is parked")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="seconds a record may take before it counts as missed")


def bench_tail(samples: int = 2000, warmup: int = 100, record_bytes: int = 32, client: str = "confluent",
               fetch_wait_ms: int = 500, gap_ms: float = 1.0, flush: str = "none", timeout: float = 5.0) -> dict:
    """Produce one record at a time and time it to the tailing consumer. Returns {"latencies_ms": sorted counted
    samples, "late": samples slower than 0.8 × fetch_wait_ms, "missed": records never received within `timeout`,
    "rss_start"/"rss_end" (MiB), "gateway_cpu" (seconds), "counters" (the gateway's Kafka requests per type
    during the run, from its metrics), "records" (produced, warm-up included)}."""
    from confluent_kafka import Producer

    from .launcher import GatewayProcess
    from .proc import proc_cpu_seconds, rss_mib

    if record_bytes < 8:
        raise SystemExit("logway bench kafka-tail: --record-bytes must be at least 8 (the sequence number)")
    topic = "tail"
    pad = os.urandom(record_bytes - 8)
    with tempfile.TemporaryDirectory(prefix="logway-bench-kafka-") as tmp:
        gw = GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={flush}", "log_level=WARNING")
        try:
            bootstrap = "%s:%d" % gw.addresses["kafka"]
            _create_topic(bootstrap, topic, 1)
            errors: list = []

            def on_delivery(err, msg) -> None:
                if err is not None:
                    errors.append(err)

            producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                                 "enable.idempotence": False, "on_delivery": on_delivery,
                                 "error_cb": errors.append})
            producer.list_topics(topic, 10)
            consumer = (_ConfluentTail if client == "confluent" else _KafkaPythonTail)(
                bootstrap, topic, fetch_wait_ms, errors)
            admins = [gw.addresses["admin"]] if "admin" in gw.addresses else []
            counters0 = _kafka_counters(admins)
            rss0, cpu0 = rss_mib(gw.pid), proc_cpu_seconds(gw.pid)
            latencies: list[float] = []
            late = missed = stale = 0
            try:
                for seq in range(warmup + samples):
                    value = seq.to_bytes(8, "big") + pad
                    t0 = time.perf_counter_ns()
                    producer.produce(topic, value, partition=0)
                    producer.poll(0)
                    deadline = t0 + int(timeout * 1e9)
                    got = None
                    while got is None:
                        for v in consumer.poll(0.1):
                            n = int.from_bytes(v[:8], "big")
                            if n == seq:
                                got = time.perf_counter_ns()
                            elif n < seq:
                                stale += 1  # a record counted missed before, arriving now
                            else:
                                raise RuntimeError(f"kafka-tail: record {n} arrived while waiting for {seq}")
                        if got is None and time.perf_counter_ns() > deadline:
                            break
                    producer.poll(0)
                    if errors:
                        raise RuntimeError(f"kafka-tail: {len(errors)} client errors, the first: {errors[0]}")
                    if got is None:
                        if seq >= warmup:
                            missed += 1
                        continue
                    ms = (got - t0) / 1e6
                    if seq >= warmup:
                        latencies.append(ms)
                        if ms >= 0.8 * fetch_wait_ms:
                            late += 1
                    if gap_ms:
                        time.sleep(gap_ms / 1000)
                producer.flush(10)
            finally:
                consumer.close()
                producer = None  # destroyed before the gateway stops (no reconnect attempts logged)
            cpu = proc_cpu_seconds(gw.pid) - cpu0
            counters = {k: v - counters0.get(k, 0) for k, v in _kafka_counters(admins).items()}
            result = {"latencies_ms": sorted(latencies), "late": late, "missed": missed, "stale": stale,
                      "rss_start": rss0, "rss_end": rss_mib(gw.pid), "gateway_cpu": cpu, "counters": counters,
                      "records": warmup + samples}
        finally:
            gw.stop()
    return result


class _ConfluentTail:
    """A librdkafka consumer assigned at the log end of partition 0; poll(timeout) -> values received."""

    def __init__(self, bootstrap: str, topic: str, fetch_wait_ms: int, errors: list) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.conf = {"bootstrap.servers": bootstrap, "group.id": "logway-bench-tail", "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "fetch.wait.max.ms": fetch_wait_ms, "fetch.min.bytes": 1,
                     "fetch.queue.backoff.ms": 10, "error_cb": errors.append}
        self.consumer = Consumer(self.conf)
        end = self.consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
        self.consumer.assign([TopicPartition(topic, 0, end)])

    def poll(self, timeout: float) -> list[bytes]:
        out = []
        # consume(n, timeout) waits until it has n records or the timeout passed: n = 1 returns as soon as the
        # record is in librdkafka's queue (a blocking wait on it, no polling interval)
        for m in self.consumer.consume(1, timeout):
            err = m.error()
            if err is not None:
                raise RuntimeError(f"kafka-tail: consume error: {err}")
            out.append(m.value())
        return out

    def close(self) -> None:
        self.consumer.close()


class _KafkaPythonTail:
    """kafka-python's KafkaConsumer assigned at the log end of partition 0."""

    def __init__(self, bootstrap: str, topic: str, fetch_wait_ms: int, errors: list) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      fetch_max_wait_ms=fetch_wait_ms, fetch_min_bytes=1,
                                      request_timeout_ms=max(30_000, fetch_wait_ms + 5_000))
        tp = TopicPartition(topic, 0)
        self.consumer.assign([tp])
        self.consumer.seek_to_end(tp)
        self.consumer.position(tp)  # resolved now, before the first record is produced

    def poll(self, timeout: float) -> list[bytes]:
        batches = self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=100)
        return [r.value for recs in batches.values() for r in recs]

    def close(self) -> None:
        self.consumer.close()


def run_tail(args: argparse.Namespace) -> int:
    r = bench_tail(args.samples, args.warmup, args.record_bytes, args.client, args.fetch_wait_ms, args.gap_ms,
                   args.flush, args.timeout)
    lat = r["latencies_ms"]
    n = len(lat)
    _wrapped(f"kafka-tail ({args.client} consumer, librdkafka producer; flush={args.flush}): {n:,} samples (after "
             f"{args.warmup} warm-up) of one {args.record_bytes}-byte record; producer linger.ms=0 acks=1; consumer "
             f"fetch.wait.max.ms={args.fetch_wait_ms} fetch.min.bytes=1"
             + (" fetch.queue.backoff.ms=10" if args.client == "confluent" else "")
             + f"; {args.gap_ms:g} ms pause before each produce")
    if n:
        def pct(q: float) -> float:
            return lat[min(n - 1, int(q * n))]

        print(f"  produce()→consumer latency: p50 {pct(0.50):.3f} ms, p90 {pct(0.90):.3f} ms, p99 {pct(0.99):.3f} ms,"
              f" max {lat[-1]:.3f} ms, mean {sum(lat) / n:.3f} ms")
    print(f"  late (≥ {0.8 * args.fetch_wait_ms:g} ms: answered by the fetch's timer, a missed wake-up): "
          f"{r['late']}; missed (not received within {args.timeout:g} s): {r['missed']}")
    per = r["records"]
    requests = ", ".join(f"{name} {n / per:.2f}" for name, n in sorted(r["counters"].items())
                         if name not in ("bytes_in", "bytes_out") and n / per >= 0.005)
    print(f"  gateway CPU {r['gateway_cpu']:.2f} s ({r['gateway_cpu'] / per * 1e3:.2f} ms per record); "
          f"Kafka requests per record: {requests or 'n/a'}")
    print(f"  gateway RSS {r['rss_start']:.1f} MiB before, {r['rss_end']:.1f} MiB after")
    return 0


_GATEWAY = " (gateway in a subprocess)"
BENCHMARKS = [
    Benchmark("kafka-produce", "Kafka produce throughput, idempotent vs transactional (librdkafka)", arguments, run),
    Benchmark("kafka-throughput", "Kafka produce then consume 1 M x 100 B with librdkafka, records/s each way"
              + _GATEWAY, throughput_arguments, run_throughput),
    Benchmark("kafka-tail", "Kafka tailing consumer: produce→consume latency of long-poll fetches" + _GATEWAY,
              tail_arguments, run_tail),
]
