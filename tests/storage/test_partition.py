"""A partition log: reopening, rolling by size and age, retention, a hole in the middle, visibility (readers see
only synced records when reads need a sync), and the lookups kept in memory — the last batch, the recent batches'
places, remembered answers under the engine's bound — answering as a walk over the file does."""

from __future__ import annotations

import gc
import os
import weakref

import pytest
from logway.codecs.tank import TankFormat
from logway.storage import LogEngine, OffsetOutOfRange, TopicConfig
from logway.storage.segment import RECENT_BATCHES

from .helpers import FORMATS, Clock, all_offsets, batch, bundle, open_engine, values


def test_reopen_continues_offsets(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=4096)
    plog = eng.create_topic("t", 2).partitions[1]
    for _ in range(40):
        plog.append(batch(5, size=30))
    eng.close()
    eng = open_engine(tmp_path, segment_bytes=4096)
    assert eng.clean_start
    plog = eng.partition("t", 1)
    assert plog.log_end_offset == 200 and len(plog.segments) > 1
    assert plog.append(batch(1)).base_offset == 200
    assert all_offsets(plog) == list(range(201))
    assert eng.partition("t", 0).log_end_offset == 0
    eng.close()


def test_roll_by_size(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    b = batch(3, size=40)
    for _ in range(30):
        plog.append(b)
    per_seg = 1024 // len(b)
    assert len(plog.segments) == -(-30 // per_seg)
    for seg in plog.segments:
        assert seg.size <= 1024
        assert os.path.basename(seg.log_path) == f"{seg.base_offset:020d}.log"
    assert [s.base_offset for s in plog.segments] == [i * per_seg * 3 for i in range(len(plog.segments))]
    eng.close()


def test_roll_by_age(tmp_path):
    clock = Clock()
    eng = open_engine(tmp_path, clock, segment_ms=1000)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(1))
    clock.ms += 999
    plog.append(batch(1))
    assert len(plog.segments) == 1
    clock.ms += 1
    plog.append(batch(1))
    assert [s.base_offset for s in plog.segments] == [0, 2]
    eng.close()


def test_retention_by_size_deletes_whole_old_segments_never_the_active(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024, retention_bytes=2500)
    plog = eng.create_topic("t", 1).partitions[0]
    for _ in range(40):
        plog.append(batch(3, size=40))
    before = len(plog.segments)
    deleted = plog.enforce_retention()
    assert deleted == before - len(plog.segments) > 0
    assert plog.size_bytes <= 2500 + plog.segments[-1].size
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    assert plog.log_end_offset == 120
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 100)
    assert all_offsets(plog) == list(range(plog.log_start_offset, 120))
    # Files of deleted segments are gone.
    names = sorted(os.listdir(plog.directory))
    assert f"{0:020d}.log" not in names
    # retention_bytes 0 keeps only the active segment.
    eng.close()
    eng = open_engine(tmp_path, segment_bytes=1024, retention_bytes=0)
    plog = eng.partition("t", 0)
    plog.enforce_retention()
    assert len(plog.segments) == 1 and plog.log_start_offset == plog.segments[0].base_offset
    eng.close()


def test_retention_by_age(tmp_path):
    clock = Clock()
    eng = open_engine(tmp_path, clock, segment_bytes=1024, retention_ms=60_000)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(30):  # record timestamps advance with the clock
        plog.append(batch(3, size=40, ts=clock.ms))
        clock.ms += 10_000
    n = len(plog.segments)
    deleted = plog.enforce_retention()
    assert deleted > 0 and len(plog.segments) == n - deleted
    for seg in plog.segments[:-1]:
        assert clock.ms - seg.max_timestamp <= 60_000
    clock.ms += 10 ** 9
    plog.enforce_retention()
    assert len(plog.segments) == 1  # the active one stays, however old
    eng.close()


def test_corrupt_frozen_segment_keeps_the_consistent_prefix(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    for _ in range(30):
        plog.append(batch(3, size=40))
    second = plog.segments[1]
    n = len(plog.segments)
    assert n > 3
    eng.close()
    with open(second.log_path, "r+b") as f:  # tear the tail of a frozen segment
        f.truncate(second.size - 7)
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert len(plog.segments) == 2 and plog.recovery.segments_dropped == n - 2
    assert plog.log_end_offset == second.next_offset - 3  # the torn batch of 3 records is gone
    assert all_offsets(plog) == list(range(plog.log_end_offset))
    end = plog.log_end_offset
    assert plog.append(batch(1)).base_offset == end
    eng.close()


def test_reads_need_sync_hides_appends_until_synced(tmp_path):
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(segment_bytes=4096), clock=Clock(), reads_need_sync=True)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3))
    assert (plog.log_end_offset, plog.high_watermark, plog.durable_offset) == (3, 0, 0)
    assert plog.read(0, 1 << 20) is None  # appended, not yet visible: nothing to read (not an error)
    assert plog.offset_for_timestamp(0) is None
    with pytest.raises(OffsetOutOfRange) as exc:
        plog.read(4, 1)  # past the log end: an error naming the end a client may know
    assert exc.value.log_end == 0
    hw, segment, size = plog.watermark()
    plog.sync()
    assert plog.high_watermark == 3 and [r.offset for r in values(plog)] == [0, 1, 2]
    assert plog.watermark()[1] == segment and plog.watermark()[2] > size
    while len(plog.segments) == 1:  # roll, unsynced: the new segment stays invisible, the old one readable
        plog.append(batch(5, size=200))
    assert plog.read(plog.segments[-1].base_offset, 1) is None
    assert [r.offset for r in values(plog, 0, 100)][:3] == [0, 1, 2]
    plog.sync()
    assert plog.high_watermark == plog.log_end_offset and all_offsets(plog) == list(range(plog.log_end_offset))
    eng.close()


def test_without_reads_need_sync_every_append_is_visible_at_once(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    assert plog.high_watermark == 2 and plog.durable_offset == 0 and len(values(plog)) == 2
    eng.close()


def test_an_unclean_open_makes_what_recovery_kept_durable_and_visible(tmp_path):
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(), clock=Clock(), reads_need_sync=True)
    eng.create_topic("t", 1).partitions[0].append(batch(4))
    eng.close(clean=False)  # a crash: appended, never synced
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(), clock=Clock(), reads_need_sync=True)
    plog = eng.partition("t", 0)
    assert plog.durable_offset == plog.high_watermark == 4 and len(values(plog)) == 4
    eng.close()


def test_the_last_batch_is_read_from_memory_and_matches_the_file(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1 << 20)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(50):
        plog.append(batch(3, size=30, tag=str(i)))
    small = batch(2, size=20, tag="last")
    plog.append(small)
    rng = plog.read(150, 1 << 20)  # a tailing reader: the batch appended last, found without a header scan
    assert (rng.first_offset, rng.end_offset, rng.length) == (150, 152, len(small))
    stored = os.pread(rng.fileno(), rng.length, rng.position)  # (the offsets assigned on append are in it)
    assert rng.data == stored and rng.read() == stored and rng.head(8) == stored[:8]
    wider = plog.read(147, 1 << 20)  # a range that ends with it but starts earlier: read from the file
    assert wider.data is None and wider.read().endswith(stored)
    big = batch(1, size=20_000)  # above the size kept in memory
    plog.append(big)
    rng = plog.read(152, 1 << 20)
    assert rng.data is None and rng.length == len(big)
    seg = plog.segments[-1]
    seg.rollback(seg.size - len(big))  # a failed write undone: nothing is remembered
    assert seg.last_batch is None
    eng.close()
    eng = open_engine(tmp_path, segment_bytes=1 << 20)  # after a restart the file is read
    rng = eng.partition("t", 0).read(150, 1 << 20)
    assert rng.data is None and rng.read() == stored
    eng.close()


def _lookups(plog, max_bytes_list=(1, 300, 1000)) -> list:
    """Every slice of a reader walking the partition from 0 with each budget, and one read at every offset (up to
    the visible end)."""
    end = plog.high_watermark
    out = []
    for max_bytes in max_bytes_list:
        offset = 0
        while offset < end:
            rng = plog.read(offset, max_bytes)
            out.append((offset, max_bytes, rng.first_offset, rng.position, rng.length, rng.end_offset))
            offset = rng.end_offset
    for offset in range(end):
        rng = plog.read(offset, 500)
        out.append((offset, 500, rng.first_offset, rng.position, rng.length, rng.end_offset))
    return out


def test_remembered_lookups_answer_as_a_fresh_scan_does_and_are_forgotten_when_bytes_are_cut(tmp_path):
    eng = open_engine(tmp_path, index_interval_bytes=256, segment_bytes=1 << 20)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(40):
        plog.append(batch(1 + i % 3, size=40, tag=str(i)))
    seg = plog.segments[-1]
    kept = seg.size
    for i in range(10):
        plog.append(batch(2, size=60, tag=f"cut{i}"))
    asked = _lookups(plog)
    assert _lookups(plog) == asked  # asked again: the remembered answers
    generation = seg.generation
    seg.rollback(kept)  # bytes that were appended cut again (a failed append's undo) ...
    seg.recover(full=False)
    assert seg.generation == generation + 1
    for i in range(10):  # ... and other batches written where they were
        plog.append(batch(3, size=25, tag=f"new{i}"))
    after = _lookups(plog)
    eng.close()
    fresh = open_engine(tmp_path, index_interval_bytes=256, segment_bytes=1 << 20)  # nothing remembered
    assert _lookups(fresh.partition("t", 0)) == after
    assert after != asked
    fresh.close()


@pytest.mark.parametrize("fmt", ["kafka", "tank"])
def test_the_recent_batches_answer_as_a_walk_over_the_file_does(tmp_path, fmt):
    """The places of the batches appended last (`Segment.recent`): every read — of batches kept there, across the
    oldest of them, of older ones — answers as a walk over the file does, also with appends not yet visible; a
    roll forgets them (the frozen segment walks), a restart starts without. Kafka batches and TANK bundles."""
    formats = {**FORMATS, "tank": TankFormat()}

    def batch_of(n: int, *, size: int = 10, tag: str = "") -> bytes:
        if fmt == "kafka":
            return batch(n, size=size, tag=tag)
        return bundle(*(f"{tag}{i}".encode().ljust(size, b".") for i in range(n)))

    def opened(**cfg) -> LogEngine:
        return LogEngine(tmp_path / "data", formats, TopicConfig(index_interval_bytes=256, segment_bytes=1 << 20),
                         clock=Clock(), **cfg)

    eng = opened(reads_need_sync=True)
    plog = eng.create_topic("t", 1, {"format": fmt}).partitions[0]
    for i in range(2 * RECENT_BATCHES + 40):
        plog.append(batch_of(1 + i % 3, size=20 + i % 50, tag=str(i)))
    plog.sync()
    for i in range(5):
        plog.append(batch_of(2, tag=f"hidden{i}"))  # appended, not visible: the reads stop before them
    seg = plog.segments[-1]
    recent = seg.recent
    assert RECENT_BATCHES <= len(recent.pos) < 2 * RECENT_BATCHES and recent.first[0] > 0
    visible = plog.watermark()[2]
    kept = range(recent.first[0], plog.high_watermark)
    assert kept and all(recent.locate(o, visible) is not None for o in kept)  # the reads below use them
    assert recent.locate(plog.high_watermark, visible) is None  # (a hidden batch: not below the visible end)
    with_recent = _lookups(plog, (1, 300, 1000, 5000))
    recent.clear()
    assert _lookups(plog, (1, 300, 1000, 5000)) == with_recent  # the same, walked
    for i in range(10):
        plog.append(batch_of(2, size=30, tag=f"more{i}"))
    plog.sync()
    synced = _lookups(plog, (1, 300, 1000, 5000))
    plog.roll()
    assert len(seg.recent.pos) == 0
    assert _lookups(plog, (1, 300, 1000, 5000)) == synced
    eng.close()
    fresh = opened()
    assert _lookups(fresh.partition("t", 0), (1, 300, 1000, 5000)) == synced
    fresh.close()


def test_the_lookups_remembered_are_bounded_across_every_segment_of_the_engine(tmp_path):
    """Segments walked once (a log read from its start) do not each keep their remembered lookups: the engine's
    `Lookups` bounds them all together, forgetting every segment's at once when full; answers stay a walk's."""
    eng = open_engine(tmp_path, index_interval_bytes=256, segment_bytes=2048)
    eng.lookups.max_entries = 40
    logs = eng.create_topic("t", 2).partitions
    for i in range(120):
        logs[i % 2].append(batch(1 + i % 3, size=30, tag=str(i)))
    assert all(len(plog.segments) > 3 for plog in logs)

    def remembered() -> int:
        return sum(len(seg._located) + len(seg._ranges) for plog in logs for seg in plog.segments)

    answers = [_lookups(plog) for plog in logs]
    assert 0 < remembered() <= 40 and remembered() == eng.lookups.entries
    assert [_lookups(plog) for plog in logs] == answers
    eng.close()
    fresh = open_engine(tmp_path, index_interval_bytes=256, segment_bytes=2048)
    assert [_lookups(fresh.partition("t", p)) for p in (0, 1)] == answers
    fresh.close()


@pytest.mark.parametrize("synced", [True, False])
def test_a_segment_retention_deleted_is_not_kept_alive(tmp_path, synced):
    """A deleted segment keeps its data descriptor — and the disk space of its unlinked file — until the object is
    dropped: neither the engine's `Lookups` (it refers to segments weakly) nor the partition's durable point (never
    synced, under `flush: none`, it stays in the first segment) nor its remembered first offset may hold one
    retention deleted."""
    eng = open_engine(tmp_path, index_interval_bytes=256, segment_bytes=1024, retention_bytes=0)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(40):
        plog.append(batch(3, size=40, tag=str(i)))
    if synced:
        plog.sync()
    _lookups(plog)  # every segment remembers some answers
    assert plog.first_offset == 0  # (remembered with its segment)
    first = weakref.ref(plog.segments[0])
    assert first()._located and eng.lookups.entries > 0
    assert plog.enforce_retention() > 0
    gc.collect()
    assert first() is None  # dropped: its descriptor closed, its space freed
    eng.close()


def test_an_append_takes_the_batch_infos_its_caller_read(tmp_path):
    """Given each batch's info (a Kafka produce's headers, parsed by its handler), an append stores what a scan
    would have, and still validates every batch whole; infos that do not cover the data are a truncated batch."""
    from logway.codecs.kafka.records import iter_batches, parse_header
    from logway.storage import CorruptBatch

    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    data = batch(2) + batch(3, tag="b")

    def infos(buf):
        return [(h.size, h.base_offset, h.last_offset_delta, h.max_timestamp)
                for h in (parse_header(b) for b in iter_batches(buf))]

    given, scanned = plog.append(data, infos=infos(data)), plog.append(data)
    assert (given.base_offset, given.last_offset, scanned.base_offset, scanned.last_offset) == (0, 4, 5, 9)
    assert all_offsets(plog) == list(range(10))
    with pytest.raises(CorruptBatch, match="truncated"):
        plog.append(data + batch(1)[:30], infos=infos(data))  # a partial batch the caller's parse left out
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptBatch):
        plog.append(bytes(damaged), infos=infos(data))  # the CRC is checked all the same
    assert plog.log_end_offset == 10
    eng.close()
