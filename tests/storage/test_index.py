"""The sparse offset and time indexes: lookups at every boundary, and rebuilding an index that is missing, torn or
holds nonsense."""

from __future__ import annotations

import os

import pytest
from logway.codecs.kafka.records import decode_records
from logway.storage import OffsetOutOfRange

from .helpers import T0, all_offsets, batch, fill, open_engine


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


def test_recovery_after_nonsense_written_into_the_index(tmp_path):
    eng, plog, bounds, log_path = fill(tmp_path, index_interval_bytes=256)
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


def test_crash_shape_truncated_index_entry(tmp_path):
    eng, plog, bounds, log_path = fill(tmp_path, index_interval_bytes=128)
    end = plog.log_end_offset
    eng.close()  # even after a clean shutdown a torn index entry is noticed
    index_path = log_path[:-4] + ".index"
    os.truncate(index_path, os.path.getsize(index_path) - 3)
    eng = open_engine(tmp_path, index_interval_bytes=128)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == end
    assert all_offsets(plog) == list(range(end))
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
