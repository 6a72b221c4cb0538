"""Power-loss durability through the power-loss file system (logway.bench.powerfs): the storage engine in this
process (alone, and as the workers of `workers: N` sharing one directory) and a real gateway in another, cut off
at random moments. Under `flush: always` nothing acknowledged is lost; under `flush: interval` at most the last
interval; the `flush: none` control must lose (else the layer would prove nothing)."""

from __future__ import annotations

import os
import time

import pytest

from logway.bench.chaos import PROTOCOLS, TOPICS
from logway.bench.powerfs import DATA_MODES, ENTRY_MODES
from logway.bench.powerloss import PowerLossConfig, PowerLossReport, PowerLossRun
from logway.codecs.kafka.records import KafkaFormat, decode_records, encode_batch
from logway.codecs.records import Record
from logway.codecs.tank import TankFormat, decode_chunk, encode_bundle, wrap
from logway.gateway.cluster.ownership import leaders, partition_leader
from logway.storage import LogEngine, TopicConfig, UnknownTopic
from logway.storage.engine import Share

FORMATS = {"kafka": KafkaFormat(), "tank": TankFormat()}
T0 = 1_700_000_000_000


def kafka_batch(records) -> bytes:
    return encode_batch(records, default_timestamp=T0)


def tank_bundle(records) -> bytes:
    return wrap(encode_bundle(records, default_timestamp=T0))


def engine(powerfs, **cfg) -> LogEngine:
    return LogEngine(os.path.join(powerfs.path, "data"), FORMATS, TopicConfig(**cfg))


def kafka_values(plog) -> list[bytes]:
    return _values(plog, lambda rng: decode_records(rng.read()))


def tank_values(plog) -> list[bytes]:
    return _values(plog, lambda rng: decode_chunk(rng.read(), rng.first_offset + 1).records)


def _values(plog, decode) -> list[bytes]:
    """Every record value of the partition, reading across segments."""
    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 24)) is not None:
        out += [r.value for r in decode(rng)]
        offset = rng.end_offset
    return out


# -- the storage engine, in process ---------------------------------------------------------------------------

def test_a_synced_append_in_a_new_topic_of_a_new_data_dir_survives_a_cut(powerfs):
    """The two holes the issue found: a fresh data dir's subdirectories and a new topic's own entries."""
    eng = engine(powerfs)
    for fmt in ("kafka", "tank"):
        plog = eng.create_topic(f"t-{fmt}", 2, {"format": fmt}).partitions[1]
        data = kafka_batch([Record(b"acked")]) if fmt == "kafka" else tank_bundle([Record(b"acked")])
        plog.append(data)
        plog.sync()  # what a `flush: always` acknowledgement waits for
    eng.offsets.commit("g", "t-kafka", 1, 1, "")
    eng.offsets.sync()
    pid = eng.producer_ids.next_id()
    powerfs.cut()  # no close: the power went
    eng = engine(powerfs)
    assert not eng.clean_start
    assert sorted(t.name for t in eng.topics()) == ["t-kafka", "t-tank"]
    assert kafka_values(eng.partition("t-kafka", 1)) == [b"acked"]
    assert tank_values(eng.partition("t-tank", 1)) == [b"acked"]
    assert eng.offsets.fetch("g", "t-kafka", 1).offset == 1
    assert eng.producer_ids.next_id() > pid
    eng.close()


def test_what_was_never_synced_is_lost_but_the_topic_is_not(powerfs):
    eng = engine(powerfs)
    eng.create_topic("t", 1).partitions[0].append(kafka_batch([Record(b"unsynced")]))
    powerfs.cut()
    eng = engine(powerfs)
    assert eng.partition("t", 0).log_end_offset == 0  # the layer dropped the data: this test could fail
    eng.close()


def test_a_checksum_file_recovery_creates_is_durable_before_appends_are(powerfs):
    """A segment whose checksum file an earlier cut lost is emptied and gets a new one: that name must be durable
    before what is appended there is acknowledged, or the next cut empties the segment again with acked data."""
    from logway.storage.files import fsync_dir

    eng = engine(powerfs, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    while len(plog.segments) < 2:
        plog.append(tank_bundle([Record(b"x" * 100)]))
    frozen = tank_values(plog)[:plog.segments[0].next_offset]
    active = plog.segments[-1]
    plog.sync()  # the recovery point moves past the frozen segment: reopening has nothing of its own to sync
    eng.close(clean=False)
    os.unlink(active.checksums.path)  # what an earlier cut did: the data file's name kept, this one's not
    fsync_dir(os.path.dirname(active.checksums.path))
    eng = engine(powerfs, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert tank_values(plog) == frozen and plog.recovery.truncated_bytes > 0  # emptied: unverifiable
    plog.append(tank_bundle([Record(b"acked")]))
    plog.sync()  # what a `flush: always` acknowledgement waits for
    powerfs.cut()
    eng = engine(powerfs, segment_bytes=1024)
    assert tank_values(eng.partition("t", 0)) == frozen + [b"acked"]
    eng.close()


def test_a_deleted_topic_stays_deleted_with_its_offsets(powerfs):
    eng = engine(powerfs)
    eng.create_topic("t", 1)
    eng.offsets.commit("g", "t", 0, 5, "")
    eng.offsets.sync()
    eng.delete_topic("t")
    powerfs.cut()
    eng = engine(powerfs)
    with pytest.raises(UnknownTopic):
        eng.topic("t")
    eng.create_topic("t", 1)
    assert eng.offsets.fetch("g", "t", 0) is None
    eng.close()


def test_what_workers_acknowledged_survives_a_cut(powerfs):
    """`workers: 2` (share mode, storage/engine.py): the topic changes one worker makes and the other sees — a
    creation, growth, a configuration change, a deletion of the other's topic —, each worker's synced appends to its
    own partitions, worker 0's committed offsets and each worker's producer ids all survive a power cut, for the
    workers started again and for one process opening the directory afterwards."""
    data = os.path.join(powerfs.path, "data")

    def open_workers():
        supervisor = LogEngine(data, FORMATS, share=Share(2, leaders(2)))
        return supervisor, [LogEngine(data, FORMATS, share=Share(2, leaders(2), i, supervisor.clean_start))
                            for i in (0, 1)]

    _, (w0, w1) = open_workers()
    w0.create_topic("t", 2)
    w1.refresh()
    w1.create_partitions("t", 4)
    w0.refresh()
    w0.alter_topic_config("t", {"retention.ms": 60000})
    w1.create_topic("gone", 1)
    w0.refresh()
    w0.delete_topic("gone")
    w1.refresh()
    owners = {p: partition_leader("t", p, 2) for p in range(4)}
    assert sorted(owners.values()) == [0, 0, 1, 1]
    for w in (w0, w1):
        for plog in w.topic("t").partitions:  # (each worker's own)
            plog.append(kafka_batch([Record(b"acked %d" % plog.partition)]))
            plog.sync()
            plog.append(kafka_batch([Record(b"never synced")]))
    w0.offsets.commit("g", "t", 3, 1, "")
    w0.offsets.sync()
    pids = [w.producer_ids.next_id() for w in (w0, w1)]
    powerfs.cut()  # no close: the power went

    supervisor, workers = open_workers()
    assert not supervisor.clean_start
    for i, w in enumerate(workers):
        w.refresh()
        assert sorted(t.name for t in w.topics()) == ["t"], f"worker {i}"
        topic = w.topic("t")
        assert len(topic.partitions) == 4 and topic.config.retention_ms == 60000, f"worker {i}"
        assert {plog.partition: kafka_values(plog) for plog in topic.partitions} == {
            p: [b"acked %d" % p] for p in range(4) if owners[p] == i}
        assert w.producer_ids.next_id() > pids[i]
    assert workers[0].offsets.fetch("g", "t", 3).offset == 1
    for engine_ in (*workers, supervisor):
        engine_.close()
    one = engine(powerfs)  # and one process reads every worker's partitions
    assert [kafka_values(one.partition("t", p)) for p in range(4)] == [[b"acked %d" % p] for p in range(4)]
    with pytest.raises(UnknownTopic):
        one.topic("gone")
    one.close()


def test_a_clean_stop_is_durable_and_its_marker_does_not_outlive_the_next_start(powerfs):
    eng = engine(powerfs, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    while len(plog.segments) < 3:
        plog.append(kafka_batch([Record(b"x" * 200)]))
    n = plog.log_end_offset
    eng.close()  # clean: everything synced, indexes too, then the marker
    powerfs.cut()
    eng = engine(powerfs, segment_bytes=1024)
    assert eng.clean_start and eng.partition("t", 0).log_end_offset == n
    eng.partition("t", 0).append(kafka_batch([Record(b"after the clean start")]))
    powerfs.cut()  # the marker's removal was synced at open: this start is known to be unclean
    eng = engine(powerfs, segment_bytes=1024)
    assert not eng.clean_start and eng.partition("t", 0).log_end_offset == n
    eng.close()


@pytest.mark.parametrize("fmt", ["kafka", "tank"])
def test_torn_and_garbage_tails_never_become_records(powerfs, fmt):
    """Synced batches, then unsynced ones torn or garbled by the cut (small segments: rolls are cut too): after
    each cut the log holds every synced record, then at most whole unsynced batches, in order — never garbage."""
    values = kafka_values if fmt == "kafka" else tank_values
    synced: list[bytes] = []
    eng = engine(powerfs, segment_bytes=4096)
    eng.create_topic("t", 1, {"format": fmt})
    n = 0
    for cycle in range(24):
        plog = eng.partition("t", 0)
        appended = list(synced)
        for i in range(12):
            recs = [Record(b"%d-%d-" % (cycle, i) + bytes([65 + j % 26]) * 90) for j in range(n % 5 + 1)]
            n += 1
            plog.append(kafka_batch(recs) if fmt == "kafka" else tank_bundle(recs))
            appended += [r.value for r in recs]
            if i == 5:
                plog.sync()
                synced = list(appended)
        powerfs.cut(data=DATA_MODES[cycle % 3], entries=ENTRY_MODES[cycle // 3 % 2], seed=cycle)
        eng = engine(powerfs, segment_bytes=4096)
        got = values(eng.partition("t", 0))
        assert got[:len(synced)] == synced, f"cycle {cycle}: synced records lost"
        assert got == appended[:len(got)], f"cycle {cycle}: the log holds something never appended there"
        synced = got  # recovery synced what it kept
    eng.close()


def _keyed_rows(plog, fmt: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, walking the partition across the gaps a cleaner leaves."""
    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 24)) is not None:
        records = (decode_records(rng.read(), min_offset=offset) if fmt == "kafka" else
                   [r for r in decode_chunk(rng.read(), rng.first_offset + 1).records if r.offset >= offset])
        out += [(r.offset, r.key, r.value) for r in records]
        offset = rng.end_offset
    return out


@pytest.mark.parametrize("fmt", ["kafka", "tank"])
def test_power_cuts_while_cleaning_leave_the_old_segments_or_the_cleaned_ones(powerfs, fmt):
    """The log cleaner rewriting a compacted partition (every record synced before), the power cut at a random
    moment of it — every other cut as soon as a cleaned segment is being written — in every mode: after each cut the
    partition holds every record the cleaning keeps and none it never held, each offset once in order, and no
    half-made segment; the cleaning, run to its end, keeps exactly the last record of each key."""
    import random
    import threading

    from logway.storage import CleanerSettings, Throttle
    from logway.storage.cleaner import CleanStats

    rnd = random.Random(38)
    eng = engine(powerfs, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": fmt, "cleanup.policy": "compact"}).partitions[0]
    for i in range(0, 600, 6):
        recs = [Record(b"v%d-" % j + b"x" * 30, key=b"k%d" % (j % 23), timestamp=T0) for j in range(i, i + 6)]
        plog.append(kafka_batch(recs) if fmt == "kafka" else tank_bundle(recs))
    plog.roll()
    plog.sync()
    original = _keyed_rows(plog, fmt)
    latest = {}
    for row in original:
        latest[row[1]] = row
    final = sorted(latest.values())
    cut_during: list[str] = []
    for cycle in range(6):
        plog = eng.partition("t", 0)
        [plan] = eng.cleaning_plans()
        done: list = []
        throttle = Throttle(60_000)  # bytes a second: the cleaning takes about a second, the cut comes within it

        def clean():
            try:
                done.append(eng.clean(plan, throttle))
            except Exception as exc:  # (the cut: every call of the frozen file system fails)
                done.append(exc)

        worker = threading.Thread(target=clean)
        worker.start()

        def half_made() -> list[str]:
            return [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))]

        if cycle % 2:  # every other cut while a cleaned segment is being written: as soon as one appears
            deadline = time.monotonic() + 20
            while not half_made() and worker.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
        else:  # the others at a random moment of the cleaning (mapping, writing, swapping, or after it)
            time.sleep(rnd.uniform(0.05, 1.2))
        swapping = half_made()
        cut_during.append("writing" if swapping else "mapping or done")
        powerfs.cut(data=DATA_MODES[cycle % 3], entries=ENTRY_MODES[cycle // 3 % 2], seed=cycle)
        worker.join(30)
        assert not worker.is_alive() and done
        throttle.stop()
        eng = engine(powerfs, segment_bytes=1024)
        plog = eng.partition("t", 0)
        got = _keyed_rows(plog, fmt)
        assert set(final) <= set(got) <= set(original), f"cycle {cycle} ({cut_during[-1]})"
        assert [r[0] for r in got] == sorted({r[0] for r in got}), f"cycle {cycle}"
        assert plog.recovery.segments_dropped == 0 and plog.recovery.truncated_bytes == 0, f"cycle {cycle}"
        assert not [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))], f"cycle {cycle}"
    assert "writing" in cut_during, cut_during  # (some cuts came while a cleaned segment was being written)
    [plan] = eng.cleaning_plans()
    assert isinstance(eng.clean(plan, Throttle(0), CleanerSettings()), CleanStats)
    assert _keyed_rows(eng.partition("t", 0), fmt) == final
    eng.close()


# -- a real gateway under load --------------------------------------------------------------------------------

def run_powerloss(tmp_path, seed: int = 20261123, **cfg) -> tuple[PowerLossRun, PowerLossReport]:
    config = PowerLossConfig(seed=seed, min_run=0.15, max_run=0.6, pause=0.003,
                             data_dir=str(tmp_path), log=None, **cfg)
    run = PowerLossRun(config)
    report = PowerLossReport(run.run(), run.cuts, config.flush, run.window * 1000)
    return run, report


def test_power_cuts_under_flush_always_lose_nothing_acknowledged(fuse, tmp_path):
    cycles = 10
    run, report = run_powerloss(tmp_path / "always", cycles=cycles)
    report.chaos.raise_for_violations()
    assert len(report.cuts) == cycles and report.chaos.final is not None and not report.chaos.final.violations
    acked = report.chaos.acked
    assert all(acked[p] > 100 for p in PROTOCOLS), acked
    assert report.chaos.total("commits") > 50 and report.chaos.total("consumed") > 100
    assert report.chaos.total("replays_deduplicated") + report.chaos.total("replays_appended") > 0
    assert all(c.unclean_reported for c in report.chaos.cycles)
    assert all(run.ledger.commits.get((TOPICS[p], i)) for p in PROTOCOLS for i in range(run.config.partitions))
    # The cuts did drop and tear what was in flight, in every mode.
    assert {c.data for c in report.cuts} == set(DATA_MODES) and {c.entries for c in report.cuts} == set(ENTRY_MODES)
    assert sum(c.report["bytes_dropped"] for c in report.cuts) > 0
    assert report.lost == 0
    figures = "\n".join(report.figures())
    assert "acknowledged records lost: 0" in figures and "violations: 0" in figures
    # Whether a cut garbles a page is the layer's coin toss over the few pages unsynced at that moment (under
    # `flush: always`, only appends in flight): when the run's garbage cuts garbled none, more cuts that all
    # garble, each run held to the same promises, until one did.
    garbled = sum(c.report["pages_garbage"] for c in report.cuts)
    for extra in range(3):
        if garbled:
            break
        _, more = run_powerloss(tmp_path / f"garbage-{extra}", seed=extra, cycles=5, data_modes=("garbage",))
        more.chaos.raise_for_violations()
        assert more.lost == 0 and not more.chaos.final.violations
        garbled = sum(c.report["pages_garbage"] for c in more.cuts)
    assert garbled > 0


def test_power_cuts_of_a_workers_gateway_lose_nothing_acknowledged(fuse, tmp_path):
    """The same with `workers: 2`: every worker and the supervisor killed, then the cut; Kafka clients at the
    partitions' leaders and worker 0's coordinators, native and TANK through the shared ports."""
    cycles = 5
    run, report = run_powerloss(tmp_path / "workers", cycles=cycles, workers=2)
    report.chaos.raise_for_violations()
    assert len(report.cuts) == cycles and report.chaos.final is not None and not report.chaos.final.violations
    assert all(report.chaos.acked[p] > 50 for p in PROTOCOLS), report.chaos.acked
    assert {partition_leader(*tp, 2) for tp, acked in run.ledger.acked.items() if acked} == {0, 1}
    assert report.chaos.total("txn_committed") > 0 and report.chaos.total("commits") > 0
    assert sum(c.report["bytes_dropped"] for c in report.cuts) > 0
    assert report.lost == 0


def test_workers_that_shut_down_on_their_own_sync_what_they_acknowledged(fuse, tmp_path):
    """`kill: supervisor`: the supervisor alone SIGKILLed, the cut once both workers shut down on their own (their
    control socket closed). A worker's own shutdown makes what it acknowledged durable, so even `flush: interval`
    — which may lose the last interval to a cut that comes while it runs — loses nothing here."""
    cycles = 4
    run, report = run_powerloss(tmp_path / "supervisor", cycles=cycles, workers=2, kill="supervisor",
                                flush="interval", flush_interval_ms=1000)
    report.chaos.raise_for_violations()
    assert len(report.cuts) == cycles and report.chaos.final is not None and not report.chaos.final.violations
    assert all(report.chaos.acked[p] > 50 for p in PROTOCOLS), report.chaos.acked
    assert report.chaos.total("commits") > 0 and all(c.unclean_reported for c in report.chaos.cycles)
    assert report.lost == 0 and sum(c.commits_lost for c in report.cuts) == 0, report.figures()


def test_flush_interval_loses_at_most_the_last_interval(fuse, tmp_path):
    run, report = run_powerloss(tmp_path / "interval", cycles=6, flush="interval", flush_interval_ms=200)
    report.chaos.raise_for_violations()  # includes: no record lost in the middle, none older than the window
    assert report.lost > 0, "nothing lost: the cuts came right after flushes every time?"
    assert max(c.lost_max_age_ms for c in report.cuts) <= run.window * 1000


def test_flush_none_is_the_control_that_loses(fuse, tmp_path):
    run, report = run_powerloss(tmp_path / "none", cycles=3, flush="none")
    report.chaos.raise_for_violations()  # lossy, but never a corrupt or reordered log
    assert report.lost > sum(report.chaos.acked.values()) // 2
