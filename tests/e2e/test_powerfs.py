"""Self-tests of the power-loss file system (logway.bench.powerfs): through a real FUSE mount, each kind of change
survives a cut exactly when POSIX promises it — file data after fsync/fdatasync, a name after its directory's
fsync — and the cut modes that tear or garble unsynced data do what they say. The gateway's power-loss tests
(test_powerloss.py) are only as good as this."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import socket

import pytest

from logway.storage.files import fsync_dir

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
KEEP_SIZE = 1


def write(path, data: bytes, *, sync: bool = False, datasync: bool = False, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
        if datasync:
            os.fdatasync(f.fileno())


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_synced_data_survives_and_unsynced_data_is_lost(powerfs):
    f = os.path.join(powerfs.path, "a")
    write(f, b"A" * 100, sync=True)
    fsync_dir(powerfs.path)
    write(f, b"B" * 100, mode="ab")  # appended, never synced
    assert read(f) == b"A" * 100 + b"B" * 100
    powerfs.cut()
    assert read(f) == b"A" * 100


def test_fdatasync_makes_data_durable_too(powerfs):
    f = os.path.join(powerfs.path, "a")
    write(f, b"x", sync=True)
    fsync_dir(powerfs.path)
    write(f, b"yz", mode="ab", datasync=True)
    write(f, b"lost", mode="ab")
    stats = powerfs.stats()
    assert stats["fdatasync"] == 1 and stats["fsync"] == 1 and stats["fsyncdir"] == 1
    powerfs.cut()
    assert read(f) == b"xyz"


def test_a_new_file_needs_its_directory_synced(powerfs):
    root = powerfs.path
    write(os.path.join(root, "synced-file-only"), b"data", sync=True)  # file synced, name not
    write(os.path.join(root, "name-only"), b"data")
    os.mkdir(os.path.join(root, "d"))
    fsync_dir(root)  # makes "name-only" and "d" durable; "synced-file-only" too, from here on
    write(os.path.join(root, "after"), b"late", sync=True)  # created after the directory sync
    write(os.path.join(root, "d", "inner"), b"in", sync=True)  # d itself never synced: its entry is lost
    powerfs.cut()
    assert sorted(os.listdir(root)) == ["d", "name-only", "synced-file-only"]
    assert read(os.path.join(root, "name-only")) == b""  # the name survived, the unsynced data did not
    assert read(os.path.join(root, "synced-file-only")) == b"data"
    assert os.listdir(os.path.join(root, "d")) == []


def test_a_new_directory_needs_its_parent_synced(powerfs):
    root = powerfs.path
    os.makedirs(os.path.join(root, "a", "b"))
    write(os.path.join(root, "a", "b", "f"), b"1", sync=True)
    fsync_dir(os.path.join(root, "a", "b"))
    fsync_dir(os.path.join(root, "a"))  # a/b durable inside a, but a itself is not in the root yet
    powerfs.cut()
    assert os.listdir(root) == []
    os.makedirs(os.path.join(root, "a", "b"))
    write(os.path.join(root, "a", "b", "f"), b"1", sync=True)
    for d in ("a/b", "a", ""):
        fsync_dir(os.path.join(root, d))
    powerfs.cut()
    assert read(os.path.join(root, "a", "b", "f")) == b"1"


def test_rename_in_one_directory(powerfs):
    root = powerfs.path
    write(os.path.join(root, "old"), b"v1", sync=True)
    fsync_dir(root)
    os.rename(os.path.join(root, "old"), os.path.join(root, "new"))
    powerfs.cut()
    assert os.listdir(root) == ["old"]  # the rename was never synced
    os.rename(os.path.join(root, "old"), os.path.join(root, "new"))
    fsync_dir(root)
    powerfs.cut()
    assert os.listdir(root) == ["new"] and read(os.path.join(root, "new")) == b"v1"


def test_rename_across_directories_needs_both_synced(powerfs):
    root = powerfs.path
    for d in ("src", "dst"):
        os.mkdir(os.path.join(root, d))
    write(os.path.join(root, "src", "f"), b"payload", sync=True)
    fsync_dir(os.path.join(root, "src"))
    fsync_dir(root)

    def move():
        os.rename(os.path.join(root, "src", "f"), os.path.join(root, "dst", "f"))

    move()
    fsync_dir(os.path.join(root, "dst"))  # only the new side: the old name comes back as well
    powerfs.cut()
    assert os.listdir(os.path.join(root, "src")) == ["f"] and os.listdir(os.path.join(root, "dst")) == ["f"]
    assert read(os.path.join(root, "dst", "f")) == b"payload"
    os.unlink(os.path.join(root, "dst", "f"))
    fsync_dir(os.path.join(root, "dst"))
    move()
    fsync_dir(os.path.join(root, "src"))  # only the old side: the file is gone from both
    powerfs.cut()
    assert os.listdir(os.path.join(root, "src")) == [] and os.listdir(os.path.join(root, "dst")) == []


def test_replace_over_an_existing_file(powerfs):
    root = powerfs.path
    target, tmp = os.path.join(root, "state"), os.path.join(root, "state.tmp")
    write(target, b"old state", sync=True)
    fsync_dir(root)
    write(tmp, b"new state", sync=True)
    os.replace(tmp, target)
    powerfs.cut()
    assert os.listdir(root) == ["state"] and read(target) == b"old state"
    write(tmp, b"new state", sync=True)
    os.replace(tmp, target)
    fsync_dir(root)
    powerfs.cut()
    assert os.listdir(root) == ["state"] and read(target) == b"new state"


def test_unlink_needs_the_directory_synced(powerfs):
    root = powerfs.path
    f = os.path.join(root, "f")
    write(f, b"keep me", sync=True)
    fsync_dir(root)
    write(f, b" (unsynced)", mode="ab")
    os.unlink(f)
    powerfs.cut()
    assert read(f) == b"keep me"  # back, with its durable content
    os.unlink(f)
    fsync_dir(root)
    powerfs.cut()
    assert os.listdir(root) == []


def test_truncate_is_durable_only_after_fsync(powerfs):
    f = os.path.join(powerfs.path, "f")
    write(f, b"0123456789", sync=True)
    fsync_dir(powerfs.path)
    os.truncate(f, 4)
    powerfs.cut()
    assert read(f) == b"0123456789"
    fd = os.open(f, os.O_RDWR)
    os.ftruncate(fd, 4)
    os.fsync(fd)
    os.ftruncate(fd, 8)  # grown again (zeros), unsynced
    os.close(fd)
    powerfs.cut()
    assert read(f) == b"0123"


def test_open_with_o_trunc_is_a_change_like_any_other(powerfs):
    f = os.path.join(powerfs.path, "f")
    write(f, b"durable", sync=True)
    fsync_dir(powerfs.path)
    write(f, b"rewritten, never synced")  # "wb": O_TRUNC, then a write
    powerfs.cut()
    assert read(f) == b"durable"


def test_fallocate(powerfs):
    f = os.path.join(powerfs.path, "f")
    write(f, b"abc", sync=True)
    fsync_dir(powerfs.path)
    fd = os.open(f, os.O_RDWR)
    assert _libc.fallocate(fd, KEEP_SIZE, 0, 1 << 20) == 0, os.strerror(ctypes.get_errno())
    assert os.fstat(fd).st_size == 3  # blocks reserved, size and data unchanged
    assert _libc.fallocate(fd, 0, 0, 4096) == 0, os.strerror(ctypes.get_errno())
    assert os.fstat(fd).st_size == 4096
    os.close(fd)
    powerfs.cut()
    assert read(f) == b"abc"  # the size change was not synced
    fd = os.open(f, os.O_RDWR)
    _libc.fallocate(fd, 0, 0, 4096)
    os.fsync(fd)
    os.close(fd)
    powerfs.cut()
    assert read(f) == b"abc" + bytes(4093)
    assert powerfs.stats()["fallocate"] == 0  # counters start again with each mount


def test_files_found_at_mount_are_durable_and_readable_as_the_storage_reads(powerfs, tmp_path):
    root = powerfs.path
    data = bytes(range(256)) * 64
    write(os.path.join(root, "seg"), data, sync=True)
    fsync_dir(root)
    powerfs.cut()  # now a file found at mount
    write(os.path.join(root, "seg"), b"tail", mode="ab")
    with open(os.path.join(root, "seg"), "rb") as f:  # mmap (frozen indexes) and sendfile (fetches)
        with mmap.mmap(f.fileno(), len(data), access=mmap.ACCESS_READ) as m:
            assert m[:] == data
        a, b = socket.socketpair()
        with a, b:
            assert os.sendfile(a.fileno(), f.fileno(), 0, 256) == 256
            assert b.recv(1024) == data[:256]
    powerfs.cut()
    assert read(os.path.join(root, "seg")) == data


def test_an_unlinked_open_file_stays_usable_through_its_descriptor(powerfs):
    f = os.path.join(powerfs.path, "f")
    write(f, b"segment", sync=True)
    fsync_dir(powerfs.path)
    fd = os.open(f, os.O_RDWR)
    os.unlink(f)
    fsync_dir(powerfs.path)
    assert os.pread(fd, 100, 0) == b"segment"  # a reader finishing a range of a deleted segment
    os.pwrite(fd, b"!", 7)
    os.fsync(fd)
    os.close(fd)
    assert os.listdir(powerfs.path) == []
    powerfs.cut()
    assert os.listdir(powerfs.path) == []


@pytest.mark.parametrize("mode", ["pages", "garbage"])
def test_torn_cuts_keep_the_durable_prefix_and_tear_the_rest(powerfs, mode):
    f = os.path.join(powerfs.path, "f")
    durable = b"D" * 5000
    live = bytes((i * 7) % 251 + 1 for i in range(40_000))  # no zero bytes: a hole shows
    outcomes = set()
    for seed in range(12):
        write(f, durable, sync=True)
        fsync_dir(powerfs.path)
        write(f, live, mode="ab")
        report = powerfs.cut(data=mode, seed=seed)
        got = read(f)
        assert got[:5000] == durable, "synced bytes must survive every cut"
        assert len(got) in (5000, 45_000)
        kept = zeros = other = 0
        for start in range(4096, len(got), 4096):  # file pages past the durable bytes (the first one shares them)
            lo, hi = max(start, 5000), min(start + 4096, len(got))
            if lo >= hi:
                continue
            piece = got[lo:hi]
            if piece == live[lo - 5000:hi - 5000]:
                kept += 1
            elif not any(piece):
                zeros += 1
            else:
                other += 1
        if mode == "pages":
            assert other == 0, "an unsynced page is either written or a hole"
        outcomes.add((len(got), kept > 0, zeros > 0, other > 0))
        assert report["unsynced_files"] == 1
        os.truncate(f, 0)  # start the next round from an empty, synced file
        os.truncate(f, 0)
        with open(f, "rb+") as g:
            os.fsync(g.fileno())
    assert (5000, False, False, False) in outcomes  # the size did not reach the disk
    assert any(size == 45_000 and kept for size, kept, *_ in outcomes)  # some pages did
    if mode == "pages":
        assert any(size == 45_000 and zeros for size, _, zeros, _ in outcomes)  # holes read as zeros
    else:
        assert any(garbage for *_, garbage in outcomes)  # stale blocks read as random bytes


def test_random_entries_persist_some_unsynced_names(powerfs):
    root = powerfs.path
    seen = set()
    for seed in range(10):
        write(os.path.join(root, "new"), b"x", sync=True)
        powerfs.cut(entries="random", seed=seed)
        seen.add(os.path.exists(os.path.join(root, "new")))
        if os.path.exists(os.path.join(root, "new")):
            os.unlink(os.path.join(root, "new"))
            fsync_dir(root)
    assert seen == {True, False}


def test_a_cut_is_refused_while_modes_are_unknown(powerfs):
    from logway.bench.powerfs import PowerFSError

    with pytest.raises(PowerFSError, match="cut modes"):
        powerfs.cut(data="sometimes")


# -- a failing device -------------------------------------------------------------------------------------------

def test_faults_fail_the_chosen_calls_on_matching_files_until_healed(powerfs):
    """`fail("write", "fsync", paths="*.index")`: writes and syncs of index files fail with EIO, and change nothing
    (a failed write wrote nothing, a failed sync made nothing durable); other files and other calls work; after
    `heal` everything works again — but, as on Linux, what was written before the failed sync never reaches the
    disk (its pages were marked clean): a later sync makes durable only what was written after it."""
    import errno

    root = powerfs.path
    os.mkdir(os.path.join(root, "d"))
    idx, log_ = os.path.join(root, "d", "0.index"), os.path.join(root, "d", "0.log")
    write(idx, b"first", sync=True)
    fsync_dir(os.path.join(root, "d"))
    fsync_dir(root)
    fd = os.open(idx, os.O_RDWR | os.O_APPEND)
    try:
        os.write(fd, b"+unsynced")
        powerfs.fail("write", "fsync", paths="*.index")
        with pytest.raises(OSError) as failed:
            os.write(fd, b"+refused")
        assert failed.value.errno == errno.EIO
        with pytest.raises(OSError) as failed:
            os.fsync(fd)
        assert failed.value.errno == errno.EIO
        assert read(idx) == b"first+unsynced"  # reads work, the refused write wrote nothing
        write(log_, b"data", sync=True)  # another file: nothing fails
        assert powerfs.stats()["faults"] == 2
        powerfs.heal()
        os.write(fd, b"+healed")
    finally:
        os.close(fd)
    write(idx, b"", mode="ab", sync=True)
    assert read(idx) == b"first+unsynced+healed"  # read back meanwhile (the page cache)
    powerfs.cut()
    assert read(idx) == b"first" + b"\0" * len(b"+unsynced") + b"+healed"


def test_read_and_open_faults_and_other_errnos(powerfs):
    import errno

    f = os.path.join(powerfs.path, "store.log")
    write(f, b"kept", sync=True)
    powerfs.fail("read", paths="*.log")
    fd = os.open(f, os.O_RDONLY)  # opening still works
    try:
        with pytest.raises(OSError) as failed:
            os.pread(fd, 4, 0)
        assert failed.value.errno == errno.EIO
    finally:
        os.close(fd)
    powerfs.fail("open", error="ENOSPC")  # every file
    with pytest.raises(OSError) as failed:
        open(os.path.join(powerfs.path, "new"), "wb")
    assert failed.value.errno == errno.ENOSPC
    powerfs.heal()
    assert read(f) == b"kept"
    from logway.bench.powerfs import PowerFSError

    with pytest.raises(PowerFSError, match="fault ops"):
        powerfs.fail("stat")
