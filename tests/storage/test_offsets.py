"""OffsetStore: semantics, recovery from torn/corrupt tails, compaction, counters, and a real kill -9 storm."""

from __future__ import annotations

import errno
import logging
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from logway.storage.errors import StorageClosed, StorageError, StorageIOError
from logway.storage.offsets import (
    COMPACT_NAME,
    FILE_HEADER,
    LOG_NAME,
    MAX_METADATA_BYTES,
    MAX_RECORD_BYTES,
    MAX_TOPIC_BYTES,
    CommittedOffset,
    OffsetStore,
)

from ..conftest import fill_disk

STORM = Path(__file__).resolve().parent.parent / "helpers" / "offset_storm.py"
LOGGER = "logway.storage.offsets"


def log_size(directory: Path) -> int:
    return (directory / LOG_NAME).stat().st_size


# ------------------------------------------------------------------------------------------------ semantics


def test_commit_fetch_overwrite(tmp_path):
    with OffsetStore(tmp_path) as store:
        assert store.fetch("g", "t", 0) is None
        store.commit("g", "t", 0, 10, "meta", commit_time_ms=1000)
        assert store.fetch("g", "t", 0) == CommittedOffset(10, "meta", 1000)
        store.commit("g", "t", 0, 5, commit_time_ms=2000)  # the store keeps the latest, even if lower
        assert store.fetch("g", "t", 0) == CommittedOffset(5, "", 2000)
        assert store.fetch("g", "t", 1) is None
        assert store.fetch("other", "t", 0) is None
        store.commit("g", "t", 1, 7)
        now = time.time_ns() // 1_000_000
        assert abs(store.fetch("g", "t", 1).commit_time_ms - now) < 5000  # default: wall clock


def test_fetch_group_and_groups(tmp_path):
    with OffsetStore(tmp_path) as store:
        assert store.groups() == [] and store.fetch_group("g") == {}
        store.commit("g2", "a", 0, 1, commit_time_ms=1)
        store.commit("g1", "a", 0, 2, commit_time_ms=1)
        store.commit("g1", "b", 3, 4, "x", commit_time_ms=1)
        assert store.groups() == ["g1", "g2"]
        group = store.fetch_group("g1")
        assert group == {("a", 0): CommittedOffset(2, "", 1), ("b", 3): CommittedOffset(4, "x", 1)}
        group.clear()  # a copy
        assert len(store.fetch_group("g1")) == 2
        assert store.live_keys == 3


def test_unicode_names_and_extremes(tmp_path):
    with OffsetStore(tmp_path) as store:
        store.commit("grüppe-✓", "tópic", 2**31 - 1, 2**63 - 1, "méta 🚀" * 10, commit_time_ms=-1)
        store.commit("g", "t" * MAX_TOPIC_BYTES, 0, 0, "m" * MAX_METADATA_BYTES, commit_time_ms=0)
    with OffsetStore(tmp_path) as store:
        assert store.fetch("grüppe-✓", "tópic", 2**31 - 1) == CommittedOffset(2**63 - 1, "méta 🚀" * 10, -1)
        assert store.fetch("g", "t" * MAX_TOPIC_BYTES, 0) == CommittedOffset(0, "m" * MAX_METADATA_BYTES, 0)


def test_delete_topic_and_group(tmp_path):
    with OffsetStore(tmp_path) as store:
        for g in ("g1", "g2"):
            for t in ("a", "b"):
                store.commit(g, t, 0, 1)
        store.commit("g3", "a", 0, 1)
        store.delete_topic("a")
        assert store.groups() == ["g1", "g2"]  # g3 had only topic a
        assert set(store.fetch_group("g1")) == {("b", 0)}
        store.delete_group("g2")
        store.delete_group("missing")  # harmless
        assert store.groups() == ["g1"]
        store.commit("g2", "a", 1, 9)  # a deleted group / topic can come back
        assert store.live_keys == 2
    with OffsetStore(tmp_path) as store:  # tombstones are durable like commits
        assert store.groups() == ["g1", "g2"]
        assert store.fetch_group("g1") == {("b", 0): store.fetch("g1", "b", 0)}
        assert set(store.fetch_group("g2")) == {("a", 1)}
        assert store.fetch("g3", "a", 0) is None


def test_reopen_restores(tmp_path):
    expected = {}
    with OffsetStore(tmp_path) as store:
        for i in range(500):
            key = (f"g{i % 7}", f"t{i % 3}", i % 5)
            store.commit(*key, i, f"m{i}", commit_time_ms=i)
            expected[key] = CommittedOffset(i, f"m{i}", i)
        store.commit_many("many", [("t", p, p * 10, "") for p in range(20)], commit_time_ms=5)
        expected.update({("many", "t", p): CommittedOffset(p * 10, "", 5) for p in range(20)})
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0 and store.recovery.records == 501
        assert store.live_keys == len(expected)
        for key, value in expected.items():
            assert store.fetch(*key) == value


def test_commit_many_duplicates_and_empty(tmp_path):
    with OffsetStore(tmp_path) as store:
        store.commit_many("g", [])
        assert store.written_seq == 0  # nothing written
        store.commit_many("g", [("t", 0, 1, "a"), ("t", 0, 2, "b")], commit_time_ms=3)
        assert store.fetch("g", "t", 0) == CommittedOffset(2, "b", 3)  # later entry wins
        store.commit_many("g", (e for e in [("u", 1, 4, "")]))  # any iterable
    with OffsetStore(tmp_path) as store:
        assert store.fetch("g", "t", 0) == CommittedOffset(2, "b", 3)
        assert store.fetch("g", "u", 1).offset == 4


@pytest.mark.parametrize(
    "args",
    [
        (1, "t", 0, 0),
        ("", "t", 0, 0),
        ("g", "", 0, 0),
        ("g", b"t", 0, 0),
        ("g", "t" * (MAX_TOPIC_BYTES + 1), 0, 0),
        ("g", "é" * 128, 0, 0),  # 256 bytes in UTF-8
        ("g" * 40000, "t", 0, 0),
        ("\ud800", "t", 0, 0),
        ("g", "t", -1, 0),
        ("g", "t", 2**31, 0),
        ("g", "t", True, 0),
        ("g", "t", 1.0, 0),
        ("g", "t", 0, -1),
        ("g", "t", 0, 2**63),
        ("g", "t", 0, "5"),
        ("g", "t", 0, 0, None),
        ("g", "t", 0, 0, "m" * (MAX_METADATA_BYTES + 1)),
        ("g", "t", 0, 0, "", 2**63),
        ("g", "t", 0, 0, "", 1.5),
    ],
)
def test_validation(tmp_path, args):
    with OffsetStore(tmp_path) as store:
        with pytest.raises(ValueError):
            store.commit(*args)
        assert store.written_seq == 0 and store.live_keys == 0



def test_delete_committed_before_keeps_what_was_committed_since(tmp_path):
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1, commit_time_ms=1_000)
        store.commit("g", "t", 1, 2, commit_time_ms=5_000)
        store.commit("g", "t", 2, 3, commit_time_ms=2_000)
        assert store.delete("g", [("t", 0), ("t", 1), ("t", 9)], committed_before=3_000) == 1  # only (t, 0)
        assert set(store.fetch_group("g")) == {("t", 1), ("t", 2)}
        assert store.delete("g", [("t", 1)], committed_before=3_000) == 0  # nothing written
    with OffsetStore(tmp_path) as store:
        assert set(store.fetch_group("g")) == {("t", 1), ("t", 2)}


def test_validation_commit_many_and_deletes(tmp_path):
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1)
        for bad in ([("t", 0, 1)], [("t", 0, 1, "", 5)], [None], [("t", -1, 1, "")], [("t", 0, 1, "")] + [7]):
            with pytest.raises(ValueError):
                store.commit_many("g", bad)
        too_big = [("t" * 200, p, 0, "m" * 4000) for p in range(MAX_RECORD_BYTES // 4000 + 10)]
        with pytest.raises(ValueError, match="MAX_RECORD_BYTES"):
            store.commit_many("g", too_big)
        with pytest.raises(ValueError):
            store.delete_group("")
        with pytest.raises(ValueError):
            store.delete_topic(3)
        with pytest.raises(ValueError):
            OffsetStore(tmp_path / "other", compact_after=0)
        assert store.written_seq == 1 and store.fetch_group("g") == {("t", 0): store.fetch("g", "t", 0)}


def test_closed_store_and_exclusive_open(tmp_path):
    store = OffsetStore(tmp_path)
    with pytest.raises(StorageError, match="already open"):
        OffsetStore(tmp_path)
    store.commit("g", "t", 0, 1)
    store.close()
    store.close()  # idempotent
    for call in (
        lambda: store.commit("g", "t", 0, 2),
        lambda: store.commit_many("g", [("t", 0, 2, "")]),
        lambda: store.fetch("g", "t", 0),
        lambda: store.fetch_group("g"),
        lambda: store.groups(),
        lambda: store.delete_group("g"),
        lambda: store.delete_topic("t"),
        lambda: store.sync(),
        lambda: store.compact(),
    ):
        with pytest.raises(StorageClosed):
            call()
    with OffsetStore(tmp_path) as again:  # the lock was released
        assert again.fetch("g", "t", 0).offset == 1


def test_not_an_offset_log_is_refused_untouched(tmp_path):
    (tmp_path / LOG_NAME).write_bytes(b"something else entirely")
    with pytest.raises(StorageError, match="not an offset log"):
        OffsetStore(tmp_path)
    assert (tmp_path / LOG_NAME).read_bytes() == b"something else entirely"
    (tmp_path / LOG_NAME).write_bytes(FILE_HEADER[:8] + struct.pack(">I", 99))
    with pytest.raises(StorageError, match="version 99"):
        OffsetStore(tmp_path)
    with OffsetStore(tmp_path / "fresh"):  # a failed open released its lock and fds
        pass
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / LOG_NAME).write_bytes(FILE_HEADER[:5])  # torn header: start over
    with OffsetStore(tmp_path / "torn") as store:
        store.commit("g", "t", 0, 1)
    with OffsetStore(tmp_path / "torn") as store:
        assert store.fetch("g", "t", 0).offset == 1


def test_storage_never_imports_trio_codecs_gateway():
    code = (
        "import sys, logway.storage.offsets\n"
        "bad = [m for m in sys.modules if m == 'trio' or m.startswith(('trio.', 'logway.codecs', 'logway.gateway'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------------ recovery


def three_commits(directory: Path) -> list[int]:
    """Commit A, B, C as separate records; return the file size after each (record boundaries)."""
    with OffsetStore(directory) as store:
        ends = [log_size(directory)]
        for i, name in enumerate("ABC"):
            store.commit("g", name, 0, i + 1, commit_time_ms=1)
            ends.append(log_size(directory))
    return ends


def test_torn_tail_truncated_mid_record(tmp_path, caplog):
    ends = three_commits(tmp_path)
    os.truncate(tmp_path / LOG_NAME, ends[3] - 3)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with OffsetStore(tmp_path) as store:
            assert store.fetch("g", "A", 0).offset == 1 and store.fetch("g", "B", 0).offset == 2
            assert store.fetch("g", "C", 0) is None
            report = store.recovery
            assert report.records == 2 and report.bytes_dropped == ends[3] - 3 - ends[2]
            assert "torn" in report.reason
            assert log_size(tmp_path) == ends[2]
            store.commit("g", "D", 0, 4)  # appends after the cut, not after garbage
    assert f"dropped {ends[3] - 3 - ends[2]} bytes" in caplog.text
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0
        assert store.fetch("g", "D", 0).offset == 4 and store.fetch("g", "C", 0) is None


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00" * 37,  # a zeroed tail (length 0, crc 0) after power loss
        b"\xff\xff\xff\xff\x00\x00\x00\x00",  # absurd length: must not allocate
        struct.pack(">II", 100, 0) + b"x" * 100,  # complete but bad CRC
        b"\x01\x02",  # torn frame header
        os.urandom(300),
    ],
)
def test_garbage_appended(tmp_path, garbage):
    ends = three_commits(tmp_path)
    with open(tmp_path / LOG_NAME, "ab") as f:
        f.write(garbage)
    with OffsetStore(tmp_path) as store:
        assert [store.fetch("g", n, 0).offset for n in "ABC"] == [1, 2, 3]
        assert store.recovery.bytes_dropped == len(garbage)
        assert log_size(tmp_path) == ends[3]


@pytest.mark.parametrize("where", ["length", "crc", "payload_first", "payload_last"])
def test_flipped_byte_in_last_record(tmp_path, where):
    ends = three_commits(tmp_path)
    pos = {"length": ends[2] + 2, "crc": ends[2] + 5, "payload_first": ends[2] + 8, "payload_last": ends[3] - 1}[where]
    data = bytearray((tmp_path / LOG_NAME).read_bytes())
    data[pos] ^= 0x40
    (tmp_path / LOG_NAME).write_bytes(data)
    with OffsetStore(tmp_path) as store:
        assert store.fetch("g", "A", 0).offset == 1 and store.fetch("g", "B", 0).offset == 2
        assert store.fetch("g", "C", 0) is None
        assert log_size(tmp_path) == ends[2]


def test_corrupt_middle_record_drops_the_rest(tmp_path):
    ends = three_commits(tmp_path)
    data = bytearray((tmp_path / LOG_NAME).read_bytes())
    data[ends[1] + 10] ^= 1  # inside B
    (tmp_path / LOG_NAME).write_bytes(data)
    with OffsetStore(tmp_path) as store:
        assert store.fetch_group("g") == {("A", 0): CommittedOffset(1, "", 1)}
        assert store.recovery.reason == "CRC mismatch"
        assert log_size(tmp_path) == ends[1]


def test_commit_many_is_all_or_nothing_at_every_cut(tmp_path):
    src = tmp_path / "src"
    with OffsetStore(src) as store:
        store.commit_many("g", [("t", p, 1, "old") for p in range(8)], commit_time_ms=1)
        before = log_size(src)
        store.commit_many("g", [("t", p, 2, "new" * p) for p in range(8)] + [("u", 0, 5, "")], commit_time_ms=2)
        after = log_size(src)
    for cut in range(before, after + 1):
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        shutil.copy(src / LOG_NAME, work / LOG_NAME)
        os.truncate(work / LOG_NAME, cut)
        with OffsetStore(work) as store:
            group = store.fetch_group("g")
            if cut == after:
                assert len(group) == 9 and {v.offset for k, v in group.items() if k[0] == "t"} == {2}
            else:
                assert group == {("t", p): CommittedOffset(1, "old", 1) for p in range(8)}, cut
                assert log_size(work) == before


def test_short_write_is_cut_off_and_store_stays_consistent(tmp_path):
    """A disk-full style short write (real, via RLIMIT_FSIZE in a child) must not leave a torn record behind."""
    code = """
import resource, signal, sys
from logway.storage.errors import StorageError
from logway.storage.offsets import OffsetStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG / short writes instead of being killed
store = OffsetStore(sys.argv[1])
store.commit("g", "t", 0, 0)
store.sync()
limit = (store.directory / "offsets.log").stat().st_size + 1000
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
ok = failed = 0
for i in range(1, 200):
    try:
        store.commit("g", "t", i % 4, i, "m" * 25)
        ok = i
    except StorageError:
        failed += 1
assert failed and store.fetch("g", "t", ok % 4).offset == ok
store.close()
print(ok)
"""
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    ok = int(result.stdout)
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0 and store.recovery.records == ok + 1
        assert store.fetch("g", "t", ok % 4).offset == ok


def test_disk_full_refuses_commits_then_recovers_by_itself(small_disk, tmp_path, caplog):
    """A real full tmpfs: commits fail with an I/O error (never half-written), the file stays replayable, and
    the first commit after space returns succeeds and survives a reopen."""
    work = small_disk / "offsets"
    with OffsetStore(work) as store:
        store.commit("g", "t", 0, 1, commit_time_ms=1)
        store.sync()
        ballast = fill_disk(small_disk)
        acked, errors = 1, []
        for i in range(2, 200):  # the file's last page may still hold a few records
            try:
                store.commit("g", "t", i % 3, i, "m" * 1000, commit_time_ms=1)
                store.sync()
                acked = i
            except StorageIOError as exc:
                assert isinstance(exc, OSError) and exc.errno == errno.ENOSPC, exc
                assert "No space left on device" in str(exc)
                errors.append(i)
                if len(errors) == 5:
                    break
        assert errors, "the disk never filled up"
        assert store.fetch("g", "t", acked % 3).offset == acked
        assert all(getattr(store.fetch("g", "t", i % 3), "offset", None) != i for i in errors)  # none applied
        # What is on disk replays whole, to exactly what the store shows (no torn record left behind).
        copy = tmp_path / "copy"
        copy.mkdir()
        shutil.copy(work / LOG_NAME, copy / LOG_NAME)
        with OffsetStore(copy) as replay:
            assert replay.recovery.bytes_dropped == 0
            assert replay.fetch_group("g") == store.fetch_group("g")
        os.unlink(ballast)  # space returns: the very next commit succeeds, no reopen needed
        store.commit("g", "t", 0, 1000, "after", commit_time_ms=2)
        store.sync()
        state = store.fetch_group("g")
    with OffsetStore(work) as store:
        assert store.recovery.bytes_dropped == 0
        assert store.fetch_group("g") == state and state[("t", 0)] == CommittedOffset(1000, "after", 2)


class _FaultyOS:
    """Stands in for the `os` module inside logway.storage.offsets: calls named in `faults` raise, the rest pass
    through. `short_writes` makes os.write write only half of what it is given (then the next one fails)."""

    def __init__(self, *, faults=(), short_writes=False, err=errno.EIO):
        self.faults = set(faults)
        self.short_writes = short_writes
        self.err = err

    def __getattr__(self, name):
        real = getattr(os, name)
        if name == "write" and self.short_writes:
            def write(fd, data):
                if "write" in self.faults:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                self.faults.add("write")
                return os.write(fd, bytes(data)[: len(data) // 2])
            return write
        if name in self.faults:
            def fail(*args, **kwargs):
                raise OSError(self.err, os.strerror(self.err))
            return fail
        return real


def test_failed_fdatasync_fails_the_store_until_a_rewrite_succeeds(tmp_path, monkeypatch, caplog):
    import logway.storage.offsets as offsets_module

    healthy = offsets_module._fdatasync
    faulty = []

    def fdatasync(fd):
        if faulty:
            raise OSError(faulty[0], os.strerror(faulty[0]))
        healthy(fd)

    monkeypatch.setattr(offsets_module, "_fdatasync", fdatasync)
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1, commit_time_ms=1)
        store.sync()
        store.commit("g", "t", 0, 2, commit_time_ms=1)
        faulty.append(errno.ENOSPC)  # e.g. NFS or a thin volume: the space runs out at writeback
        with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(StorageIOError) as failed:
            store.sync()
        assert failed.value.errno == errno.ENOSPC and store.synced_seq < store.written_seq
        assert "writes are refused until the log is rewritten" in caplog.text
        assert store.fetch("g", "t", 0).offset == 2  # reads keep working (outcome unknown to the caller)
        for _ in range(3):  # still failing: each write tries the rewrite, which fails too; nothing is written
            with pytest.raises(StorageIOError, match="cannot rewrite its log yet"):
                store.commit("g", "t", 1, 5)
        assert store.fetch("g", "t", 1) is None and not (tmp_path / COMPACT_NAME).exists()
        faulty.clear()  # the file system recovers
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            store.commit("g", "t", 1, 6, commit_time_ms=1)
        assert "recovered from the I/O failure" in caplog.text
        store.sync()
        assert store.synced_seq == store.written_seq
        state = store.fetch_group("g")
    assert state == {("t", 0): CommittedOffset(2, "", 1), ("t", 1): CommittedOffset(6, "", 1)}
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0 and store.fetch_group("g") == state


def test_failed_cut_after_a_short_write_is_repaired_by_the_next_write(tmp_path, monkeypatch):
    """A short write whose cut-off (ftruncate) fails too leaves a torn record: the store fails, and the next
    write replaces the whole file, so the torn bytes never reach a later recovery."""
    import logway.storage.offsets as offsets_module

    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1, commit_time_ms=1)
        store.sync()
        size = log_size(tmp_path)
        monkeypatch.setattr(offsets_module, "os", _FaultyOS(faults={"ftruncate"}, short_writes=True))
        with pytest.raises(StorageIOError, match="No space left"):
            store.commit("g", "t", 0, 2, "x" * 100)
        assert log_size(tmp_path) > size  # the torn half is still there
        with pytest.raises(StorageIOError):
            store.commit("g", "t", 0, 3)  # the fault persists: refused, nothing written
        monkeypatch.setattr(offsets_module, "os", os)
        store.commit("g", "t", 0, 4, commit_time_ms=1)
        store.sync()
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0
        assert store.fetch_group("g") == {("t", 0): CommittedOffset(4, "", 1)}


def test_commit_after_recovery_survives_kill_9(tmp_path):
    """After a failed fdatasync and the repair, an acknowledged commit is durable across a real kill -9."""
    code = """
import errno, os, signal, sys
import logway.storage.offsets as m
from logway.storage.errors import StorageIOError
healthy = m._fdatasync
broken = [True]
def fdatasync(fd):
    if broken:
        raise OSError(errno.EIO, "injected")
    healthy(fd)
m._fdatasync = fdatasync
store = m.OffsetStore(sys.argv[1])
store.commit("g", "t", 0, 1)
try:
    store.sync()
    sys.exit("sync did not fail")
except StorageIOError:
    pass
broken.clear()
store.commit("g", "t", 0, 2, "acked")
store.sync()
print("ACK", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == -signal.SIGKILL and result.stdout == "ACK\n", result.stderr
    with OffsetStore(tmp_path) as store:
        assert store.recovery.bytes_dropped == 0
        found = store.fetch("g", "t", 0)
        assert (found.offset, found.metadata) == (2, "acked")


# ------------------------------------------------------------------------------------------------ compaction


def test_compaction_keeps_latest_values(tmp_path):
    expected = {}
    with OffsetStore(tmp_path, compact_after=100) as store:
        rng = random.Random(1)
        for i in range(3000):
            key = (f"g{rng.randrange(4)}", f"t{rng.randrange(3)}", rng.randrange(4))
            store.commit(*key, i, f"m{i}", commit_time_ms=i)
            expected[key] = CommittedOffset(i, f"m{i}", i)
            if i % 250 == 249:
                store.sync()  # compaction runs here when due
        store.delete_group("g0")
        store.delete_topic("t1")
        expected = {k: v for k, v in expected.items() if k[0] != "g0" and k[1] != "t1"}
        big_before = log_size(tmp_path)
        store.compact()
        assert store.compactions >= 10
        assert log_size(tmp_path) < big_before
        assert store.synced_seq == store.written_seq
        assert not (tmp_path / COMPACT_NAME).exists()
        for key, value in expected.items():
            assert store.fetch(*key) == value
        store.commit("g9", "t", 0, 1)  # writes go to the new file
    with OffsetStore(tmp_path, compact_after=100) as store:
        assert store.recovery.records <= len(expected) + 1  # one record per group + the last commit
        assert store.live_keys == len(expected) + 1
        for key, value in expected.items():
            assert store.fetch(*key) == value
        assert store.fetch("g0", "t0", 0) is None and store.fetch("g1", "t1", 0) is None


def test_compaction_not_due_when_log_is_mostly_live(tmp_path):
    with OffsetStore(tmp_path, compact_after=10) as store:
        store.commit_many("g", [("t", p, 1, "") for p in range(100)])
        for p in range(50):  # 51 records, 100 live keys: rewriting would not shrink the log
            store.commit("g", "t", p, 2)
        store.sync()
        assert store.compactions == 0
        for p in range(200):
            store.commit("g", "t", p % 100, 3)
        store.sync()
        assert store.compactions == 1


def test_compaction_splits_huge_groups(tmp_path):
    entries = [(f"topic-{p % 50}", p, p, "x" * 4000) for p in range(5000)]  # ~20 MiB > MAX_RECORD_BYTES
    with OffsetStore(tmp_path) as store:
        for i in range(0, len(entries), 1000):
            store.commit_many("big", entries[i : i + 1000], commit_time_ms=1)
        store.compact()
    with OffsetStore(tmp_path) as store:
        assert store.recovery.records >= 2 and store.live_keys == 5000
        assert store.fetch("big", "topic-7", 4007) == CommittedOffset(4007, "x" * 4000, 1)


@pytest.mark.parametrize("leftover", ["garbage", "older_snapshot", "empty"])
def test_leftover_compact_file_is_discarded(tmp_path, caplog, leftover):
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1)
        store.compact()
        snapshot = (tmp_path / LOG_NAME).read_bytes()  # a complete snapshot of an older state
        store.commit("g", "t", 0, 2)
        store.commit("g", "t", 1, 3)
    content = {"garbage": os.urandom(100), "older_snapshot": snapshot, "empty": b""}[leftover]
    (tmp_path / COMPACT_NAME).write_bytes(content)  # a crash before os.replace leaves this behind
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with OffsetStore(tmp_path) as store:
            assert store.recovery.removed_compact_file
            assert not (tmp_path / COMPACT_NAME).exists()
            assert store.fetch("g", "t", 0).offset == 2 and store.fetch("g", "t", 1).offset == 3
    assert "leftover" in caplog.text


def test_compaction_concurrent_with_commits(tmp_path):
    """Commits keep flowing (into the rewrite buffer) while another thread compacts and syncs."""
    store = OffsetStore(tmp_path, compact_after=50)
    stop = threading.Event()
    errors = []

    def compactor():
        try:
            while not stop.is_set():
                store.compact()
                store.sync()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=compactor)
    thread.start()
    expected = {}
    try:
        for i in range(20000):
            key = (f"g{i % 5}", "t", i % 13)
            store.commit(*key, i)
            expected[key] = i
            if i % 3000 == 0:
                store.delete_group("g4")
                expected = {k: v for k, v in expected.items() if k[0] != "g4"}
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert store.compactions > 1
    assert {k: store.fetch(*k).offset for k in expected} == expected and store.live_keys == len(expected)
    store.close()
    with OffsetStore(tmp_path) as again:
        assert again.live_keys == len(expected)
        assert {k: again.fetch(*k).offset for k in expected} == expected


def test_random_operations_match_a_model(tmp_path):
    rng = random.Random(20240601)
    model: dict[tuple[str, str, int], CommittedOffset] = {}
    store = OffsetStore(tmp_path, compact_after=40)
    try:
        for step in range(3000):
            r = rng.random()
            g, t, p = f"g{rng.randrange(5)}", f"t{rng.randrange(4)}", rng.randrange(3)
            if r < 0.6:
                v = CommittedOffset(rng.randrange(10**6), rng.choice(["", "a", "ü" * 3]), step)
                store.commit(g, t, p, *v)
                model[(g, t, p)] = v
            elif r < 0.75:
                batch = [(f"t{rng.randrange(4)}", rng.randrange(3), rng.randrange(100), "b") for _ in range(4)]
                store.commit_many(g, batch, commit_time_ms=step)
                for bt, bp, bo, bm in batch:
                    model[(g, bt, bp)] = CommittedOffset(bo, bm, step)
            elif r < 0.79:
                store.delete_group(g)
                model = {k: v for k, v in model.items() if k[0] != g}
            elif r < 0.82:
                store.delete_topic(t)
                model = {k: v for k, v in model.items() if k[1] != t}
            elif r < 0.95:
                store.sync()
            elif r < 0.97:
                store.compact()
            else:
                store.close()
                store = OffsetStore(tmp_path, compact_after=40)
                assert store.recovery.bytes_dropped == 0
            if step % 100 == 0 or r >= 0.97:
                got = {(grp, k[0], k[1]): v for grp in store.groups() for k, v in store.fetch_group(grp).items()}
                assert got == model, step
    finally:
        store.close()


# ------------------------------------------------------------------------------------------------ counters


def test_sync_counters(tmp_path):
    with OffsetStore(tmp_path) as store:
        assert (store.written_seq, store.synced_seq) == (0, 0)
        store.commit("g", "t", 0, 1)
        store.commit_many("g", [("t", 1, 1, ""), ("t", 2, 1, "")])
        store.delete_topic("zzz")
        assert (store.written_seq, store.synced_seq) == (3, 0)
        store.sync()
        assert store.synced_seq == 3
        store.sync()  # nothing new: still 3
        assert store.synced_seq == 3
        with pytest.raises(ValueError):
            store.commit("g", "t", -1, 1)
        assert store.written_seq == 3  # a refused commit writes nothing


def test_sync_from_worker_thread_while_committing(tmp_path):
    store = OffsetStore(tmp_path)
    stop = threading.Event()
    seen = []

    def syncer():
        while not stop.is_set():
            store.sync()
            seen.append(store.synced_seq)

    thread = threading.Thread(target=syncer)
    thread.start()
    try:
        for i in range(20000):
            store.commit(f"g{i % 3}", "t", i % 7, i)
            assert store.synced_seq <= store.written_seq
    finally:
        stop.set()
        thread.join()
    assert seen == sorted(seen)  # monotonic
    store.sync()
    assert store.synced_seq == store.written_seq == 20000
    store.close()
    with OffsetStore(tmp_path) as again:
        assert again.recovery.records == 20000


# ------------------------------------------------------------------------------------------------ kill -9


def run_storm_and_kill(directory: Path, rng: random.Random, mode: str, compact_after: int):
    proc = subprocess.Popen(
        [sys.executable, str(STORM), str(directory), str(rng.randrange(2**32)), str(compact_after), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[bytes] = []
    ready = threading.Event()

    def reader():
        for line in proc.stdout:
            if line == b"READY\n":
                ready.set()
            lines.append(line)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        assert ready.wait(10), proc.stderr.read() if proc.poll() is not None else "storm never became ready"
        time.sleep(rng.uniform(0.3, 1.0))
        assert proc.poll() is None, proc.stderr.read().decode()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        thread.join(5)
    stderr = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, stderr
    return lines


def test_durability_across_kill_9(tmp_path):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acked: dict[tuple[str, str, int], int] = {}
    acked_generation = 0
    compact_after = 500
    synced_total = compactions_total = 0  # over every storm so far
    for cycle in range(4):
        mode = ("inline", "thread")[cycle % 2]
        lines = run_storm_and_kill(tmp_path, rng, mode, compact_after)
        new = synced = compactions = 0
        for line in lines:
            if not line.endswith(b"\n"):
                continue  # torn by the kill
            parts = line.decode().split()
            if parts[0] == "ACK":
                key = (parts[1], parts[2], int(parts[3]))
                acked[key] = max(acked.get(key, 0), int(parts[4]))
                new += 1
            elif parts[0] == "ATOMIC":
                acked_generation = max(acked_generation, int(parts[1]))
            elif parts[0] == "SYNCED":
                synced, compactions = int(parts[1]), int(parts[2])
        synced_total += synced
        compactions_total += compactions
        context = f"seed={seed} cycle={cycle} mode={mode}"
        assert new > 0, f"the storm acknowledged nothing ({context})"

        with OffsetStore(tmp_path, compact_after=compact_after) as store:
            report = store.recovery
            assert not (tmp_path / COMPACT_NAME).exists()
            for key, offset in acked.items():
                found = store.fetch(*key)
                assert found is not None and found.offset >= offset, (key, offset, found, context)
                assert found.metadata == f"m{found.offset}", (key, found, context)
            atomic = store.fetch_group("atomic")
            generations = {v.offset for v in atomic.values()}
            assert len(generations) <= 1, f"commit_many applied partially: {generations} ({context})"
            if acked_generation:
                assert len(atomic) == 8 and generations.pop() >= acked_generation, context
            # Compaction ran during the storms (kills land inside it too), so the log holds fewer records than
            # were written. Not a bound on its size: how far a commit storm outruns compaction is up to the CPU.
            if compactions_total:
                assert report.records < synced_total, (report, synced_total, context)
            state = {g: store.fetch_group(g) for g in store.groups()}
        with OffsetStore(tmp_path, compact_after=compact_after) as store:  # recovery left a clean log
            assert store.recovery.bytes_dropped == 0, context
            assert {g: store.fetch_group(g) for g in store.groups()} == state
    assert compactions_total > 0, f"no storm completed a compaction (seed={seed})"


# ------------------------------------------------------------------------------------------------ throughput


def test_throughput_report(tmp_path):
    """Not a timing assertion: prints commits/s (see with -s)."""
    n = 100_000
    keys = [(f"group-{i % 20}", f"topic-{i % 7}", i % 16) for i in range(1000)]
    with OffsetStore(tmp_path) as store:
        start = time.perf_counter()
        for i in range(n):
            store.commit(*keys[i % 1000], i)
            if i % 1000 == 999:
                store.sync()
        elapsed = time.perf_counter() - start
        batch = [(f"topic-{p % 7}", p, 0, "") for p in range(50)]
        start2 = time.perf_counter()
        for i in range(2000):
            store.commit_many(f"group-{i % 20}", batch)
            if i % 20 == 19:
                store.sync()
        elapsed2 = time.perf_counter() - start2
        assert store.synced_seq == store.written_seq
    print(
        f"\nOffsetStore: {n / elapsed:,.0f} commits/s with one sync per 1000 commits;"
        f" commit_many of 50 entries: {2000 * 50 / elapsed2:,.0f} entries/s (one sync per 20 calls)"
    )


# ------------------------------------------------------------------------------------------------ deleting offsets


def test_delete_some_offsets_of_a_group(tmp_path):
    with OffsetStore(tmp_path) as store:
        for p in range(3):
            store.commit("g", "a", p, p + 10)
            store.commit("h", "a", p, p + 20)
        store.commit("g", "b", 0, 5)
        assert store.delete("g", [("a", 0), ("a", 2), ("a", 0), ("zzz", 1), ("a", 7)]) == 2
        assert set(store.fetch_group("g")) == {("a", 1), ("b", 0)}
        assert len(store.fetch_group("h")) == 3  # other groups keep theirs
        written = store.written_seq
        assert store.delete("g", [("a", 0)]) == 0 and store.delete("nobody", [("a", 0)]) == 0
        assert store.delete("g", []) == 0
        assert store.written_seq == written  # nothing to delete: nothing written
        assert store.delete("g", [("a", 1), ("b", 0)]) == 2
        assert store.groups() == ["h"]  # the group went with its last offset
        assert store.live_keys == 3
        store.commit("g", "a", 0, 99)  # and can come back
        assert store.delete_group("h") == 3 and store.delete_group("h") == 0
    with OffsetStore(tmp_path) as store:  # deletions are durable like commits
        assert store.recovery.bytes_dropped == 0
        assert store.groups() == ["g"] and store.fetch_group("g") == {("a", 0): store.fetch("g", "a", 0)}
        assert store.fetch("g", "a", 0).offset == 99


def test_deletions_survive_compaction(tmp_path):
    with OffsetStore(tmp_path, compact_after=10) as store:
        for i in range(50):
            store.commit("g", "t", i % 5, i)
        store.delete("g", [("t", 1), ("t", 3)])
        store.compact()
        assert set(store.fetch_group("g")) == {("t", 0), ("t", 2), ("t", 4)}
        store.delete("g", [("t", 0)])  # after the compaction: in the new file
    with OffsetStore(tmp_path) as store:
        assert set(store.fetch_group("g")) == {("t", 2), ("t", 4)}


def test_a_torn_deletion_is_dropped_whole(tmp_path):
    with OffsetStore(tmp_path) as store:
        for p in range(3):
            store.commit("g", "t", p, p)
        end = log_size(tmp_path)
        store.delete("g", [("t", 0), ("t", 1)])
        full = log_size(tmp_path)
    for cut in range(end + 1, full):
        data = (tmp_path / LOG_NAME).read_bytes()
        (tmp_path / LOG_NAME).write_bytes(data[:cut])
        with OffsetStore(tmp_path) as store:  # all of the deletion or none of it
            assert len(store.fetch_group("g")) == 3 and log_size(tmp_path) == end
        with OffsetStore(tmp_path) as store:
            store.delete("g", [("t", 0), ("t", 1)])
            assert log_size(tmp_path) == full


def test_delete_validation(tmp_path):
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1)
        for bad in ([("t",)], [None], [("t", -1)], [("", 0)], [("t", 2**31)], [(3, 0)], [("t", True)], [("t", "0")]):
            with pytest.raises(ValueError):
                store.delete("g", bad)
        with pytest.raises(ValueError):
            store.delete("", [("t", 0)])
        with pytest.raises(ValueError, match="MAX_RECORD_BYTES"):
            store.delete("g", [("t" * 200, p) for p in range(MAX_RECORD_BYTES // 200)])
        assert store.written_seq == 1 and store.live_keys == 1
    with pytest.raises(StorageClosed):
        store.delete("g", [("t", 0)])


def test_random_operations_with_deletions_match_a_model(tmp_path):
    rng = random.Random(7)
    model: dict[tuple[str, str, int], int] = {}
    store = OffsetStore(tmp_path, compact_after=30)
    try:
        for step in range(2000):
            r = rng.random()
            g = f"g{rng.randrange(3)}"
            if r < 0.55:
                t, p = f"t{rng.randrange(3)}", rng.randrange(3)
                store.commit(g, t, p, step)
                model[(g, t, p)] = step
            elif r < 0.75:
                keys = [(f"t{rng.randrange(3)}", rng.randrange(3)) for _ in range(rng.randrange(1, 4))]
                expected = len({k for k in keys if (g, *k) in model})
                assert store.delete(g, keys) == expected
                for k in keys:
                    model.pop((g, *k), None)
            elif r < 0.8:
                expected = sum(1 for k in model if k[0] == g)
                assert store.delete_group(g) == expected
                model = {k: v for k, v in model.items() if k[0] != g}
            elif r < 0.93:
                store.sync()
            elif r < 0.96:
                store.compact()
            else:
                store.close()
                store = OffsetStore(tmp_path, compact_after=30)
            got = {(grp, *k): v.offset for grp in store.groups() for k, v in store.fetch_group(grp).items()}
            assert got == model, step
    finally:
        store.close()


def test_engine_deletes_group_offsets_durably(tmp_path):
    from .helpers import open_engine

    eng = open_engine(tmp_path)
    eng.create_topic("t", 2)
    for g in ("g", "h"):
        for p in range(2):
            eng.offsets.commit(g, "t", p, 5)
    assert eng.delete_group_offsets("g", [("t", 1)]) == 1
    assert eng.offsets.synced_seq == eng.offsets.written_seq  # synced under every flush policy
    assert eng.delete_group_offsets("h") == 2
    assert eng.delete_group_offsets("nobody") == 0
    with pytest.raises(ValueError):
        eng.delete_group_offsets("g", [("t", -1)])
    eng.close(clean=False)
    eng = open_engine(tmp_path)
    assert eng.offsets.groups() == ["g"] and set(eng.offsets.fetch_group("g")) == {("t", 0)}
    eng.close()


def test_deleted_group_offsets_stay_deleted_after_a_power_cut(powerfs):
    from .helpers import open_engine

    data = os.path.join(powerfs.path, "data")
    eng = open_engine(data)
    eng.create_topic("t", 2)
    eng.offsets.commit_many("g", [("t", 0, 3, ""), ("t", 1, 4, "")])
    eng.offsets.commit("h", "t", 0, 5)
    eng.offsets.sync()
    assert eng.delete_group_offsets("g", [("t", 0)]) == 1
    assert eng.delete_group_offsets("h") == 1
    powerfs.cut()  # no close: the power went
    eng = open_engine(data)
    assert eng.offsets.groups() == ["g"] and set(eng.offsets.fetch_group("g")) == {("t", 1)}
    eng.close()
