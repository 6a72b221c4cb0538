"""Power cuts under load (`logway bench powerloss`, tests/e2e/test_powerloss.py): the crash-restart checker of
`logway.bench.chaos` with the kill followed by a power cut.

The gateway's data directory lives on a `PowerFS` mount (logway.bench.powerfs), which keeps only what was synced.
Each cycle runs producers of every protocol (native, TANK, idempotent Kafka; with `flush: always` also the
transactional Kafka producers, whose transactions must be all-or-nothing across the cuts) and a Kafka consumer
group that commits, SIGKILLs the gateway at a random moment and cuts the power: the mount drops — or, by the
cycle's mode, tears or garbles — everything never synced and forgets every name whose directory was never
synced. Then a new gateway starts on what the "disk" kept, and the checker verifies it before any client connects.

What is checked depends on the flush policy:
- `always`: every chaos invariant — each acknowledged record exactly once at its acknowledged offset, offsets
  contiguous from the log start, in-flight batches whole or absent, idempotent replays answered with their
  original offset, committed offsets never below the last acknowledged commit nor past the log end, reads at
  acknowledged offsets through the native and TANK protocols, the gateway starts and reports the unclean stop;
- `interval`: the acknowledged records lost are, per partition, only the last ones (none below the log end that
  survived: never a record in the middle), each acknowledged at most `flush_interval_ms` + `grace` before the cut;
  commits acknowledged before that window survive; the log is readable and contiguous, nothing it holds was never
  sent. Idempotent producers start again with a new producer id after each cut and consumers whose commit outran
  the log start again at its end;
- `none`: the same as `interval` without the window — a control that must show losses (proof that the layer drops
  data; `PowerLossReport.lost`).

With `workers: N` and `kill: supervisor` (`--kill supervisor`) only the supervisor is SIGKILLed; the cut comes once
its workers shut down on their own (bench/chaos.py), which syncs what they acknowledged: then even `interval` must
lose nothing.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from logway.clients.kafka import KafkaClient, KafkaConfig

from .chaos import KILLS, ChaosConfig, ChaosReport, ChaosRun, CycleSummary, _KafkaProducer, read_partition
from .powerfs import DATA_MODES, ENTRY_MODES, PowerFSMount
from .registry import Benchmark

__all__ = ["BENCHMARKS", "PowerLossConfig", "PowerLossRun", "PowerLossReport", "run", "add_arguments"]


@dataclass(slots=True)
class PowerLossConfig(ChaosConfig):
    data_modes: tuple = DATA_MODES  # what each cut does with unsynced data, in turn (see logway.bench.powerfs)
    entry_modes: tuple = ENTRY_MODES  # ... and with unsynced directory entries, in turn
    grace: float = 1.0  # with flush: interval, losses may reach back flush_interval_ms plus this (a sync's time)
    torn_tail_probability: float = 0.0  # the cuts tear the tails; the chaos checker's own tearing is off


@dataclass(slots=True)
class CutSummary:
    cycle: int
    data: str
    entries: str
    report: dict = field(default_factory=dict)  # the PowerFS cut report and the calls it saw since its mount
    lost: int = 0  # acknowledged records the cut took (allowed only when the flush policy is not `always`)
    lost_max_age_ms: float = 0.0  # how long before the cut the oldest of them was acknowledged
    commits_lost: int = 0  # partitions whose committed offset went back to an earlier acknowledged commit

    def line(self) -> str:
        r = self.report
        text = (f"           power cut (data={self.data}, entries={self.entries}): {r.get('unsynced_files', 0)} "
                f"files had unsynced data, {r.get('bytes_dropped', 0):,} B dropped, {r.get('pages_kept', 0)} pages "
                f"kept, {r.get('pages_garbage', 0)} garbled, {r.get('entries_reverted', 0)} names reverted, "
                f"{r.get('entries_kept', 0)} kept")
        if self.lost or self.commits_lost:
            text += (f"; lost {self.lost} acknowledged records (oldest acknowledged {self.lost_max_age_ms:.0f} ms "
                     f"before the cut), {self.commits_lost} commits")
        return text


@dataclass(slots=True)
class PowerLossReport:
    chaos: ChaosReport
    cuts: list  # CutSummary per cycle
    flush: str
    window_ms: float  # interval: the loss window allowed; 0 otherwise

    @property
    def violations(self) -> list[str]:
        return self.chaos.violations

    @property
    def lost(self) -> int:
        return sum(c.lost for c in self.cuts)

    def figures(self) -> list[str]:
        chaos = self.chaos
        acked = chaos.acked
        total = lambda key: sum(c.report.get(key, 0) for c in self.cuts)  # noqa: E731
        modes = {m: sum(1 for c in self.cuts if c.data == m) for m in DATA_MODES}
        entries = {m: sum(1 for c in self.cuts if c.entries == m) for m in ENTRY_MODES}
        lost_age = max((c.lost_max_age_ms for c in self.cuts), default=0.0)
        promise = {"always": "flush: always promises none",
                   "interval": f"flush: interval allows the last {self.window_ms:.0f} ms; the oldest lost was "
                               f"acknowledged {lost_age:.0f} ms before its cut",
                   "none": "flush: none, the control: losses prove the file system drops unsynced data"}[self.flush]
        return [
            f"powerloss: {len(self.cuts)} power cuts (kill -9, unsynced data dropped or torn) with flush: "
            f"{self.flush} in {chaos.seconds:.1f} s",
            f"  records acknowledged: {sum(acked.values()):,} (native {acked['native']:,}, tank {acked['tank']:,}, "
            f"kafka idempotent {acked['kafka']:,}); group commits acknowledged: {chaos.total('commits'):,}; "
            f"records consumed by the group: {chaos.total('consumed'):,}",
            f"  acknowledged records lost: {self.lost:,} ({promise}); commits gone back: "
            f"{sum(c.commits_lost for c in self.cuts)}",
            f"  cuts: data lose/pages/garbage {modes['lose']}/{modes['pages']}/{modes['garbage']}, entries "
            f"durable/random {entries['durable']}/{entries['random']}; {total('bytes_dropped'):,} unsynced bytes "
            f"dropped, {total('pages_kept')} unsynced pages kept, {total('pages_garbage')} garbled, "
            f"{total('entries_reverted')} unsynced names reverted, {total('entries_kept')} kept",
            f"  in-flight batches at the cuts: {chaos.total('in_flight_kept')} kept whole, "
            f"{chaos.total('in_flight_lost')} absent; idempotent replays: {chaos.total('replays_deduplicated')} "
            f"answered with their original offset, {chaos.total('replays_appended')} appended",
            f"  recovery truncated {chaos.total('truncated_bytes'):,} bytes of partition logs and "
            f"{chaos.total('offsets_dropped'):,} bytes of the offset store; unclean start reported after "
            f"{sum(c.unclean_reported for c in chaos.cycles)}/{len(chaos.cycles)} cuts",
            f"  calls the file system saw: {total('calls_fdatasync'):,} fdatasync, {total('calls_fsync'):,} fsync, "
            f"{total('calls_fsyncdir'):,} directory fsync, {total('calls_write'):,} writes",
            f"  violations: {len(self.violations)}",
        ]


class PowerLossRun(ChaosRun):
    """Runs the cycles (see the module docstring). Single use: `run()` once."""

    def __init__(self, config: PowerLossConfig | None = None) -> None:
        config = config or PowerLossConfig()
        if config.flush != "always":
            # The transactional checks expect every acknowledged record to survive; with interval/none a cut may
            # take a committed transaction's records (acknowledged, unsynced) while the coordinator's state (always
            # fsynced) says committed: lossy by the policy, which those checks cannot tell from a bug yet.
            config.txn_partitions = 0
        super().__init__(config)
        self.mount: PowerFSMount | None = None
        self.cuts: list[CutSummary] = []

    @property
    def window(self) -> float:
        """Seconds before a cut within which acknowledged records may be lost (interval); 0 for always."""
        cfg = self.config
        return cfg.flush_interval_ms / 1000 + cfg.grace if cfg.flush == "interval" else 0.0

    def setup(self, base: str) -> None:
        self.run_dir = os.path.join(base, "run")
        os.makedirs(self.run_dir, exist_ok=True)
        self.mount = PowerFSMount(os.path.join(base, "disk"), os.path.join(base, "mnt"),
                                  log_path=os.path.join(self.run_dir, "powerfs.log")).start()
        self.data_dir = os.path.join(self.mount.path, "data")

    def teardown(self) -> None:
        if self.mount is not None:
            self.mount.stop()

    def inject_torn_tails(self) -> dict[str, int]:
        """The power cut (the gateway is already dead): the mount keeps only what was synced, by the cycle's modes."""
        cfg = self.config
        n = len(self.cuts)
        cut = CutSummary(n + 1, cfg.data_modes[n % len(cfg.data_modes)],
                         cfg.entry_modes[(n // len(cfg.data_modes)) % len(cfg.entry_modes)])
        cut.report = self.mount.cut(data=cut.data, entries=cut.entries, seed=self.rnd.randrange(1 << 30))
        self.cuts.append(cut)
        if self.lossy:
            for producer in self.producers:  # its last batches may be gone: it starts again as a new producer
                if isinstance(producer, _KafkaProducer):
                    producer.pending = None
        return {}

    def verify(self, gw, summary: CycleSummary, *, expect_unclean: bool = True,
               injected: dict[str, int] | None = None) -> CycleSummary:
        if self.lossy and expect_unclean:
            self._forgive_allowed_losses(gw, summary, self.cuts[-1])
        super().verify(gw, summary, expect_unclean=expect_unclean, injected=injected)
        if self.lossy:
            for producer in self.producers:
                if isinstance(producer, _KafkaProducer):
                    producer.producer_id, producer.sequence = None, 0
        return summary

    def _forgive_allowed_losses(self, gw, summary: CycleSummary, cut: CutSummary) -> None:
        """Check what a lossy policy lost against what it allows, then take it out of the ledger, so the chaos
        checks that follow hold the log to everything else."""
        ledger, problems = self.ledger, summary.violations
        window = self.window
        host, port = gw.addresses["kafka"]
        with KafkaClient(KafkaConfig(host, port, client_id="powerloss-checker", timeout=30,
                                     retries=0)) as client:
            committed = self.committed_offsets(client)
            for tp in self.partitions:
                _, end, records = read_partition(client, tp, problems)
                by_offset = dict(records)
                name = f"{tp[0]}-{tp[1]}"
                with ledger.lock:
                    acked = ledger.acked.get(tp, {})
                    acked_at = ledger.acked_at.get(tp, {})
                    lost = sorted(o for o, p in acked.items() if by_offset.get(o) != p)
                    for off in lost:
                        age = self.killed_at - acked_at.get(off, self.killed_at)
                        cut.lost_max_age_ms = max(cut.lost_max_age_ms, age * 1000)
                        if off < end:
                            problems.append(f"{name}: acknowledged record at offset {off} is gone but the log goes "
                                            f"on to {end}: a record lost in the middle")
                        elif window and age > window:
                            problems.append(f"{name}: acknowledged record at offset {off} was lost although it "
                                            f"was acknowledged {age:.2f} s before the cut (flush: interval allows "
                                            f"{window:.2f} s)")
                        acked.pop(off, None)
                        acked_at.pop(off, None)
                    cut.lost += len(lost)
                    observed = ledger.observed.get(tp, {})
                    for off in [o for o, p in observed.items() if by_offset.get(o) != p]:
                        del observed[off]  # consumers may read what was never synced
                    last = ledger.commits.get(tp)
                    have = committed.get(tp, -1)
                    if last is not None and have < last:
                        cut.commits_lost += 1
                        before = [o for t, o in ledger.commit_times.get(tp, ()) if t < self.killed_at - window]
                        if window and before and have < max(before):
                            problems.append(f"{name}: committed offset {have} after the cut is below {max(before)}, "
                                            f"committed more than {window:.2f} s before it")
                        ledger.commits[tp] = have
                    if have > end:  # consumers start again at the log end (see _GroupConsumer)
                        ledger.commits[tp] = end
                    if tp in ledger.commits:  # what survived the cut is durable now: the next cut keeps it
                        ledger.commit_times[tp] = [(self.killed_at, ledger.commits[tp])]


def run(args: argparse.Namespace) -> int:
    """`logway bench powerloss`: print every cycle and the figures; exit status 1 on any violation (and, for the
    flush: none control, when nothing was lost)."""
    config = PowerLossConfig(cycles=args.cycles, seed=args.seed, min_run=args.min_run, max_run=args.max_run,
                             partitions=args.partitions, consumers=args.consumers, data_dir=args.data_dir,
                             flush=args.flush, flush_interval_ms=args.flush_interval_ms, workers=args.workers,
                             kill=args.kill)
    try:
        run = PowerLossRun(config)
    except ValueError as exc:
        raise SystemExit(f"logway bench powerloss: {exc}") from None
    printed = 0

    def say(line: str) -> None:
        nonlocal printed
        print(line, flush=True)
        if line.startswith("cycle") and printed < len(run.cuts):
            print(run.cuts[printed].line(), flush=True)
            printed += 1

    config.log = say
    report = PowerLossReport(run.run(), run.cuts, config.flush, run.window * 1000)
    for line in report.figures():
        print(line)
    if report.violations:
        return 1
    return 1 if config.flush == "none" and not report.lost else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cycles", type=int, default=20, help="power cuts")
    parser.add_argument("--flush", choices=("always", "interval", "none"), default="always",
                        help="the gateway's storage.flush (none is the control that must lose)")
    parser.add_argument("--flush-interval-ms", type=int, default=200,
                        help="storage.flush_interval_ms with --flush interval")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--min-run", type=float, default=0.3, help="shortest run before a cut, seconds")
    parser.add_argument("--max-run", type=float, default=1.5, help="longest run before a cut, seconds")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per protocol's topic")
    parser.add_argument("--consumers", type=int, default=2, help="members of the Kafka group")
    parser.add_argument("--workers", type=int, default=1,
                        help="the gateway's workers (> 1: every process is killed before each cut)")
    parser.add_argument("--kill", choices=KILLS, default="all",
                        help="all: SIGKILL every process before the cut; supervisor (with --workers > 1): the "
                             "supervisor alone, the cut once its workers shut down on their own")
    parser.add_argument("--data-dir", default=None, help="keep the disk image and the logs here (None: a "
                                                         "temporary directory, removed)")


BENCHMARKS = [Benchmark("powerloss", "the chaos checker with a power cut after each kill, on a FUSE file system "
                                     "that drops unsynced data", add_arguments, run)]
