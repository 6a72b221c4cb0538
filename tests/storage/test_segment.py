"""One segment: appends that are stamped or refused whole, reads of whole batches, and the crash shapes recovery
repairs (torn, half-written, unindexed or overwritten batches)."""

from __future__ import annotations

import os
import random

import pytest
from logway.storage import BatchTooLarge, CorruptBatch
from logway.storage.index import ENTRY

from .helpers import all_offsets, batch, fill, open_engine, values


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


@pytest.mark.parametrize("seed", range(8))
def test_recovery_after_nonsense_from_a_random_byte_of_a_random_batch(tmp_path, seed):
    rnd = random.Random(seed)
    random.seed(seed)
    eng, plog, bounds, log_path = fill(tmp_path, index_interval_bytes=512)
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
    eng, plog, bounds, log_path = fill(tmp_path, index_interval_bytes=128)
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


def test_crash_shape_half_written_batch(tmp_path):
    eng, plog, bounds, log_path = fill(tmp_path, n=50)
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
