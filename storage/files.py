"""Small durable-file helpers shared by the storage modules."""

from __future__ import annotations

import logging
import os
import uuid

log = logging.getLogger("logway.storage")


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes) -> None:
    """Write a whole small file and fsync it (the caller renames it into place and fsyncs the directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def quarantine(path: str, quarantine_dir: str, label: str) -> str:
    """Move `path` (a file or a directory) into `quarantine_dir` as `<label>.<8 hex digits>` and return where.

    The quarantine directory is created on demand; anything else in its place is first renamed aside (with a log
    line), so a damaged data directory can always set its damage aside. Same file system, so a rename."""
    if os.path.lexists(quarantine_dir) and not os.path.isdir(quarantine_dir):
        aside = f"{quarantine_dir}.{uuid.uuid4().hex[:8]}"
        os.rename(quarantine_dir, aside)
        log.error("%s is not a directory: moved it to %s", quarantine_dir, aside)
    os.makedirs(quarantine_dir, exist_ok=True)
    dest = os.path.join(quarantine_dir, f"{label}.{uuid.uuid4().hex[:8]}")
    os.rename(path, dest)
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
    Returns False when the platform or file system cannot do it; that is never an error."""
    if _fallocate is None:
        return False
    return _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0
