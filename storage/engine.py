"""`LogEngine`: every topic of one data directory, plus the shared offset store.

On disk:
    <data>/.lock                        flock held while an engine has the directory open
    <data>/.clean_shutdown              present only between a clean close and the next open
    <data>/topics/<topic>/topic.json    {"name", "partitions", "config": {overrides}, "created_ms", "id"}; rewritten
                                        (through topic.json.tmp, synced, renamed, the directory synced) when the
                                        topic's config is altered or partitions are added. "id" is the topic's
                                        UUID (its canonical hex form), made with the topic and never changed
                                        (Kafka's topic id); a topic.json written before ids existed has none:
                                        its id is derived from the name and creation time, and written with
                                        the next rewrite
    <data>/topics/<topic>/<p>/          one partition log per partition (see logway.storage.partition)
    <data>/offsets/                     the committed-offset store (see logway.storage.offsets)
    <data>/producer_ids                 the next block of producer ids (see logway.storage.sequences)
    <data>/transactions/                the transaction coordinator's durable state (see logway.storage.transactions)
    <data>/share_groups/                share groups' durable state (see logway.storage.share_state)
    <data>/security/                    ACLs, SCRAM credentials and client quotas (see logway.storage.security)
    <data>/tmp/, <data>/trash/          topics being created / deleted (cleared on open)
    <data>/quarantine/                  damage set aside on open, each with a log line naming it: topic directories
                                        that cannot be opened, segments dropped by recovery, entries of the wrong
                                        kind (a file where a directory belongs, ...), an unreadable offset store
                                        or producer-id file
    <data>/workers/                     only when the gateway runs several worker processes (`Share`, below):
    <data>/workers/<i>/.lock            flock held by worker i while it runs (the supervisor holds <data>/.lock)
    <data>/workers/<i>/producer_ids     worker i's own block of producer ids (i >= 1; worker 0 uses the shared one)
    <data>/workers/<i>/offsets/, transactions/   private stores of workers i >= 1, kept empty (worker 0 is the
                                        group and transaction coordinator and owns the shared ones; the others
                                        read <data>/security/, which worker 0 writes)
    <data>/workers/admin.lock           flock taken around every topic creation, deletion and change

Opening never fails on a damaged directory (only on one locked by another process, or an I/O error): segments
are truncated to their last valid batch and indexes rebuilt (logway.storage.partition / segment), and what
cannot be used is quarantined with a log line; unknown entries are left alone, with a warning.

Topic names are validated (logway.storage.names) before they become paths. Creation is atomic (built under
tmp/, then renamed into topics/); deletion renames into trash/ first, so a crash never leaves half a topic.
Partitions are added (never removed) by creating their directories first and then rewriting topic.json, so a
crash leaves either the old count (the next attempt clears the directories it left) or the new one.

Sharing a directory between processes (`share=Share(...)`, the gateway's `workers: N`): partition p of topic t
belongs to worker `Share.owner(t, p)` — the ownership predicate the gateway's cluster hands in — and only its
owner ever opens it (recovery, appends, retention). The supervisor's engine (`Share(N, owner)`, no worker) takes
`.lock`, reads and clears the clean-shutdown marker, clears tmp/ and trash/, checks the topic directories and opens
no partition and no store; each worker's engine (`Share(N, owner, worker=i, clean_start=...)`) locks
workers/<i>/.lock, opens its own partitions — the others are `ForeignPartition` stubs, and a topic's `partitions` is
then a `WorkerPartitions` (len() = the partition count, [p] = the log or the stub, iteration = this worker's logs only)
— and sees other workers' topic changes with `refresh()`. Topic creation, deletion and changes are serialized across
workers by workers/admin.lock, and each one made calls `on_shared_change(name)` when set (from the thread that made it),
so the caller can tell the other workers at once. With `share=None` (one process, the default) none of this applies.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .config import MAX_PARTITIONS, EngineLimits, TopicConfig, clamped_overrides
from .errors import (DataDirLocked, InvalidPartitions, InvalidTopicName, NotAnOffsetLog, StorageError, UnknownFormat,
                     running_out)
from .files import (aside_name, makedirs_durably, name_max, named, quarantine, rename_durably, sync_names,
                    write_synced)
from .formats import BatchFormat
from .names import validate_topic_name
from .cleaner import CleanPlan, CleanStats, CleanerSettings, Throttle, clean, plan
from .offsets import OffsetStore
from .share_state import ShareStateStore
from .security import SecurityStore
from .transactions import TransactionStore
from .partition import PartitionLog
from .openfiles import OpenFiles
from .segment import Lookups
from .sequences import IdAllocator
from .topics import Engine, Topic, _acceptable_topic_id, new_topic_id

log = logging.getLogger("logway.storage")

#: Entries of a data directory that the engine owns; anything else is left alone with a warning.
DATA_DIR_ENTRIES = frozenset({".lock", ".clean_shutdown", "topics", "tmp", "trash", "quarantine", "offsets",
                              "producer_ids", "producer_ids.tmp", "transactions", "share_groups", "workers",
                              "security"})
#: After a damaged producer-id file, ids restart at (wall-clock ms) × this: above anything handed out before
#: (blocks of 1000 ids cost one fsync each, so no allocator gets near a million ids per millisecond).
PRODUCER_ID_FLOOR_PER_MS = 1_000_000
#: Workers i >= 1 hand out producer ids from their own range, [2^62 + (i-1) * 2^55, 2^62 + i * 2^55): apart from
#: each other's whatever the number of workers, and above the shared allocator (and its time-based floor).
WORKER_PRODUCER_IDS = 1 << 62
WORKER_PRODUCER_ID_SPAN = 1 << 55
#: The namespace of the ids derived for topics made before topics had ids (uuid5 of "name/created_ms").
LEGACY_TOPIC_ID_NAMESPACE = uuid.UUID("6c6f6777-6179-4000-8000-746f70696373")


def legacy_topic_id(name: str, created_ms: int) -> uuid.UUID:
    """The id of a topic whose topic.json predates ids: derived from what identifies it, so it is the same at every
    start until a rewrite of topic.json stores it."""
    attempt = 0
    while True:
        topic_id = uuid.uuid5(LEGACY_TOPIC_ID_NAMESPACE, f"{name}/{created_ms}/{attempt}")
        if _acceptable_topic_id(topic_id):
            return topic_id
        attempt += 1


def _topic_json(name: str, partitions: int, overrides: Mapping[str, Any], created_ms: int,
                topic_id: uuid.UUID) -> bytes:
    return json.dumps({"name": name, "partitions": partitions, "config": dict(overrides), "created_ms": created_ms,
                       "id": str(topic_id)}).encode()


@dataclass(frozen=True, slots=True)
class Share:
    """One of several processes over the same data directory: `workers` of them, this one `worker` (None: the
    supervisor, which owns the directory but no partition), `clean_start` what the supervisor found, and `owner`
    the ownership predicate — which worker owns partition p of topic t (`owner(t, p)`, stable for the directory's
    life: the gateway's cluster decides it)."""
    workers: int
    owner: Callable[[str, int], int]
    worker: int | None = None
    clean_start: bool = False

    def owns(self, topic: str, partition: int) -> bool:
        return self.worker is not None and self.owner(topic, partition) == self.worker


class PartitionNotOwned(StorageError):
    """The partition belongs to another worker process (see `Share`)."""


class ForeignPartition:
    """Another worker's partition, in this worker's engine: its topic, number and owner; anything else raises
    `PartitionNotOwned` (a `StorageError`)."""
    __slots__ = ("topic", "partition", "owner")

    def __init__(self, topic: str, partition: int, owner: int) -> None:
        self.topic, self.partition, self.owner = topic, partition, owner

    def __getattr__(self, name: str):
        raise self.refusal()

    def refusal(self) -> PartitionNotOwned:
        """The error a request for this partition gets here."""
        return PartitionNotOwned(f"partition {self.partition} of topic {self.topic!r} is served by worker "
                                 f"{self.owner}" if self.owner >= 0 else f"partition {self.partition} of topic "
                                 f"{self.topic!r} has no live leader right now: ask again in a moment")

    def __repr__(self) -> str:
        return f"ForeignPartition({self.topic!r}, {self.partition}, owner={self.owner})"


class WorkerPartitions:
    """A topic's partitions in a worker's engine: `len()` is the topic's partition count and `[p]` partition p (a
    `PartitionLog`, or a `ForeignPartition`); iterating yields this worker's `PartitionLog`s only, so every
    "for each partition" (sync, retention, metrics) covers what this process owns."""
    __slots__ = ("_all", "_owned")

    def __init__(self, entries) -> None:
        self._all = tuple(entries)
        self._owned = tuple(p for p in self._all if not isinstance(p, ForeignPartition))

    def __len__(self) -> int:
        return len(self._all)

    def __getitem__(self, index):
        return self._all[index]

    def __iter__(self):
        return iter(self._owned)

    def __add__(self, more) -> "WorkerPartitions":
        return WorkerPartitions(self._all + tuple(more))

    def __repr__(self) -> str:
        return f"WorkerPartitions({list(self._all)!r})"


class LogEngine(Engine):
    def __init__(self, data_dir: str | os.PathLike, formats: Mapping[str, BatchFormat],
                 defaults: TopicConfig | None = None, *, clock: Callable[[], float] = time.time,
                 reads_need_sync: bool = False, share: Share | None = None,
                 limits: EngineLimits | None = None) -> None:
        """`reads_need_sync`: readers of every partition see only what was synced (see logway.storage.partition);
        the gateway sets it when it acknowledges only synced writes (`flush: always`). `share`: this engine is the
        supervisor or one worker of several processes over the directory (see the module docstring). `limits`: what
        clients may create, and the segment files kept open at once.

        A resource that runs out while opening (descriptors, space, an I/O error: `errors.RUNNING_OUT`) is raised as
        the OSError it is, after closing what was opened: nothing is quarantined for it, and the next start,
        once the resource is back, opens everything."""
        super().__init__(formats, defaults, clock, limits)
        self.data_dir = os.path.abspath(os.fspath(data_dir))
        self.reads_need_sync = reads_need_sync
        self.share = share
        #: The bound on the lookups all its partitions' segments remember (see logway.storage.segment.Lookups).
        self.lookups = Lookups()
        #: The budget of segment files open at once, across its partitions (see logway.storage.openfiles).
        self.files = OpenFiles(self.limits.open_segment_files)
        #: Set by `close` when it could not make everything durable (the shutdown then counts as unclean).
        self.close_error: OSError | None = None
        worker = share.worker if share is not None else None
        self._stamps: dict[str, tuple[int, int, int]] = {}  # share mode: topic.json as last read, per topic
        #: Share mode: called with a topic's name after this engine created, deleted or changed it (any thread).
        self.on_shared_change: Callable[[str], None] | None = None
        makedirs_durably(self.data_dir)
        self._quarantine_dir = os.path.join(self.data_dir, "quarantine")
        own_dir = self.data_dir if worker is None else os.path.join(self.data_dir, "workers", str(worker))
        if worker is not None:
            makedirs_durably(own_dir)
        lock_path = os.path.join(own_dir, ".lock")
        if os.path.lexists(lock_path) and not os.path.isfile(lock_path):
            self._set_aside(lock_path, ".lock", "not a regular file")
        self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:  # the holder wrote its pid there (`_claim_lock`): name it, so the operator knows what to stop
                holder = os.pread(self._lock_fd, 64, 0).decode("ascii", "replace").strip()
            except OSError:
                holder = ""
            os.close(self._lock_fd)
            who = "" if worker is None else f"worker {worker}'s part of "
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise DataDirLocked(f"{who}data directory {self.data_dir} is in use by another logway process{pid}",
                                int(holder) if holder.isdigit() else None) from None
        previous_owner = self._claim_lock()
        self._topics_dir = os.path.join(self.data_dir, "topics")
        self.offsets = self.producer_ids = self.transactions = self.share_state = self.security = None
        try:
            self._open(share, worker, own_dir, lock_path, previous_owner)
        except BaseException:  # (out of descriptors, space, ...): nothing stays open
            self._abandon()
            raise

    def _open(self, share: Share | None, worker: int | None, own_dir: str, lock_path: str,
              previous_owner: str) -> None:
        """Open what the directory holds (the constructor's work once the directory is locked)."""
        if worker is None:
            self.clean_start = self._take_clean_marker(previous_owner, lock_path)
        else:  # the supervisor took the marker (and clears tmp/ and trash/)
            self.clean_start = share.clean_start
        for sub in ("topics", "tmp", "trash"):
            path = os.path.join(self.data_dir, sub)
            if os.path.lexists(path) and not os.path.isdir(path):
                self._set_aside(path, sub, "not a directory")
            elif sub != "topics" and worker is None:
                shutil.rmtree(path, ignore_errors=True)
            makedirs_durably(path)  # a fresh data directory's topics/ must not vanish with its topics
        self._name_max = name_max(self._topics_dir)
        self._load_topics()
        if share is None or worker is not None:  # (the supervisor opens no store: its workers do)
            # Worker 0 (the coordinator) opens the shared stores, the others their private ones.
            stores, first = self.data_dir, 0
            if worker:
                stores, first = own_dir, WORKER_PRODUCER_IDS + (worker - 1) * WORKER_PRODUCER_ID_SPAN
            self.offsets = self._open_offsets(os.path.join(stores, "offsets"))
            self.producer_ids = self._open_producer_ids(os.path.join(stores, "producer_ids"), first)
            self.transactions = self._open_transactions(os.path.join(stores, "transactions"))
            self.share_state = self._open_keyed(ShareStateStore, os.path.join(stores, "share_groups"),
                                                "share_groups", "share groups' state starts empty")
            if worker:  # the shared one, which worker 0 writes: every worker serves the same ACLs and users
                self.security = SecurityStore(os.path.join(self.data_dir, "security"), read_only=True)
            else:
                self.security = self._open_keyed(SecurityStore, os.path.join(stores, "security"), "security",
                                                 "ACLs, SCRAM credentials and client quotas start empty")
        for name in sorted(os.listdir(self.data_dir)) if worker is None else ():
            if name not in DATA_DIR_ENTRIES:
                log.warning("%s: ignoring unknown entry %s", self.data_dir, name)

    def _abandon(self) -> None:
        """Opening failed: close what was opened (best effort, nothing synced or marked) and unlock."""
        for topic in self.topics_by_name.values():
            for plog in topic.partitions:
                plog.close()
        for store in (self.offsets, self.transactions, self.share_state, self.security):
            if store is not None:
                try:
                    store.close()
                except OSError:
                    pass
        os.close(self._lock_fd)

    # -- opening -----------------------------------------------------------------------------------------
    def _claim_lock(self) -> str:
        """Write our pid into the (flocked) lock file; return what the previous owner left there (its pid)."""
        try:
            previous = os.pread(self._lock_fd, 64, 0).decode("ascii", "replace").strip()
            os.ftruncate(self._lock_fd, 0)
            os.pwrite(self._lock_fd, b"%d\n" % os.getpid(), 0)
        except OSError:  # informational only (e.g. a full disk): the flock is what matters
            return ""
        return previous

    def _take_clean_marker(self, previous_owner: str, lock_path: str) -> bool:
        """Whether the last stop was clean (or the directory is new); the marker is durably gone afterwards."""
        marker = os.path.join(self.data_dir, ".clean_shutdown")
        if os.path.lexists(marker) and not os.path.isfile(marker):
            self._set_aside(marker, ".clean_shutdown", "not a regular file (the shutdown counts as unclean)")
        # A brand-new directory has nothing to recover; otherwise only the marker proves a clean stop.
        clean_start = os.path.exists(marker) or not os.path.lexists(self._topics_dir)
        if os.path.exists(marker):
            # Durably gone before anything is written: a marker that came back after a power cut would vouch
            # for logs that were never closed cleanly.
            os.unlink(marker)
            sync_names(marker)
        elif not clean_start and previous_owner:
            log.warning("%s: left by process %s, which did not shut down cleanly (a stale lock); recovering",
                        lock_path, previous_owner)
        return clean_start

    def _set_aside(self, path: str, label: str, why: object, consequence: str = "") -> str:
        """Quarantine one damaged entry with an error log line naming it, why, and where it went."""
        dest = quarantine(path, self._quarantine_dir, label)
        log.error("%s: %s: moved to %s%s", path, why, dest, f"; {consequence}" if consequence else "")
        return dest

    def _load_topics(self) -> None:
        worker = self.share is not None and self.share.worker is not None
        for name in sorted(os.listdir(self._topics_dir)):
            path = os.path.join(self._topics_dir, name)
            try:
                partitions, overrides, created_ms, topic_id = self._read_topic_json(name)
                if not worker:  # a worker leaves the directory's entries to the supervisor
                    self._check_topic_entries(path, name, partitions)
                topic = self._open_topic(name, partitions, overrides, created_ms, topic_id, clean=self.clean_start)
            except (OSError, ValueError, KeyError, TypeError, StorageError) as exc:
                if running_out(exc):  # not damage: the start fails as what it is, the topic stays where it is
                    if exc.filename is None:
                        exc.filename = path
                    raise
                if worker:  # the supervisor set aside what it could not open: this one is new damage
                    log.error("cannot open topic directory %s (%s): skipped", path, exc)
                else:
                    self._quarantine(path, name, exc)
                continue
            self.topics_by_name[name] = topic

    def _read_topic_json(self, name: str) -> tuple[int, dict, int, uuid.UUID]:
        """(partitions, overrides, created_ms, topic id) of a topic's topic.json, checked; in share mode its
        identity is remembered (`refresh` reads it again only once it was replaced)."""
        validate_topic_name(name)
        path = os.path.join(self._topics_dir, name)
        if not os.path.isdir(path):
            raise StorageError("not a topic directory")
        with open(os.path.join(path, "topic.json"), "rb") as f, named(f.name):
            st = os.fstat(f.fileno())
            meta = json.load(f)
        if not isinstance(meta, dict) or not isinstance(meta.get("config") or {}, dict):
            raise StorageError(f"topic.json does not hold a topic's metadata: {str(meta)[:80]!r}")
        if meta.get("name") != name:
            raise StorageError(f"topic.json names {meta.get('name')!r}")
        partitions = int(meta["partitions"])
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partition count {partitions} is not in 1..{MAX_PARTITIONS}")
        if self.share is not None:
            self._stamps[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
        created_ms = int(meta.get("created_ms", 0))
        stored = meta.get("id")
        topic_id = uuid.UUID(stored) if stored is not None else legacy_topic_id(name, created_ms)
        return partitions, meta.get("config") or {}, created_ms, topic_id

    def _check_topic_entries(self, path: str, name: str, partitions: int) -> None:
        """Partition entries that are not directories are quarantined (the partition starts empty); missing
        partitions and unknown entries get a warning."""
        expected = {str(p) for p in range(partitions)}
        present = set(os.listdir(path))
        if "topic.json.tmp" in present:  # an interrupted rewrite: topic.json itself is the old or the new one
            os.unlink(os.path.join(path, "topic.json.tmp"))
            present.discard("topic.json.tmp")
        for entry in sorted(present - {"topic.json"}):
            full = os.path.join(path, entry)
            if entry not in expected:
                log.warning("%s: ignoring unknown entry %s (the topic has %d partition(s))", path, entry, partitions)
            elif not os.path.isdir(full):
                self._set_aside(full, f"{name}-{entry}", "partition is not a directory", "the partition starts empty")
        for missing in sorted(expected - present, key=int):
            log.warning("%s: partition directory %s is missing; the partition starts empty", path, missing)

    def _quarantine(self, path: str, name: str, why: Exception) -> None:
        dest = quarantine(path, self._quarantine_dir, name)
        log.error("cannot open topic directory %s (%s): moved to %s", path, why, dest)

    def _open_offsets(self, path: str) -> OffsetStore:
        if os.path.lexists(path) and not os.path.isdir(path):
            self._set_aside(path, "offsets", "not a directory", "committed offsets start empty")
        try:
            with named(path):
                return OffsetStore(path)
        except (NotAnOffsetLog, IsADirectoryError, NotADirectoryError) as exc:
            self._set_aside(path, "offsets", f"cannot open the offset store ({exc})", "committed offsets start empty")
            return OffsetStore(path)

    def _open_transactions(self, path: str) -> TransactionStore:
        return self._open_keyed(TransactionStore, path, "transactions", "transaction states start empty")

    def _open_keyed(self, cls: type[TransactionStore], path: str, name: str, consequence: str):
        """A store of keyed JSON states (`TransactionStore` or a subclass) in `path`, set aside when damaged."""
        if os.path.lexists(path) and not os.path.isdir(path):
            self._set_aside(path, name, "not a directory", consequence)
        try:
            with named(path):
                return cls(path)
        except (StorageError, IsADirectoryError, NotADirectoryError) as exc:
            if running_out(exc):  # (a StorageIOError): not damage
                raise
            self._set_aside(path, name, f"cannot open the {cls.what} ({exc})", consequence)
            return cls(path)

    def _open_producer_ids(self, path: str, first: int = 0) -> IdAllocator:
        """`first`: where a new allocator starts (a worker's range, see WORKER_PRODUCER_IDS)."""
        try:
            return IdAllocator(path, first=first)
        except (StorageError, OSError) as exc:
            if running_out(exc):  # an I/O error, no descriptor left …: not damage, nothing set aside
                raise
            if first:  # a worker's range: a floor inside it (1000 ids per ms)
                first += int(self.clock() * 1000) * 1000 % WORKER_PRODUCER_ID_SPAN
            else:
                first = int(self.clock() * 1000) * PRODUCER_ID_FLOOR_PER_MS
            self._set_aside(path, "producer_ids", exc, f"producer ids continue from {first}")
            return IdAllocator(path, first=first)

    def producer_ids_reserved(self) -> int:
        """The first producer id that no allocator of this directory handed out: its own, and those of the workers
        of a gateway that ran several processes over it (`workers/<i>/producer_ids`)."""
        reserved = self.producer_ids.reserved
        workers = os.path.join(self.data_dir, "workers")
        for entry in sorted(os.listdir(workers)) if os.path.isdir(workers) else ():
            path = os.path.join(workers, entry, "producer_ids")
            if entry.isdigit() and os.path.isfile(path):
                reserved = max(reserved, IdAllocator(path).reserved)
        return reserved

    def _open_topic(self, name: str, partitions: int, overrides: dict, created_ms: int, topic_id: uuid.UUID, *,
                    clean: bool) -> Topic:
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partition count {partitions} is not in 1..{MAX_PARTITIONS}")
        overrides, fixed = clamped_overrides(overrides)
        if fixed:
            log.warning("topic %s: %s: beyond what the setting can hold (stored by an older logway), brought within "
                        "its range", name, ", ".join(fixed))
        config = self.defaults.with_overrides(overrides)
        fmt = self.formats.get(config.format)
        if fmt is None:
            raise UnknownFormat(f"unknown storage format {config.format!r} (known: {sorted(self.formats)})")
        logs = self._open_partitions(name, range(partitions), fmt, config, clean)
        return Topic(name, config, dict(overrides), logs if self.share is None else WorkerPartitions(logs), created_ms,
                     topic_id)

    def _partition_log(self, directory: str, name: str, partition: int, fmt: BatchFormat, config: TopicConfig,
                       clean: bool) -> PartitionLog:
        return PartitionLog(directory, name, partition, fmt, config, clean_shutdown=clean, clock=self.clock,
                            quarantine_dir=self._quarantine_dir, reads_need_sync=self.reads_need_sync,
                            lookups=self.lookups, files=self.files)

    def _open_partitions(self, name: str, numbers: Iterable[int], fmt: BatchFormat, config: TopicConfig,
                         clean: bool) -> list:
        """A `PartitionLog` for each of these partitions this process owns — every one, without a share — and a
        `ForeignPartition` for the others (share mode); when one fails to open, those opened are closed."""
        share, base = self.share, os.path.join(self._topics_dir, name)
        entries: list = []
        try:
            for p in numbers:
                if share is None or share.owns(name, p):
                    entries.append(self._partition_log(os.path.join(base, str(p)), name, p, fmt, config, clean))
                else:
                    entries.append(ForeignPartition(name, p, share.owner(name, p)))
        except BaseException:
            _close_all(entries)
            raise
        return entries

    # -- topics (the rules are `Engine`'s; here where they are kept) -----------------------------------------
    def _changing(self, name: str):
        return self._shared_change(name)

    def _create(self, name: str, partitions: int, overrides: dict, config: TopicConfig) -> Topic:
        """Create the topic's directory durably (see the module docstring): built under tmp/, renamed into topics/;
        an OSError (out of space, descriptors) leaves nothing behind: no directory, nothing open."""
        created_ms = int(self.clock() * 1000)
        topic_id = new_topic_id()
        tmp = aside_name(os.path.join(self.data_dir, "tmp"), name)
        try:
            os.makedirs(tmp)
            for p in range(partitions):
                os.makedirs(os.path.join(tmp, str(p)))
            write_synced(os.path.join(tmp, "topic.json"),
                         _topic_json(name, partitions, overrides, created_ms, topic_id))
            sync_names(os.path.join(tmp, "topic.json"))  # topic.json and the partition directories
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        path = os.path.join(self._topics_dir, name)
        rename_durably(tmp, path)
        # Each partition creates its first segment's files and syncs its directory before it is used.
        try:
            topic = self._open_topic(name, partitions, overrides, created_ms, topic_id, clean=True)
        except BaseException:  # (its partitions are closed): the topic never existed
            self._discard(path)
            raise
        self._stamp(name)
        return topic

    def _add_partitions(self, topic: Topic, count: int) -> list:
        """The new partitions' directories are made durably, then topic.json is rewritten durably. A directory left
        beyond the topic's count by an attempt that crashed before its topic.json was written is removed first when
        it holds no records (quarantined otherwise); one this call made is removed when it fails."""
        name, have = topic.name, len(topic.partitions)
        base = os.path.join(self._topics_dir, name)
        fmt = self.formats[topic.config.format]
        added: list = []
        try:
            for p in range(have, count):
                directory = os.path.join(base, str(p))
                if os.path.lexists(directory):
                    self._clear_leftover_partition(directory, f"{name}-{p}")
                if self.share is not None and not self.share.owns(name, p):  # its owner opens it
                    makedirs_durably(directory)
                    added.append(ForeignPartition(name, p, self.share.owner(name, p)))
                    continue
                added.append(self._partition_log(directory, name, p, fmt, topic.config, True))
            self._write_topic_json(name, count, topic.overrides, topic.created_ms, topic.topic_id)
        except BaseException:  # nothing half-made: the new directories go (topic.json never named them)
            _close_all(added)
            for p in range(have, count):
                shutil.rmtree(os.path.join(base, str(p)), ignore_errors=True)
            raise
        self._stamp(name)
        return added

    def _store_overrides(self, topic: Topic, overrides: dict) -> None:
        """topic.json rewritten durably (see the module docstring)."""
        self._write_topic_json(topic.name, len(topic.partitions), overrides, topic.created_ms, topic.topic_id)
        self._stamp(topic.name)

    def _check_name(self, name: str) -> None:
        """InvalidTopicName unless `name` is a legal topic name the file system takes as a name."""
        super()._check_name(name)
        if len(name.encode()) > self._name_max:
            raise InvalidTopicName(f"topic name is longer than the {self._name_max} characters a file name may have "
                                   f"on the file system of {self.data_dir}")

    def _discard(self, path: str) -> None:
        """Remove a topic directory that was never acknowledged (a creation that failed after its rename): through
        trash/, durably, like a deletion."""
        try:
            trash = aside_name(os.path.join(self.data_dir, "trash"), os.path.basename(path))
            rename_durably(path, trash)
        except OSError as exc:
            log.error("%s: could not take back the topic directory of a failed creation (%s); it is opened at the "
                      "next start", path, exc)
            return
        shutil.rmtree(trash, ignore_errors=True)

    def delete_topic(self, name: str) -> None:
        self._check_open()
        with self._lock, self._shared_change(name):
            topic = self.topic(name)
            for plog in topic.partitions:  # (a cleaner at work on one stops before the directory goes)
                plog.stop_cleaning()
            trash = aside_name(os.path.join(self.data_dir, "trash"), name)
            try:
                rename_durably(os.path.join(self._topics_dir, name), trash)
            except BaseException:  # the topic stays: so does its cleaning
                for plog in topic.partitions:
                    plog.resume_cleaning()
                raise
            rest = dict(self.topics_by_name)
            del rest[name]
            self.topics_by_name = rest
            self._stamps.pop(name, None)
        for plog in topic.partitions:
            plog.close()
        shutil.rmtree(trash, ignore_errors=True)
        self.offsets.delete_topic(name)
        self.offsets.sync()  # else a power cut could hand a later topic of that name these offsets
        log.info("deleted topic %s", name)

    def _clear_leftover_partition(self, directory: str, label: str) -> None:
        """Remove a partition directory beyond its topic's count (never acknowledged: topic.json did not name it)
        when it holds no records; set it aside otherwise."""
        try:
            entries = os.listdir(directory) if os.path.isdir(directory) and not os.path.islink(directory) else None
            empty = entries is not None and all(
                os.path.isfile(os.path.join(directory, e)) and not os.path.islink(os.path.join(directory, e))
                and (not e.endswith(".log") or os.path.getsize(os.path.join(directory, e)) == 0) for e in entries)
        except OSError:
            empty = False
        if empty:
            shutil.rmtree(directory)
            sync_names(directory)
            log.warning("%s: removed an empty partition directory left by an interrupted create_partitions",
                        directory)
        else:
            self._set_aside(directory, label, "a partition directory beyond the topic's count",
                            "the new partition starts empty")

    def _write_topic_json(self, name: str, partitions: int, overrides: Mapping[str, Any], created_ms: int,
                          topic_id: uuid.UUID) -> None:
        """Replace a topic's metadata durably: a synced temporary file renamed over topic.json, the directory
        synced (a power cut leaves the old file or the new one, whole)."""
        path = os.path.join(self._topics_dir, name, "topic.json")
        write_synced(path + ".tmp", _topic_json(name, partitions, overrides, created_ms, topic_id))
        rename_durably(path + ".tmp", path)

    # -- maintenance -------------------------------------------------------------------------------------

    def cleaning_plans(self, now_ms: int | None = None) -> list[CleanPlan]:
        """What the log cleaner could do (see logway.storage.cleaner.plan): a plan for every partition of a compacted
        topic, the dirtiest first; those that are `due` are to be cleaned."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        plans = [p for t in self.topics() if t.config.compact for plog in t.partitions
                 if (p := plan(plog, now_ms)) is not None]
        return sorted(plans, key=lambda p: p.ratio, reverse=True)

    def clean(self, plan_: CleanPlan, throttle: Throttle, settings: CleanerSettings | None = None,
              now_ms: int | None = None) -> CleanStats:
        """Clean one partition as `plan_` planned it (see logway.storage.cleaner.clean); blocking, for a worker
        thread: raises CleaningStopped once `throttle` is stopped or the partition closes."""
        self._check_open()
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        return clean(plan_, throttle, settings or CleanerSettings(), now_ms)

    def sync(self) -> None:
        """fdatasync every partition with unsynced appends, and the offset store."""
        for t in self.topics():
            for p in t.partitions:
                p.sync()
        if self.offsets is not None:  # (None: a supervisor's engine)
            self.offsets.sync()

    def close(self, *, clean: bool = True) -> None:
        """Sync and close everything, then mark the shutdown clean.

        `clean=False` closes without syncing or marking, exactly as a crash would leave the directory (the next
        open runs full recovery); the gateway uses it when storage failed, tests use it to simulate a kill.

        Never fails for the file system (a full disk, an I/O error, no descriptor left): what cannot be made durable
        makes the shutdown unclean — no marker, the next start recovers as after a crash — the first such failure is
        kept in `close_error` (an OSError) for the caller to report (the gateway does, in one line), and everything is closed and the directory unlocked
        all the same.
        """
        if self._closed:
            return
        self._closed = True

        def failed(exc: BaseException) -> None:
            nonlocal clean
            if clean and self.close_error is None:
                cause = exc if isinstance(exc, OSError) else exc.__cause__
                self.close_error = cause if isinstance(cause, OSError) else OSError(str(exc))
            clean = False

        if clean:
            try:
                self.sync()
            except (OSError, StorageError) as exc:
                failed(exc)
        for t in self.topics():
            for p in t.partitions:
                try:
                    p.close(durable=clean)
                except (OSError, StorageError) as exc:
                    failed(exc)
        for store in (self.offsets, self.transactions, self.share_state, self.security):  # (None: a supervisor's)
            if store is not None:
                try:
                    store.close()
                except (OSError, StorageError) as exc:
                    failed(exc)
        if clean and (self.share is None or self.share.worker is None):  # a worker's stop is its supervisor's
            marker = os.path.join(self.data_dir, ".clean_shutdown")
            try:
                write_synced(marker, b"")
                sync_names(marker)
            except OSError as exc:
                failed(exc)
        os.close(self._lock_fd)

    # -- sharing the directory with other worker processes (share mode) ----------------------------------
    @contextmanager
    def _shared_change(self, name: str):
        """Around a topic's creation, deletion or change (the caller holds `_lock`): in share mode, hold
        workers/admin.lock (one change at a time across the workers) and first read what other workers changed
        about this topic; otherwise nothing."""
        if self.share is None:
            yield
            return
        path = os.path.join(self.data_dir, "workers", "admin.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._refresh([name])
            yield
        finally:
            os.close(fd)  # (releases the flock)
        if self.on_shared_change is not None:  # made: the other workers may be told at once
            try:
                self.on_shared_change(name)
            except Exception:  # the change is made and durable: a failed notice must not undo the caller's answer
                log.exception("%s: telling the other workers of topic %s's change failed", self._topics_dir, name)

    def _stamp(self, name: str) -> None:
        """Share mode: remember topic.json as this engine wrote it (not to read it back at the next refresh)."""
        if self.share is not None:
            st = os.stat(os.path.join(self._topics_dir, name, "topic.json"))
            self._stamps[name] = (st.st_ino, st.st_mtime_ns, st.st_size)

    def refresh(self, names: Iterable[str] | None = None) -> list[str]:
        """Share mode: catch up with the topics other workers created, deleted, grew or reconfigured since this
        engine last looked (one listdir and one stat per topic; topic.json is read again only once replaced) —
        every topic, or only the `names` given (one stat each: a request naming a topic this engine does not know).
        Returns the names of the topics that went away (their partitions here are closed). Without a share,
        nothing to do: []."""
        if self.share is None:
            return []
        self._check_open()
        with self._lock:
            return self._refresh(None if names is None else list(names))

    def _refresh(self, names: list[str] | None) -> list[str]:
        """`refresh` for every topic on disk (None) or the ones named; the caller holds `_lock`."""
        current = dict(self.topics_by_name)
        if names is None:
            on_disk = os.listdir(self._topics_dir)
            names = sorted(set(on_disk) | set(current))
        gone = []
        for name in names:
            topic = current.get(name)
            try:
                st = os.stat(os.path.join(self._topics_dir, name, "topic.json"))
            except (FileNotFoundError, NotADirectoryError):
                st = None
            stamp = None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp is not None and self._stamps.get(name) == stamp:
                continue  # unchanged since this engine read it (or failed to: said once)
            try:
                partitions, overrides, created_ms, topic_id = (self._read_topic_json(name) if st is not None
                                                               else (0, {}, 0, None))
            except (OSError, ValueError, KeyError, TypeError, StorageError) as exc:
                self._stamps[name] = stamp  # not again until topic.json is replaced
                log.warning("%s: cannot read topic %s (%s): left as it was", self._topics_dir, name, exc)
                continue
            if topic is not None and (st is None or created_ms != topic.created_ms):  # deleted (and made again?)
                del current[name]
                for plog in topic.partitions:
                    plog.close()
                gone.append(name)
                topic = None
            if st is None:
                self._stamps.pop(name, None)
                continue
            try:
                if topic is None:  # new since this engine looked: nobody wrote to its partitions before
                    current[name] = self._open_topic(name, partitions, overrides, created_ms, topic_id, clean=True)
                    continue
                config = self.defaults.with_overrides(overrides)
                if overrides != topic.overrides:
                    for plog in topic.partitions:
                        plog.apply_config(config)
                    topic.config, topic.overrides = config, dict(overrides)
                if partitions > len(topic.partitions):
                    topic.partitions = topic.partitions + self._open_partitions(
                        name, range(len(topic.partitions), partitions), self.formats[config.format], config, True)
            except (OSError, StorageError) as exc:  # tried again once topic.json is replaced
                log.error("%s: cannot open the changes of topic %s (%s)", self._topics_dir, name, exc)
        self.topics_by_name = current
        return gone


def _close_all(partitions: Iterable) -> None:
    """Close the `PartitionLog`s among `partitions` (a creation that failed)."""
    for plog in partitions:
        if not isinstance(plog, ForeignPartition):
            plog.close()
