"""The log cleaner: compaction of the partitions whose topic has `cleanup.policy` compact (or compact,delete).

What it keeps. A partition's *cleanable* part is its frozen segments that are durable (below the recovery point),
wholly below the last stable offset (no open transaction in them), and whose newest record is older than
`min.compaction.lag.ms`; the active segment is never cleaned. Cleaning rewrites that part keeping, of the records it
holds:
- the last record of each key (a record is dropped once a later record of its key is in the cleanable part), and
  every record past what one pass could map (see the key map below);
- tombstones (a record whose value is null; in a `tank` topic a keyed empty message) until their segment was last
  written more than `delete.retention.ms` ago — so a reader that starts at the log start and reaches the end within
  that time sees every deletion;
- no record without a key (a compacted topic refuses them on append; older ones, written before the topic became
  compacted, are dropped, as Kafka's cleaner does), and no record of an aborted transaction;
- a transaction marker until its transaction has no record left and its segment is older than
  `delete.retention.ms` (an abort marker goes only in a pass after the one that removed its transaction's records,
  and the partition's transaction index forgets that abort first, durably: a crash in between never shows a reader
  aborted records as committed);
- the last batch of each idempotent producer, emptied when its records go (it keeps the producer's offsets and
  sequence numbers, from which the producer state is rebuilt after a restart), unless its segment was last written
  more than the producers' expiration ago.
Offsets never change: the cleaner leaves gaps, which readers of every protocol step over. A batch keeps its offsets
even when records are removed from it (Kafka's rule: its last offset carries the producer's last sequence number).

When. A partition is due once the bytes written since its last cleaning (its *dirty* part, from the first dirty
offset on) are at least `min.cleanable.dirty.ratio` of its cleanable part, or once the newest record of its oldest
dirty segment is older than `max.compaction.lag.ms`. `plan` says so; the gateway runs `clean` in a worker thread,
dirtiest partition first, through a `Throttle` (bytes per second read and written).

How. A pass maps every key of the dirty part to its last offset (`KeyMap`, bounded by `dedupe_buffer_bytes`: when
it is full, the pass cleans up to where the map ends and the next pass goes on from there), then rewrites the
segments from the log start to the end of what was mapped, in groups of consecutive segments that fit in one segment
(`segment.bytes`; so a compacted log's small segments merge). Each group becomes one new segment, written beside the
old ones and swapped in durably (`PartitionLog.install_cleaned`):

    1. <base>.log.tmp, .index.tmp, .timeindex.tmp, [.checksums.tmp], .cleaned.tmp written and synced;
    2. the side files renamed to *.swap, the directory synced; <base>.log.tmp renamed to <base>.log.swap, the
       directory synced — the commit point;
    3. the old segments' files removed (a reader holding one keeps reading it), the *.swap files renamed into place
       (the data file last), the directory synced.

Opening a partition completes a swap whose <base>.log.swap exists (it removes the segments the new one replaces —
those based in (base, end), with `end` from its .cleaned file — and renames the rest into place) and removes the
files of any other (never committed) cleaning, so kill -9 or a power cut at any point leaves the old segments or
the new one, never a mix. `cleaner-offset` (decimal text) in the partition directory is where the dirty part begins
(a hint: without it the whole log counts as dirty once).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from crc32c import crc32c

from .config import MAX_LONG, MiB
from .errors import CleaningStopped, StorageError
from .files import fsync_dir, write_synced
from .index import ENTRY as INDEX_ENTRY, TIME_ENTRY
from .checksums import ENTRY as CHECKSUM_ENTRY
from .segment import CLEANED, MAX_RELATIVE_OFFSET, Segment, segment_name

if TYPE_CHECKING:  # pragma: no cover
    from .partition import PartitionLog

__all__ = ["CleanPlan", "CleanStats", "CleanerSettings", "KeyMap", "Throttle", "plan", "clean", "digest", "SWAP"]

log = logging.getLogger("logway.storage.cleaner")

#: Suffix of a cleaned segment's files between the commit point and their final names.
SWAP = ".swap"
#: Suffix of a cleaned segment's files while they are written (removed on open if a cleaning was cut short).
TMP = ".tmp"
#: The partition file holding the first dirty offset (`PartitionLog.set_cleaned_upto`).
CLEANER_OFFSET = "cleaner-offset"
#: Bytes read from a segment at a time (and the most the cleaner holds of one beside the batch it works on).
READ_CHUNK = 1 * MiB
#: Written to a new segment in pieces of about this many bytes (each through the throttle).
WRITE_CHUNK = 1 * MiB
#: What one key costs the key map: a bytes object of up to 16 bytes, an int, the dict's entry and index slots —
#: measured with tracemalloc, 128 bytes a key for short keys and 137 for digests. `dedupe_buffer_bytes` / this = the
#: keys one pass maps.
KEY_ENTRY_BYTES = 144
#: Keys shorter than this are their own map key; longer ones are replaced by a BLAKE2b digest of this many bytes
#: (so the two never collide; two digests collide with probability 2^-128 per pair — Kafka uses MD5 so).
DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """How the cleaner runs (the gateway's `storage.cleaner_*` settings)."""

    #: Memory for the key map of one pass (Kafka's log.cleaner.dedupe.buffer.size).
    dedupe_buffer_bytes: int = 64 * MiB
    #: An idempotent producer's last batch is kept until its segment was last written this long ago (the gateway's
    #: kafka.producer_id_expiration_ms: its state is dropped then anyway).
    producer_expiration_ms: int = 24 * 3600 * 1000


class Throttle:
    """The cleaner's budget of bytes per second (read and written): `charge(n)` sleeps as long as the bytes so
    far are ahead of the rate (0 or less = no limit), and raises `CleaningStopped` once `stop()` was called — also
    in the middle of a sleep. Thread-safe; one per cleaner."""

    def __init__(self, bytes_per_second: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = bytes_per_second
        self.clock = clock
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._start = clock()
        self._bytes = 0.0

    def charge(self, nbytes: int) -> None:
        if self._stopped.is_set():
            raise CleaningStopped("the cleaner was stopped")
        if self.rate <= 0:
            return
        with self._lock:
            now = self.clock()
            self._bytes += nbytes
            ahead = self._start + self._bytes / self.rate - now  # how far the bytes so far are ahead of the rate
            if now - self._start >= 1.0:  # a new window from here: time spent idle is not saved up
                self._start, self._bytes = now + max(ahead, 0.0), 0.0
        if ahead > 0 and self._stopped.wait(ahead):
            raise CleaningStopped("the cleaner was stopped")

    def stop(self) -> None:
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()


def digest(key: bytes) -> bytes:
    """What the key map holds for a key: itself when short, else its BLAKE2b digest (see `DIGEST_BYTES`)."""
    return key if len(key) < DIGEST_BYTES else hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


class KeyMap:
    """Each key of a dirty part (`digest`) -> the offset of its last record, for about `capacity` keys (`offsets`
    is the dict itself: the cleaner's loops use it directly)."""

    __slots__ = ("capacity", "offsets")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self.offsets: dict[bytes, int] = {}

    def room_for(self, n: int) -> bool:
        """Whether `n` more keys surely fit."""
        return len(self.offsets) + n <= self.capacity

    def get(self, key: bytes) -> int | None:
        return self.offsets.get(digest(key))

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(slots=True)
class CleanPlan:
    """What `plan` found of one partition: its cleanable segments (oldest first), where its dirty part begins, and
    whether it is due. `dirty_bytes` / `cleanable_bytes` is its dirty ratio."""

    plog: "PartitionLog"
    segments: list[Segment]
    first_dirty: int
    dirty_bytes: int
    cleanable_bytes: int
    due: bool

    @property
    def ratio(self) -> float:
        return self.dirty_bytes / self.cleanable_bytes if self.cleanable_bytes else 0.0


@dataclass(slots=True)
class CleanStats:
    """What one `clean` did."""

    bytes_read: int = 0  # of segments read (mapping the keys and rewriting)
    bytes_before: int = 0  # the segments rewritten (not those found unchanged), before ...
    bytes_after: int = 0  # ... and after
    segments_before: int = 0
    segments_after: int = 0
    records_removed: int = 0
    cleaned_upto: int = 0  # the first dirty offset afterwards
    groups_skipped: int = 0  # groups whose segments retention or DeleteRecords took out meanwhile

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


def segment_mtime_ms(seg: Segment) -> int:
    """When the segment's data was last written (a cleaned segment: the newest of those it replaced), in ms; now
    for one taken out meanwhile (its group is not swapped in: what is decided for it does not matter)."""
    try:
        return int(os.path.getmtime(seg.log_path) * 1000)
    except FileNotFoundError:
        return int(time.time() * 1000)


def plan(plog: "PartitionLog", now_ms: int) -> CleanPlan | None:
    """The cleanable part of a compacted partition and whether it is due (None for a partition that is not
    compacted, or is closing)."""
    cfg = plog.config
    if not cfg.compact or plog.cleaning_stopped:
        return None
    stable = plog.last_stable_offset
    segments, unsynced, start = plog.cleaning_view()
    lag_horizon = now_ms - cfg.min_compaction_lag_ms
    cleanable = []
    for seg in segments[:-1]:
        if any(seg is u for u in unsynced) or seg.next_offset > stable:
            break
        if cfg.min_compaction_lag_ms and plog.segment_time(seg) > lag_horizon:
            break
        cleanable.append(seg)
    first_dirty = max(plog.cleaned_upto, start)
    dirty = [s for s in cleanable if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    total = sum(s.size for s in cleanable)
    forced = bool(dirty) and cfg.max_compaction_lag_ms < MAX_LONG and (
        plog.segment_time(dirty[0]) <= now_ms - cfg.max_compaction_lag_ms)
    due = bool(dirty) and dirty_bytes > 0 and (forced or dirty_bytes >= cfg.min_cleanable_dirty_ratio * total)
    return CleanPlan(plog, cleanable, first_dirty, dirty_bytes, total, due)


# -- reading -----------------------------------------------------------------------------------------------------

def _batches(seg: Segment, throttle: Throttle, check: Callable[[], None],
             stats: CleanStats) -> Iterator[tuple[memoryview, int, int, int, bool]]:
    """(bytes, first offset, last offset, max timestamp, whether the batch names its first offset) of every batch
    of a frozen segment, in order, read a chunk at a time through the throttle (the segment's data file held
    meanwhile)."""
    fmt = seg.fmt
    handle = seg.handle()
    fd, end = handle.fd, seg.size
    position, offset = 0, seg.base_offset
    buf, buf_start = memoryview(b""), 0
    while position < end:
        rel = position - buf_start
        info = fmt.scan(buf, rel) if rel < len(buf) else None
        if info is None or rel + info[0] > len(buf):
            want = max(READ_CHUNK, info[0] if info is not None else 0)
            check()
            throttle.charge(min(want, end - position))
            buf, buf_start, rel = memoryview(os.pread(fd, min(want, end - position), position)), position, 0
            stats.bytes_read += len(buf)
            info = fmt.scan(buf, 0)
            if info is None or info[0] > len(buf):
                raise StorageError(f"{seg.log_path}: the batch at position {position} is cut off")
        size, base, delta, max_ts = info
        first = offset if base is None else base
        yield buf[rel:rel + size], first, first + delta, max_ts, base is not None
        position += size
        offset = first + delta + 1


def _map_keys(plan_: CleanPlan, keys: KeyMap, throttle: Throttle, check: Callable[[], None],
              stats: CleanStats, aborted: _Aborted) -> tuple[int, dict[int, int]]:
    """Put every key of the dirty part in `keys` (the last offset of each) until it is full; returns where the
    mapped part ends (the first offset not mapped) and each producer's last batch in it (its last offset)."""
    fmt = plan_.plog.fmt
    first_dirty = plan_.first_dirty
    end = first_dirty
    producers: dict[int, int] = {}
    offsets_of = keys.offsets
    for seg in plan_.segments:
        if seg.next_offset <= first_dirty:
            continue
        for view, first, last, _ts, _named in _batches(seg, throttle, check, stats):
            if last < first_dirty:
                continue
            offsets, batch_keys, _, producer, _txn, marker = fmt.batch_keys(view, first)
            if not keys.room_for(len(offsets)) and end > first_dirty:
                return end, producers  # full: this batch and what follows are cleaned by a later pass
            if marker is None:
                txns = aborted.at(first, last)
                for offset, key in zip(offsets, batch_keys):
                    if key is not None and offset >= first_dirty and not (txns and _covered(txns, offset)):
                        offsets_of[key if len(key) < DIGEST_BYTES else digest(key)] = offset
                if producer >= 0:
                    producers[producer] = last
            end = last + 1
        end = max(end, seg.next_offset)  # (records may have been cleaned from its end: the segment is mapped)
    return end, producers


class _Aborted:
    """The aborted transactions of the part being cleaned (`TxnIndex.aborted`, by first offset), looked up in one
    sweep of increasing offsets — a pass walks the log in order: `at(first, last)` gives those that may hold data in
    first..last (a transaction's data lies between its first offset and its end), in time linear in the batches
    and the transactions together."""

    __slots__ = ("_txns", "_next", "_active")

    def __init__(self, txns) -> None:
        self._txns = txns
        self._next = 0
        self._active: list = []

    def at(self, first: int, last: int) -> list:
        txns = self._txns
        while self._next < len(txns) and txns[self._next].first <= last:
            self._active.append(txns[self._next])
            self._next += 1
        if self._active:
            self._active = [t for t in self._active if t.end >= first]
        return self._active


def _covered(aborted, offset: int):
    """The aborted transaction (of `aborted`) holding `offset`, or None."""
    for txn in aborted:
        if txn.covers(offset):
            return txn
    return None


# -- writing -----------------------------------------------------------------------------------------------------

class CleanedSegment:
    """The files of one new segment being written beside the old ones (`<base>.<ext>.tmp`), as appends would have
    made them: indexes every `index_interval` bytes, a time index entry where the maximum timestamp grows and one at
    the end (as a roll writes), side checksums for formats without their own, and the `.cleaned` file holding where
    the segment ends. `finish` syncs them; `commit` renames them to *.swap (the commit point); `install` renames
    them into place; `discard` removes what is left of them."""

    def __init__(self, directory: str, base: int, fmt, index_interval: int, throttle: Throttle) -> None:
        self.directory = directory
        self.base = base
        self.stem = os.path.join(directory, segment_name(base))
        self.throttle = throttle
        self.index_interval = index_interval
        self.checksummed = not getattr(fmt, "checksummed", True)
        self.size = 0
        self.next_offset = base  # just after the last batch added
        self.max_timestamp = -1
        self._index = bytearray()
        self._times = bytearray()
        self._crcs = bytearray()
        self._since = index_interval  # (the first batch is always indexed)
        self._last_rel = 0  # the relative offset of the last index entry
        self._time_last = -1  # the timestamp of the last time index entry
        self._pending: list = []
        self._pending_bytes = 0
        self._suffix = TMP
        self._fd = os.open(self._path(".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def _path(self, ext: str, suffix: str | None = None) -> str:
        return f"{self.stem}{ext}{self._suffix if suffix is None else suffix}"

    @property
    def extensions(self) -> list[str]:
        """The files of the segment, the data file last."""
        return [".index", ".timeindex", *((".checksums",) if self.checksummed else ()), CLEANED, ".log"]

    def add(self, batch, first: int, last: int, max_ts: int) -> None:
        """Append one whole batch that covers offsets first..last."""
        position, size = self.size, len(batch)
        rel = first - self.base
        if self._since >= self.index_interval:
            self._index += INDEX_ENTRY.pack(rel, position)
            self._last_rel = rel
            self._time_entry(max(max_ts, self.max_timestamp), rel)
            self._since = 0
        self._since += size
        self.max_timestamp = max(self.max_timestamp, max_ts)
        if self.checksummed:
            self._crcs += CHECKSUM_ENTRY.pack(position, crc32c(batch))
        self._pending.append(batch)
        self._pending_bytes += size
        self.size += size
        self.next_offset = last + 1
        if self._pending_bytes >= WRITE_CHUNK:
            self._flush()

    def _time_entry(self, timestamp: int, rel: int) -> None:
        if timestamp > self._time_last:
            self._times += TIME_ENTRY.pack(timestamp, rel)
            self._time_last = timestamp

    def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending, self._pending_bytes = [], 0
        self.throttle.charge(len(data))
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def finish(self, end: int, mtime_ms: int) -> None:
        """Write what is left, the side files and the end (`end`: the offset just after the segment), give the data
        file the modification time of what it replaces, and sync everything."""
        self._flush()
        if self.size:  # (as a roll does: the final maximum at the last index point)
            self._time_entry(self.max_timestamp, self._last_rel)
        os.utime(self._fd, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        sides = {".index": self._index, ".timeindex": self._times, CLEANED: b"%d\n" % end}
        if self.checksummed:
            sides[".checksums"] = self._crcs
        for ext, data in sides.items():
            write_synced(self._path(ext), bytes(data))

    def commit(self) -> None:
        """The commit point: the side files renamed to *.swap and synced, then the data file."""
        for ext in self.extensions[:-1]:
            os.replace(self._path(ext), self._path(ext, SWAP))
        fsync_dir(self.directory)
        os.replace(self._path(".log"), self._path(".log", SWAP))
        fsync_dir(self.directory)
        self._suffix = SWAP

    def install(self) -> None:
        """Rename the committed files into place, the data file last, and sync the directory (the caller removed
        the old segments' files first)."""
        for ext in self.extensions:
            os.replace(self._path(ext), self._path(ext, ""))
        fsync_dir(self.directory)
        self._suffix = ""

    def discard(self) -> None:
        """Remove the files not yet committed (a cleaning that stopped or failed)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._suffix != TMP:
            return
        for ext in self.extensions:
            try:
                os.unlink(self._path(ext))
            except FileNotFoundError:
                pass


# -- cleaning ----------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Pass:
    """What one pass knows while it rewrites the segments, in offset order."""

    keys: KeyMap
    map_end: int
    last_of_producer: dict[int, int]
    aborted: _Aborted
    now_ms: int
    delete_retention_ms: int
    producer_expiration_ms: int
    #: Producers whose open transaction (since their last marker) kept a batch in what was written so far.
    txn_kept: set[int] = field(default_factory=set)


def clean(plan_: CleanPlan, throttle: Throttle, settings: CleanerSettings, now_ms: int) -> CleanStats:
    """Clean the planned partition (see the module docstring); raises CleaningStopped when the throttle or the
    partition says to stop (what was being written is discarded), OSError for what the file system refuses (the
    log is as before the group being written)."""
    plog = plan_.plog
    stats = CleanStats()
    with plog.cleaning() as check:
        aborted = plog.txns.aborted(plan_.segments[0].base_offset, plan_.segments[-1].next_offset) \
            if plan_.segments else []
        keys = KeyMap(settings.dedupe_buffer_bytes // KEY_ENTRY_BYTES)
        map_end, producers = _map_keys(plan_, keys, throttle, check, stats, _Aborted(aborted))
        state = _Pass(keys, map_end, producers, _Aborted(aborted), now_ms, plog.config.delete_retention_ms,
                      settings.producer_expiration_ms)
        for group in _groups([s for s in plan_.segments if s.base_offset < map_end], plog.config.segment_bytes):
            check()
            if not _clean_group(plog, group, state, throttle, check, stats):
                stats.groups_skipped += 1
        stats.cleaned_upto = plan_.first_dirty
        if not stats.groups_skipped:  # (else the next pass maps these keys again)
            plog.set_cleaned_upto(map_end)
            stats.cleaned_upto = map_end
    return stats


def _groups(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive segments, in runs that fit in one segment (in bytes, and in offsets an index can address)."""
    groups: list[list[Segment]] = []
    size = 0
    for seg in segments:
        if groups and groups[-1] and (size + seg.size > max_bytes or
                                      seg.next_offset - 1 - groups[-1][0].base_offset > MAX_RELATIVE_OFFSET):
            groups.append([])
            size = 0
        if not groups:
            groups.append([])
        groups[-1].append(seg)
        size += seg.size
    return groups


def _clean_group(plog: "PartitionLog", group: list[Segment], state: _Pass, throttle: Throttle,
                 check: Callable[[], None], stats: CleanStats) -> bool:
    """Rewrite one group into one segment and swap it in; False when the log no longer holds the group."""
    fmt = plog.fmt
    new = CleanedSegment(plog.directory, group[0].base_offset, fmt, plog.config.index_interval_bytes, throttle)
    try:
        forget = []  # aborted transactions whose abort marker goes with this group
        seen = set()  # aborted transactions with a record in this group
        removed = 0
        changed = len(group) > 1  # (one segment whose batches all stay as they are is left as it is)
        for seg in group:
            mtime = segment_mtime_ms(seg)
            past_horizon = mtime <= state.now_ms - state.delete_retention_ms
            producer_expired = mtime <= state.now_ms - state.producer_expiration_ms
            for view, first, last, max_ts, named in _batches(seg, throttle, check, stats):
                offsets, keys, tombstones, producer, transactional, marker = fmt.batch_keys(view, first)
                txns = state.aborted.at(first, last)
                if marker is not None:
                    if _marker_goes(state, txns, producer, marker, first, past_horizon, seen, forget):
                        removed += 1
                        changed = True
                    else:
                        new.add(view, first, last, max_ts)
                    state.txn_kept.discard(producer)
                    continue
                kept = _kept(state, txns, offsets, keys, tombstones, past_horizon, seen)
                removed += len(offsets) - len(kept)
                if kept:
                    # Unchanged, a batch is written as it is — unless its offsets are implicit (they follow the batch
                    # before) and it no longer follows what was written: then it names them (a sparse bundle).
                    same = len(kept) == len(offsets) and (named or first == new.next_offset)
                    new.add(view if same else fmt.retained_batch(view, first, kept), first, last, max_ts)
                    changed = changed or not same
                elif producer >= 0 and not producer_expired and state.last_of_producer.get(producer, last) == last:
                    # (possibly this producer's last batch: emptied, it keeps the producer's sequence numbers)
                    new.add(fmt.retained_batch(view, first, []) if offsets else view, first, last, max_ts)
                    changed = changed or bool(offsets)
                else:
                    changed = True
                    continue
                if transactional:
                    state.txn_kept.add(producer)
        if not changed:  # (not rewritten: not counted)
            new.discard()
            return True
        new.finish(group[-1].next_offset, max(segment_mtime_ms(s) for s in group))
        check()
        if not plog.install_cleaned(group, new, forget):
            return False
    except BaseException:
        new.discard()
        raise
    stats.bytes_before += sum(s.size for s in group)
    stats.bytes_after += new.size
    stats.segments_before += len(group)
    stats.segments_after += 1
    stats.records_removed += removed
    return True


def _kept(state: _Pass, aborted: list, offsets, keys, tombstones, past_horizon: bool, seen: set) -> list[int]:
    """The offsets of the data records of one batch the cleaned segment keeps (see the module docstring);
    `aborted`: the aborted transactions that may hold some of them."""
    kept = []
    latest = state.keys.offsets
    map_end = state.map_end
    for offset, key, tombstone in zip(offsets, keys, tombstones):
        if aborted:
            txn = _covered(aborted, offset)
            if txn is not None:
                seen.add((txn.producer_id, txn.first))
                continue
        if offset >= map_end:
            kept.append(offset)
        elif key is not None:
            last = latest.get(key if len(key) < DIGEST_BYTES else digest(key))
            if (last is None or last <= offset) and not (tombstone and past_horizon):
                kept.append(offset)
    return kept


def _marker_goes(state: _Pass, aborted: list, producer: int, commit: bool, offset: int, past_horizon: bool,
                 seen: set, forget: list) -> bool:
    """Whether a transaction marker at `offset` is removed: its transaction kept no record (an abort's records
    gone in an earlier pass or group, never in this group: its index entry is forgotten before the swap) and its
    segment is past the delete horizon."""
    if not past_horizon or offset >= state.map_end:
        return False
    if commit:
        return producer not in state.txn_kept
    txn = next((t for t in aborted if t.producer_id == producer and t.end == offset), None)
    if txn is None or (txn.producer_id, txn.first) in seen:
        return False
    forget.append(txn)
    return True

