"""`logway bench kafka-failover` (issue 36): what a gateway's death costs Kafka clients of a cluster over one
PostgreSQL database (`storage.postgres.cluster`).

Two gateways (`Gateways`, cluster mode, `--lease-ms`) over a fresh database — of a throwaway PostgreSQL server of its
own (Debian's, `logway.bench.postgres`) or, with `--dsn`, a fresh schema of that database — and a topic of
`--partitions` partitions, each gateway leading some. An idempotent librdkafka producer (acks=all, bootstrapped with
both gateways, librdkafka's default retries, `message.timeout.ms` long enough to outlive the failover) produces
`--rate` records of `--record-bytes` bytes a second round-robin over the partitions, from a thread of its own. After
`--warmup` seconds the first gateway — member 0: the controller and group coordinator, and half the leaders — is
killed with SIGKILL; the clock starts then. Measured from the kill:

- **leaders**: until the survivor's Kafka metadata (a Metadata request every `POLL_SECONDS`) shows a live leader
  for every partition — the survivor, the only live member — which the lease bounds: the dead member's slots are
  taken once its lease passed (`storage.postgres.lease_ms`; the survivor ticks every third of it);
- **acks**: until the first acknowledgement of a record produced after the kill (its CreateTime, set by produce(),
  later than the kill) on a partition the dead gateway led — the producer going on there — and until every such
  partition has had one: what the client sees, the lease plus librdkafka's time to notice the dead connection, ask
  for metadata again and send its retries to the new leader. (Answers the dead gateway sent just before the kill
  may be delivered after it; records produced before the kill do not count, so they do not pass for a recovery.)

The load goes on for `--after` seconds more, then the producer flushes. Every record must have been acknowledged,
no error reported, and the partitions' high-water marks must sum to the records produced (no loss, no duplicate);
otherwise the run fails. `--runs` repeats it on fresh gateways and databases.

A subcommand of its own rather than a phase of `kafka-throughput`: it measures time to recover under a steady,
bounded load (not a saturating one, whose backlog would blur the moment acknowledgements resume), kills a gateway
(which the throughput runs must not), and its figure follows `--lease-ms`, a knob the throughput runs leave alone.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from .gateways import Database, Gateways, metadata, postgres_server
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_failover"]

#: How often the survivor's metadata is asked for after the kill: the resolution of the leaders' figure.
POLL_SECONDS = 0.01
#: How often the producing thread produces its share of the rate (and serves librdkafka's callbacks): the
#: resolution of the acknowledgements' figures.
TICK_SECONDS = 0.01


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic (spread over both)")
    parser.add_argument("--rate", type=int, default=20_000, help="records produced per second")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--lease-ms", type=int, default=3000,
                        help="the gateways' storage.postgres.lease_ms (3000 is its default)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before the kill")
    parser.add_argument("--after", type=float, default=2.0,
                        help="seconds of load after every partition is acknowledged again")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds the failover may take at most")
    parser.add_argument("--producer-set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra librdkafka producer setting (repeatable), e.g. "
                             "topic.metadata.refresh.interval.ms=500")
    parser.add_argument("--runs", type=int, default=1, help="repeat on fresh gateways and report each run")
    parser.add_argument("--dsn", default="",
                        help="a database to use (a fresh schema per run, dropped after); empty: a throwaway "
                             "PostgreSQL server of its own")


def bench_failover(partitions: int = 8, rate: int = 20_000, record_bytes: int = 100, lease_ms: int = 3000,
                   warmup: float = 3.0, after: float = 2.0, timeout: float = 60.0,
                   settings: tuple[str, ...] = (), producer_extra: dict | None = None) -> dict:
    """One failover on gateways with `settings` (the database's), the producer's librdkafka settings updated with
    `producer_extra`. Returns {"leaders": seconds from the kill until
    every partition had a live leader, "first_ack" / "all_acked": until the first acknowledgement of a record
    produced after the kill on a partition the dead gateway led / until each of them had one, "led": those
    partitions, "records": produced and acknowledged, "before": of them, acknowledged before the kill, "notices":
    the client's non-fatal errors (its connections to the dead gateway refused)}. Raises on a lost, failed or
    duplicated record."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    if partitions < 2:
        raise SystemExit("logway bench kafka-failover: --partitions must be 2 or more, so that both gateways lead")
    topic = "failover"
    payload = os.urandom(record_bytes)
    with tempfile.TemporaryDirectory(prefix="logway-bench-failover-") as tmp:
        gws = Gateways(tmp, 2, "log_level=ERROR", *settings, lease_ms=lease_ms)
        try:
            victim, survivor = gws.members
            gws.admin(0).create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
            led_by = gws.settle(topic, partitions)
            dead_node, live = gws.node_id(0), gws.node_id(1)
            led = [p for p, node in enumerate(led_by) if node == dead_node]

            # each partition's first acknowledgement (monotonic) of a record produced after the kill (wall clock, ms)
            resumed: list[float | None] = [None] * partitions
            killed_ms = [float("inf")]
            counts = {"acked": 0, "produced": 0}
            errors: list = []  # failed deliveries, and fatal client errors
            notices: list = []  # the others librdkafka reports (the dead gateway's refused connections)

            def on_error(err) -> None:
                (errors if err.fatal() else notices).append(err)

            def delivered(err, msg) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    counts["acked"] += 1
                    if resumed[msg.partition()] is None and msg.timestamp()[1] > killed_ms[0]:
                        resumed[msg.partition()] = time.monotonic()

            producer = Producer({"bootstrap.servers": gws.bootstrap, "enable.idempotence": True, "acks": "all",
                                 "linger.ms": 5, "message.timeout.ms": int(timeout * 1000) + 30_000,
                                 "on_delivery": delivered, "error_cb": on_error, "log_level": 2,
                                 "log.connection.close": False,  # (the dead gateway's connections: notices)
                                 **(producer_extra or {})})
            stop = threading.Event()

            def load() -> None:
                per_tick, i, start = rate * TICK_SECONDS, 0, time.monotonic()
                while not stop.is_set():
                    due = int((time.monotonic() - start) / TICK_SECONDS * per_tick)
                    while i < due:
                        producer.produce(topic, payload, None, i % partitions)
                        i += 1
                    counts["produced"] = i
                    producer.poll(TICK_SECONDS)

            loader = threading.Thread(target=load, name="failover-producer")
            loader.start()
            try:
                time.sleep(warmup)  # a benchmark's steady state before the kill, not a wait for an event
                before = counts["acked"]
                if not before:
                    raise RuntimeError("kafka-failover: nothing acknowledged before the kill")
                killed, killed_ms[0] = time.monotonic(), time.time() * 1000
                victim.kill()
                leaders_at = None
                while leaders_at is None:
                    _, found = metadata(gws.admin(1), topic, partitions)
                    if all(node == live for node in found):
                        leaders_at = time.monotonic()
                    elif time.monotonic() - killed > timeout:
                        raise RuntimeError(f"kafka-failover: partitions without a live leader after {timeout:g} s: "
                                           f"{found}")
                    else:
                        time.sleep(POLL_SECONDS)
                while any(resumed[p] is None for p in led):
                    if time.monotonic() - killed > timeout:
                        raise RuntimeError(f"kafka-failover: partitions {[p for p in led if resumed[p] is None]} "
                                           f"not acknowledged again within {timeout:g} s")
                    time.sleep(TICK_SECONDS)
                first_ack = min(resumed[p] for p in led) - killed
                all_acked = max(resumed[p] for p in led) - killed
                time.sleep(after)
            finally:
                stop.set()
                loader.join(timeout)
            left = producer.flush(timeout)
            producer = None  # destroyed before the survivor stops (no reconnect attempts logged)
            if left or errors:
                raise RuntimeError(f"kafka-failover: {left} records unacknowledged, {len(errors)} errors"
                                   + (f", the first: {errors[0]}" if errors else ""))
            reader = Consumer({"bootstrap.servers": "%s:%d" % survivor.addresses["kafka"], "group.id": "check",
                               "log_level": 2})
            stored = sum(reader.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions))
            reader.close()
            if not counts["acked"] == counts["produced"] == stored:
                raise RuntimeError(f"kafka-failover: {counts['produced']} records produced, {counts['acked']} "
                                   f"acknowledged, {stored} stored")
        finally:
            gws.stop()
    return {"leaders": leaders_at - killed, "first_ack": first_ack, "all_acked": all_acked, "led": led,
            "records": counts["acked"], "before": before, "notices": len(notices)}


def run(args: argparse.Namespace) -> int:
    import textwrap

    from .kafka import key_values

    extra = key_values(args.producer_set)
    print(textwrap.fill(
        f"kafka-failover: 2 gateways (storage.postgres.cluster, lease_ms={args.lease_ms}) over one PostgreSQL, "
        f"{args.partitions} partitions; an idempotent librdkafka producer (acks=all) at {args.rate:,} records/s of "
        f"{args.record_bytes} B; member 0 (the coordinator, half the leaders) killed with SIGKILL after "
        f"{args.warmup:g} s" + "".join(f"; producer {k}={v}" for k, v in extra.items()), 118,
        subsequent_indent="    "))
    with postgres_server(not args.dsn) as server:
        for run_no in range(args.runs):
            with Database("postgres", args.dsn, server, run_no) as (settings, _):
                r = bench_failover(args.partitions, args.rate, args.record_bytes, args.lease_ms, args.warmup,
                                   args.after, args.timeout, settings, extra)
            print(f"  run {run_no + 1}: every partition led again after {r['leaders']:.2f} s; acknowledgements on "
                  f"the dead gateway's {len(r['led'])} partitions resumed after {r['first_ack']:.2f} s (first) – "
                  f"{r['all_acked']:.2f} s (all); {r['records']:,} records acknowledged, none lost or duplicated")
    return 0


BENCHMARKS = [Benchmark("kafka-failover", "seconds until every partition has a live leader and a producer's "
                        "acknowledgements resume after a kill -9 of one of 2 gateways over one PostgreSQL",
                        arguments, run)]
