"""Small durable-file helpers shared by the storage modules."""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY)
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
