"""Durable-file helpers shared by the storage modules, and the rule they exist for.

The rule: an acknowledgement promises only what has been made durable. A file's data is durable once the file was
fsynced (or fdatasynced); a *name* — a file or directory created, renamed or removed — is durable only once the
directory holding it was fsynced, and a rename changes two directories. File systems keep new names in memory like
any other dirty data (ext4 commits them every few seconds, or never before a power cut), so a file that was synced
but whose name was not can vanish with everything in it.

So every namespace change storage makes before an acknowledgement goes through `sync_names` (after creating or
removing entries), `rename_durably` (a rename and both of its directories) or `makedirs_durably` (new directories
and the directories holding them). Appends need no name sync: the segment files exist (durably) before the first
append is acknowledged. tests/e2e/test_powerloss.py proves the rule on a file system that drops what was never synced.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid
from contextlib import contextmanager

log = logging.getLogger("logway.storage")


@contextmanager
def named(path: str | os.PathLike):
    """Name `path` in an OSError raised inside that names no file: calls on a descriptor (write, fdatasync,
    ftruncate) fail without one, and the line that reports the failure (an I/O error, a full disk) must say which
    file it was."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = os.fspath(path)
        raise


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with named(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_names(*paths: str | os.PathLike) -> None:
    """Make the names `paths` durable as they are now (created, replaced or removed): fsync the directory that
    holds each of them, each directory once."""
    seen = set()
    for path in paths:
        parent = os.path.dirname(os.path.abspath(os.fspath(path)))
        if parent not in seen:
            seen.add(parent)
            fsync_dir(parent)


def rename_durably(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """`os.replace(src, dst)`, durable: both directories fsynced (the new name's first)."""
    os.replace(src, dst)
    sync_names(dst, src)


def makedirs_durably(path: str | os.PathLike) -> bool:
    """`os.makedirs(path, exist_ok=True)`, durable: each directory created, and the one holding it, fsynced.
    Returns True when something was created."""
    path = os.path.abspath(os.fspath(path))
    missing = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not missing:
        return False
    os.makedirs(path, exist_ok=True)
    sync_names(*reversed(missing))
    return True


def sync_file(path: str | os.PathLike) -> None:
    """fdatasync a file by name (nothing to do when it does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        with named(path):
            os.fdatasync(fd)
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes) -> None:
    """Write a whole small file and fsync it (the caller renames it into place and fsyncs the directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with named(path):
            os.write(fd, data)
            os.fsync(fd)
    finally:
        os.close(fd)


#: The longest file name when the file system does not say (Linux's NAME_MAX on ext4, xfs, btrfs, tmpfs).
NAME_MAX = 255


def name_max(directory: str) -> int:
    """The longest name (in bytes) the file system holding `directory` takes."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


def aside_name(directory: str, label: str) -> str:
    """`<directory>/<label>.<8 hex digits>`: a new, unique name for something set aside (quarantined, a topic being
    created or deleted), the label cut short where the name would be longer than the file system takes — a topic
    name may be as long as a name can be, and the label is only there to tell a person what it was."""
    room = name_max(directory) - 9
    cut = label.encode()[:room].decode("utf-8", "ignore")
    return os.path.join(directory, f"{cut}.{uuid.uuid4().hex[:8]}")


def quarantine(path: str, quarantine_dir: str, label: str) -> str:
    """Move `path` (a file or a directory) into `quarantine_dir` as `<label>.<8 hex digits>` (`aside_name`) and
    return where.

    The quarantine directory is created on demand; anything else in its place is first renamed aside (with a log
    line), so a damaged data directory can always set its damage aside. Same file system, so a rename."""
    if os.path.lexists(quarantine_dir) and not os.path.isdir(quarantine_dir):
        aside = aside_name(os.path.dirname(quarantine_dir), os.path.basename(quarantine_dir))
        rename_durably(quarantine_dir, aside)
        log.error("%s is not a directory: moved it to %s", quarantine_dir, aside)
    makedirs_durably(quarantine_dir)
    dest = aside_name(quarantine_dir, label)
    rename_durably(path, dest)
    return dest


_FALLOC_FL_KEEP_SIZE = 1
try:  # Linux fallocate(2) with KEEP_SIZE: reserve blocks past the end without changing the file's size
    import ctypes
    import ctypes.util

    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _fallocate = _libc.fallocate
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    _fallocate.restype = ctypes.c_int
except (OSError, AttributeError):  # not Linux / no libc symbol: appends simply allocate as they go
    _fallocate = None


def preallocate(fd: int, offset: int, length: int) -> bool:
    """Reserve disk blocks for [offset, offset + length) without changing the file size (appends into reserved
    blocks are markedly cheaper, and a full disk shows up here rather than in the middle of a batch).
    Returns False when the platform or file system cannot do it (that is never an error); raises OSError when it
    could but failed (ENOSPC, EDQUOT: no room; EIO)."""
    if _fallocate is None:
        return False
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENODEV, errno.ESPIPE):
        return False
    raise OSError(err, os.strerror(err))
