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
- `txn_producers` transactional Kafka producers on `chaos-txn` (kafka format, `txn_partitions` partitions), each
  with a stable transactional id that outlives the gateway (InitProducerId v1 with it: the same producer id, a
  higher epoch). A transaction adds a random non-empty subset of the partitions — so its markers go to several
  partitions, and the producers' transactions interleave in a partition (several open at once, aborted ranges
  between committed ones) —, writes 1..`txn_max_batches` transactional batches of unique payloads, sometimes
  (`txn_offsets_probability`) commits offsets of the producer's own group `chaos-txn-group-<i>`
  (AddOffsetsToTxn + TxnOffsetCommit, the transaction's number for every partition), then commits or aborts
  (`txn_abort_probability`). The ledger (`TxnLedger`) knows each transaction's batches and how it ended:
  COMMITTED / ABORTED when EndTxn was answered NONE (ABORTED also when a request was fenced: the coordinator's
  timeout aborted it), in doubt when the kill came first (open, or its EndTxn unanswered). Odd producers ask for
  a short transaction timeout (`txn_timeout_ms`), even ones for a minute;

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
   ("offset store …: dropped N bytes"); after the final graceful stop a restart is clean and truncates nothing;
7. transactions (`verify_transactions`), checked twice: before any client connects (transactions in doubt may
   still be open: the coordinator keeps an Ongoing one until its timeout), and again after the transactional
   producers came back and every transaction ended. How each comes back is random (`settle_transactions`):
   re-initialise (InitProducerId fences it and aborts its open transaction), resume (retry its EndTxn with the
   same epoch, or abort it: a commit retried after the restart must succeed unless its timeout aborted it),
   leave the open transaction to the coordinator's timeout, or go on with the same epoch and sequences when
   nothing was in doubt. Each partition of `chaos-txn` is read read_uncommitted (Kafka Fetch v11: data and
   control batches) and read_committed three ways — native Fetch and TANK Consume (which filter aborted
   records and stop at the last stable offset) and Kafka Fetch isolation_level=1 with the answer's
   aborted_transactions applied as Kafka's consumer does (a producer's transactional batches dropped from the
   first_offset on until its ABORT marker; control batches skipped) — and:
   - the log holds every acknowledged transactional record once, in its producer's order; a produce in flight
     at the kill whole or absent (the checker may tear it, as above), a refused one absent; nothing unsent; the
     data of every ended transaction is followed by its producer's COMMIT / ABORT marker, as it ended;
   - the LSO is the high watermark, or the first offset of a transaction in doubt (an ended transaction never
     holds it back); once every transaction ended, it is the high watermark;
   - every read_committed reader returns exactly the records of committed transactions below the LSO, each once,
     at its offset in the log (never a control batch), never a record of an aborted transaction or of one in
     doubt that had not asked to commit; a transaction whose commit was in flight is all there (in every
     partition and every reader) or not at all, and the same before and after the producers came back;
   - each producer's group holds the value of its last committed transaction with offsets, in every partition
     (all or nothing), or that of its commit in flight — and then that transaction's records are visible too,
     and vice versa; an aborted transaction's offsets never appear.
   The outcome found for each transaction in doubt is then recorded in the ledger, binding for later cycles.

`ChaosRun(ChaosConfig(...)).run()` returns a `ChaosReport` (per-cycle `CycleSummary`s, totals, violations);
`ChaosReport.raise_for_violations()` raises `ChaosViolation`. `verify_partition` is the pure check of one
partition's records against the `Ledger` of what the clients were told; `verify_transactions` the pure check of
the transactional topic, as read (`TxnPartitionRead`), against the `TxnLedger`.

With `workers: N > 1` (`ChaosConfig.workers`, `--workers`) the gateway is a supervisor and N workers, each the
only writer of its partitions: the kill is SIGKILL of every worker, then of the supervisor (none shuts down on its
own); the Kafka clients send each partition's requests to its leader and group and transaction requests to their
coordinator (as `logway.clients.KafkaClient` routes them), native and TANK clients use the shared ports (relayed to
the owner), and every check above is the same. With `kill: supervisor` (`--kill supervisor`) the kill is SIGKILL of
the supervisor alone, as the OOM killer might: each worker sees its control socket close and shuts down on its own,
one after the other, under the load (a worker still running `join_timeout` s later is a violation). While they go,
a worker whose peer is already gone refuses what it would relay there (TANK SYSTEM_ERROR, a native Error) and a
transaction it cannot end (CONCURRENT_TRANSACTIONS): any refusal after the kill began is taken as the kill's cut —
the request in doubt, as one whose connection was cut (`_refused`) — while before it, it stays a violation. The
supervisor writes no clean-shutdown marker, so the restart is unclean and checked as after any kill.

The checker is a client of the gateway in another process: it speaks every protocol through the blocking clients
of `logway.clients` (no Kafka library), and only `logway bench` and the tests import it. Its own numbers come
from `random.Random(seed)`: the run lengths and the decision to tear are the same for a seed; what is torn, and
how the transactional producers come back, depends on where the clients were when the kill came.
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
from logway.clients.kafka import EARLIEST, LATEST, TRANSACTION, KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import (KafkaFormat, decode_batch, decode_records, encode_batch, iter_batches,
                                         parse_control_marker, parse_header)
from logway.codecs.records import Record
from logway.codecs.tank import TankFormat, decode_bundle, decode_varint, encode_bundle, wrap
from logway.gateway.config import load_config

from .launcher import GatewayProcess
from .registry import Benchmark

__all__ = ["BENCHMARKS", "ChaosConfig", "ChaosRun", "ChaosReport", "CycleSummary", "ChaosViolation", "Ledger",
           "verify_partition", "read_partition", "PROTOCOLS", "TOPICS", "GROUP", "TXN_TOPIC", "TXN_GROUP",
           "Transaction", "TxnLedger", "TxnPartitionRead", "verify_transactions", "OPEN", "COMMITTING", "ABORTING",
           "COMMITTED", "ABORTED"]

PROTOCOLS = ("native", "tank", "kafka")
TOPICS = {"native": "chaos-native", "tank": "chaos-tank", "kafka": "chaos-kafka"}
GROUP = "chaos-group"
#: The transactional producers' topic (kafka format), and the prefix of their groups (one each: "<prefix>-<i>").
TXN_TOPIC = "chaos-txn"
TXN_GROUP = "chaos-txn-group"
#: Errors that mean "the gateway went away" (the kill), as opposed to an answer the gateway should not give.
_GONE = (OSError, ConnectionError, RemoteProtocolError, GatewayUnavailable)
#: The kill modes (`ChaosConfig.kill`).
KILLS = ("all", "supervisor")
#: Group errors after which a member joins again.
_REJOIN = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
#: Fetch sizes: the checker's full reads after a restart, a group member's reads.
_READ_BYTES = 4 * 1024 * 1024
_CONSUMER_FETCH_BYTES = 256 * 1024
_RECOVERY_RE = re.compile(r"recovery of (?P<topic>.+)-(?P<partition>\d+) truncated (?P<bytes>\d+) bytes "
                          r"and dropped (?P<segments>\d+) segment")
_OFFSETS_RE = re.compile(r"offset store .*: dropped (?P<bytes>\d+) bytes")
_UNCLEAN = "the previous run did not shut down cleanly"


def _other_listeners() -> list[str]:
    """`--set` items giving the listeners `GatewayProcess` leaves alone (e.g. admin, 9644 by default) an ephemeral
    port: a developer's own gateway, or another test's, may hold the default."""
    return [f"listeners.{name}.port=0" for name in load_config(None, env={}).listeners
            if name not in ("native", "kafka", "tank")]


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
    txn_partitions: int = 2  # partitions of TXN_TOPIC (0: no transactional producers)
    txn_producers: int = 2  # transactional producers (0: none); each transaction spans some of the partitions
    txn_abort_probability: float = 0.3  # a transaction ends with EndTxn(abort) rather than commit
    txn_offsets_probability: float = 0.3  # a transaction also commits offsets of its producer's group
    txn_max_batches: int = 3  # produce requests per transaction (1..txn_max_batches)
    txn_timeout_ms: int = 1000  # the transaction timeout odd transactional producers ask for (even ones: 60 s)
    txn_abort_check_ms: int = 100  # the gateway's kafka.transaction_abort_check_ms
    workers: int = 1  # the gateway's `workers`: > 1 kills every worker process and the supervisor each cycle
    kill: str = "all"  # "all": SIGKILL every process; "supervisor" (workers > 1): the supervisor alone, see below
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
    txn_acked: int = 0  # transactional records acknowledged this cycle
    txn_committed: int = 0  # transactions whose EndTxn(commit) was answered NONE this cycle
    txn_aborted: int = 0  # ... EndTxn(abort) answered NONE, or aborted by the coordinator's timeout (fenced)
    txn_timed_out: int = 0  # ... of which the timeout aborted (the producer was fenced during the run)
    txn_offsets: int = 0  # committed transactions that also committed group offsets
    txn_in_doubt: int = 0  # transactions in flight at the kill (open, or their EndTxn unanswered)
    txn_doubt_committed: int = 0  # ... found committed after the restart (all their records visible)
    txn_doubt_aborted: int = 0  # ... found aborted (none visible)
    txn_lso_held: int = 0  # partitions whose LSO an open transaction held below the HW after the restart
    txn_visible: int = 0  # records read_committed (native Fetch) once every transaction ended
    txn_settle: dict = field(default_factory=dict)  # how the producers came back: reinit/resume/timeout/continue
    txn_settle_seconds: float = 0.0  # until every transaction had ended (LSO = HW everywhere) after that
    refused_at_kill: list = field(default_factory=list)  # refusals after the kill began (in doubt, as cut)
    violations: list = field(default_factory=list)

    def line(self) -> str:
        acked = " ".join(f"{p}={self.acked[p]}" for p in PROTOCOLS)
        injected = ", ".join(f"{k} +{v} B" for k, v in sorted(self.injected.items())) or "none"
        return (f"cycle {self.cycle:3d}: ran {self.run_seconds:.2f} s, acked {acked}, commits {self.commits}, "
                f"consumed {self.consumed}; in flight kept/lost {self.in_flight_kept}/{self.in_flight_lost} "
                f"(torn {self.in_flight_torn}), "
                f"idempotent replays dedup/append {self.replays_deduplicated}/{self.replays_appended}; "
                f"torn tails injected: {injected}; recovery: {self.truncated_bytes} B from partitions, "
                f"{self.offsets_dropped} B from offsets; "
                f"txn committed/aborted {self.txn_committed}/{self.txn_aborted} ({self.txn_acked} records), "
                f"in doubt {self.txn_in_doubt} -> {self.txn_doubt_committed} committed, {self.txn_doubt_aborted} "
                f"aborted ({', '.join(f'{k} {v}' for k, v in sorted(self.txn_settle.items())) or '-'}; "
                f"settled in {self.txn_settle_seconds:.2f} s)"
                + (f"; refused after the kill began: {len(self.refused_at_kill)}" if self.refused_at_kill else "")
                + (f"; VIOLATIONS: {len(self.violations)}" if self.violations else ""))


@dataclass(slots=True)
class ChaosReport:
    cycles: list = field(default_factory=list)  # CycleSummary, one per restart after a kill
    final: CycleSummary | None = None  # the check after the last graceful stop
    seconds: float = 0.0
    supervisor_kills: bool = False  # ChaosConfig.kill == "supervisor"

    @property
    def violations(self) -> list[str]:
        out = [v for c in self.cycles for v in c.violations]
        return out + (self.final.violations if self.final else [])

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.cycles)

    @property
    def acked(self) -> dict[str, int]:
        return {p: sum(c.acked[p] for c in self.cycles) for p in PROTOCOLS}

    @property
    def txn_visible(self) -> int:
        """Records read_committed returned at the last check that got that far."""
        checks = ([self.final] if self.final is not None else []) + self.cycles[::-1]
        return next((c.txn_visible for c in checks if c.txn_visible), 0)

    def _settle_totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cycles:
            for k, v in c.txn_settle.items():
                out[k] = out.get(k, 0) + v
        return out

    def raise_for_violations(self) -> None:
        if self.violations:
            raise ChaosViolation(f"{len(self.violations)} crash-safety violation(s):\n  "
                                 + "\n  ".join(self.violations[:50]))

    def figures(self) -> list[str]:
        acked = self.acked
        injected = sum(sum(c.injected.values()) for c in self.cycles)
        return [
            f"chaos: {len(self.cycles)} kill -9 / restart cycles in {self.seconds:.1f} s"
            + (" (the supervisor alone killed: its workers shut down on their own)" if self.supervisor_kills else ""),
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
            f"  transactions: {self.total('txn_committed'):,} committed ({self.total('txn_offsets'):,} with group "
            f"offsets), {self.total('txn_aborted'):,} aborted ({self.total('txn_timed_out')} by their timeout), "
            f"{self.total('txn_acked'):,} transactional records acknowledged; in doubt at the kills: "
            f"{self.total('txn_in_doubt')} ({self.total('txn_doubt_committed')} found committed, "
            f"{self.total('txn_doubt_aborted')} aborted); {self.txn_visible:,} records visible to read_committed "
            f"at the last check; LSO held by an open transaction after "
            f"{sum(c.txn_lso_held > 0 for c in self.cycles)} restarts; producers came back by "
            + ", ".join(f"{k} {v}" for k, v in sorted(self._settle_totals().items())),
            f"  requests refused after a kill began (in doubt, as cut ones): "
            f"{sum(len(c.refused_at_kill) for c in self.cycles)}",
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
        self.txn_ids: dict[int, str] = {}  # producer id -> the transactional id InitProducerId returned it for
        self.violations: list[str] = []
        self.cut: list[str] = []  # refusals after the kill began, taken as the kill's cut (`_refused`)
        self.acked_count = {p: 0 for p in PROTOCOLS}
        self.commit_count = 0
        self.consumed_count = 0

    def violation(self, message: str) -> None:
        with self.lock:
            self.violations.append(message)

    def refused_at_kill(self, message: str) -> None:
        with self.lock:
            self.cut.append(message)

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
            if pid in self.producer_ids or pid in self.txn_ids:
                self.violations.append(f"InitProducerId returned producer id {pid} a second time")
            self.producer_ids.add(pid)

    def txn_producer_id(self, tid: str, pid: int) -> str | None:
        """Record the producer id of a transactional id; the problem, if it was handed out otherwise before."""
        with self.lock:
            owner = self.txn_ids.get(pid)
            self.txn_ids[pid] = tid
            if pid in self.producer_ids or (owner is not None and owner != tid):
                return (f"InitProducerId returned producer id {pid} for {tid}, already handed out to "
                        f"{owner or 'an idempotent producer'}")
        return None

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


# ------------------------------------------------------------------------------------ the transactional ledger
OPEN, COMMITTING, ABORTING, COMMITTED, ABORTED = "open", "committing", "aborting", "committed", "aborted"
#: A transaction in one of these states when the gateway died is "in doubt": its producer never learned the end.
IN_DOUBT = (OPEN, COMMITTING, ABORTING)


@dataclass(slots=True, eq=False)
class Transaction:
    """One transaction as its producer knows it. `state`: OPEN (begun, no EndTxn sent yet), COMMITTING / ABORTING
    (EndTxn sent, not answered), COMMITTED / ABORTED (EndTxn answered NONE; ABORTED also when the coordinator
    fenced the producer — a timeout aborted it — or when the checker resolved a transaction in doubt)."""

    tid: str
    number: int  # 1, 2, ... per transactional id; also the offset it commits for `group` (TxnOffsetCommit)
    producer_id: int
    epoch: int
    partitions: list[int] = field(default_factory=list)  # AddPartitionsToTxn sent for these
    added: bool = False  # ... and answered NONE: the coordinator has the transaction open
    batches: list[tuple[int, list[bytes]]] = field(default_factory=list)  # acknowledged produces, in order
    in_flight: tuple[int, list[bytes]] | None = None  # a produce sent but not answered
    refused: list[bytes] = field(default_factory=list)  # payloads of produces answered with an error
    group: str | None = None  # the group whose offsets it commits (value `number` for every partition)
    state: str = OPEN
    fenced: bool = False  # the coordinator ended it (timeout) and fenced the producer

    @property
    def key(self) -> tuple[str, int]:
        return (self.tid, self.number)

    @property
    def name(self) -> str:
        return f"transaction {self.tid}#{self.number}"

    def written(self) -> list[tuple[int, bytes]]:
        """(partition, payload) of every produce sent: acknowledged, then the one in flight."""
        out = [(p, x) for p, xs in self.batches for x in xs]
        if self.in_flight is not None:
            out += [(self.in_flight[0], x) for x in self.in_flight[1]]
        return out


class TxnLedger:
    """What the transactional producers were told (all methods take the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.txns: list[Transaction] = []  # in the order they began
        self.origin: dict[bytes, tuple[Transaction, int]] = {}  # every payload sent -> (transaction, partition)
        self.counts = {"acked": 0, "committed": 0, "aborted": 0, "timed_out": 0, "offsets": 0}

    def begin(self, txn: Transaction) -> None:
        with self.lock:
            self.txns.append(txn)

    def sending(self, txn: Transaction, partition: int, payloads: list[bytes]) -> None:
        with self.lock:
            for x in payloads:
                self.origin[x] = (txn, partition)
            txn.in_flight = (partition, list(payloads))

    def acked(self, txn: Transaction, partition: int, payloads: list[bytes]) -> None:
        with self.lock:
            txn.in_flight = None
            txn.batches.append((partition, list(payloads)))
            self.counts["acked"] += len(payloads)

    def refused(self, txn: Transaction) -> None:
        """The produce in flight was answered with an error: nothing of it may be in the log."""
        with self.lock:
            if txn.in_flight is not None:
                txn.refused += txn.in_flight[1]
                txn.in_flight = None

    def set_state(self, txn: Transaction, state: str, *, fenced: bool = False) -> None:
        with self.lock:
            txn.state = state
            txn.fenced = txn.fenced or fenced
            if state == COMMITTED:
                self.counts["committed"] += 1
                self.counts["offsets"] += txn.group is not None
            elif state == ABORTED:
                self.counts["aborted"] += 1
                self.counts["timed_out"] += fenced

    def resolve(self, txn: Transaction, committed: bool, kept: bool) -> None:
        """The outcome of a transaction in doubt, as the checker found it (not counted as acknowledged); `kept`:
        its produce in flight is in the log, from now on as binding as an acknowledgement (else it must stay
        absent, as a refused one)."""
        with self.lock:
            txn.state = COMMITTED if committed else ABORTED
            if txn.in_flight is not None:
                if kept:
                    txn.batches.append(txn.in_flight)
                else:
                    txn.refused += txn.in_flight[1]
                txn.in_flight = None

    def in_doubt(self) -> list[Transaction]:
        with self.lock:
            return [t for t in self.txns if t.state in IN_DOUBT]


@dataclass(slots=True)
class TxnPartitionRead:
    """What the checker read of one partition of `TXN_TOPIC`: the whole log read_uncommitted (data records and
    control batches), the last stable offset and high watermark before and after the read_committed `views`
    (name -> [(offset, payload)]: e.g. native Fetch, Kafka Fetch read_committed, TANK Consume)."""

    high_watermark: int
    last_stable_offset: int
    data: list[tuple[int, bytes]] = field(default_factory=list)
    markers: list[tuple[int, int, bool]] = field(default_factory=list)  # (offset, producer id, committed)
    views: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    stable_after: int | None = None  # None: as before
    end_after: int | None = None


def verify_transactions(ledger: TxnLedger, reads: dict[int, TxnPartitionRead],
                        committed_offsets: dict[str, dict[int, int]] | None = None, *,
                        settled: bool) -> tuple[list[str], dict[tuple[str, int], bool]]:
    """Check `TXN_TOPIC` as read after a restart (`reads`: partition -> what was read) against the ledger.

    - the log (read_uncommitted): every acknowledged transactional record once, at increasing offsets in the
      order its producer sent it; a produce in flight at the kill whole (consecutive offsets) or absent, a
      refused one absent; nothing no producer sent; every ended transaction's data followed by its producer's
      COMMIT / ABORT marker;
    - the LSO is the high watermark or the first offset of a transaction in doubt (a transaction that ended
      never holds it back), and with `settled` (every transaction ended) it is the high watermark;
    - each read_committed view: offsets increasing, below the LSO, each holding what the log holds there (never
      a control batch), no payload twice; every record of a committed transaction below the LSO; never one of
      an aborted transaction, nor of one in doubt that never asked to commit; a transaction in doubt that asked
      to commit is all there (what of it lies below the LSO) or not at all, in every partition and every view;
    - `committed_offsets` (group -> {partition: offset, -1 none}, the offsets transactions commit): every
      partition of a group holds the same transaction's value: the last committed transaction's with offsets,
      or the one in doubt's — and then that transaction's records are visible too (and vice versa).

    Returns (violations, decisions): decisions maps each transaction in doubt whose outcome the reads show
    (always when `settled`) to True (committed) or False (aborted).
    """
    out: list[str] = []
    with ledger.lock:
        txns = list(ledger.txns)
        origin = dict(ledger.origin)
        state = {t.key: t.state for t in txns}
        written = {t.key: t.written() for t in txns}
        acked = {t.key: [(p, x) for p, xs in t.batches for x in xs] for t in txns}
        in_flight = {t.key: t.in_flight for t in txns if t.in_flight is not None}
        refused = {t.key: list(t.refused) for t in txns}
    doubt = [t for t in txns if state[t.key] in IN_DOUBT]
    bounds = {}
    where: dict[bytes, tuple[int, int]] = {}  # payload -> (partition, offset) in the log
    for p, read in sorted(reads.items()):
        name = f"{TXN_TOPIC}-{p}"
        lo, hw_lo = read.last_stable_offset, read.high_watermark
        hi = lo if read.stable_after is None else read.stable_after
        hw_hi = hw_lo if read.end_after is None else read.end_after
        bounds[p] = (lo, hw_lo, hi, hw_hi)
        offsets = sorted([o for o, _ in read.data] + [o for o, _, _ in read.markers])
        if len(set(offsets)) != len(offsets):
            out.append(f"{name}: two records of the log share an offset")
        if offsets and offsets[-1] >= max(hw_lo, hw_hi):
            out.append(f"{name}: the log holds offset {offsets[-1]}, past the high watermark {max(hw_lo, hw_hi)}")
        for off, x in read.data:
            if x in where:
                out.append(f"{name}: payload {x[:40]!r} stored twice, at offsets {where[x][1]} and {off}")
                continue
            where[x] = (p, off)
            src = origin.get(x)
            if src is None:
                out.append(f"{name}: offset {off} holds {x[:40]!r}, which no transactional producer sent")
            elif src[1] != p:
                out.append(f"{name}: offset {off} holds {x[:40]!r}, sent to partition {src[1]}")
    # The log: acknowledged records there, in their producer's order; in-flight produces whole or absent.
    order: dict[tuple[str, int], list[int]] = {}
    for t in txns:
        lost = [(p, x) for p, x in acked[t.key] if p in reads and where.get(x, (None,))[0] != p]
        if lost:
            out.append(f"{TXN_TOPIC}-{lost[0][0]}: acknowledged record {lost[0][1][:40]!r} of {t.name} "
                       f"({state[t.key]}) is missing from the log"
                       + (f" (and {len(lost) - 1} more)" if lost[1:] else ""))
        for p, x in acked[t.key]:
            if where.get(x, (None,))[0] == p:
                order.setdefault((t.tid, p), []).append(where[x][1])
        flight = in_flight.get(t.key)
        if flight is not None and flight[0] in reads:
            found = [where[x][1] if x in where else None for x in flight[1]]
            present = [o for o in found if o is not None]
            if present and (len(present) != len(found) or present != list(range(present[0], present[0] + len(found)))):
                out.append(f"{TXN_TOPIC}-{flight[0]}: a produce of {t.name} in flight at the kill is partly in the "
                           f"log (offsets {found})")
        back = [x for x in refused[t.key] if x in where]
        if back:
            out.append(f"{TXN_TOPIC}-{where[back[0]][0]}: {back[0][:40]!r} of {t.name} is in the log at offset "
                       f"{where[back[0]][1]}, but its produce was refused")
    for (tid, p), offs in sorted(order.items()):
        if offs != sorted(offs):
            out.append(f"{TXN_TOPIC}-{p}: the records of {tid} are not in the order it sent them")
    # The LSO: the high watermark, or where a transaction in doubt begins.
    firsts: dict[int, set[int]] = {p: set() for p in reads}
    for t in doubt:
        mine: dict[int, int] = {}
        for p, x in written[t.key]:
            if x in where and where[x][0] == p:
                mine[p] = min(mine.get(p, where[x][1]), where[x][1])
        for p, first in mine.items():
            firsts.setdefault(p, set()).add(first)
    for p, (lo, hw_lo, hi, hw_hi) in sorted(bounds.items()):
        name = f"{TXN_TOPIC}-{p}"
        for lso, hw in dict.fromkeys(((lo, hw_lo), (hi, hw_hi))):
            if settled and lso != hw:
                out.append(f"{name}: the last stable offset is {lso}, not the high watermark {hw}, though no "
                           f"transaction is open")
            elif lso != hw and lso not in firsts[p]:
                out.append(f"{name}: the last stable offset is {lso} (high watermark {hw}): no transaction in doubt "
                           f"begins there (they begin at {sorted(firsts[p]) or 'none'}): an ended one holds it back")
            if lso > hw:
                out.append(f"{name}: the last stable offset {lso} is past the high watermark {hw}")
    # The read_committed views.
    visible: dict[tuple[str, int], dict[str, set[bytes]]] = {}
    views: set[str] = set()
    for p, read in sorted(reads.items()):
        name = f"{TXN_TOPIC}-{p}"
        lo, _, hi, _ = bounds[p]
        raw_at = dict(read.data)
        marker_at = {o for o, _, _ in read.markers}
        expected = {x for t in txns if state[t.key] == COMMITTED for q, x in acked[t.key]
                    if q == p and x in where and where[x][1] < lo}
        for view, rows in sorted(read.views.items()):
            views.add(view)
            last, seen, bad = -1, set(), []
            for off, x in rows:
                if off <= last:
                    bad.append(f"offset {off} after {last}: not increasing")
                last = off
                if off >= hi:
                    bad.append(f"offset {off} is past the last stable offset {hi}")
                if off in marker_at:
                    bad.append(f"returned the control batch at offset {off} as a record ({x[:40]!r})")
                elif raw_at.get(off) != x:
                    bad.append(f"returned {x[:40]!r} at offset {off}, where the log holds {raw_at.get(off)!r}")
                if x in seen:
                    bad.append(f"returned {x[:40]!r} twice")
                seen.add(x)
                src = origin.get(x)
                if src is None:
                    continue
                t = src[0]
                s = state[t.key]
                if s == ABORTED:
                    bad.append(f"returned {x[:40]!r} at offset {off}, a record of the aborted {t.name}"
                               + (" (aborted by its timeout)" if t.fenced else ""))
                elif s in (OPEN, ABORTING):
                    bad.append(f"returned {x[:40]!r} at offset {off}, a record of {t.name}, in doubt at the kill "
                               f"({s}: it never asked to commit)")
                elif s == COMMITTING:
                    visible.setdefault(t.key, {}).setdefault(view, set()).add(x)
            for b in bad[:5]:
                out.append(f"{name} read_committed ({view}): {b}")
            if len(bad) > 5:
                out.append(f"{name} read_committed ({view}): ... {len(bad) - 5} more")
            missing = sorted((where[x][1], x) for x in expected - seen)
            if missing:
                off, x = missing[0]
                src = origin[x][0]
                out.append(f"{name} read_committed ({view}): {len(missing)} record(s) of committed transactions below "
                           f"the last stable offset {lo} are not returned, first {x[:40]!r} at offset {off} "
                           f"({src.name})")
    # Transactions in doubt: all or nothing, everywhere.
    decisions: dict[tuple[str, int], bool] = {}
    for t in doubt:
        if state[t.key] != COMMITTING:
            if settled:
                decisions[t.key] = False
            continue
        # Its records below the LSO must all be visible or none; those between the LSO before and after the
        # reads (a transaction ended meanwhile) may be visible or not.
        below = {x for p, x in written[t.key] if p in reads and x in where and where[x][1] < bounds[p][0]}
        upto = {x for p, x in written[t.key] if p in reads and x in where and where[x][1] < bounds[p][2]}
        shown = {view: visible.get(t.key, {}).get(view, set()) for view in sorted(views)}
        for view, got in shown.items():
            if got and not below <= got <= upto:
                out.append(f"{t.name}, committing at the kill, is partly visible to read_committed ({view}): "
                           f"{len(got)} of its {len(below)} records below the last stable offset")
        outcomes = {bool(got) for got in shown.values()}
        if len(outcomes) > 1 and below:
            out.append(f"{t.name}, committing at the kill, is visible to some read_committed readers and not to "
                       f"others: {', '.join(f'{v}: {len(g)}' for v, g in shown.items())}")
        if below or settled or any(outcomes):
            decisions[t.key] = any(outcomes)
    # Markers: the first control batch of a transaction's producer after its data says how it ended.
    for t in txns:
        outcome = state[t.key] if state[t.key] in (COMMITTED, ABORTED) else (
            None if t.key not in decisions else COMMITTED if decisions[t.key] else ABORTED)
        if outcome is None:
            continue
        ends: dict[int, int] = {}
        for p, x in written[t.key]:
            if x in where and where[x][0] == p:
                ends[p] = max(ends.get(p, -1), where[x][1])
        for p, end in sorted(ends.items()):
            marker = next(((o, c) for o, pid, c in sorted(reads[p].markers) if o > end and pid == t.producer_id), None)
            if marker is None:
                out.append(f"{TXN_TOPIC}-{p}: no transaction marker of producer {t.producer_id} follows the data of "
                           f"{t.name} ({outcome}, last record at offset {end})")
            elif marker[1] != (outcome == COMMITTED):
                out.append(f"{TXN_TOPIC}-{p}: {t.name} is {outcome}, but the marker after its data (offset "
                           f"{marker[0]}) says {'COMMIT' if marker[1] else 'ABORT'}")
    # Offsets committed in transactions.
    if committed_offsets is not None:
        for group in sorted({t.group for t in txns if t.group is not None}):
            values = committed_offsets.get(group, {})
            got = set(values.values()) or {-1}
            if len(got) > 1:
                out.append(f"group {group}: the partitions hold offsets of different transactions {values}: a "
                           f"transaction's offsets were committed in part")
            value = max(got)
            mine = [t for t in txns if t.group == group]
            known = max((t.number for t in mine if state[t.key] == COMMITTED), default=-1)
            pending = [t for t in mine if state[t.key] == COMMITTING]
            if value == known:
                for t in pending:
                    if decisions.get(t.key) is True:
                        out.append(f"group {group}: {t.name} committed its records but not its offsets (the group "
                                   f"holds {value}, not {t.number})")
            elif pending and value == pending[-1].number:
                t = pending[-1]
                if decisions.get(t.key) is False:
                    out.append(f"group {group}: the offsets of {t.name} were committed, but its records were not")
                decisions.setdefault(t.key, True)
            else:
                src = next((t for t in mine if t.number == value), None)
                what = "no transaction" if src is None else f"{src.name} ({state[src.key]})"
                out.append(f"group {group}: the committed offset is {value}, from {what}; the last committed "
                           f"transaction with offsets committed {known}")
    return out, decisions


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def txn_bounds(client: KafkaClient, partitions: int) -> dict[int, tuple[int, int]]:
    """{partition: (last stable offset, high watermark)} of `TXN_TOPIC`, both from one Fetch answer each (one
    instant). Two ListOffsets requests can straddle a transaction's end: with `flush: always` the LSO moves past
    the ended transaction while its marker waits for the sync that makes it visible, so an LSO read before the
    sync and a high watermark read after it look like a transaction open at the marker's offset."""
    out = {}
    for p in range(partitions):
        part = _txn_fetch(client, p, 0, 1, max_bytes=1)
        out[p] = (part.last_stable_offset, part.high_watermark)
    return out


def _txn_fetch(client: KafkaClient, partition: int, offset: int, isolation: int, max_bytes: int = _READ_BYTES):
    """One Kafka Fetch v11 of `TXN_TOPIC`'s partition (isolation_level 0 read_uncommitted, 1 read_committed)."""
    body = F.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=isolation,
                          session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=TXN_TOPIC, partitions=[
                              F.FetchPartition(partition=partition, fetch_offset=offset,
                                               partition_max_bytes=max_bytes)])])
    resp = client.for_partition(TXN_TOPIC, partition).call(F.API_KEY, 11, body).body
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, topic=TXN_TOPIC, partition=partition, operation="fetch")
    part = resp.responses[0].partitions[0]
    if part.error_code != ErrorCode.NONE:
        raise KafkaError(part.error_code, topic=TXN_TOPIC, partition=partition, operation="fetch")
    return part


def read_txn_log(client: KafkaClient, partition: int,
                 problems: list[str]) -> tuple[list[tuple[int, bytes]], list[tuple[int, int, bool]]]:
    """The whole partition read_uncommitted: (data records [(offset, payload)], control batches [(offset,
    producer id, committed)])."""
    tp = (TXN_TOPIC, partition)
    end = client.list_offsets({tp: LATEST})[tp]
    data: list[tuple[int, bytes]] = []
    markers: list[tuple[int, int, bool]] = []
    offset = 0
    while offset < end:
        part = _txn_fetch(client, partition, offset, 0)
        moved = False
        for batch in iter_batches(part.records or b""):
            header, records = decode_batch(batch)
            last = header.base_offset + header.last_offset_delta
            if last < offset:
                continue
            if header.is_control:
                markers.append((header.base_offset, header.producer_id, parse_control_marker(batch)))
            else:
                data += [(r.offset, r.value or b"") for r in records if r.offset >= offset]
            offset, moved = last + 1, True
        if not moved:
            problems.append(f"{TXN_TOPIC}-{partition}: a read_uncommitted fetch at offset {offset} returned nothing "
                            f"before the high watermark {end}")
            break
    return data, markers


def read_committed_kafka(client: KafkaClient, partition: int, problems: list[str]) -> list[tuple[int, bytes]]:
    """The partition as a Kafka read_committed consumer sees it: Fetch isolation_level=1 up to the last stable
    offset, dropping what the answer's aborted_transactions cover as Kafka's consumer does (per answer: a
    producer's transactional batches from its first_offset on until its ABORT marker; control batches
    skipped)."""
    rows: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        part = _txn_fetch(client, partition, offset, 1)
        if offset >= part.last_stable_offset:
            return rows
        pending = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or [])
        aborting: set[int] = set()
        moved = False
        for batch in iter_batches(part.records or b""):
            header = parse_header(batch)
            last = header.base_offset + header.last_offset_delta
            if last < offset:
                continue
            skip = header.is_control
            if header.producer_id >= 0:
                while pending and pending[0][0] <= last:
                    aborting.add(pending.pop(0)[1])
                if header.is_control:
                    if not parse_control_marker(batch):
                        aborting.discard(header.producer_id)
                elif header.is_transactional and header.producer_id in aborting:
                    skip = True
            if not skip:
                rows += [(r.offset, r.value or b"") for r in decode_batch(batch)[1] if r.offset >= offset]
            offset, moved = last + 1, True
        if not moved:
            problems.append(f"{TXN_TOPIC}-{partition}: a read_committed fetch at offset {offset} returned nothing "
                            f"below the last stable offset {part.last_stable_offset}")
            return rows


def read_committed_native(client: NativeClient, partition: int) -> list[tuple[int, bytes]]:
    """The partition over native Fetch (which returns committed records only)."""
    rows: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        got = [(r.offset, r.value or b"") for r in client.fetch(TXN_TOPIC, partition, offset, _READ_BYTES).records
               if r.offset >= offset]
        if not got:
            return rows
        rows += got
        offset = got[-1][0] + 1


def read_committed_tank(client: TankClient, partition: int) -> list[tuple[int, bytes]]:
    """The partition over TANK Consume (committed messages only; seq = offset + 1)."""
    rows: list[tuple[int, bytes]] = []
    bounds = client.discover_partitions(TXN_TOPIC, [partition])[0]
    seq, last = max(bounds.first_available, 1), bounds.high_water_mark
    while seq <= last:
        msgs = client.get(TXN_TOPIC, partition, seq, _READ_BYTES).messages
        if not msgs:
            break
        rows += [(m.seq - 1, m.value) for m in msgs]
        seq = msgs[-1].seq + 1
    return rows


# -------------------------------------------------------------------------------------------- the clients
class _Cut(Exception):
    """A request refused after the kill began: in doubt, as one whose connection the kill cut (see `_refused`)."""


def _refused(run: "ChaosRun", message: str) -> None:
    """A client's request was refused. While the gateway is up that is a violation. Once the kill began it is what
    a gateway going down answers — a worker whose peer is already gone refuses what it would relay there, or a
    transaction it cannot end — so the request is in doubt, as one the kill cut: `_Cut` ends the client."""
    if run.kill_started.is_set():
        run.ledger.refused_at_kill(message)
        raise _Cut(message)
    run.ledger.violation(message)


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
        except (*_GONE, _Cut):
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
                    _refused(self.run, f"native produce to {self.tp} refused: {exc.message}")
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
                    _refused(self.run, f"TANK produce to {self.tp} refused with error {err:#x}")
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
                except KafkaError as exc:  # (after the kill began: pending, replayed by the next cycle)
                    _refused(self.run, f"idempotent produce to {self.tp} (sequence {self.sequence}) refused: {exc}")
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
        except KafkaError as exc:
            try:
                _refused(self.run, f"group consumer {self.index}: {type(exc).__name__}: {exc}")
            except _Cut:
                pass  # its offsets stay as the last acknowledged commit left them
        except Exception as exc:
            self.run.ledger.violation(f"group consumer {self.index}: {type(exc).__name__}: {exc}")

    def _join(self, client: KafkaClient, member_id: str):
        topics = sorted(TOPICS.values())
        meta = json.dumps(topics).encode()
        while True:
            resp = client.for_coordinator(GROUP).request(G.JOIN_GROUP_KEY, 5, G.JoinGroupRequest(
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
        sync = client.for_coordinator(GROUP).request(G.SYNC_GROUP_KEY, 3, G.SyncGroupRequest(
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
            beat = client.for_coordinator(GROUP).request(G.HEARTBEAT_KEY, 3, G.HeartbeatRequest(
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
        coordinator = client.for_coordinator(GROUP)
        resp = coordinator.request(O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest(group_id=GROUP, topics=[
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
        resp = client.for_coordinator(GROUP).request(O.OFFSET_COMMIT_KEY, 7, O.OffsetCommitRequest(
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


class _Broken(AssertionError):
    """An answer no correct gateway gives to a transactional producer (the message says which)."""


class _TxnProducer:
    """A transactional Kafka producer with a stable transactional id that outlives the gateway, as the idempotent
    producer's pending batch does. Each transaction adds a random non-empty subset of `TXN_TOPIC`'s partitions
    (so its markers go to several partitions, and the transactions of different producers interleave in a
    partition), writes 1..txn_max_batches batches of unique payloads (transactional RecordBatches, sequences per
    partition and epoch), sometimes commits offsets of the producer's own group (AddOffsetsToTxn +
    TxnOffsetCommit, the value is the transaction's number for every partition), then commits or aborts at
    random. A request fenced (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH) means the coordinator's timeout aborted
    the transaction: the producer re-initialises. After a kill, how it comes back is decided by
    `ChaosRun.settle_transactions`."""

    protocol = "txn"

    def __init__(self, run: "ChaosRun", index: int) -> None:
        cfg = run.config
        self.run = run
        self.index = index
        self.tid = f"{TXN_TOPIC}-producer-{index}"
        self.group = f"{TXN_GROUP}-{index}"
        self.tp = (TXN_TOPIC, index)  # names its thread
        self.rnd = random.Random(f"{cfg.seed}-txn-{index}")
        # Odd producers ask for the short `txn_timeout_ms`: after a kill they may leave their open transaction
        # to the coordinator's timeout. Even ones ask for a minute: their open transaction outlives the restart,
        # and they come back to end it (or re-initialise).
        self.short_timeout = index % 2 == 1
        self.timeout_ms = cfg.txn_timeout_ms if self.short_timeout else max(60000, cfg.txn_timeout_ms)
        self.producer_id: int | None = None
        self.epoch = -1
        self.sequences: dict[int, int] = {}  # partition -> next base sequence (this epoch)
        self.needs_init = True
        self.number = 0
        self.count = 0
        self.current: Transaction | None = None

    def main(self, gw: GatewayProcess, stop: threading.Event, cycle: int) -> None:
        try:
            self.produce_loop(gw, stop, cycle)
        except (*_GONE, _Cut):
            pass  # killed under us: the transaction stays in doubt
        except _Broken as exc:
            self.run.ledger.violation(str(exc))
        except Exception as exc:
            self.run.ledger.violation(f"transactional producer {self.tid}: {type(exc).__name__}: {exc}")

    def produce_loop(self, gw: GatewayProcess, stop: threading.Event, cycle: int) -> None:
        host, port = gw.addresses["kafka"]
        config = KafkaConfig(host, port, client_id=f"chaos-txn-{self.index}", connect_timeout=5, timeout=10,
                             retries=0)
        with KafkaClient(config) as client:
            if self.needs_init:
                self.init(client)
            while not stop.is_set():
                self.transaction(client, cycle)
                time.sleep(self.run.config.pause)

    def coordinator(self, client: KafkaClient) -> KafkaClient:
        """The client of the transaction coordinator (the bootstrap broker's, worker 0's, with `workers`)."""
        return client.for_coordinator(self.tid, TRANSACTION)

    def payloads(self, cycle: int) -> list[bytes]:
        cfg = self.run.config
        out = []
        for _ in range(self.rnd.randint(1, cfg.max_batch)):
            head = f"txn:{self.index}:{cycle}:{self.count}:".encode()
            out.append(head + b"." * self.rnd.randint(0, cfg.max_padding))
            self.count += 1
        return out

    # -- requests --------------------------------------------------------------------------------------------
    def init(self, client: KafkaClient) -> None:
        """InitProducerId with the transactional id: the id's producer id, a higher epoch (fencing the previous
        producer and aborting its open transaction)."""
        resp = self.coordinator(client).call(A.INIT_PRODUCER_ID_KEY, 1, A.InitProducerIdRequest(
            transactional_id=self.tid, transaction_timeout_ms=self.timeout_ms)).body
        if resp.error_code != ErrorCode.NONE:
            message = f"InitProducerId for {self.tid} refused with {_code_name(resp.error_code)}"
            if self.run.kill_started.is_set():
                _refused(self.run, message)  # a gateway going down: in doubt, initialised next cycle
            raise _Broken(message)
        if self.producer_id is not None and resp.producer_id != self.producer_id:
            raise _Broken(f"InitProducerId for {self.tid} returned producer id {resp.producer_id}, not its "
                          f"{self.producer_id}")
        if resp.producer_epoch <= self.epoch:
            raise _Broken(f"InitProducerId for {self.tid} returned epoch {resp.producer_epoch}, not above the "
                          f"{self.epoch} it had")
        problem = self.run.ledger.txn_producer_id(self.tid, resp.producer_id)
        if problem:
            raise _Broken(problem)
        self.producer_id, self.epoch = resp.producer_id, resp.producer_epoch
        self.sequences = {}
        self.needs_init = False

    def end(self, client: KafkaClient, txn: Transaction, commit: bool) -> int:
        return self.coordinator(client).call(X.END_TXN_KEY, 2, X.EndTxnRequest(
            transactional_id=self.tid, producer_id=txn.producer_id, producer_epoch=txn.epoch,
            committed=commit)).body.error_code

    def transaction(self, client: KafkaClient, cycle: int) -> None:
        cfg = self.run.config
        ledger = self.run.txn_ledger
        self.number += 1
        parts = sorted(self.rnd.sample(range(cfg.txn_partitions), self.rnd.randint(1, cfg.txn_partitions)))
        group = self.group if self.rnd.random() < cfg.txn_offsets_probability else None
        txn = self.current = Transaction(self.tid, self.number, self.producer_id, self.epoch, partitions=parts,
                                         group=group)
        ledger.begin(txn)
        resp = self.coordinator(client).call(X.ADD_PARTITIONS_TO_TXN_KEY, 2, X.AddPartitionsToTxnRequest(
            transactional_id=self.tid, producer_id=self.producer_id, producer_epoch=self.epoch,
            topics=[X.AddPartitionsToTxnTopic(name=TXN_TOPIC, partitions=parts)])).body
        codes = {r.error_code for t in resp.results for r in t.results}
        if codes != {ErrorCode.NONE}:
            return self.refused(client, txn, "AddPartitionsToTxn", codes)
        txn.added = True
        for _ in range(self.rnd.randint(1, cfg.txn_max_batches)):
            p = self.rnd.choice(parts)
            payloads = self.payloads(cycle)
            seq = self.sequences.get(p, 0)
            batch = encode_batch([Record(x) for x in payloads], default_timestamp=int(time.time() * 1000),
                                 producer_id=self.producer_id, producer_epoch=self.epoch, base_sequence=seq,
                                 transactional=True)
            ledger.sending(txn, p, payloads)
            body = P.ProduceRequest(transactional_id=self.tid, acks=-1, timeout_ms=30000, topic_data=[
                P.TopicProduceData(name=TXN_TOPIC, partition_data=[P.PartitionProduceData(index=p, records=batch)])])
            leader = client.for_partition(TXN_TOPIC, p)
            part = leader.call(P.API_KEY, 8, body).body.responses[0].partition_responses[0]
            if part.error_code != ErrorCode.NONE:
                return self.refused(client, txn, f"Produce to {TXN_TOPIC}-{p} (sequence {seq})", {part.error_code},
                                    part.error_message)
            if part.base_offset < 0:
                raise _Broken(f"{TXN_TOPIC}-{p}: a transactional produce of {txn.name} was answered without an "
                              f"offset")
            self.sequences[p] = seq + len(payloads)
            ledger.acked(txn, p, payloads)
        if group is not None:
            code = self.coordinator(client).call(X.ADD_OFFSETS_TO_TXN_KEY, 2, X.AddOffsetsToTxnRequest(
                transactional_id=self.tid, producer_id=self.producer_id, producer_epoch=self.epoch,
                group_id=group)).body.error_code
            if code != ErrorCode.NONE:
                return self.refused(client, txn, "AddOffsetsToTxn", {code})
            resp = client.for_coordinator(group).call(X.TXN_OFFSET_COMMIT_KEY, 2, X.TxnOffsetCommitRequest(
                transactional_id=self.tid, group_id=group, producer_id=self.producer_id, producer_epoch=self.epoch,
                topics=[X.TxnOffsetCommitRequestTopic(name=TXN_TOPIC, partitions=[
                    X.TxnOffsetCommitRequestPartition(partition_index=q, committed_offset=self.number,
                                                      committed_leader_epoch=-1, committed_metadata=None)
                    for q in range(cfg.txn_partitions)])])).body
            codes = {p.error_code for t in resp.topics for p in t.partitions}
            if codes != {ErrorCode.NONE}:
                return self.refused(client, txn, "TxnOffsetCommit", codes)
        commit = self.rnd.random() >= cfg.txn_abort_probability
        ledger.set_state(txn, COMMITTING if commit else ABORTING)
        code = self.end(client, txn, commit)
        if code != ErrorCode.NONE:
            return self.refused(client, txn, f"EndTxn({'commit' if commit else 'abort'})", {code})
        ledger.set_state(txn, COMMITTED if commit else ABORTED)

    def refused(self, client: KafkaClient, txn: Transaction, what: str, codes: set[int],
                message: str | None = None) -> None:
        """A request of `txn` answered with an error: fenced means the coordinator's timeout aborted the
        transaction (re-initialise and go on); anything else is a violation — but after the kill began, the
        transaction and its produce in flight stay in doubt (see `_refused`), settled after the restart."""
        if self.run.kill_started.is_set():
            _refused(self.run, f"{what} of {txn.name} refused with {', '.join(_code_name(c) for c in sorted(codes))}")
        self.run.txn_ledger.refused(txn)
        if codes <= {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}:
            self.run.txn_ledger.set_state(txn, ABORTED, fenced=True)
            self.needs_init = True
            self.init(client)
            return
        raise _Broken(f"{what} of {txn.name} refused with {', '.join(_code_name(c) for c in sorted(codes))}"
                      + (f": {message}" if message else ""))

    def resume(self, client: KafkaClient, txn: Transaction) -> None:
        """After a restart, end the transaction in doubt as a producer that survived the gateway does: retry its
        EndTxn (or abort it when it had not asked yet) with the same epoch. Marks the outcome in the ledger."""
        commit = txn.state == COMMITTING
        code = self.end(client, txn, commit)
        if code == ErrorCode.NONE:
            outcome = COMMITTED if commit else ABORTED
        elif code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            outcome = ABORTED  # the timeout aborted it in the meantime
            self.needs_init = True
        elif code == ErrorCode.INVALID_TXN_STATE and txn.state == OPEN and not txn.added:
            outcome = ABORTED  # its AddPartitionsToTxn never reached the coordinator: nothing was begun
        else:
            raise _Broken(f"after the restart, the retried EndTxn({'commit' if commit else 'abort'}) of {txn.name} "
                          f"({txn.state} at the kill) was refused with {_code_name(code)}"
                          + (" (the coordinator lost the open transaction)" if code == ErrorCode.INVALID_TXN_STATE
                             else ""))
        with self.run.txn_ledger.lock:
            txn.state = outcome


# ------------------------------------------------------------------------------------------------- the run
class ChaosRun:
    """Runs the cycles (see the module docstring). Single use: `run()` once."""

    def __init__(self, config: ChaosConfig | None = None) -> None:
        self.config = config or ChaosConfig()
        if self.config.kill not in KILLS:
            raise ValueError(f"kill must be one of {', '.join(KILLS)}, not {self.config.kill!r}")
        if self.config.kill == "supervisor" and self.config.workers < 2:
            raise ValueError("kill: supervisor needs workers > 1 (one process has no supervisor to kill)")
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
        self.txn_ledger = TxnLedger()
        self.txn_producers = ([_TxnProducer(self, i) for i in range(cfg.txn_producers)]
                              if cfg.txn_partitions > 0 else [])
        self.txn_rnd = random.Random(self.config.seed + 2)  # how the transactional producers come back
        self.log_end_at_restart: dict[tuple[str, int], int] = {}
        self.torn_in_flight = 0
        self._stderr_path = ""
        self.killed_at = 0.0  # monotonic time of the last kill
        self.kill_started = threading.Event()  # set from the kill until the next cycle's clients start (`_refused`)

    @property
    def lossy(self) -> bool:
        """True when the flush policy promises nothing for a power cut (the checker forgives what it allows)."""
        return self.config.flush != "always"

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return [(TOPICS[p], i) for p in PROTOCOLS for i in range(self.config.partitions)]

    @property
    def txn_partitions(self) -> list[tuple[str, int]]:
        return [(TXN_TOPIC, i) for i in range(self.config.txn_partitions)] if self.txn_producers else []

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
            return GatewayProcess(self.data_dir, *_other_listeners(), f"storage.flush={cfg.flush}",
                                  f"storage.flush_interval_ms={cfg.flush_interval_ms}", "log_level=WARNING",
                                  f"kafka.transaction_abort_check_ms={cfg.txn_abort_check_ms}",
                                  f"workers={cfg.workers}", run_dir=self.run_dir, stderr=err)

    def _create_topics(self, gw: GatewayProcess) -> None:
        cfg = self.config
        host, port = gw.addresses["kafka"]
        with KafkaClient(KafkaConfig(host, port, client_id="chaos-admin")) as client:
            for proto in ("native", "kafka"):
                client.create_topic(TOPICS[proto], cfg.partitions, configs={"segment.bytes": str(cfg.segment_bytes)})
            if self.txn_producers:
                client.create_topic(TXN_TOPIC, cfg.txn_partitions, configs={"segment.bytes": str(cfg.segment_bytes)})
        with TankClient(*gw.addresses["tank"]) as tank:
            err = tank.create_topic(TOPICS["tank"], cfg.partitions, {"log.segment.bytes": str(cfg.segment_bytes)})
            if err != 0:
                raise RuntimeError(f"TANK CreateTopic {TOPICS['tank']} failed with error {err}")

    # -- one cycle -----------------------------------------------------------------------------------------
    def run_clients_and_kill(self, gw: GatewayProcess, cycle: int, run_seconds: float) -> None:
        """Start every client, SIGKILL the gateway after `run_seconds`, wait for the clients to notice."""
        stop = threading.Event()
        self.kill_started.clear()
        threads = [threading.Thread(target=p.main, args=(gw, stop, cycle), name=f"chaos-{p.protocol}-{p.tp[1]}",
                                    daemon=True) for p in self.producers]
        threads += [threading.Thread(target=c.main, args=(gw, stop), name=f"chaos-consumer-{c.index}", daemon=True)
                    for c in self.consumers]
        threads += [threading.Thread(target=t.main, args=(gw, stop, cycle), name=f"chaos-txn-{t.index}",
                                     daemon=True) for t in self.txn_producers]
        for t in threads:
            t.start()
        time.sleep(run_seconds)
        self.kill_started.set()
        if self.config.kill == "supervisor":
            lingering = gw.kill_supervisor(timeout=self.config.join_timeout)
            if lingering:
                self.ledger.violation(f"worker process(es) {lingering} still running {self.config.join_timeout} s "
                                      f"after their supervisor was killed")
        else:
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
            flights += [InFlight("txn", (TXN_TOPIC, t.in_flight[0]), t.in_flight[1])
                        for t in self.txn_ledger.in_doubt() if t.in_flight is not None]
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
            topic, partition = rnd.choice([tp for tp in self.partitions + self.txn_partitions
                                           if f"{tp[0]}-{tp[1]}" not in injected])
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
        # 5. transactions: read_committed before the producers come back, and after every transaction ended.
        if self.txn_producers:
            self.check_transactions(gw, summary)
        # 6. the recovery report.
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

    # -- transactions --------------------------------------------------------------------------------------
    def read_transactions(self, client: KafkaClient, native: NativeClient, tank: TankClient,
                          problems: list[str]) -> dict[int, TxnPartitionRead]:
        """Every partition of `TXN_TOPIC`: the bounds, the read_committed views (native Fetch, Kafka Fetch
        isolation_level=1 filtered as a client does, TANK Consume), the whole log read_uncommitted (after the
        views, so it holds whatever they returned), the bounds again."""
        n = self.config.txn_partitions
        before = txn_bounds(client, n)
        reads = {}
        for p in range(n):
            views = {"native Fetch": read_committed_native(native, p),
                     "Kafka Fetch read_committed": read_committed_kafka(client, p, problems),
                     "TANK Consume": read_committed_tank(tank, p)}
            data, markers = read_txn_log(client, p, problems)
            reads[p] = TxnPartitionRead(high_watermark=before[p][1], last_stable_offset=before[p][0], data=data,
                                        markers=markers, views=views)
        after = txn_bounds(client, n)
        for p, read in reads.items():
            read.stable_after, read.end_after = after[p]
        return reads

    def txn_committed_offsets(self, client: KafkaClient) -> dict[str, dict[int, int]]:
        """{group: {partition of TXN_TOPIC: committed offset (-1: none)}} of the transactional producers' groups."""
        out = {}
        for prod in self.txn_producers:
            coordinator = client.for_coordinator(prod.group)
            resp = coordinator.call(O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest(group_id=prod.group, topics=[
                O.OffsetFetchRequestTopic(name=TXN_TOPIC, partition_indexes=list(range(self.config.txn_partitions)))
            ])).body
            if resp.error_code != ErrorCode.NONE:
                raise KafkaError(resp.error_code, operation=f"offset fetch of {prod.group}")
            out[prod.group] = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
        return out

    def settle_transactions(self, client: KafkaClient, summary: CycleSummary, problems: list[str]) -> dict:
        """Bring each transactional producer back as a client would after losing its broker, at random: with a
        transaction in doubt, `reinit` (InitProducerId: fences it and aborts it if still open) or `resume`
        (retry its EndTxn, or abort it, with the same epoch) for a long-timeout producer, `reinit` or `timeout`
        (do nothing: the coordinator's timeout aborts it; the producer re-initialises next cycle) for a
        short-timeout one; with none, `continue` (same epoch and sequences) or `reinit`. Returns {producer: mode}."""
        modes = {}
        for prod in self.txn_producers:
            txn = prod.current if prod.current is not None and prod.current.state in IN_DOUBT else None
            r = self.txn_rnd.random()
            if txn is None:
                mode = "reinit" if r < 0.3 else "continue"
            elif prod.short_timeout:
                mode = "timeout" if r < 0.5 else "reinit"
            else:
                mode = "reinit" if r < 0.5 else "resume"
            modes[prod] = mode
            summary.txn_settle[mode] = summary.txn_settle.get(mode, 0) + 1
            try:
                if mode == "reinit":
                    prod.init(client)
                elif mode == "resume":
                    prod.resume(client, txn)
                elif mode == "timeout":
                    prod.needs_init = True
            except _Broken as exc:
                problems.append(str(exc))
        return modes

    def wait_until_stable(self, client: KafkaClient) -> dict[int, tuple[int, int]]:
        """Poll until every partition's LSO is its high watermark (no transaction open), or a deadline a
        while past the short transaction timeout; the last (LSO, HW) of each partition."""
        deadline = time.monotonic() + self.config.txn_timeout_ms / 1000 + self.config.txn_abort_check_ms / 1000 + 10
        while True:
            bounds = txn_bounds(client, self.config.txn_partitions)
            if all(lso == hw for lso, hw in bounds.values()) or time.monotonic() > deadline:
                return bounds
            time.sleep(0.02)

    def check_transactions(self, gw: GatewayProcess, summary: CycleSummary) -> None:
        """`verify_transactions` before any client came back (transactions in doubt may be open), then after the
        producers came back (`settle_transactions`) and every transaction ended: the outcomes found are recorded
        in the ledger, and must agree with what the first read showed."""
        problems = summary.violations
        ledger = self.txn_ledger
        doubt = ledger.in_doubt()
        summary.txn_in_doubt = len(doubt)
        host, port = gw.addresses["kafka"]
        with KafkaClient(KafkaConfig(host, port, client_id="chaos-txn-checker", timeout=30, retries=0)) as client, \
                NativeClient(*gw.addresses["native"], timeout=30) as native, \
                TankClient(*gw.addresses["tank"], timeout=30) as tank:
            reads = self.read_transactions(client, native, tank, problems)
            summary.txn_lso_held = sum(r.last_stable_offset < r.high_watermark for r in reads.values())
            found, early = verify_transactions(ledger, reads, self.txn_committed_offsets(client), settled=False)
            problems += [f"before the producers came back: {v}" for v in found]
            t0 = time.monotonic()
            modes = self.settle_transactions(client, summary, problems)
            bounds = self.wait_until_stable(client)
            summary.txn_settle_seconds = time.monotonic() - t0
            open_ = {p: b for p, b in bounds.items() if b[0] != b[1]}
            if open_:
                problems.append(f"{TXN_TOPIC}: a transaction stays open {summary.txn_settle_seconds:.1f} s after the "
                                f"producers came back ((LSO, HW) by partition: {open_})")
            reads = self.read_transactions(client, native, tank, problems)
            found, decisions = verify_transactions(ledger, reads, self.txn_committed_offsets(client), settled=True)
            problems += found
            summary.txn_visible = sum(len(r.views["native Fetch"]) for r in reads.values())
        where = {x: p for p, read in reads.items() for _, x in read.data}
        for txn in doubt:
            committed = decisions[txn.key] if txn.key in decisions else txn.state == COMMITTED
            if txn.key in early and early[txn.key] != committed:
                problems.append(f"{txn.name} ({'committing' if txn.state in (COMMITTING, COMMITTED) else txn.state} "
                                f"at the kill) looked {'committed' if early[txn.key] else 'aborted'} before the "
                                f"producer came back, and is {'committed' if committed else 'aborted'} after")
            flight = txn.in_flight
            kept = flight is not None and all(where.get(x) == flight[0] for x in flight[1])
            prod = next(p for p in self.txn_producers if p.tid == txn.tid)
            if kept and modes.get(prod) == "resume" and not prod.needs_init and prod.epoch == txn.epoch:
                prod.sequences[flight[0]] = prod.sequences.get(flight[0], 0) + len(flight[1])  # in the log: used
            ledger.resolve(txn, committed, kept)
            if committed:
                summary.txn_doubt_committed += 1
            else:
                summary.txn_doubt_aborted += 1

    def committed_offsets(self, client: KafkaClient) -> dict[tuple[str, int], int]:
        """The group's committed offset of every partition (-1: none), over Kafka OffsetFetch."""
        coordinator = client.for_coordinator(GROUP)
        resp = coordinator.request(O.OFFSET_FETCH_KEY, 5, O.OffsetFetchRequest(group_id=GROUP, topics=[
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
        report = ChaosReport(supervisor_kills=cfg.kill == "supervisor")
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
                txn_before = dict(self.txn_ledger.counts)
                summary.run_seconds = self.rnd.uniform(cfg.min_run, cfg.max_run)
                self.run_clients_and_kill(gw, cycle, summary.run_seconds)
                torn_before = self.torn_in_flight
                injected = self.inject_torn_tails()
                summary.in_flight_torn = self.torn_in_flight - torn_before
                with self.ledger.lock:  # violations seen by the clients during the run belong to this cycle
                    summary.violations += self.ledger.violations
                    self.ledger.violations.clear()
                    summary.refused_at_kill, self.ledger.cut = self.ledger.cut, []
                    summary.acked = {p: self.ledger.acked_count[p] - before[0][p] for p in PROTOCOLS}
                    summary.commits = self.ledger.commit_count - before[1]
                    summary.consumed = self.ledger.consumed_count - before[2]
                with self.txn_ledger.lock:
                    txn_now = dict(self.txn_ledger.counts)
                for name in ("acked", "committed", "aborted", "timed_out", "offsets"):
                    setattr(summary, f"txn_{name}", txn_now[name] - txn_before[name])
                gw = self._restart(summary)
                if gw is not None:
                    self._checked(summary, lambda: self.verify(gw, summary, injected=injected))
                report.cycles.append(summary)
                self._say(summary.line())
                for line in summary.recovery:
                    self._say(f"           {line}")
                for line in summary.refused_at_kill:
                    self._say(f"           refused after the kill began: {line}")
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
    parser.add_argument("--txn-partitions", type=int, default=2,
                        help="partitions of the transactional producers' topic chaos-txn (0: no transactions)")
    parser.add_argument("--txn-producers", type=int, default=2,
                        help="transactional producers (each transaction spans a random subset of the partitions)")
    parser.add_argument("--txn-abort-probability", type=float, default=0.3,
                        help="chance that a transaction ends with an abort rather than a commit")
    parser.add_argument("--workers", type=int, default=1,
                        help="the gateway's workers (> 1: N brokers; every process is killed at each cycle)")
    parser.add_argument("--kill", choices=KILLS, default="all",
                        help="all: SIGKILL every process (a crash); supervisor (with --workers > 1): the supervisor "
                             "alone, its workers shut down on their own under the load")
    parser.add_argument("--data-dir", default=None, help="keep the data and gateway logs here (None: a "
                                                         "temporary directory, removed)")


def run(args: argparse.Namespace) -> int:
    """`logway bench chaos`: print every cycle and the figures; exit status 1 on any violation."""
    config = ChaosConfig(cycles=args.cycles, seed=args.seed, min_run=args.min_run, max_run=args.max_run,
                         partitions=args.partitions, consumers=args.consumers,
                         torn_tail_probability=args.torn_tail_probability, data_dir=args.data_dir,
                         txn_partitions=args.txn_partitions, txn_producers=args.txn_producers,
                         txn_abort_probability=args.txn_abort_probability, workers=args.workers, kill=args.kill)
    try:
        run = ChaosRun(config)
    except ValueError as exc:
        raise SystemExit(f"logway bench chaos: {exc}") from None
    report = run.run()
    for line in report.figures():
        print(line)
    return 1 if report.violations else 0


BENCHMARKS = [Benchmark("chaos", "kill -9 the gateway at random moments under producers of every protocol and a "
                                 "consumer group; check after restarts", add_arguments, run)]
