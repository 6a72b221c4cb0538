"""The crash-restart checker (`logway bench chaos`, tests/e2e/test_chaos.py): a real gateway killed with SIGKILL at
random moments while producers of every protocol and a Kafka consumer group run against it, restarted on the
same data directory, and checked after every restart.

One cycle: start `logway serve` (`storage.flush=always` unless `ChaosConfig.flush` says otherwise, ephemeral
ports) on the data directory, start

- per partition of `chaos-native` (kafka format) a native producer: `Produce` answers carry the offsets;
- per partition of `chaos-tank` (tank format, created over TANK) a TANK producer (0x01 Produce): it is the only
  writer of its partition, so it learns the partition end from DiscoverPartitions when it starts and each
  acknowledged bundle of n messages holds the next n offsets;
- per partition of `chaos-kafka` (kafka format) an idempotent Kafka producer (`InitProducerId`, RecordBatches
  with producer id / epoch / sequence, acks=-1). It outlives the gateway: a batch whose answer was lost in the
  kill stays pending, and the next cycle first re-sends *the same bytes* (same sequence) to the new gateway;
- `consumers` members of the Kafka group `chaos-group` (JoinGroup v5 with the MEMBER_ID_REQUIRED handshake,
  SyncGroup with the leader's round-robin assignment of all partitions, Fetch, OffsetCommit with generation and
  member id, Heartbeat, re-join on REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID);

then sleep a random time in [min_run, max_run] and SIGKILL the gateway. SIGKILL keeps the page cache, so it
rarely tears a write; between the kill and the restart the checker therefore may (`torn_tail_probability`) cut
short the last batch of a partition when it is a batch that was in flight (never acknowledged: a crash in the
middle of its write, or a power loss before its fdatasync), and append a torn batch to the active segment of a
random partition and a torn record to the offset store. After the restart, before any client connects, it
checks:

1. every acknowledged record is present exactly once at its acknowledged offset (and records kept by an earlier
   recovery stay where they were); nothing in the log was never sent; no payload is stored twice;
2. each partition's offsets are contiguous and increasing from the log start (0: no retention) to the log end;
3. a batch in flight at the kill is all there (at consecutive offsets) or not at all; a pending idempotent
   Kafka batch found in the log must be answered with its original offset when replayed (not appended again),
   one not found must be appended at the log end; a replay may not be refused;
4. reads at random acknowledged offsets (native Fetch; TANK Consume for the TANK topic) start at that record
   (the indexes rebuilt by recovery point at the right batches); InitProducerId never returns an id twice;
5. committed group offsets are never below the last acknowledged commit, nor past the log end; during the run an
   acknowledged commit never moves a partition's committed offset backwards; records a consumer read at an
   offset are still there (a process crash keeps the page cache, so what was readable survives);
6. recovery reports the unclean shutdown ("the previous run did not shut down cleanly"), and at least the bytes
   the checker tore off, per partition ("recovery of T-P truncated N bytes …") and for the offset store
   ("offset store …: dropped N bytes"); after the final graceful stop a restart is clean and truncates nothing.

`ChaosRun(ChaosConfig(...)).run()` returns a `ChaosReport` (per-cycle `CycleSummary`s, totals, violations);
`ChaosReport.raise_for_violations()` raises `ChaosViolation`. `verify_partition` is the pure check of one
partition's records against the `Ledger` of what the clients were told.

The checker is a client of the gateway in another process: it speaks every protocol through the blocking clients
of `logway.clients` (no Kafka library), and only `logway bench` and the tests import it. Its own numbers come
from `random.Random(seed)`: the run lengths and the decision to tear are the same for a seed; what is torn
depends on where the clients were when the kill came.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from logway.clients.errors import GatewayUnavailable, KafkaError, NativeError, TankError
from logway.clients.kafka import EARLIEST, LATEST, KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import KafkaFormat, decode_batch, decode_records, encode_batch
from logway.codecs.records import Record
from logway.codecs.tank import TankFormat, decode_bundle, decode_varint, encode_bundle, wrap

from .launcher import GatewayProcess
from .registry import Benchmark

__all__ = ["BENCHMARKS", "ChaosConfig", "ChaosRun", "ChaosReport", "CycleSummary", "ChaosViolation", "Ledger",
           "verify_partition", "read_partition", "PROTOCOLS", "TOPICS", "GROUP"]

PROTOCOLS = ("native", "tank", "kafka")
TOPICS = {"native": "chaos-native", "tank": "chaos-tank", "kafka": "chaos-kafka"}
GROUP = "chaos-group"
#: Errors that mean "the gateway went away" (the kill), as opposed to an answer the gateway should not give.
_GONE = (OSError, ConnectionError, RemoteProtocolError, GatewayUnavailable)
#: Group errors after which a member joins again.
_REJOIN = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
#: Fetch sizes: the checker's full reads after a restart, a group member's reads.
_READ_BYTES = 4 * 1024 * 1024
_CONSUMER_FETCH_BYTES = 256 * 1024
_RECOVERY_RE = re.compile(r"recovery of (?P<topic>.+)-(?P<partition>\d+) truncated (?P<bytes>\d+) bytes "
                          r"and dropped (?P<segments>\d+) segment")
_OFFSETS_RE = re.compile(r"offset store .*: dropped (?P<bytes>\d+) bytes")
_UNCLEAN = "the previous run did not shut down cleanly"


class ChaosViolation(AssertionError):
    """A crash-safety promise was broken; the message lists every violation found."""


@dataclass(slots=True)
class ChaosConfig:
    cycles: int = 50
    seed: int = 1
    min_run: float = 0.3  # seconds the clients run before the kill (uniformly random in [min_run, max_run])
    max_run: float = 1.5
    partitions: int = 2  # per topic; one producer per partition
    consumers: int = 2  # members of the Kafka group
    max_batch: int = 8  # records per produce request (1..max_batch)
    max_padding: int = 200  # random bytes added to each payload, so segments fill and roll
    pause: float = 0.002  # seconds between a producer's requests (bounds the log the checker re-reads)
    segment_bytes: int = 64 * 1024  # small segments: rolls happen during the run
    torn_tail_probability: float = 0.3  # per restart: tear a partition's tail and the offset store's
    data_dir: str | None = None  # None: a temporary directory, removed afterwards
    join_timeout: float = 15.0  # seconds to wait for client threads after a kill
    flush: str = "always"  # the gateway's storage.flush
    flush_interval_ms: int = 1000  # its storage.flush_interval_ms (with flush: interval)
    log: Callable[[str], None] | None = print


@dataclass(slots=True)
class CycleSummary:
    cycle: int
    run_seconds: float = 0.0
    acked: dict = field(default_factory=lambda: {p: 0 for p in PROTOCOLS})  # records acknowledged this cycle
    commits: int = 0  # acknowledged OffsetCommits this cycle
    consumed: int = 0  # records read by the group this cycle
    in_flight_kept: int = 0  # unacknowledged batches found whole in the log after the restart
    in_flight_lost: int = 0  # ... and not found at all
    in_flight_torn: int = 0  # in-flight batches the checker cut short on disk (so recovery must drop them)
    replays_deduplicated: int = 0  # pending idempotent batches found in the log (the replay must not append)
    replays_appended: int = 0  # pending idempotent batches not in the log (the replay appends them)
    injected: dict = field(default_factory=dict)  # "topic-p" or "offsets" -> bytes of torn tail the checker added
    recovery: list = field(default_factory=list)  # the gateway's recovery report lines after the restart
    truncated_bytes: int = 0  # bytes the recovery of the partitions reported
    offsets_dropped: int = 0  # bytes the offset store's recovery reported
    unclean_reported: bool = False
    log_end: dict = field(default_factory=dict)  # (topic, partition) -> log end offset after the restart
    violations: list = field(default_factory=list)

    def line(self) -> str:
        acked = " ".join(f"{p}={self.acked[p]}" for p in PROTOCOLS)
        injected = ", ".join(f"{k} +{v} B" for k, v in sorted(self.injected.items())) or "none"
        return (f"cycle {self.cycle:3d}: ran {self.run_seconds:.2f} s, acked {acked}, commits {self.commits}, "
                f"consumed {self.consumed}; in flight kept/lost {self.in_flight_kept}/{self.in_flight_lost} "
                f"(torn {self.in_flight_torn}), "
                f"idempotent replays dedup/append {self.replays_deduplicated}/{self.replays_appended}; "
                f"torn tails injected: {injected}; recovery: {self.truncated_bytes} B from partitions, "
                f"{self.offsets_dropped} B from offsets"
                + (f"; VIOLATIONS: {len(self.violations)}" if self.violations else ""))


@dataclass(slots=True)
class ChaosReport:
    cycles: list = field(default_factory=list)  # CycleSummary, one per restart after a kill
    final: CycleSummary | None = None  # the check after the last graceful stop
    seconds: float = 0.0

    @property
    def violations(self) -> list[str]:
        out = [v for c in self.cycles for v in c.violations]
        return out + (self.final.violations if self.final else [])

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.cycles)

    @property
    def acked(self) -> dict[str, int]:
        return {p: sum(c.acked[p] for c in self.cycles) for p in PROTOCOLS}

    def raise_for_violations(self) -> None:
        if self.violations:
            raise ChaosViolation(f"{len(self.violations)} crash-safety violation(s):\n  "
                                 + "\n  ".join(self.violations[:50]))

    def figures(self) -> list[str]:
        acked = self.acked
        injected = sum(sum(c.injected.values()) for c in self.cycles)
        return [
            f"chaos: {len(self.cycles)} kill -9 / restart cycles in {self.seconds:.1f} s",
            f"  records acknowledged: {sum(acked.values()):,} (native {acked['native']:,}, tank {acked['tank']:,}, "
            f"kafka idempotent {acked['kafka']:,}); group commits acknowledged: {self.total('commits'):,}; "
            f"records consumed by the group: {self.total('consumed'):,}",
            f"  in-flight batches at the kills: {self.total('in_flight_kept')} kept whole, "
            f"{self.total('in_flight_lost')} absent ({self.total('in_flight_torn')} torn by the checker); "
            f"idempotent replays: {self.total('replays_deduplicated')} answered with their original offset, "
            f"{self.total('replays_appended')} appended",
            f"  recovery truncated {self.total('truncated_bytes'):,} bytes of partition logs and "
            f"{self.total('offsets_dropped'):,} bytes of the offset store (torn tails injected: {injected:,} bytes); "
            f"unclean start reported after {sum(c.unclean_reported for c in self.cycles)}/{len(self.cycles)} kills",
            f"  violations: {len(self.violations)}",
        ]


# ------------------------------------------------------------------------------------------------ the ledger
@dataclass(slots=True)
class InFlight:
    """A produce request sent but not answered when the gateway died."""

    protocol: str
    tp: tuple[str, int]
    payloads: list[bytes]


class Ledger:
    """What the clients were told, shared by every client thread (all methods take the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: set[bytes] = set()  # every payload ever put in a request
        self.acked: dict[tuple[str, int], dict[int, bytes]] = {}  # acknowledged (or kept by recovery): must stay
        self.acked_at: dict[tuple[str, int], dict[int, float]] = {}  # when each was acknowledged (monotonic)
        self.observed: dict[tuple[str, int], dict[int, bytes]] = {}  # read by a group member
        self.in_flight: dict[object, InFlight] = {}  # per producer: its unanswered request
        self.commits: dict[tuple[str, int], int] = {}  # last acknowledged committed offset
        self.commit_times: dict[tuple[str, int], list[tuple[float, int]]] = {}  # (monotonic time, offset) each
        self.producer_ids: set[int] = set()  # every id InitProducerId returned
        self.violations: list[str] = []
        self.acked_count = {p: 0 for p in PROTOCOLS}
        self.commit_count = 0
        self.consumed_count = 0

    def violation(self, message: str) -> None:
        with self.lock:
            self.violations.append(message)

    def sending(self, producer: object, protocol: str, tp: tuple[str, int], payloads: list[bytes]) -> None:
        with self.lock:
            self.sent.update(payloads)
            self.in_flight[producer] = InFlight(protocol, tp, payloads)

    def ack(self, producer: object, protocol: str, tp: tuple[str, int], offsets: list[int],
            payloads: list[bytes]) -> None:
        problems = []
        now = time.monotonic()
        with self.lock:
            self.in_flight.pop(producer, None)
            acked = self.acked.setdefault(tp, {})
            acked_at = self.acked_at.setdefault(tp, {})
            for off, payload in zip(offsets, payloads):
                old = acked.get(off)
                if old is not None and old != payload:
                    problems.append(f"{tp[0]}-{tp[1]}: offset {off} acknowledged twice ({old!r} and {payload!r})")
                acked[off] = payload
                acked_at[off] = now
            self.acked_count[protocol] += len(payloads)
            self.violations += problems

    def observe(self, tp: tuple[str, int], records: list[Record]) -> None:
        problems = []
        with self.lock:
            seen = self.observed.setdefault(tp, {})
            acked = self.acked.get(tp, {})
            for r in records:
                value = r.value or b""
                if r.offset in acked and acked[r.offset] != value:
                    problems.append(f"{tp[0]}-{tp[1]}: a consumer read {value!r} at offset {r.offset}, "
                                    f"acknowledged as {acked[r.offset]!r}")
                seen[r.offset] = value
            self.consumed_count += len(records)
            self.violations += problems

    def producer_id(self, pid: int) -> None:
        with self.lock:
            if pid in self.producer_ids:
                self.violations.append(f"InitProducerId returned producer id {pid} a second time")
            self.producer_ids.add(pid)

    def committed(self, tp: tuple[str, int], offset: int) -> None:
        with self.lock:
            last = self.commits.get(tp, -1)
            if offset < last:
                self.violations.append(f"{tp[0]}-{tp[1]}: an acknowledged commit moved the group's offset "
                                       f"backwards from {last} to {offset}")
            self.commits[tp] = max(last, offset)
            self.commit_times.setdefault(tp, []).append((time.monotonic(), offset))
            self.commit_count += 1


def verify_partition(ledger: Ledger, tp: tuple[str, int], log_start: int, log_end: int,
                     records: list[tuple[int, bytes]]) -> list[str]:
    """Check one partition as read after a restart (`records`: (offset, payload) from log_start to the end).

    Checks 1 and 2 of the module docstring and the consumers' observations; in-flight batches, replays and
    commits are checked by `ChaosRun.verify`. Returns the violations (empty when all is well).
    """
    name = f"{tp[0]}-{tp[1]}"
    out = []
    if log_start != 0:
        out.append(f"{name}: log start offset is {log_start}, not 0 (nothing may be deleted: no retention)")
    offsets = [o for o, _ in records]
    if offsets != list(range(log_start, log_start + len(offsets))):
        bad = next((i for i, o in enumerate(offsets) if o != log_start + i), len(offsets))
        out.append(f"{name}: offsets are not contiguous and increasing from {log_start}: "
                   f"position {bad} holds offset {offsets[bad] if bad < len(offsets) else None}")
    if log_start + len(records) != log_end:
        out.append(f"{name}: read {len(records)} records from {log_start} but the log end offset is {log_end}")
    by_offset = dict(records)
    seen: dict[bytes, int] = {}
    for off, payload in records:
        if payload in seen:
            out.append(f"{name}: payload {payload[:40]!r} stored twice, at offsets {seen[payload]} and {off}")
        seen[payload] = off
    with ledger.lock:
        unknown = [(o, p) for o, p in records if p not in ledger.sent]
        acked = dict(ledger.acked.get(tp, {}))
        observed = dict(ledger.observed.get(tp, {}))
    for off, payload in unknown[:5]:
        out.append(f"{name}: offset {off} holds {payload[:40]!r}, which no producer sent")
    missing = [(o, p) for o, p in sorted(acked.items()) if by_offset.get(o) != p]
    for off, payload in missing[:5]:
        where = seen.get(payload)
        out.append(f"{name}: acknowledged record {payload[:40]!r} at offset {off} is "
                   + ("missing" if where is None else f"at offset {where} instead"))
    if len(missing) > 5:
        out.append(f"{name}: ... {len(missing) - 5} more acknowledged records missing or moved")
    gone = [(o, p) for o, p in sorted(observed.items()) if by_offset.get(o) != p]
    for off, payload in gone[:3]:
        out.append(f"{name}: a consumer read {payload[:40]!r} at offset {off}; after the restart it is gone")
    return out


def read_partition(client: KafkaClient, tp: tuple[str, int],
                   problems: list[str]) -> tuple[int, int, list[tuple[int, bytes]]]:
    """(log start, log end, [(offset, payload)]) of a whole partition, read over Kafka (ListOffsets, Fetch)."""
    start = client.list_offsets({tp: EARLIEST})[tp]
    end = client.list_offsets({tp: LATEST})[tp]
    records: list[tuple[int, bytes]] = []
    offset = start
    while offset < end:
        got = decode_records(client.fetch(tp[0], tp[1], offset, _READ_BYTES).records, min_offset=offset)
        if not got:
            problems.append(f"{tp[0]}-{tp[1]}: a fetch at offset {offset} returned nothing before the log end {end}")
            break
        records += [(r.offset, r.value or b"") for r in got]
        offset = got[-1].offset + 1
    return start, end, records


# -------------------------------------------------------------------------------------------- the clients
class _Producer:
    """Common loop: numbered payloads, one request in flight, stop on the kill."""

    protocol = ""

    def __init__(self, run: "ChaosRun", partition: int, index: int) -> None:
        self.run = run
        self.tp = (TOPICS[self.protocol], partition)
        self.index = index
        self.rnd = random.Random(f"{run.config.seed}-{self.protocol}-{partition}")
        self.count = 0

    def payloads(self, cycle: int) -> list[bytes]:
        cfg = self.run.config
        n = self.rnd.randint(1, cfg.max_batch)
        out = []
        for _ in range(n):
            head = f"{self.protocol}:{self.tp[1]}:{cycle}:{self.count}:".encode()
            out.append(head + b"." * self.rnd.randint(0, cfg.max_padding))
            self.count += 1
        return out

    def main(self, gw: GatewayProcess, stop: threading.Event, cycle: int) -> None:
        try:
            self.produce_loop(gw, stop, cycle)
        except _GONE:
            pass  # the gateway was killed under us: the request in flight stays in the ledger's in_flight
        except Exception as exc:  # an answer no correct gateway gives, or a bug in the checker: report it
            self.run.ledger.violation(f"{self.protocol} producer {self.tp}: {type(exc).__name__}: {exc}")

    def produce_loop(self, gw: GatewayProcess, stop: threading.Event, cycle: int) -> None:
        raise NotImplementedError


class _NativeProducer(_Producer):
    protocol = "native"

    def produce_loop(self, gw, stop, cycle):
        ledger, pause = self.run.ledger, self.run.config.pause
        with NativeClient(*gw.addresses["native"], timeout=10) as client:
            while not stop.is_set():
                payloads = self.payloads(cycle)
                ledger.sending(self, "native", self.tp, payloads)
                try:
                    offsets = client.produce(self.tp[0], self.tp[1], payloads)
                except NativeError as exc:
                    ledger.violation(f"native produce to {self.tp} refused: {exc.message}")
                    return
                if len(offsets) != len(payloads) or offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                    ledger.violation(f"native produce to {self.tp}: offsets {offsets} for {len(payloads)} records")
                ledger.ack(self, "native", self.tp, offsets, payloads)
                time.sleep(pause)


class _TankProducer(_Producer):
    protocol = "tank"

    def produce_loop(self, gw, stop, cycle):
        ledger, pause = self.run.ledger, self.run.config.pause
        topic, partition = self.tp
        with TankClient(*gw.addresses["tank"], timeout=10) as client:
            bounds = client.discover_partitions(topic, [partition])
            next_offset = bounds[0].high_water_mark  # the last assigned seq = offset + 1 = the log end
            while not stop.is_set():
                payloads = self.payloads(cycle)
                ledger.sending(self, "tank", self.tp, payloads)
                err = client.produce(topic, partition, payloads)
                if err != 0:
                    ledger.violation(f"TANK produce to {self.tp} refused with error {err:#x}")
                    return
                n = len(payloads)
                ledger.ack(self, "tank", self.tp, list(range(next_offset, next_offset + n)), payloads)
                next_offset += n
                time.sleep(pause)


class _KafkaProducer(_Producer):
    """An idempotent producer that outlives the gateway: its producer id, next sequence and pending batch
    survive the kill, and the pending batch is re-sent unchanged to the restarted gateway."""

    protocol = "kafka"

    def __init__(self, run, partition, index):
        super().__init__(run, partition, index)
        self.producer_id: int | None = None
        self.epoch = 0
        self.sequence = 0
        self.pending: tuple[bytes, list[bytes]] | None = None  # (batch bytes, payloads) awaiting an answer
        self.expected_replay: int | None = None  # set by verify: the pending batch's offset in the log, if there
        self.replay_checked = True

    def produce_loop(self, gw, stop, cycle):
        ledger, pause = self.run.ledger, self.run.config.pause
        host, port = gw.addresses["kafka"]
        config = KafkaConfig(host, port, client_id=f"chaos-producer-{self.tp[1]}", connect_timeout=5,
                              timeout=10, retries=0)
        with KafkaClient(config) as client:
            if self.producer_id is None:
                self.producer_id, self.epoch = client.init_producer_id()
                ledger.producer_id(self.producer_id)
            else:  # a producer that starts now must get an id never handed out before, restarts or not
                ledger.producer_id(client.init_producer_id()[0])
            while not stop.is_set():
                if self.pending is None:
                    payloads = self.payloads(cycle)
                    batch = encode_batch([Record(p) for p in payloads], default_timestamp=int(time.time() * 1000),
                                         producer_id=self.producer_id, producer_epoch=self.epoch,
                                         base_sequence=self.sequence)
                    self.pending = (batch, payloads)
                    self.replay_checked = True  # a fresh batch: nothing to compare its answer with
                batch, payloads = self.pending
                ledger.sending(self, "kafka", self.tp, payloads)  # fresh or replayed: in flight until answered
                try:
                    base = client.produce(self.tp[0], self.tp[1], batch, acks=-1)
                except KafkaError as exc:
                    ledger.violation(f"idempotent produce to {self.tp} (sequence {self.sequence}) refused: {exc}")
                    return
                if base < 0:
                    ledger.violation(f"idempotent produce to {self.tp} (sequence {self.sequence}) answered without "
                                     f"an offset (DUPLICATE_SEQUENCE_NUMBER for the batch in flight)")
                    return
                if not self.replay_checked:  # the first answer to a batch re-sent after a restart
                    self.replay_checked = True
                    if self.expected_replay is not None and base != self.expected_replay:
                        ledger.violation(f"{self.tp}: replayed idempotent batch (sequence {self.sequence}) was in "
                                         f"the log at offset {self.expected_replay} but was answered with offset "
                                         f"{base} (appended twice)")
                    elif self.expected_replay is None and base < self.run.log_end_at_restart.get(self.tp, 0):
                        ledger.violation(f"{self.tp}: replayed idempotent batch (sequence {self.sequence}) was not "
                                         f"in the log but was answered with the old offset {base}")
                self.pending = None
                self.sequence += len(payloads)
                ledger.ack(self, "kafka", self.tp, list(range(base, base + len(payloads))), payloads)
                time.sleep(pause)


class _GroupConsumer:
    """A member of `GROUP`: join, sync (the leader assigns round-robin), fetch, commit, heartbeat."""

    def __init__(self, run: "ChaosRun", index: int) -> None:
        self.run = run
        self.index = index

    def main(self, gw: GatewayProcess, stop: threading.Event) -> None:
        host, port = gw.addresses["kafka"]
        config = KafkaConfig(host, port, client_id=f"chaos-consumer-{self.index}", connect_timeout=5,
                              timeout=15, retries=0)
        try:
            with KafkaClient(config) as client:
                member_id = ""
                while not stop.is_set():
                    member_id, generation, assignment = self._join(client, member_id)
                    if generation is not None:
                        self._consume(client, stop, member_id, generation, assignment)
        except _GONE:
            pass
        except Exception as exc:
            self.run.ledger.violation(f"group consumer {self.index}: {type(exc).__name__}: {exc}")

    def _join(self, client: KafkaClient, member_id: str):
        topics = sorted(TOPICS.values())
        meta = json.dumps(topics).encode()
        while True:
            resp = client.request(G.JOIN_GROUP_KEY, 5, G.JoinGroupRequest(
                group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=5000, member_id=member_id,
                group_instance_id=None, protocol_type="consumer",
                protocols=[G.JoinGroupRequestProtocol(name="chaos-roundrobin", metadata=meta)]))
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                member_id = resp.member_id
                continue
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                member_id = ""
                continue
            if resp.error_code != ErrorCode.NONE:
                raise KafkaError(resp.error_code, operation="join group")
            break
        member_id, generation = resp.member_id, resp.generation_id
        assignments = []
        if resp.leader == member_id:
            members = sorted(m.member_id for m in resp.members)
            parts = [(t, p) for t in topics for p in range(self.run.config.partitions)]
            for i, m in enumerate(members):
                mine = parts[i::len(members)]
                assignments.append(G.SyncGroupRequestAssignment(member_id=m, assignment=json.dumps(mine).encode()))
        sync = client.request(G.SYNC_GROUP_KEY, 3, G.SyncGroupRequest(
            group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=None,
            assignments=assignments))
        if sync.error_code in _REJOIN:
            return (member_id if sync.error_code != ErrorCode.UNKNOWN_MEMBER_ID else ""), None, []
        if sync.error_code != ErrorCode.NONE:
            raise KafkaError(sync.error_code, operation="sync group")
        assignment = [tuple(x) for x in json.loads(sync.assignment)] if sync.assignment else []
        return member_id, generation, assignment

    def _consume(self, client, stop, member_id: str, generation: int, assignment: list) -> None:
        ledger = self.run.ledger
        positions = self._committed(client, assignment)
        last_beat = time.monotonic()
        while not stop.is_set():
            advanced = {}
            for tp in assignment:
                pos = positions[tp]
                try:
                    result = client.fetch(tp[0], tp[1], pos, _CONSUMER_FETCH_BYTES)
                except KafkaError as exc:
                    if not (self.run.lossy and exc.code == ErrorCode.OFFSET_OUT_OF_RANGE):
                        raise
                    # A flush policy that may lose the last records after a power cut may also keep a commit
                    # past them: start again where the log ends now (auto.offset.reset=latest).
                    positions[tp] = client.list_offsets({tp: LATEST})[tp]
                    continue
                records = decode_records(result.records, min_offset=pos)
                if not records:
                    continue
                offsets = [r.offset for r in records]
                if offsets != list(range(pos, pos + len(records))):
                    ledger.violation(f"{tp[0]}-{tp[1]}: a fetch from offset {pos} returned offsets "
                                     f"{offsets[:5]}...: not contiguous")
                ledger.observe(tp, records)
                positions[tp] = advanced[tp] = records[-1].offset + 1
            if advanced:
                if not self._commit(client, member_id, generation, advanced):
                    return  # rebalance: join again
            elif time.monotonic() - last_beat < 0.3:
                time.sleep(0.01)
                continue
            beat = client.request(G.HEARTBEAT_KEY, 3, G.HeartbeatRequest(
                group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=None))
            last_beat = time.monotonic()
            if beat.error_code in _REJOIN:
                return
            if beat.error_code != ErrorCode.NONE:
                raise KafkaError(beat.error_code, operation="heartbeat")

    def _committed(self, client, assignment: list) -> dict:
        by_topic: dict[str, list[int]] = {}
        for t, p in assignment:
            by_topic.setdefault(t, []).append(p)
        resp = client.request(O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest(group_id=GROUP, topics=[
            O.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
        positions = {tp: 0 for tp in assignment}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(p.error_code, topic=t.name, partition=p.partition_index,
                                       operation="offset fetch")
                positions[(t.name, p.partition_index)] = max(p.committed_offset, 0)
        return positions

    def _commit(self, client, member_id: str, generation: int, advanced: dict) -> bool:
        by_topic: dict[str, list] = {}
        for (t, p), off in advanced.items():
            by_topic.setdefault(t, []).append(O.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""))
        resp = client.request(O.OFFSET_COMMIT_KEY, 7, O.OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
            topics=[O.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        ok = True
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE:
                    self.run.ledger.committed((t.name, p.partition_index), advanced[(t.name, p.partition_index)])
                elif p.error_code in _REJOIN:
                    ok = False
                else:
                    raise KafkaError(p.error_code, topic=t.name, partition=p.partition_index,
                                       operation="offset commit")
        return ok


# ------------------------------------------------------------------------------------------------- the run
class ChaosRun:
    """Runs the cycles (see the module docstring). Single use: `run()` once."""

    def __init__(self, config: ChaosConfig | None = None) -> None:
        self.config = config or ChaosConfig()
        self.rnd = random.Random(self.config.seed)  # run lengths and whether to tear: the same for a seed
        self.detail_rnd = random.Random(self.config.seed + 1)  # choices that depend on what the clients did
        self.ledger = Ledger()
        self._tmp: str | None = None
        self.data_dir = ""
        self.run_dir = ""
        self.incarnation = 0
        cfg = self.config
        self.producers: list[_Producer] = []
        for cls in (_NativeProducer, _TankProducer, _KafkaProducer):
            for p in range(cfg.partitions):
                self.producers.append(cls(self, p, len(self.producers)))
        self.consumers = [_GroupConsumer(self, i) for i in range(cfg.consumers)]
        self.log_end_at_restart: dict[tuple[str, int], int] = {}
        self.torn_in_flight = 0
        self._stderr_path = ""
        self.killed_at = 0.0  # monotonic time of the last kill

    @property
    def lossy(self) -> bool:
        """True when the flush policy promises nothing for a power cut (the checker forgives what it allows)."""
        return self.config.flush != "always"

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return [(TOPICS[p], i) for p in PROTOCOLS for i in range(self.config.partitions)]

    def _say(self, text: str) -> None:
        if self.config.log is not None:
            self.config.log(text)

    # -- gateway processes ---------------------------------------------------------------------------------
    def start_gateway(self) -> GatewayProcess:
        """A new gateway incarnation on the data directory; its stderr goes to a file read by `verify`."""
        self.incarnation += 1
        self._stderr_path = os.path.join(self.run_dir, f"gateway-{self.incarnation}.stderr")
        cfg = self.config
        with open(self._stderr_path, "wb") as err:
            return GatewayProcess(self.data_dir, f"storage.flush={cfg.flush}",
                                  f"storage.flush_interval_ms={cfg.flush_interval_ms}", "log_level=WARNING",
                                  run_dir=self.run_dir, stderr=err)

    def _create_topics(self, gw: GatewayProcess) -> None:
        cfg = self.config
        host, port = gw.addresses["kafka"]
        with KafkaClient(KafkaConfig(host, port, client_id="chaos-admin")) as client:
            for proto in ("native", "kafka"):
                client.create_topic(TOPICS[proto], cfg.partitions, configs={"segment.bytes": str(cfg.segment_bytes)})
        with TankClient(*gw.addresses["tank"]) as tank:
            err = tank.create_topic(TOPICS["tank"], cfg.partitions, {"log.segment.bytes": str(cfg.segment_bytes)})
            if err != 0:
                raise RuntimeError(f"TANK CreateTopic {TOPICS['tank']} failed with error {err}")

    # -- one cycle -----------------------------------------------------------------------------------------
    def run_clients_and_kill(self, gw: GatewayProcess, cycle: int, run_seconds: float) -> None:
        """Start every client, SIGKILL the gateway after `run_seconds`, wait for the clients to notice."""
        stop = threading.Event()
        threads = [threading.Thread(target=p.main, args=(gw, stop, cycle), name=f"chaos-{p.protocol}-{p.tp[1]}",
                                    daemon=True) for p in self.producers]
        threads += [threading.Thread(target=c.main, args=(gw, stop), name=f"chaos-consumer-{c.index}", daemon=True)
                    for c in self.consumers]
        for t in threads:
            t.start()
        time.sleep(run_seconds)
        gw.kill()
        self.killed_at = time.monotonic()
        stop.set()
        deadline = time.monotonic() + self.config.join_timeout
        for t in threads:
            t.join(max(deadline - time.monotonic(), 0.1))
            if t.is_alive():
                self.ledger.violation(f"client thread {t.name} still running {self.config.join_timeout} s after "
                                      f"the kill")

    def inject_torn_tails(self) -> dict[str, int]:
        """While the gateway is dead, each with probability `torn_tail_probability`: cut the last batch of a
        partition short when it is a batch that was in flight (never acknowledged: a crash in the middle of its
        write), and append a torn batch to one random partition's active segment and a torn record to the offset
        store. Returns {"topic-p" or "offsets": bytes of torn tail left for recovery to cut off}."""
        injected: dict[str, int] = {}
        if self.rnd.random() < self.config.torn_tail_probability:
            with self.ledger.lock:
                flights = sorted(self.ledger.in_flight.values(), key=lambda f: f.tp)
            for flight in self.detail_rnd.sample(flights, len(flights)):
                left = self._tear_last_batch(flight)
                if left:
                    injected[f"{flight.tp[0]}-{flight.tp[1]}"] = left
                    self.torn_in_flight += 1
                    break
        if self.rnd.random() < self.config.torn_tail_probability:
            # Not after a batch just torn: TANK bundles carry no checksum, so a torn bundle followed by more bytes
            # can read as whole (a crash leaves nothing after a torn write; recovery runs before any append).
            rnd = self.detail_rnd
            topic, partition = rnd.choice([tp for tp in self.partitions if f"{tp[0]}-{tp[1]}" not in injected])
            path = self._active_segment((topic, partition))
            recs = [Record(b"torn-%d" % i + b"." * rnd.randint(0, 100)) for i in range(rnd.randint(1, 5))]
            now = int(time.time() * 1000)
            if topic == TOPICS["tank"]:
                whole = wrap(encode_bundle(recs, default_timestamp=now))
            else:
                whole = encode_batch(recs, default_timestamp=now)
            torn = whole[:rnd.randint(1, len(whole) - 1)]  # a prefix of a valid batch is always incomplete
            with open(path, "ab") as f:
                f.write(torn)
            key = f"{topic}-{partition}"
            injected[key] = injected.get(key, 0) + len(torn)
            frame = struct.pack(">II", 64 + rnd.randint(0, 1000), 0) + b"\x01" * rnd.randint(0, 63)
            with open(os.path.join(self.data_dir, "offsets", "offsets.log"), "ab") as f:
                f.write(frame)  # a record whose length says more than what follows: torn
            injected["offsets"] = len(frame)
        return injected

    def _active_segment(self, tp: tuple[str, int]) -> str:
        pdir = os.path.join(self.data_dir, "topics", tp[0], str(tp[1]))
        return os.path.join(pdir, max(n for n in os.listdir(pdir) if n.endswith(".log")))

    def _tear_last_batch(self, flight: InFlight) -> int:
        """Truncate the active segment inside its last batch if that batch holds exactly `flight`'s records
        and no consumer read any of them (a batch still being written cannot be read); returns the bytes of the
        batch left on disk (0: not done)."""
        with self.ledger.lock:
            read = set(self.ledger.observed.get(flight.tp, {}).values())
        if read.intersection(flight.payloads):
            return 0
        path = self._active_segment(flight.tp)
        with open(path, "rb") as f:
            data = memoryview(f.read())
        tank = flight.tp[0] == TOPICS["tank"]
        fmt = TankFormat() if tank else KafkaFormat()
        pos, last = 0, None
        while pos < len(data):
            info = fmt.scan(data, pos)
            if info is None or pos + info[0] > len(data):
                return 0  # already torn (the kill interrupted a write): leave it to recovery as it is
            last = (pos, info[0])
            pos += info[0]
        if last is None:
            return 0
        start, size = last
        entry = data[start:start + size]
        if tank:
            _, p = decode_varint(entry, 0, size)
            records, _ = decode_bundle(entry[p:], 1)
        else:
            _, records = decode_batch(entry)
        if [r.value for r in records] != flight.payloads:
            return 0
        left = self.detail_rnd.randint(1, size - 1)
        os.truncate(path, start + left)
        return left

    def probe_reads(self, gw: GatewayProcess, per_partition: int = 3) -> list[str]:
        """Fetch at a few random acknowledged offsets of every partition, through the native protocol and, for
        the TANK topic, through TANK too: the first record returned must be the acknowledged one."""
        problems = []
        with self.ledger.lock:
            acked = {tp: list(self.ledger.acked.get(tp, {}).items()) for tp in self.partitions}
        with NativeClient(*gw.addresses["native"], timeout=30) as native, \
                TankClient(*gw.addresses["tank"], timeout=30) as tank:
            for tp in self.partitions:
                for off, payload in self.detail_rnd.sample(acked[tp], min(per_partition, len(acked[tp]))):
                    got = native.fetch(tp[0], tp[1], off, 1024).records
                    first = (got[0].offset, got[0].value) if got else None
                    if first != (off, payload):
                        problems.append(f"{tp[0]}-{tp[1]}: a native fetch at acknowledged offset {off} returned "
                                        f"{first} instead of {payload[:40]!r}")
                    if tp[0] == TOPICS["tank"]:
                        msgs = tank.get(tp[0], tp[1], off + 1, 64 * 1024).messages
                        first = (msgs[0].seq, msgs[0].value) if msgs else None
                        if first != (off + 1, payload):
                            problems.append(f"{tp[0]}-{tp[1]}: a TANK consume at seq {off + 1} returned {first} "
                                            f"instead of {payload[:40]!r}")
        return problems

    def verify(self, gw: GatewayProcess, summary: CycleSummary, *, expect_unclean: bool = True,
               injected: dict[str, int] | None = None) -> CycleSummary:
        """Every check of the module docstring against a freshly started gateway (no client running yet)."""
        injected = injected or {}
        summary.injected = dict(injected)
        ledger = self.ledger
        problems = summary.violations
        with ledger.lock:
            in_flight = list(ledger.in_flight.items())
            ledger.in_flight.clear()
        host, port = gw.addresses["kafka"]
        checker = KafkaClient(KafkaConfig(host, port, client_id="chaos-checker", timeout=30, retries=0))
        contents: dict[tuple[str, int], dict[bytes, int]] = {}
        for tp in self.partitions:
            log_start, log_end, records = read_partition(checker, tp, problems)
            summary.log_end[tp] = log_end
            problems += verify_partition(ledger, tp, log_start, log_end, records)
            contents[tp] = {p: o for o, p in records}
        self.log_end_at_restart = dict(summary.log_end)
        problems += self.probe_reads(gw)
        # 3. batches in flight at the kill: whole or absent; what recovery kept must stay from now on.
        for producer, flight in in_flight:
            where = contents[flight.tp]
            found = [where.get(p) for p in flight.payloads]
            present = [o for o in found if o is not None]
            name = f"{flight.tp[0]}-{flight.tp[1]}"
            if present and (len(present) != len(found) or present != list(range(present[0], present[0] + len(found)))):
                problems.append(f"{name}: a {flight.protocol} batch in flight at the kill is partly in the log "
                                f"(offsets {found})")
            if isinstance(producer, _KafkaProducer) and producer.pending is not None:
                producer.expected_replay = present[0] if present and len(present) == len(found) else None
                producer.replay_checked = False
                if producer.expected_replay is None:
                    summary.replays_appended += 1
                else:
                    summary.replays_deduplicated += 1
            elif present:
                with ledger.lock:  # kept by recovery: from now on as binding as an acknowledgement
                    ledger.acked.setdefault(flight.tp, {}).update(zip(present, flight.payloads))
            if present:
                summary.in_flight_kept += 1
            else:
                summary.in_flight_lost += 1
        # 4. committed offsets: never below the last acknowledged commit, never past the log end.
        with checker:
            committed = self.committed_offsets(checker)
        with ledger.lock:
            acked_commits = dict(ledger.commits)
        for tp in self.partitions:
            have, want = committed.get(tp, -1), acked_commits.get(tp)
            if want is not None and have < want:
                problems.append(f"{tp[0]}-{tp[1]}: committed offset of {GROUP} is {have} after the restart, below "
                                f"the last acknowledged commit {want}")
            if have > summary.log_end[tp] and not self.lossy:
                problems.append(f"{tp[0]}-{tp[1]}: committed offset {have} is past the log end {summary.log_end[tp]}")
        # 5. the recovery report.
        with open(self._stderr_path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
        truncated: dict[str, int] = {}
        for line in lines:
            m = _RECOVERY_RE.search(line)
            if m:
                key = f"{m['topic']}-{m['partition']}"
                truncated[key] = truncated.get(key, 0) + int(m["bytes"])
                summary.recovery.append(line.split(": ", 1)[-1])
            m = _OFFSETS_RE.search(line)
            if m:
                summary.offsets_dropped += int(m["bytes"])
                summary.recovery.append(line.split(": ", 1)[-1])
            if _UNCLEAN in line:
                summary.unclean_reported = True
        summary.truncated_bytes = sum(truncated.values())
        if expect_unclean and not summary.unclean_reported:
            problems.append(f"the restart after a kill did not report an unclean shutdown ({_UNCLEAN!r})")
        if not expect_unclean and (summary.unclean_reported or truncated or summary.offsets_dropped):
            problems.append(f"a start after a graceful stop reported a recovery: {summary.recovery or lines[:3]}")
        for key, n in injected.items():
            got = summary.offsets_dropped if key == "offsets" else truncated.get(key, 0)
            if got < n:
                problems.append(f"{key}: the checker tore {n} bytes onto the tail but recovery reported {got}")
        return summary

    def committed_offsets(self, client: KafkaClient) -> dict[tuple[str, int], int]:
        """The group's committed offset of every partition (-1: none), over Kafka OffsetFetch."""
        resp = client.request(O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest(group_id=GROUP, topics=[
            O.OffsetFetchRequestTopic(name=TOPICS[p], partition_indexes=list(range(self.config.partitions)))
            for p in PROTOCOLS]))
        return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}

    # -- the whole run -------------------------------------------------------------------------------------
    def _restart(self, summary: CycleSummary) -> GatewayProcess | None:
        """A new incarnation, or None (and a violation with the end of its log) when it does not start."""
        try:
            return self.start_gateway()
        except RuntimeError as exc:
            with open(self._stderr_path, "rb") as f:
                tail = f.read().decode(errors="replace").splitlines()[-5:]
            summary.violations.append(f"the gateway did not restart on the crashed data directory ({exc}): "
                                      + " | ".join(tail))
            return None

    @staticmethod
    def _checked(summary: CycleSummary, check: Callable[[], object]) -> None:
        try:
            check()
        except (*_GONE, KafkaError, NativeError, TankError) as exc:
            summary.violations.append(f"checking after the restart failed: {type(exc).__name__}: {exc}")

    def run(self) -> ChaosReport:
        cfg = self.config
        report = ChaosReport()
        t0 = time.monotonic()
        self._tmp = tempfile.mkdtemp(prefix="logway-chaos-") if cfg.data_dir is None else None
        gw = None
        try:
            self.setup(self._tmp or cfg.data_dir)
            gw = self.start_gateway()
            self._create_topics(gw)
            for cycle in range(1, cfg.cycles + 1):
                summary = CycleSummary(cycle)
                before = (dict(self.ledger.acked_count), self.ledger.commit_count, self.ledger.consumed_count)
                summary.run_seconds = self.rnd.uniform(cfg.min_run, cfg.max_run)
                self.run_clients_and_kill(gw, cycle, summary.run_seconds)
                torn_before = self.torn_in_flight
                injected = self.inject_torn_tails()
                summary.in_flight_torn = self.torn_in_flight - torn_before
                with self.ledger.lock:  # violations seen by the clients during the run belong to this cycle
                    summary.violations += self.ledger.violations
                    self.ledger.violations.clear()
                    summary.acked = {p: self.ledger.acked_count[p] - before[0][p] for p in PROTOCOLS}
                    summary.commits = self.ledger.commit_count - before[1]
                    summary.consumed = self.ledger.consumed_count - before[2]
                gw = self._restart(summary)
                if gw is not None:
                    self._checked(summary, lambda: self.verify(gw, summary, injected=injected))
                report.cycles.append(summary)
                self._say(summary.line())
                for line in summary.recovery:
                    self._say(f"           {line}")
                for v in summary.violations:
                    self._say(f"           VIOLATION: {v}")
                if summary.violations:
                    break  # the ledger no longer describes a correct log: later cycles would only echo this
            if gw is not None and not report.violations:
                # A graceful stop, then a start that must be clean and keep everything.
                final = report.final = CycleSummary(0)
                if gw.stop() != 0:
                    final.violations.append(f"the gateway's graceful stop exited with {gw.proc.returncode}")
                gw = self._restart(final)
                if gw is not None:
                    self._checked(final, lambda: self.verify(gw, final, expect_unclean=False))
                    gw.stop()
                    gw = None
                for v in final.violations:
                    self._say(f"after a graceful stop: VIOLATION: {v}")
        finally:
            if gw is not None:
                gw.kill()
            self.teardown()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
        report.seconds = time.monotonic() - t0
        return report

    def setup(self, base: str) -> None:
        """Where the data directory and the gateways' logs go (a subclass may put the data elsewhere)."""
        self.data_dir = os.path.join(base, "data")
        self.run_dir = os.path.join(base, "run")
        os.makedirs(self.run_dir, exist_ok=True)

    def teardown(self) -> None:
        """Undo `setup` after the run (nothing to undo here)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cycles", type=int, default=50, help="kill -9 / restart cycles")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--min-run", type=float, default=0.3, help="shortest run before a kill, seconds")
    parser.add_argument("--max-run", type=float, default=1.5, help="longest run before a kill, seconds")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per protocol's topic")
    parser.add_argument("--consumers", type=int, default=2, help="members of the Kafka group")
    parser.add_argument("--torn-tail-probability", type=float, default=0.3,
                        help="chance per restart of tearing a partition's tail and the offset store's")
    parser.add_argument("--data-dir", default=None, help="keep the data and gateway logs here (None: a "
                                                         "temporary directory, removed)")


def run(args: argparse.Namespace) -> int:
    """`logway bench chaos`: print every cycle and the figures; exit status 1 on any violation."""
    config = ChaosConfig(cycles=args.cycles, seed=args.seed, min_run=args.min_run, max_run=args.max_run,
                         partitions=args.partitions, consumers=args.consumers,
                         torn_tail_probability=args.torn_tail_probability, data_dir=args.data_dir)
    report = ChaosRun(config).run()
    for line in report.figures():
        print(line)
    return 1 if report.violations else 0


BENCHMARKS = [Benchmark("chaos", "kill -9 the gateway at random moments under producers of every protocol and a "
                                 "consumer group; check after restarts", add_arguments, run)]
