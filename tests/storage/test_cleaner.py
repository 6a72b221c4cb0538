"""The log cleaner on crafted segments (logway.storage.cleaner): the last record of each key at its offset,
tombstones, records without keys, transaction markers and aborted transactions, idempotent producers' last
batches, `tank` bundles, several passes when the key map is small, merging, when a partition is due, and a kill at
every step of writing and swapping a cleaned segment leaving the old segments or the new one."""

from __future__ import annotations

import os
import threading
import time

import pytest

from logway.codecs.kafka.records import (decode_records, encode_batch, encode_control_batch, iter_batches,
                                         parse_control_marker, parse_header)
from logway.codecs.records import Record
from logway.codecs.tank import decode_chunk, encode_bundle, wrap
from logway.codecs.tank.bundle import TankFormat
from logway.storage import InvalidConfig, InvalidRecord, TopicConfig
from logway.storage.cleaner import KEY_ENTRY_BYTES, CleanerSettings, Throttle
from logway.storage.errors import CleaningStopped

from .helpers import T0, batch, open_engine, tank_engine

DAY_MS = 24 * 3600 * 1000
COMPACT = {"cleanup.policy": "compact"}


def now_ms() -> int:
    """Wall-clock ms: what the delete horizon compares segment files' modification times with."""
    return int(time.time() * 1000)


def kbatch(pairs, *, ts: int = T0, **fields) -> bytes:
    """One Kafka batch of (key, value) records (a None value is a tombstone)."""
    return encode_batch([Record(v, key=k, timestamp=ts) for k, v in pairs], default_timestamp=ts, **fields)


def records(plog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a reader finds, walking the log from its start across the gaps."""
    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 20)) is not None:
        out += [(r.offset, r.key, r.value) for r in decode_records(rng.read(), min_offset=offset)]
        offset = rng.end_offset
    return out


def last_per_key(rows):
    latest = {}
    for offset, key, value in rows:
        latest[key] = (offset, key, value)
    return sorted(latest.values())


def compact(eng, plog, now: int | None = None, **settings):
    """Roll and sync the partition (its segments become cleanable), then clean it whether due or not."""
    now = now_ms() if now is None else now
    plog.roll()
    plog.sync()
    (plan,) = [p for p in eng.cleaning_plans(now) if p.plog is plog]
    return eng.clean(plan, Throttle(0), CleanerSettings(**settings), now)


def fill(plog, n: int, keys: int, *, start: int = 0, per_batch: int = 1):
    rows = []
    for i in range(start, start + n, per_batch):
        pairs = [(b"k%d" % (j % keys), b"v%d" % j) for j in range(i, min(i + per_batch, start + n))]
        result = plog.append(kbatch(pairs))
        rows += [(result.base_offset + k, key, value) for k, (key, value) in enumerate(pairs)]
    return rows


# -- what is kept ---------------------------------------------------------------------------------------------

def test_keeps_the_last_record_of_each_key_at_its_offset_across_reopens(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=2048)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    rows = fill(plog, 400, 10, per_batch=3)
    end = plog.log_end_offset
    stats = compact(eng, plog)
    assert records(plog) == last_per_key(rows)
    assert plog.log_end_offset == end and plog.log_start_offset == 0
    assert stats.records_removed == 390 and stats.bytes_after < stats.bytes_before / 10
    # A reader asking for any offset gets the first record at or after it (the gaps are stepped over).
    kept = [r[0] for r in records(plog)]
    for offset in range(0, end, 7):
        rng = plog.read(offset, 1 << 20)
        got = decode_records(rng.read(), min_offset=offset)
        assert got[0].offset == min(k for k in kept if k >= offset)
    # Appends go on at the log end; the cleaned log survives a clean and an unclean restart as it is.
    rows.append((end, b"k0", b"new"))
    plog.append(kbatch([(b"k0", b"new")]))
    expected = records(plog)
    eng.close()
    for clean in (True, False):
        eng = open_engine(tmp_path, segment_bytes=2048)
        plog = eng.partition("t", 0)
        assert records(plog) == expected and plog.log_end_offset == end + 1
        assert plog.recovery.truncated_bytes == 0 and plog.recovery.segments_dropped == 0
        eng.close(clean=clean)


def test_a_batch_keeps_its_offsets_producer_and_codec_when_records_go(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    plog.append(kbatch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], producer_id=7, producer_epoch=1,
                       base_sequence=0, compression=1))  # gzip
    plog.append(kbatch([(b"a", b"4"), (b"c", b"5")]))
    compact(eng, plog)
    first = next(iter_batches(plog.read(0, 1 << 20).read()))
    header = parse_header(first)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.compression) == (7, 1, 0, 1)
    assert records(plog) == [(1, b"b", b"2"), (3, b"a", b"4"), (4, b"c", b"5")]
    eng.close()


def test_tombstones_stay_for_delete_retention_after_their_segment_was_written(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, {**COMPACT, "delete.retention.ms": DAY_MS}).partitions[0]
    fill(plog, 20, 4)
    plog.append(kbatch([(b"k1", None), (b"k2", None)]))  # deletions
    compact(eng, plog)
    rows = records(plog)
    assert [(k, v) for _, k, v in rows] == [(b"k0", b"v16"), (b"k3", b"v19"), (b"k1", None), (b"k2", None)]
    compact(eng, plog, now_ms() + DAY_MS - 60_000)  # not yet
    assert records(plog) == rows
    compact(eng, plog, now_ms() + DAY_MS + 60_000)
    assert [(k, v) for _, k, v in records(plog)] == [(b"k0", b"v16"), (b"k3", b"v19")]
    eng.close()


def test_a_compacted_topic_refuses_records_without_a_key_and_drops_older_ones(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]  # cleanup.policy delete: keyless records are fine
    plog.append(encode_batch([Record(b"no key"), Record(b"x", key=b"a")], default_timestamp=T0))
    eng.alter_topic_config("t", COMPACT)
    with pytest.raises(InvalidRecord, match="needs a key"):
        plog.append(encode_batch([Record(b"v", key=b"k"), Record(b"no key")], default_timestamp=T0))
    plog.append(kbatch([(b"b", b"y")]))
    compact(eng, plog)
    assert records(plog) == [(1, b"a", b"x"), (2, b"b", b"y")]
    eng.close()


def test_retention_deletes_nothing_of_a_compact_only_topic(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {**COMPACT, "retention.ms": 1}).partitions[0]
    fill(plog, 100, 100)
    assert len(plog.segments) > 2 and plog.enforce_retention(now_ms() + DAY_MS) == 0
    eng.alter_topic_config("t", {"cleanup.policy": "compact,delete"})
    segments = len(plog.segments)
    assert plog.enforce_retention(now_ms() + DAY_MS) == segments - 1
    eng.close()


# -- transactions and producers -------------------------------------------------------------------------------

def marker(pid: int, committed: bool) -> bytes:
    return encode_control_batch(pid, 0, committed=committed, timestamp_ms=T0)


def kinds(plog):
    """(offset, 'commit'|'abort'|record count) of every batch, walking the log."""
    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 20)) is not None:
        for b in iter_batches(rng.read()):
            h = parse_header(b)
            out.append((h.base_offset, ("commit" if parse_control_marker(b) else "abort") if h.is_control
                        else h.records_count))
        offset = rng.end_offset
    return out


def test_aborted_records_go_and_markers_follow_their_transactions(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    plog.append(kbatch([(b"a", b"aborted")], producer_id=1, producer_epoch=0, transactional=True), producer=(1, 0))
    plog.append(kbatch([(b"b", b"committed")], producer_id=2, producer_epoch=0, transactional=True),
                producer=(2, 0))
    plog.end_transaction(1, 0, committed=False, marker=marker(1, False))
    plog.end_transaction(2, 0, committed=True, marker=marker(2, True))
    plog.append(kbatch([(b"c", b"plain")]))
    assert [t.producer_id for t in plog.aborted(0, 10)] == [1]
    compact(eng, plog)
    # The aborted record is gone (its batch, producer 1's last, stays emptied); markers stay (their segment is
    # recent), the abort still indexed.
    assert kinds(plog) == [(0, 0), (1, 1), (2, "abort"), (3, "commit"), (4, 1)]
    assert [t.producer_id for t in plog.aborted(0, 10)] == [1]
    plog.append(kbatch([(b"b", b"newer")]))  # the committed transaction's record is superseded
    later = now_ms() + 2 * DAY_MS
    compact(eng, plog, later)
    # Past the delete horizon (and the producers' expiration): both transactions hold no record now, so both
    # markers go, and the abort with its marker (its records went in the pass before).
    assert kinds(plog) == [(4, 1), (5, 1)]
    assert plog.aborted(0, 10) == []
    eng.close(clean=False)
    eng = open_engine(tmp_path)
    assert eng.partition("t", 0).aborted(0, 10) == [] and kinds(eng.partition("t", 0)) == [(4, 1), (5, 1)]
    eng.close()


def test_an_abort_marker_outlives_the_pass_that_removes_its_records(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    plog.append(kbatch([(b"a", b"aborted")], producer_id=1, producer_epoch=0, transactional=True), producer=(1, 0))
    plog.end_transaction(1, 0, committed=False, marker=marker(1, False))
    plog.append(kbatch([(b"c", b"plain")]))
    later = now_ms() + 2 * DAY_MS  # past the horizon from the first pass on
    compact(eng, plog, later)
    assert kinds(plog) == [(1, "abort"), (2, 1)] and len(plog.aborted(0, 10)) == 1  # (the producer expired)
    compact(eng, plog, later)
    assert kinds(plog) == [(2, 1)] and plog.aborted(0, 10) == []
    eng.close()


def test_an_idempotent_producer_keeps_its_last_batch_emptied_until_it_expires(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    for seq in range(3):  # producer 9's batches, then newer values of its keys from another
        plog.append(kbatch([(b"a", b"%d" % seq), (b"b", b"%d" % seq)], producer_id=9, producer_epoch=2,
                           base_sequence=2 * seq))
    plog.append(kbatch([(b"a", b"x"), (b"b", b"y")]))
    compact(eng, plog)
    assert kinds(plog) == [(4, 0), (6, 2)]  # the producer's last batch, emptied
    header = parse_header(next(iter_batches(plog.read(4, 1 << 20).read())))
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_offset_delta) == (9, 2, 4, 1)
    eng.close(clean=False)
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert kinds(plog) == [(4, 0), (6, 2)] and plog.recovery.truncated_bytes == 0
    compact(eng, plog, now_ms() + DAY_MS + 60_000, producer_expiration_ms=DAY_MS)
    assert kinds(plog) == [(6, 2)]
    eng.close()


# -- tank bundles ---------------------------------------------------------------------------------------------

def tank_records(plog):
    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 20)) is not None:
        out += [(r.offset, r.key, r.value) for r in decode_chunk(rng.read(), rng.first_offset + 1).records
                if r.offset >= offset]
        offset = rng.end_offset
    return out


def test_a_tank_topic_keeps_the_last_message_of_each_key_in_sparse_bundles(tmp_path):
    eng = tank_engine(tmp_path, segment_bytes=2048)
    plog = eng.create_topic("t", 1, {"format": "tank", **COMPACT}).partitions[0]
    rows = []
    for i in range(0, 300, 3):
        recs = [Record(b"v%d" % j, key=b"k%d" % (j % 7), timestamp=T0) for j in range(i, i + 3)]
        base = plog.append(wrap(encode_bundle(recs, codec=i % 2))).base_offset
        rows += [(base + k, r.key, r.value) for k, r in enumerate(recs)]
    plog.append(wrap(encode_bundle([Record(b"", key=b"k3", timestamp=T0)])))  # a tombstone
    with pytest.raises(InvalidRecord):
        plog.append(wrap(encode_bundle([Record(b"keyless", timestamp=T0)])))
    compact(eng, plog)
    expected = [r for r in last_per_key(rows) if r[1] != b"k3"] + [(300, b"k3", b"")]
    assert tank_records(plog) == expected
    # A cleaned bundle that does not follow the one before names its seqs (a sparse bundle): the segment file reads
    # as these records from any bundle on, as a TANK consumer's chunk does.
    for seg in plog.segments[:-1]:
        data, pos, offset, sparse = seg.pread(0, seg.size), 0, seg.base_offset, 0
        while pos < len(data):
            size, base, delta, _ = TankFormat().scan(memoryview(data), pos)
            assert base is not None or pos and offset != seg.base_offset
            sparse += base is not None
            offset = (offset if base is None else base) + delta + 1
            pos += size
        assert sparse or not data
    eng.close(clean=False)
    eng = tank_engine(tmp_path, segment_bytes=2048)
    plog = eng.partition("t", 0)
    assert tank_records(plog) == expected and plog.recovery.truncated_bytes == 0
    compact(eng, plog, now_ms() + 2 * DAY_MS)
    assert tank_records(plog) == expected[:-1]  # the tombstone went past the horizon
    eng.close()


# -- passes, merging, when ------------------------------------------------------------------------------------

def test_a_key_map_smaller_than_the_dirty_part_takes_several_passes(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {**COMPACT, "min.cleanable.dirty.ratio": 0}).partitions[0]
    rows = fill(plog, 300, 60)
    plog.roll()
    plog.sync()
    settings = CleanerSettings(dedupe_buffer_bytes=25 * KEY_ENTRY_BYTES)
    upto = []
    while (plan := eng.cleaning_plans(now_ms())[0]).due:
        upto.append(eng.clean(plan, Throttle(0), settings, now_ms()).cleaned_upto)
    assert len(upto) > 3 and upto == sorted(upto) and upto[-1] == 300
    assert records(plog) == last_per_key(rows)
    eng.close()


def test_small_cleaned_segments_merge(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    rows = fill(plog, 200, 5)
    compact(eng, plog)
    before = len(plog.segments)
    rows += fill(plog, 10, 5, start=200)
    compact(eng, plog)
    assert len(plog.segments) < before // 3
    assert records(plog) == last_per_key(rows)
    assert all(s.base_offset < s.next_offset for s in plog.segments[:-1])
    eng.close()


def test_when_a_partition_is_due(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    topic = eng.create_topic("t", 1, {**COMPACT, "min.cleanable.dirty.ratio": 0.6})
    plog = topic.partitions[0]
    eng.create_topic("plain", 1).partitions[0].append(batch(3))
    fill(plog, 60, 60)
    [plan] = eng.cleaning_plans(now_ms())  # (only compacted topics are planned)
    assert not plan.due and plan.segments == []  # the rolled segments are not synced yet
    plog.sync()
    [plan] = eng.cleaning_plans(now_ms())
    assert plan.due and plan.ratio == 1.0 and plan.segments == plog.segments[:-1]
    eng.clean(plan, Throttle(0), now_ms=now_ms())
    assert not eng.cleaning_plans(now_ms())[0].due
    fill(plog, 30, 60, start=60)  # ~1/3 of the cleanable bytes are new: below the ratio
    plog.roll()
    plog.sync()
    [plan] = eng.cleaning_plans(now_ms())
    assert not plan.due and 0 < plan.ratio < 0.6
    eng.alter_topic_config("t", {"max.compaction.lag.ms": 1000})  # ... but older than the maximum lag
    assert eng.cleaning_plans(now_ms() + 3_600_000)[0].due
    eng.alter_topic_config("t", {"min.compaction.lag.ms": 500, "min.cleanable.dirty.ratio": 0})
    # Segments whose newest record is younger than the minimum lag are not cleanable (record times are T0 + ...).
    assert eng.cleaning_plans(T0)[0].segments == []
    # An open transaction bounds what is cleanable.
    eng.alter_topic_config("t", {"min.compaction.lag.ms": 0})
    plog.append(kbatch([(b"x", b"open")], producer_id=3, producer_epoch=0, transactional=True), producer=(3, 0))
    fill(plog, 30, 60, start=100)
    plog.roll()
    plog.sync()
    [plan] = eng.cleaning_plans(now_ms())
    assert plan.segments and plan.segments[-1].next_offset <= plog.last_stable_offset < plog.log_end_offset
    eng.close()


def test_the_active_segment_rolls_at_the_maximum_compaction_lag(tmp_path):
    from .helpers import Clock

    clock = Clock()
    eng = open_engine(tmp_path, clock)
    plog = eng.create_topic("t", 1, {**COMPACT, "max.compaction.lag.ms": 1000}).partitions[0]
    plog.append(kbatch([(b"a", b"1")]))
    clock.ms += 1000
    plog.append(kbatch([(b"a", b"2")]))
    assert len(plog.segments) == 2
    eng.close()


def test_topic_configs_of_compaction():
    cfg = TopicConfig().with_overrides({"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "0.25",
                                        "delete.retention.ms": "5"})
    assert (cfg.cleanup_policy, cfg.compact, cfg.delete) == ("compact,delete", True, True)
    assert (cfg.min_cleanable_dirty_ratio, cfg.delete_retention_ms) == (0.25, 5)
    assert TopicConfig().with_overrides({"cleanup.policy": ["compact"]}).cleanup_policy == "compact"
    for bad in ({"cleanup.policy": "shred"}, {"cleanup.policy": ""}, {"cleanup.policy": 1},
                {"min.cleanable.dirty.ratio": 1.5}, {"min.cleanable.dirty.ratio": "nan"},
                {"min.cleanable.dirty.ratio": True}, {"max.compaction.lag.ms": 0},
                {"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}, {"delete.retention.ms": -1}):
        with pytest.raises(InvalidConfig):
            TopicConfig().with_overrides(bad)


def test_a_format_the_cleaner_cannot_read_cannot_be_compacted(tmp_path):
    from logway.codecs.kafka.records import KafkaFormat
    from logway.storage import LogEngine

    class Plain:  # a storage format without the cleaner's side (BatchFormat, no CompactionFormat)
        name = "plain"
        header_size = KafkaFormat.header_size
        scan, validate, stamp = KafkaFormat.scan, KafkaFormat.validate, KafkaFormat.stamp
        _validate = KafkaFormat._validate

    eng = LogEngine(tmp_path, {"kafka": KafkaFormat(), "plain": Plain()})
    with pytest.raises(InvalidConfig, match="cannot be compacted"):
        eng.create_topic("t", 1, {"format": "plain", **COMPACT})
    eng.create_topic("t", 1, {"format": "plain"})
    with pytest.raises(InvalidConfig, match="cannot be compacted"):
        eng.alter_topic_config("t", COMPACT)
    eng.close()


def test_cleanup_policy_is_a_list_words_are_added_and_taken_away(tmp_path):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 1)
    eng.alter_topic_config("t", append={"cleanup.policy": ["compact"]})
    assert topic.config.cleanup_policy == "compact,delete" and topic.overrides == {"cleanup.policy": "compact,delete"}
    eng.alter_topic_config("t", subtract={"cleanup.policy": "delete"})
    assert topic.config.cleanup_policy == "compact"
    for bad in ({"subtract": {"cleanup.policy": ["compact"]}}, {"append": {"retention.ms": ["1"]}},
                {"append": {"cleanup.policy": ["shred"]}}, {"append": {"cleanup.policy": [1]}}):
        with pytest.raises(InvalidConfig):
            eng.alter_topic_config("t", **bad)
    assert topic.config.cleanup_policy == "compact"
    eng.close()


# -- readers, retention and stopping meanwhile ----------------------------------------------------------------

def test_a_reader_holding_an_old_segment_keeps_reading_it(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    fill(plog, 50, 2)
    rng = plog.read(0, 1 << 20)
    before = rng.read()
    compact(eng, plog)
    assert rng.read() == before and len(decode_records(before)) == 50
    assert rng.segment.locate(10, rng.length) is not None  # (its indexes, gone with its name, are not another's)
    eng.close()


def test_segments_retention_took_out_meanwhile_are_not_cleaned(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"cleanup.policy": "compact,delete", "retention.bytes": 3000}).partitions[0]
    rows = fill(plog, 200, 20)
    plog.roll()
    plog.sync()
    [plan] = eng.cleaning_plans(now_ms())
    assert plog.enforce_retention() > 0
    stats = eng.clean(plan, Throttle(0), now_ms=now_ms())
    assert stats.groups_skipped > 0
    start = plog.log_start_offset
    assert records(plog) == last_per_key([r for r in rows if r[0] >= start])
    assert not [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))]
    eng.close()


def test_a_stopped_cleaner_leaves_the_log_as_it_was(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=4096)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    rows = fill(plog, 400, 4)
    plog.roll()
    plog.sync()
    [plan] = eng.cleaning_plans(now_ms())
    throttle = Throttle(20_000)  # bytes per second: a pass takes seconds
    started = threading.Event()
    result = []

    def run():
        started.set()
        try:
            eng.clean(plan, throttle, now_ms=now_ms())
        except CleaningStopped as exc:
            result.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    started.wait()
    time.sleep(0.3)
    plog.stop_cleaning()  # what closing or deleting the partition does: it waits for the cleaner
    worker.join()
    assert result and records(plog) == rows
    assert not [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))]
    eng.close()


def test_the_throttle_keeps_to_its_rate_and_stops():
    clock = [0.0]

    def sleep(seconds):  # (threading.Event.wait, made to move the clock instead of waiting)
        clock[0] += seconds
        return False

    throttle = Throttle(1000, clock=lambda: clock[0])
    throttle._stopped.wait = sleep
    for n in (500, 1500, 1000):
        throttle.charge(n)
    assert clock[0] == pytest.approx(3.0)  # 3000 bytes at 1000 a second
    clock[0] = 10.0  # idle for long: no credit saved up, beyond one charge
    throttle.charge(1000)
    throttle.charge(1000)
    assert clock[0] == pytest.approx(11.0)
    throttle.stop()
    with pytest.raises(CleaningStopped):
        throttle.charge(1)


# -- a kill at every step ----------------------------------------------------------------------------------------

class Killed(BaseException):
    """The process died here (kill -9: what was written stays, in the page cache)."""


def test_a_kill_at_any_step_of_a_cleaning_leaves_the_old_segments_or_the_new_one(tmp_path, monkeypatch):
    """Each file-system call of a cleaning (writes, syncs, renames, removals) in turn is where the process dies:
    reopened, the log holds every record it held before or exactly the cleaned ones, group by group — never a
    record lost that the cleaning keeps, nor one it never held — and a second cleaning finishes the job."""
    import shutil

    calls = ("write", "replace", "unlink", "fsync", "utime", "open")
    template = tmp_path / "template"
    eng = open_engine(template, segment_bytes=1024)
    plog = eng.create_topic("t", 1, COMPACT).partitions[0]
    fill(plog, 80, 7, per_batch=2)
    plog.append(kbatch([(b"k1", None)]))
    before = records(plog)
    plog.roll()
    plog.sync()
    eng.close()
    shutil.copytree(template, tmp_path / "reference")
    eng = open_engine(tmp_path / "reference", segment_bytes=1024)
    compact(eng, eng.partition("t", 0))
    reference = records(eng.partition("t", 0))
    eng.close()
    assert len(reference) < len(before)
    step = 0
    while True:
        directory = tmp_path / f"run{step}"
        shutil.copytree(template, directory)
        eng = open_engine(directory, segment_bytes=1024)
        [plan] = eng.cleaning_plans(now_ms())
        count = [0]
        originals = {name: getattr(os, name) for name in calls}

        def counted(name):
            def call(*args, **kwargs):
                count[0] += 1
                if count[0] > step:
                    raise Killed(name)
                return originals[name](*args, **kwargs)
            return call

        for name in calls:
            monkeypatch.setattr(os, name, counted(name))
        try:
            eng.clean(plan, Throttle(0), now_ms=now_ms())
            finished = True
        except Killed:
            finished = False
        finally:
            monkeypatch.undo()
        if finished:
            assert step > 20
            break
        eng.close(clean=False)  # (what the process left: the files as they are)
        eng = open_engine(directory, segment_bytes=1024)
        plog = eng.partition("t", 0)
        after = records(plog)
        assert plog.recovery.segments_dropped == 0 and plog.recovery.truncated_bytes == 0, step
        assert set(reference) <= set(after) <= set(before), step
        assert [r[0] for r in after] == sorted({r[0] for r in after}), step  # each offset once, in order
        assert not [n for n in os.listdir(plog.directory) if n.endswith((".tmp", ".swap"))], step
        compact(eng, plog)
        assert records(plog) == reference, step
        eng.close()
        shutil.rmtree(directory)
        step += 1
