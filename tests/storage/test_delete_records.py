"""PartitionLog.delete_records (Kafka's DeleteRecords): the log start offset moves on durably, whole segments
below it go, reads and lookups honour it, across clean and unclean restarts and with retention."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from logway.codecs.kafka.records import decode_records
from logway.storage import OffsetOutOfRange
from logway.storage.partition import LOG_START

from .helpers import T0, batch, bundle, open_engine, tank_engine, tank_values, values


def filled(tmp_path, batches=30, per_batch=4, **cfg):
    """An engine with topic t (one partition) of `batches` batches of `per_batch` records over several segments;
    record i has timestamp T0 + i."""
    cfg.setdefault("segment_bytes", 1024)
    eng = open_engine(tmp_path, **cfg)
    plog = eng.create_topic("t", 1).partitions[0]
    for b in range(batches):
        plog.append(batch(per_batch, ts=T0 + b * per_batch, size=40, tag=f"b{b}-"))
    assert batches < 30 or len(plog.segments) > 5
    return eng, plog


def segment_files(plog):
    return sorted(n for n in os.listdir(plog.directory) if n.endswith(".log"))


def offsets_from(plog, offset):
    out = []
    while offset < plog.high_watermark:
        recs = values(plog, offset)
        out += [r.offset for r in recs]
        offset = recs[-1].offset + 1
    return out


def test_delete_records_moves_the_start_and_deletes_whole_segments(tmp_path):
    eng, plog = filled(tmp_path)
    end = plog.log_end_offset
    before = segment_files(plog)
    target = plog.segments[2].base_offset + 1  # inside the third segment, inside a batch
    assert plog.delete_records(target) == target
    assert plog.log_start_offset == target == plog.first_offset
    assert plog.segments[0].base_offset < target  # the segment holding it stays
    assert segment_files(plog) == before[2:]
    assert plog.log_end_offset == end
    with pytest.raises(OffsetOutOfRange) as err:
        plog.read(target - 1, 100)
    assert (err.value.log_start, err.value.log_end) == (target, end)
    rng = plog.read(target, 100)
    assert rng.first_offset <= target  # whole batches: the one straddling the start is served whole
    assert [r.offset for r in decode_records(rng.read(), min_offset=target)][0] == target
    assert offsets_from(plog, target) == list(range(target, end))
    assert plog.tail_offset(1 << 30) == target
    assert plog.offset_for_timestamp(0) == target  # older timestamps are below the start
    assert plog.offset_for_timestamp(T0 + end - 1) == end - 1
    assert plog.offset_for_timestamp(T0 + end) is None
    # Not past the start: nothing changes, the start is answered.
    assert plog.delete_records(target - 5) == target
    assert plog.delete_records(target) == target
    assert (tmp_path / "topics" / "t" / "0" / LOG_START).read_text() == f"{target}\n"
    eng.close()


def test_delete_up_to_the_high_watermark_empties_the_log_and_appends_go_on(tmp_path):
    eng, plog = filled(tmp_path)
    end = plog.log_end_offset
    assert plog.delete_records(-1) == end
    assert plog.log_start_offset == plog.first_offset == plog.log_end_offset == plog.high_watermark == end
    assert len(plog.segments) == 1 and plog.segments[0].base_offset == end and plog.segments[0].size == 0
    assert segment_files(plog) == [f"{end:020d}.log"]
    assert plog.read(end, 100) is None
    with pytest.raises(OffsetOutOfRange):
        plog.read(end - 1, 100)
    assert plog.offset_for_timestamp(0) is None
    assert plog.tail_offset(1000) == end
    assert plog.append(batch(2)).base_offset == end
    assert [r.offset for r in values(plog, end)] == [end, end + 1]
    eng.close()
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (end, end + 2)
    eng.close()


def test_bad_offsets_are_refused_and_change_nothing(tmp_path):
    eng, plog = filled(tmp_path, batches=3)
    end = plog.high_watermark
    for bad in (end + 1, -2, -100, 2**63):
        with pytest.raises(OffsetOutOfRange) as err:
            plog.delete_records(bad)
        assert (err.value.log_start, err.value.log_end) == (0, end)
    for bad in (True, 1.0, "3", None):
        with pytest.raises(TypeError):
            plog.delete_records(bad)
    assert plog.log_start_offset == 0 and not os.path.exists(os.path.join(plog.directory, LOG_START))
    eng.close()


def test_only_synced_records_can_be_deleted_when_reads_need_sync(tmp_path):
    from logway.storage import LogEngine, TopicConfig

    from .helpers import FORMATS, Clock

    eng = LogEngine(tmp_path, FORMATS, TopicConfig(), clock=Clock(), reads_need_sync=True)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(5))
    assert plog.high_watermark == 0
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records(3)
    assert plog.delete_records(-1) == 0  # up to the high watermark: nothing yet
    plog.sync()
    assert plog.delete_records(-1) == 5
    assert plog.high_watermark == plog.log_start_offset == 5
    plog.append(batch(2))
    plog.sync()
    assert [r.offset for r in values(plog, 5)] == [5, 6]
    eng.close()


@pytest.mark.parametrize("clean", [True, False])
def test_the_start_survives_a_restart(tmp_path, clean):
    eng, plog = filled(tmp_path)
    end = plog.log_end_offset
    target = plog.segments[3].base_offset + 2
    plog.delete_records(target)
    kept = segment_files(plog)
    eng.close(clean=clean)  # unclean: as a kill leaves it (nothing synced at close, full recovery next)
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.recovery.unclean is not clean
    assert (plog.log_start_offset, plog.first_offset, plog.log_end_offset) == (target, target, end)
    assert segment_files(plog) == kept
    with pytest.raises(OffsetOutOfRange):
        plog.read(target - 1, 10)
    assert offsets_from(plog, target) == list(range(target, end))
    assert plog.append(batch(1)).base_offset == end
    eng.close()


def test_a_crash_before_the_segments_went_is_finished_at_open(tmp_path):
    """`log-start-offset` is written before the segments below it are deleted: a crash in between leaves them,
    and the next open deletes them."""
    eng, plog = filled(tmp_path)
    end = plog.log_end_offset
    before = segment_files(plog)
    target = plog.segments[2].base_offset
    eng.close(clean=False)
    (tmp_path / "topics" / "t" / "0" / LOG_START).write_text(f"{target}\n")
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.log_start_offset == target and plog.log_end_offset == end
    assert segment_files(plog) == before[2:]
    eng.close()


def test_a_start_at_or_past_the_end_restarts_an_empty_log_there(tmp_path, caplog):
    eng, plog = filled(tmp_path, batches=3)
    end = plog.log_end_offset
    eng.close(clean=False)
    # At the end with the records still there (a crash before the roll): they go.
    (tmp_path / "topics" / "t" / "0" / LOG_START).write_text(f"{end}\n")
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset, plog.size_bytes) == (end, end, 0)
    eng.close()
    # Past the end (records that never reached the disk): offsets below the start are never handed out again.
    (tmp_path / "topics" / "t" / "0" / LOG_START).write_text(f"{end + 50}\n")
    with caplog.at_level(logging.WARNING, logger="logway.storage"):
        eng = open_engine(tmp_path)
    assert "restarts empty" in caplog.text
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (end + 50, end + 50)
    assert plog.append(batch(1)).base_offset == end + 50
    eng.close()


@pytest.mark.parametrize("garbage", [b"", b"abc\n", b"-5\n", b"99999999999999999999\n"])
def test_an_unreadable_start_file_is_ignored_with_an_error(tmp_path, caplog, garbage):
    eng, plog = filled(tmp_path, batches=3)
    end = plog.log_end_offset
    eng.close()
    (tmp_path / "topics" / "t" / "0" / LOG_START).write_bytes(garbage)
    with caplog.at_level(logging.ERROR, logger="logway.storage"):
        eng = open_engine(tmp_path)
    assert "not an offset" in caplog.text
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (0, end)
    eng.close()


def test_a_leftover_temporary_start_file_is_removed(tmp_path):
    eng, plog = filled(tmp_path, batches=3)
    plog.delete_records(4)
    eng.close()
    (tmp_path / "topics" / "t" / "0" / (LOG_START + ".tmp")).write_text("9\n")
    eng = open_engine(tmp_path)
    assert eng.partition("t", 0).log_start_offset == 4
    assert not (tmp_path / "topics" / "t" / "0" / (LOG_START + ".tmp")).exists()
    eng.close()


def test_retention_and_deleted_records(tmp_path):
    from .helpers import Clock

    clock = Clock()
    eng = open_engine(tmp_path, clock=clock, segment_bytes=1024, retention_ms=60_000)
    plog = eng.create_topic("t", 1).partitions[0]
    for b in range(30):
        plog.append(batch(4, ts=T0 + b * 1000, size=40))
    first_kept = plog.segments[1].base_offset
    target = plog.segments[4].base_offset + 1
    # Retention first: the start moves with the first segment; deleting records below it changes nothing.
    clock.ms = plog.segments[0].max_timestamp + 60_001
    assert plog.enforce_retention() == 1
    assert plog.log_start_offset == first_kept
    assert plog.delete_records(first_kept - 1) == first_kept
    # Then records: the start is past the first segment's base until retention goes further.
    assert plog.delete_records(target) == target
    assert plog.segments[0].base_offset < target == plog.log_start_offset
    clock.ms = plog.segments[0].max_timestamp + 60_001
    assert plog.enforce_retention() == 1
    assert plog.log_start_offset == plog.segments[0].base_offset > target
    eng.close()
    eng = open_engine(tmp_path, segment_bytes=1024, retention_ms=60_000)
    plog = eng.partition("t", 0)
    assert plog.log_start_offset == plog.segments[0].base_offset > target  # the stale file does not move it back
    eng.close()


def test_retention_bytes_and_delete_records_together(tmp_path):
    eng, plog = filled(tmp_path, retention_bytes=2048)
    target = plog.segments[1].base_offset + 1
    plog.delete_records(target)
    plog.enforce_retention()
    assert plog.size_bytes <= 2048 + plog.segments[0].size
    assert plog.log_start_offset == max(target, plog.segments[0].base_offset)
    assert offsets_from(plog, plog.log_start_offset) == list(range(plog.log_start_offset, plog.log_end_offset))
    eng.close()


def test_tank_topics(tmp_path):
    eng = tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("tt", 1, {"format": "tank"}).partitions[0]
    for i in range(200):
        plog.append(bundle(b"v%03d" % i, b"w%03d" % i))
    assert len(plog.segments) > 2
    target = plog.segments[1].base_offset + 2
    assert plog.delete_records(target) == target
    assert plog.first_offset == target
    got = tank_values(plog)
    assert len(got) == 400 - target and got[0] == b"v%03d" % (target // 2)
    eng.close()
    eng = tank_engine(tmp_path, segment_bytes=1024)
    assert eng.partition("tt", 0).log_start_offset == target
    eng.close()


def test_delete_records_while_appending_and_syncing(tmp_path):
    eng, plog = filled(tmp_path, batches=5)
    stop = threading.Event()
    errors = []

    def append():
        try:
            for _ in range(400):
                plog.append(batch(3, size=30))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            stop.set()

    def sync():
        try:
            while not stop.is_set():
                plog.sync()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=append), threading.Thread(target=sync)]
    for t in threads:
        t.start()
    starts = []
    while not stop.is_set():
        starts.append(plog.delete_records(-1 if len(starts) % 3 == 0 else plog.high_watermark // 2 + 1))
    for t in threads:
        t.join()
    assert not errors
    assert starts == sorted(starts)
    end = plog.log_end_offset
    assert end == 5 * 4 + 400 * 3
    start = plog.log_start_offset
    assert offsets_from(plog, start) == list(range(start, end))
    eng.close(clean=False)
    eng = open_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
    eng.close()


def test_the_start_survives_a_power_cut(powerfs):
    """On the power-loss file system (only fsynced data and names survive a cut): the start is durable when
    `delete_records` returns, and so are the deletions of the segments below it."""
    eng = open_engine(os.path.join(powerfs.path, "data"), segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    for b in range(30):
        plog.append(batch(4, size=40))
    plog.sync()
    end = plog.log_end_offset
    target = plog.segments[3].base_offset + 1
    kept = segment_files(plog)[3:]
    assert plog.delete_records(target) == target
    powerfs.cut()  # no close: the power went
    eng = open_engine(os.path.join(powerfs.path, "data"), segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (target, end)
    assert segment_files(plog) == kept
    assert offsets_from(plog, target) == list(range(target, end))
    assert plog.delete_records(-1) == end
    powerfs.cut()
    eng = open_engine(os.path.join(powerfs.path, "data"), segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset, plog.size_bytes) == (end, end, 0)
    assert plog.append(batch(1)).base_offset == end
    eng.close()
