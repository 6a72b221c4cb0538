"""The log engine on real files: appends, index lookups at every boundary, rolls, retention, reopen, recovery
(Kafka-style corruption and FluxGo's crash shapes), timestamps and topic management."""

from __future__ import annotations

import os
import random

import pytest

from logway.codecs.kafka.records import KafkaFormat, decode_records, encode_batch
from logway.codecs.records import Record
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidPartitions, InvalidTopicName, LogEngine,
                            OffsetOutOfRange, TopicConfig, TopicExists, UnknownPartition, UnknownTopic)
from logway.storage.index import ENTRY

FORMATS = {"kafka": KafkaFormat()}
T0 = 1_700_000_000_000


class Clock:
    """A settable wall clock (seconds) for age-based roll and retention."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def batch(n: int, *, ts: int = T0, size: int = 10, tag: str = "") -> bytes:
    return encode_batch([Record(f"{tag}{i}".encode().ljust(size, b"."), key=b"k%d" % i, timestamp=ts + i)
                         for i in range(n)], default_timestamp=ts)


def open_engine(path, clock=None, **cfg) -> LogEngine:
    return LogEngine(path, FORMATS, TopicConfig(**cfg), clock=clock or Clock())


def values(plog, offset=0, max_bytes=1 << 30):
    rng = plog.read(offset, max_bytes)
    return [] if rng is None else decode_records(rng.read(), min_offset=offset)


def all_offsets(plog):
    out, off = [], plog.log_start_offset
    while off < plog.log_end_offset:
        recs = values(plog, off)
        assert recs, f"no records at {off}"
        out += [r.offset for r in recs]
        off = recs[-1].offset + 1
    return out


# -- appends and reads ---------------------------------------------------------------------------------------

def test_append_assigns_contiguous_offsets_and_stamps_batches(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    r1 = plog.append(batch(3))
    r2 = plog.append(batch(2) + batch(4))
    assert (r1.base_offset, r1.last_offset) == (0, 2)
    assert (r2.base_offset, r2.last_offset) == (3, 8)
    assert plog.log_end_offset == 9
    recs = values(plog)
    assert [r.offset for r in recs] == list(range(9))
    assert recs[3].value.startswith(b"0") and recs[5].value.startswith(b"0")  # second call: two batches
    eng.close()


def test_append_rejects_corrupt_and_truncated_batches_without_writing(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    good = batch(2)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptBatch):
        plog.append(bytes(bad))
    with pytest.raises(CorruptBatch):
        plog.append(good + good[:30])  # whole batch + torn one: nothing may be written
    with pytest.raises(CorruptBatch):
        plog.append(b"\x00" * 100)
    assert plog.log_end_offset == 0 and plog.segments[-1].size == 0
    eng.close()


def test_append_rejects_batch_over_max_batch_bytes(tmp_path):
    eng = open_engine(tmp_path, max_batch_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    with pytest.raises(BatchTooLarge):
        plog.append(batch(20, size=100))
    assert plog.log_end_offset == 0
    eng.close()


def test_index_lookups_at_every_boundary(tmp_path):
    # Small index interval and segments: many index entries and several segments.
    eng = open_engine(tmp_path, index_interval_bytes=200, segment_bytes=2048)
    plog = eng.create_topic("t", 1).partitions[0]
    sizes = [1, 3, 5, 2, 7, 1, 4, 6, 2, 9, 3, 1, 8, 2, 5] * 4
    bounds = []
    for n in sizes:
        r = plog.append(batch(n, size=20))
        bounds.append((r.base_offset, r.last_offset))
    assert len(plog.segments) > 2
    end = plog.log_end_offset
    for first, last in bounds:
        for off in {first, (first + last) // 2, last}:
            rng = plog.read(off, 1)  # max_bytes 1: still one whole batch
            assert rng.first_offset == first, off
            recs = decode_records(rng.read())
            assert recs[0].offset == first and recs[-1].offset == last
            assert rng.end_offset == last + 1
    # Segment boundaries: the first offset of each segment and the last of the previous one.
    for seg in plog.segments[1:]:
        assert plog.read(seg.base_offset, 1).segment is seg
        assert plog.read(seg.base_offset - 1, 1).segment is not seg
    assert plog.read(end, 100) is None
    with pytest.raises(OffsetOutOfRange):
        plog.read(end + 1, 100)
    # Large reads stop at whole batches and never cross a segment.
    for off in range(0, end, 7):
        rng = plog.read(off, 300)
        recs = decode_records(rng.read())
        assert recs[-1].offset + 1 == rng.end_offset
        assert rng.position + rng.length <= rng.segment.size
    assert all_offsets(plog) == list(range(end))
    eng.close()


def test_read_max_bytes_returns_whole_batches(tmp_path):
    eng = open_engine(tmp_path, index_interval_bytes=64)
    plog = eng.create_topic("t", 1).partitions[0]
    for _ in range(50):
        plog.append(batch(2, size=50))
    one = len(batch(2, size=50))
    for max_bytes in (1, one - 1, one, one + 1, 3 * one + 5, 10_000):
        rng = plog.read(0, max_bytes)
        assert rng.length % one == 0
        assert rng.length == max(one, min(max_bytes - max_bytes % one, 50 * one))
    eng.close()


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


# -- rolling and retention -----------------------------------------------------------------------------------

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


# -- timestamps ----------------------------------------------------------------------------------------------

def test_offset_for_timestamp(tmp_path):
    eng = open_engine(tmp_path, index_interval_bytes=100, segment_bytes=2048)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(60):
        plog.append(batch(4, ts=T0 + i * 100, size=20))  # record j of batch i: T0 + i*100 + j
    assert len(plog.segments) > 1
    assert plog.offset_for_timestamp(0) == 0
    assert plog.offset_for_timestamp(T0) == 0
    assert plog.offset_for_timestamp(T0 + 2) == 2
    assert plog.offset_for_timestamp(T0 + 4) == 4  # between batches: the next batch's first record
    assert plog.offset_for_timestamp(T0 + 3050) == 4 * 31
    assert plog.offset_for_timestamp(T0 + 5903) == 239
    assert plog.offset_for_timestamp(T0 + 5904) is None
    eng.close()
    eng = open_engine(tmp_path, index_interval_bytes=100, segment_bytes=2048)
    assert eng.partition("t", 0).offset_for_timestamp(T0 + 3050) == 124
    eng.close()


# -- recovery ------------------------------------------------------------------------------------------------

def _fill(tmp_path, n=200, **cfg):
    eng = open_engine(tmp_path, **cfg)
    plog = eng.create_topic("t", 1).partitions[0]
    bounds = [plog.append(batch(random.randint(1, 6), size=random.randint(5, 80))) for _ in range(n)]
    seg = plog.segments[-1]
    return eng, plog, bounds, seg.log_path


def test_recovery_after_nonsense_written_into_the_index(tmp_path):
    eng, plog, bounds, log_path = _fill(tmp_path, index_interval_bytes=256)
    end = plog.log_end_offset
    eng.close()
    index_path = log_path[:-4] + ".index"
    with open(index_path, "r+b") as f:
        f.seek(16)
        f.write(os.urandom(64))
    eng = open_engine(tmp_path, index_interval_bytes=256)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end
    assert plog.recovery.truncated_bytes == 0
    assert all_offsets(plog) == list(range(end))
    for b in bounds[::7]:
        assert plog.read(b.base_offset, 1).first_offset == b.base_offset
    plog.segments[-1].index.sanity_check(plog.segments[-1].size)
    eng.close()


@pytest.mark.parametrize("seed", range(8))
def test_recovery_after_nonsense_from_a_random_byte_of_a_random_batch(tmp_path, seed):
    rnd = random.Random(seed)
    random.seed(seed)
    eng, plog, bounds, log_path = _fill(tmp_path, index_interval_bytes=512)
    seg = plog.segments[-1]
    # Positions of every batch in the (single) segment.
    positions = [p for p, *_ in seg.headers(0, 0, seg.size)]
    victim = rnd.randrange(len(bounds))
    start, end_pos = positions[victim], (positions[victim + 1] if victim + 1 < len(positions) else seg.size)
    cut = rnd.randrange(start, end_pos)
    eng.close(clean=False)  # a crash: no clean-shutdown marker, full validation of the active segment
    size = os.path.getsize(log_path)
    with open(log_path, "r+b") as f:
        f.seek(cut)
        junk = bytearray(rnd.randbytes(size - cut))
        if junk and cut < size:
            junk[0] ^= 0xFF  # make sure at least the first byte really changes
        f.write(junk)
    eng = open_engine(tmp_path, index_interval_bytes=512)
    plog = eng.partition("t", 0)
    survivors = bounds[:victim]
    expected_end = survivors[-1].last_offset + 1 if survivors else 0
    assert plog.log_end_offset == expected_end
    assert plog.recovery.truncated_bytes == size - start
    assert all_offsets(plog) == list(range(expected_end))
    assert plog.append(batch(2)).base_offset == expected_end
    eng.close()


def test_crash_shape_batch_written_but_not_indexed(tmp_path):
    eng, plog, bounds, log_path = _fill(tmp_path, index_interval_bytes=128)
    end = plog.log_end_offset
    n_entries = len(plog.segments[-1].index)
    eng.close(clean=False)
    index_path = log_path[:-4] + ".index"
    os.truncate(index_path, (n_entries // 2) * ENTRY.size)  # the last half of the entries never made it
    eng = open_engine(tmp_path, index_interval_bytes=128)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end and plog.recovery.truncated_bytes == 0
    assert len(plog.segments[-1].index) == n_entries
    for b in bounds:
        assert plog.read(b.last_offset, 1).first_offset == b.base_offset
    eng.close()


def test_crash_shape_truncated_index_entry(tmp_path):
    eng, plog, bounds, log_path = _fill(tmp_path, index_interval_bytes=128)
    end = plog.log_end_offset
    eng.close()  # even after a clean shutdown a torn index entry is noticed
    index_path = log_path[:-4] + ".index"
    os.truncate(index_path, os.path.getsize(index_path) - 3)
    eng = open_engine(tmp_path, index_interval_bytes=128)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end
    assert all_offsets(plog) == list(range(end))
    eng.close()


def test_crash_shape_half_written_batch(tmp_path):
    eng, plog, bounds, log_path = _fill(tmp_path, n=50)
    end = plog.log_end_offset
    eng.close()
    extra = batch(5, size=100)
    with open(log_path, "ab") as f:
        f.write(extra[: len(extra) // 2])
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end
    assert plog.recovery.truncated_bytes == len(extra) // 2
    assert plog.append(batch(1)).base_offset == end
    eng.close()


def test_missing_index_of_a_frozen_segment_is_rebuilt(tmp_path):
    eng = open_engine(tmp_path, segment_bytes=1024, index_interval_bytes=100)
    plog = eng.create_topic("t", 1).partitions[0]
    for _ in range(30):
        plog.append(batch(3, size=40))
    first = plog.segments[0]
    end = plog.log_end_offset
    eng.close()
    os.unlink(first.log_path[:-4] + ".index")
    os.unlink(first.log_path[:-4] + ".timeindex")
    eng = open_engine(tmp_path, segment_bytes=1024, index_interval_bytes=100)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end
    assert all_offsets(plog) == list(range(end))
    assert os.path.exists(first.log_path[:-4] + ".index")
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


def test_frozen_segment_overwritten_under_an_intact_index_is_noticed_after_a_clean_shutdown(tmp_path):
    """A clean shutdown makes recovery checksum only each segment's tail, so a data file overwritten with garbage
    (its index intact) is caught by checking sampled index entries against the data; the later segments, now
    after a hole, are quarantined rather than deleted; a garbage time index is rebuilt, not trusted."""
    eng = open_engine(tmp_path, segment_bytes=1024, index_interval_bytes=100)
    plog = eng.create_topic("t", 1).partitions[0]
    for _ in range(30):
        plog.append(batch(3, size=40))
    first, second = plog.segments[:2]
    n = len(plog.segments)
    eng.close()
    times_path = first.log_path[:-4] + ".timeindex"
    with open(times_path, "rb") as f:
        times = f.read()
    with open(times_path, "wb") as f:
        f.write(os.urandom(120))
    with open(second.log_path, "r+b") as f:
        f.write(os.urandom(second.size))
    eng = open_engine(tmp_path, segment_bytes=1024, index_interval_bytes=100)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == second.base_offset and all_offsets(plog) == list(range(second.base_offset))
    assert plog.recovery.segments_dropped == n - 2
    assert len([q for q in os.listdir(tmp_path / "quarantine") if ".log." in q]) == n - 2
    with open(times_path, "rb") as f:
        assert f.read() == times
    eng.close()


# -- topics --------------------------------------------------------------------------------------------------

def test_topic_lifecycle_and_validation(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("orders", 3, {"retention.ms": 1000})
    eng.create_topic("a.b_c-1", 1)
    assert [t.name for t in eng.topics()] == ["a.b_c-1", "orders"]
    assert eng.topic("orders").config.retention_ms == 1000
    with pytest.raises(TopicExists):
        eng.create_topic("orders", 1)
    for bad in ("", ".", "..", "a/b", "../x", "x\x00", "é", "a" * 250, "sp ace"):
        with pytest.raises(InvalidTopicName):
            eng.create_topic(bad, 1)
    for bad in (0, -1, 10 ** 6, True):
        with pytest.raises(InvalidPartitions):
            eng.create_topic("p", bad)
    with pytest.raises(UnknownTopic):
        eng.partition("nope", 0)
    with pytest.raises(UnknownPartition):
        eng.partition("orders", 3)
    eng.partition("orders", 2).append(batch(2))
    eng.offsets.commit("g", "orders", 2, 2)
    eng.delete_topic("orders")
    assert [t.name for t in eng.topics()] == ["a.b_c-1"]
    assert eng.offsets.fetch("g", "orders", 2) is None
    assert not os.path.exists(tmp_path / "topics" / "orders")
    eng.close()
    eng = open_engine(tmp_path)
    assert [t.name for t in eng.topics()] == ["a.b_c-1"]
    eng.create_topic("orders", 1)
    assert eng.partition("orders", 0).log_end_offset == 0
    eng.close()


def test_topic_dir_without_metadata_is_quarantined(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("good", 1).partitions[0].append(batch(2))
    eng.close()
    os.makedirs(tmp_path / "topics" / "stray" / "0")
    (tmp_path / "topics" / "junk file").write_bytes(b"x")
    eng = open_engine(tmp_path)
    assert [t.name for t in eng.topics()] == ["good"]
    assert eng.partition("good", 0).log_end_offset == 2
    assert len(os.listdir(tmp_path / "quarantine")) == 2
    eng.close()


def test_data_dir_is_locked(tmp_path):
    from logway.storage import StorageError

    eng = open_engine(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        open_engine(tmp_path)
    eng.close()
    open_engine(tmp_path).close()


def test_producer_ids_never_repeat_across_reopen(tmp_path):
    from logway.storage import IdAllocator

    path = tmp_path / "ids"
    a = IdAllocator(path, block=10)
    first = [a.next_id() for _ in range(15)]
    assert first == list(range(15))
    b = IdAllocator(path, block=10)  # as after a crash: the rest of the second block is skipped
    assert b.next_id() == 20
    eng = open_engine(tmp_path / "data")
    x = eng.producer_ids.next_id()
    eng.close()
    eng = open_engine(tmp_path / "data")
    assert eng.producer_ids.next_id() > x
    eng.close()


# -- visibility: with reads_need_sync, readers see only what sync() made durable ------------------------------

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
    assert plog.watermark()[1] is segment and plog.watermark()[2] > size
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


# -- side checksums for formats without their own (TANK) ------------------------------------------------------

def _tank_engine(path, **cfg):
    from logway.codecs.tank import TankFormat

    return LogEngine(path, {"kafka": KafkaFormat(), "tank": TankFormat()}, TopicConfig(**cfg), clock=Clock())


def _bundle(*values: bytes) -> bytes:
    from logway.codecs.tank import encode_bundle, wrap

    return wrap(encode_bundle([Record(v) for v in values], default_timestamp=T0))


def _tank_values(plog):
    """Every value of a tank-format partition, across segments."""
    from logway.codecs.tank import decode_chunk

    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 20)) is not None:
        out += [r.value for r in decode_chunk(rng.read(), rng.first_offset + 1).records]
        offset = rng.end_offset
    return out


def test_tank_segments_keep_a_crc_per_bundle(tmp_path):
    from crc32c import crc32c

    from logway.storage.checksums import ENTRY as CRC_ENTRY

    eng = _tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    bundles = [_bundle(b"a"), _bundle(b"bb", b"cc"), _bundle(b"d" * 300)]
    for b in bundles:
        plog.append(b)
    seg = plog.segments[-1]
    with open(seg.checksums.path, "rb") as f:
        entries = list(CRC_ENTRY.iter_unpack(f.read()))
    positions = [0, len(bundles[0]), len(bundles[0]) + len(bundles[1])]
    assert entries == [(p, crc32c(b)) for p, b in zip(positions, bundles)]
    kafka = eng.create_topic("k", 1).partitions[0]
    kafka.append(batch(1))
    assert kafka.segments[-1].checksums is None  # Kafka batches carry their own CRC
    assert not os.path.exists(kafka.segments[-1].log_path[:-4] + ".checksums")
    eng.close()


@pytest.mark.parametrize("damage", ["bundle-without-checksum", "checksum-mismatch", "checksum-file-torn"])
def test_recovery_cuts_a_tank_bundle_its_checksum_does_not_vouch_for(tmp_path, damage):
    eng = _tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    plog.append(_bundle(b"acked-1"))
    plog.append(_bundle(b"acked-2"))
    seg = plog.segments[-1]
    log_path, crc_path = seg.log_path, seg.checksums.path
    good = seg.size
    if damage == "bundle-without-checksum":
        extra = _bundle(b"data reached the disk, its checksum did not")
    else:
        plog.append(_bundle(b"the last one"))
    eng.close(clean=False)
    if damage == "bundle-without-checksum":
        with open(log_path, "ab") as f:  # a whole, well-formed bundle: only the missing checksum betrays it
            f.write(extra)
    elif damage == "checksum-mismatch":
        with open(log_path, "r+b") as f:  # same length, different bytes: a plausible garbage bundle
            f.seek(good)
            data = bytearray(f.read())
            data[-1] ^= 0x20
            f.seek(good)
            f.write(data)
    else:
        os.truncate(crc_path, os.path.getsize(crc_path) - 3)
    damaged_size = os.path.getsize(log_path)
    eng = _tank_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert _tank_values(plog) == [b"acked-1", b"acked-2"]
    assert plog.log_end_offset == 2 and plog.recovery.truncated_bytes == damaged_size - good > 0
    assert os.path.getsize(crc_path) == 2 * 8
    plog.append(_bundle(b"after"))
    assert _tank_values(plog) == [b"acked-1", b"acked-2", b"after"]
    eng.close()


def test_a_tank_partition_from_an_older_logway_gets_its_checksums_rebuilt(tmp_path, caplog):
    eng = _tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    while len(plog.segments) < 3:
        plog.append(_bundle(b"x" * 100))
    want = _tank_values(plog)
    n = plog.log_end_offset
    eng.close()
    pdir = os.path.join(tmp_path, "topics", "t", "0")
    for name in os.listdir(pdir):
        if name.endswith(".checksums"):
            os.unlink(os.path.join(pdir, name))
    eng = _tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == n and plog.recovery.truncated_bytes == 0
    assert sorted(n for n in os.listdir(pdir) if n.endswith(".checksums")) == sorted(
        n[:-4] + ".checksums" for n in os.listdir(pdir) if n.endswith(".log"))
    assert "rebuilding it from the data" in caplog.text
    eng.close(clean=False)
    eng = _tank_engine(tmp_path, segment_bytes=1024)  # and the rebuilt checksums vouch for the data
    assert eng.partition("t", 0).log_end_offset == n and eng.partition("t", 0).recovery.truncated_bytes == 0
    assert _tank_values(eng.partition("t", 0)) == want and len(want) == n
    eng.close()


def test_a_new_tank_segment_whose_checksum_file_never_reached_the_disk_is_emptied(tmp_path, caplog):
    eng = _tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    while len(plog.segments) < 2:
        plog.append(_bundle(b"y" * 100))
    frozen_end = plog.segments[0].next_offset
    active = plog.segments[-1]
    eng.close(clean=False)
    os.unlink(active.checksums.path)  # its name was never synced; the data file's was (or persisted anyway)
    eng = _tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == frozen_end and plog.recovery.truncated_bytes == active.size
    assert "cannot be verified" in caplog.text
    eng.close()
