"""`TransactionStore`: the durable state of every transactional id (Kafka's `__transaction_state`).

A transactional producer's coordinator state — its producer id and epoch, its timeout, the transaction's status,
partitions and consumer groups, and the offsets it commits when the transaction commits — must survive a crash,
so that a restarted gateway completes (or aborts) what was in flight instead of leaving it hanging. Every change
is one CRC-framed record (`logway.storage.framing`) holding the id's whole state as JSON, written with one
`os.write` and fdatasynced before `put` returns (transactions change state a handful of times each: no group
commit needed) — except where the caller says the state can be rebuilt (`sync=False`; a later put syncs it).
Opening replays the records (the last one per id wins) and cuts a torn tail.

On disk, in `<data>/transactions/`:

    transactions.log := magic "LOGWAYTX" (8 bytes) | version u32 (= 1) | record*
    record payload   := JSON {"id": transactional id, "state": {...}}, or {"id": ..., "state": null} (forgotten)

When the log holds more than `compact_after` records and more than twice the live ids, it is rewritten as one
record per live id into `transactions.log.compact`, synced, renamed over the log and the directory synced
(`rename_durably`): a crash leaves either file complete.

The store knows nothing of what a state means: the gateway's transaction coordinator owns its fields.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from typing import Any

import orjson

from .errors import StorageError, StorageIOError
from .files import makedirs_durably, rename_durably, sync_names, write_synced
from .framing import Frames, frame

log = logging.getLogger("logway.storage")

LOG_NAME = "transactions.log"
COMPACT_NAME = LOG_NAME + ".compact"
_HEADER = struct.Struct(">8sI")
FILE_HEADER = _HEADER.pack(b"LOGWAYTX", 1)
#: A state names its partitions and pending offsets: a few thousand at most in any real transaction.
MAX_RECORD_BYTES = 16 * 1024 * 1024
MIN_RECORD_BYTES = 2


class KeyedStates:
    """Reading a store of keyed JSON states held in memory (`_states`, guarded by `_lock`): copies, so that no caller
    changes what the store holds. This store's and the postgres backend's (`pg.states.PgStateStore`) share it."""

    _lock: threading.Lock
    _states: dict[str, dict[str, Any]]

    def get(self, tid: str) -> dict[str, Any] | None:
        with self._lock:
            state = self._states.get(tid)
            return None if state is None else dict(state)

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return [(tid, dict(state)) for tid, state in self._states.items()]


class TransactionStore(KeyedStates):
    """transactional id -> state (a JSON-able dict); thread-safe (one lock), every `put` durable on return.

    The same durable map of keys to JSON states serves other coordinators (`share_state.ShareStateStore`): a subclass
    names its files (`log_name`, `file_header`) and itself in messages (`what`)."""

    log_name = LOG_NAME
    file_header = FILE_HEADER
    what = "transaction store"

    def __init__(self, directory: str | os.PathLike, *, compact_after: int = 10_000) -> None:
        self.directory = os.fspath(directory)
        self.compact_after = compact_after
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, Any]] = {}
        self._records = 0
        makedirs_durably(self.directory)
        self._path = os.path.join(self.directory, self.log_name)
        compact = self._path + ".compact"
        if os.path.exists(compact):
            os.unlink(compact)  # an interrupted compaction: the log is still whole
            sync_names(compact)
        if not os.path.exists(self._path):
            write_synced(self._path, self.file_header)
            sync_names(self._path)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        self.dropped_bytes = self._replay()

    def _replay(self) -> int:
        size = os.fstat(self._fd).st_size
        with open(self._path, "rb") as f:
            head = f.read(_HEADER.size)
            if head != self.file_header:
                raise StorageError(f"{self._path} is not a {self.what} log (header {head[:12]!r})")
            frames = Frames(f, _HEADER.size, size, min_payload=MIN_RECORD_BYTES, max_payload=MAX_RECORD_BYTES)
            for payload in frames:
                try:
                    record = orjson.loads(payload)
                    tid, state = record["id"], record["state"]
                    if not isinstance(tid, str) or not (state is None or isinstance(state, dict)):
                        raise ValueError("not an id and a state")
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    frames.stop(f"undecodable record: {exc}")
                    break
                self._apply(tid, state)
                self._records += 1
        dropped = size - frames.end
        if dropped:
            log.warning("%s %s: dropped %d bytes at position %d (%s)", self.what, self.directory, dropped,
                        frames.end, frames.reason)
            os.ftruncate(self._fd, frames.end)
        os.fsync(self._fd)  # what a killed process wrote and recovery keeps is served from now on
        return dropped

    def _apply(self, tid: str, state: dict | None) -> None:
        if state is None:
            self._states.pop(tid, None)
        else:
            self._states[tid] = state

    # -- writing -----------------------------------------------------------------------------------------
    def put(self, tid: str, state: dict[str, Any] | None, *, sync: bool = True) -> None:
        """Record `tid`'s new state (None: forget it); durable when this returns — unless `sync` is false (a state
        the caller can rebuild after a crash: the next synced put makes it durable too). Raises StorageIOError."""
        record = frame(orjson.dumps({"id": tid, "state": state}))
        if len(record) > MAX_RECORD_BYTES:
            raise ValueError(f"{self.what}: the state of {tid!r} is {len(record)} bytes; the limit is "
                             f"{MAX_RECORD_BYTES}")
        with self._lock:
            size = os.fstat(self._fd).st_size
            try:
                written = os.write(self._fd, record)
                if written != len(record):
                    raise OSError(f"short write ({written} of {len(record)} bytes)")
                if sync:
                    os.fdatasync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, size)  # never leave half a record in front of the next one
                except OSError:
                    pass
                err = StorageIOError(f"{self.what} {self.directory}: {exc}")
                err.errno = getattr(exc, "errno", None)
                raise err from exc
            self._apply(tid, state)
            self._records += 1
            if self._records > self.compact_after and self._records > 2 * len(self._states):
                self._compact()

    def _compact(self) -> None:
        """Rewrite the log as one record per live id (the caller holds the lock)."""
        compact = self._path + ".compact"
        data = self.file_header + b"".join(frame(orjson.dumps({"id": tid, "state": state}))
                                      for tid, state in self._states.items())
        try:
            write_synced(compact, data)
            rename_durably(compact, self._path)
        except OSError as exc:  # the old log is still whole and in use: try again after more records
            log.warning("%s %s: compaction failed: %s", self.what, self.directory, exc)
            self.compact_after += self._records
            return
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        self._records = len(self._states)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
