"""`PgEngine`: the postgres storage backend — every topic, partition, committed offset, producer id and transaction
state of a gateway in one PostgreSQL database (the tables: logway.storage.pg.schema), behind the interface of the
file backend's `LogEngine` (`topics.Engine`: topic catalogue, lookups, retention, `sync_many`).

Opening: the first connection (its failure is one line: unreachable, no such database, login refused), the schema
created or migrated (a newer one refused), the writer lock taken (held by another gateway: `DatabaseInUse`, naming
it), this start recorded in `writers` (a previous one that never stopped makes this an unclean start), then
everything read into memory: topics and their partitions' ends, offsets, states (batches stay in the database).

Writing — one writer, one commit at a time: `sync_many(targets)` (the group committer's round, or any `sync()`)
takes what every target has pending — partitions' rows of batches and transaction changes, the offset store's
changed keys — and commits it in ONE database transaction on the writer connection, with `writers.last_commit` set
to the round's commit id; then the targets see it committed (their high watermarks move, the rows go to the cache).

A lost connection (the server restarted, a network cut, a failover) is not an answer: the commit's outcome is
unknown, as a COMMIT sent can have committed. The engine reconnects, takes the writer lock again — which waits
until the old session is gone (it ends it when the server still runs it), so no commit of it can still land — and
reads `last_commit`: its own commit id there means committed, anything older means not, and the round is written
again. It keeps reconnecting for `commit_retry_ms`; past that the round fails (its callers get a StorageIOError):
known not committed, its rows stay pending for the next round; still unknown, it is the next round's first question
(`_in_doubt`), answered before anything else is written. So a commit is never lost nor written twice.

Topic deletion is quick whatever the log's size: its rows of `topics` and `partitions` go (and its committed
offsets) in one transaction, its partitions' ids are noted in `dropped_partitions`, and retention runs delete their
batches afterwards.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterable, Mapping

import psycopg
from psycopg.types.json import Jsonb

from ..config import EngineLimits, TopicConfig, clamped_overrides
from ..engine import ForeignPartition, PartitionNotOwned, WorkerPartitions
from ..errors import (DatabaseError, DatabaseInUse, InvalidConfig, InvalidPartitions, MigrationUnfinished,
                      StorageError, StorageIOError, TopicExists, UnknownFormat)
from ..formats import BatchFormat
from ..topics import Engine, Topic, new_topic_id
from .db import Connector, Pool, io_error
from .offsets import PgOffsetStore
from .partition import PgPartitionLog
from .rows import RowCache
from .leases import Leases, View
from .schema import lock_keys, prepare, writer_lock
from .states import PgIdAllocator, PgSecurityStore, PgStateStore

__all__ = ["PgEngine"]

log = logging.getLogger("logway.storage.pg")

#: The first wait between attempts to reconnect (doubled each time, to at most `RECONNECT_MAX_S`).
RECONNECT_FIRST_S = 0.05
RECONNECT_MAX_S = 1.0
#: How long ending the old writer session may take (pg_terminate_backend's wait).
TERMINATE_WAIT_MS = 5000
#: Rows of a deleted topic's partitions one retention run deletes at most per partition.
SWEEP_ROWS = 10_000

_COPY = ("COPY batches (partition_id, end_offset, base_offset, pos, size, max_ts, time_ms, data) FROM STDIN "
         "(FORMAT BINARY)")
_COPY_TYPES = ["int8", "int8", "int8", "int8", "int4", "int8", "int8", "bytea"]
_HOLDER = ("SELECT a.application_name, host(a.client_addr), a.pid, l.mode FROM pg_locks l JOIN pg_stat_activity a "
           "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::int4::oid AND "
           "l.objid = %s::int4::oid AND l.objsubid = 2")
_ENDS = ("SELECT p.partition_id, f.base_offset, f.pos, l.end_offset, l.pos, l.size FROM partitions p "
         "LEFT JOIN LATERAL (SELECT base_offset, pos FROM batches b WHERE b.partition_id = p.partition_id "
         "ORDER BY end_offset LIMIT 1) f ON true "
         "LEFT JOIN LATERAL (SELECT end_offset, pos, size FROM batches b WHERE b.partition_id = p.partition_id "
         "ORDER BY end_offset DESC LIMIT 1) l ON true WHERE p.partition_id = ANY(%s)")
_OFFSETS = "SELECT group_id, topic, partition, committed_offset, metadata, commit_time_ms FROM offsets"


class PgEngine(Engine):
    reads_need_sync = True  # readers see what is committed
    appends_outlive_the_process = False  # (pending rows are in memory until the commit)
    share = None  # (one process: no worker shares)
    files = None  # (no segment files)

    def __init__(self, info: str, formats: Mapping[str, BatchFormat], defaults: TopicConfig | None = None, *,
                 schema: str = "logway", data_dir: str | None = None, pool_size: int = 4,
                 statement_timeout_ms: int = 30_000, connect_timeout_ms: int = 5000, commit_retry_ms: int = 15_000,
                 cache_bytes: int = 64 * 1024 * 1024, clock: Callable[[], float] = time.time,
                 limits: EngineLimits | None = None, migrating: bool = False, leases: Leases | None = None) -> None:
        """`info`: a libpq connection string (`db.conninfo`); `schema`: a plain lower-case name; `data_dir`: the
        gateway's directory, named where it asks for one (DescribeLogDirs); `migrating`: opened by `logway
        migrate`, which may open a database its unfinished run left (see `begin_migration`); `leases`: this gateway
        is one member of several over the database (see "Cluster mode" in the module docstring). Raises
        DatabaseUnreachable, DatabaseAuthFailed, SchemaTooNew, DatabaseInUse, MigrationUnfinished (each a one-line
        message), or a StorageIOError."""
        super().__init__(formats, defaults, clock, limits)
        self.connector = Connector(info, schema, statement_timeout_ms=statement_timeout_ms,
                                   connect_timeout_ms=connect_timeout_ms)
        self.where = f"{self.connector.where} (schema {schema})"
        self.data_dir = os.path.abspath(data_dir) if data_dir else self.where
        self.schema = schema
        self.cache = RowCache(cache_bytes)
        self.close_error: OSError | None = None
        self.clean_start = True
        self.writer_id = uuid.uuid4()
        #: Cluster mode: this member's leases and slots; its partitions of other members' slots are
        #: `ForeignPartition`s (and `_pids` keeps every partition's id, to take it over).
        self.leases = leases
        self._pids: dict[tuple[str, int], int] = {}
        self._holders: dict[int, int] = {}  # slot -> member id of its holder, as the last tick saw
        self._fenced: list = []  # what the last commit found this member no longer holds
        self._schema_lock = lock_keys(schema)[1]
        self._owner_lock = self._schema_lock if leases is None else writer_lock(schema, self.writer_id)
        self._retry_s = commit_retry_ms / 1000
        self._wait_s = connect_timeout_ms / 1000
        self._writer_lock = threading.Lock()  # one commit at a time, on `_writer`
        self._writer: psycopg.Connection | None = None
        self._writer_pid: int | None = None  # the server's process of the writer session (to end a lost one)
        self._seq = 0  # commit ids, written to writers.last_commit
        self._in_doubt: tuple[int, list] | None = None  # a commit whose outcome could not be learnt yet
        self.pool = Pool(self.connector, pool_size)
        conn = self.connector.first_connection()
        try:
            found, version = prepare(conn, schema)
            if found != version:
                log.info("database %s: logway's tables %s (schema version %d)", self.where,
                         "created" if found == 0 else f"migrated from version {found}", version)
            unfinished = conn.execute("SELECT value FROM meta WHERE key = 'migration'").fetchone()
            if unfinished is not None and not migrating:
                raise MigrationUnfinished(f"database {self.where} holds an unfinished `logway migrate` (of "
                                          f"{unfinished[0]}): run it again to finish it, then start the gateway")
            self._lock_writer(conn, time.monotonic() + self._wait_s)
            self._register(conn)
            self._writer = conn
            self._load(conn)
        except psycopg.Error as exc:  # (a lost connection, missing privileges, ...)
            conn.close()
            self.pool.close()
            raise DatabaseError(f"database {self.where}: cannot open logway's tables: "
                                f"{' '.join(str(exc).split())}") from None
        except BaseException:
            conn.close()
            self.pool.close()
            raise
        self.producer_ids = PgIdAllocator(self.pool)

    # -- opening -----------------------------------------------------------------------------------------
    def _lock_writer(self, conn: psycopg.Connection, deadline: float) -> None:
        """Take the writer lock on `conn`, waiting until `deadline` for a holder to go: a lost session of this
        engine is ended (pg_terminate_backend), any other holder is another gateway (DatabaseInUse after the
        deadline). A cluster member first shares the schema's lock with the others (a gateway alone holds it
        exclusively: either kind refuses the other)."""
        if self.leases is not None:
            while not conn.execute("SELECT pg_try_advisory_lock_shared(%s, %s)", self._schema_lock).fetchone()[0]:
                if time.monotonic() >= deadline:
                    raise self._in_use(conn, self._schema_lock, "a logway gateway that is not in cluster mode")
                time.sleep(RECONNECT_FIRST_S)
        while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", self._owner_lock).fetchone()[0]:
            holder = conn.execute(_HOLDER, self._owner_lock).fetchone()
            if holder is not None and holder[2] == self._writer_pid:
                conn.execute("SELECT pg_terminate_backend(%s, %s)", (holder[2], TERMINATE_WAIT_MS))
                continue
            if time.monotonic() >= deadline:
                raise self._in_use(conn, self._owner_lock, "another logway gateway")
            time.sleep(RECONNECT_FIRST_S)
        self._writer_pid = conn.info.backend_pid

    def _in_use(self, conn: psycopg.Connection, lock: tuple[int, int], what: str) -> DatabaseInUse:
        """The refusal naming who holds `lock`: a gateway alone, or the gateways of a cluster (a shared hold)."""
        holder = conn.execute(_HOLDER, lock).fetchone()
        who = "" if holder is None else f" ({holder[0]}" + (f" from {holder[1]}" if holder[1] else "") + ")"
        if holder is not None and holder[3] == "ShareLock":
            what, hint = "a cluster of logway gateways", "set storage.postgres.cluster to join them, or stop them"
        elif self.leases is not None:
            hint = "stop it, or set storage.postgres.cluster on it too"
        else:
            hint = "stop it"
        return DatabaseInUse(f"database {self.where} is in use by {what}{who}: {hint}, or give this one another "
                             f"database or schema (storage.postgres.schema)")

    def _register(self, conn: psycopg.Connection) -> None:
        """Record this start in `writers` (the previous starts' rows go; one that never stopped makes this start
        unclean). A cluster member adds its row beside the others' and joins the members (a database recovers by
        itself: its start is clean)."""
        if self.leases is not None:
            with conn.transaction():
                conn.execute("INSERT INTO writers (writer_id, host, pid, started_ms) VALUES (%s, %s, %s, %s)",
                             (self.writer_id, socket.gethostname(), os.getpid(), int(self.clock() * 1000)))
                self.leases.join(conn, self.writer_id, int(self.clock() * 1000), self.where)
            return
        with conn.transaction():
            unstopped = conn.execute("SELECT count(*) FROM writers WHERE stopped_ms IS NULL").fetchone()[0]
            conn.execute("DELETE FROM writers")
            conn.execute("INSERT INTO writers (writer_id, host, pid, started_ms) VALUES (%s, %s, %s, %s)",
                         (self.writer_id, socket.gethostname(), os.getpid(), int(self.clock() * 1000)))
        self.clean_start = unstopped == 0

    def _load(self, conn: psycopg.Connection) -> None:
        """Read the catalogue, the partitions' ends and the small stores into memory (a cluster member: the ends
        of no partition yet — it takes its slots' partitions over in `tick`)."""
        self.topics_by_name = self._read_catalog(conn)
        self.offsets = PgOffsetStore(self, conn.execute(_OFFSETS))
        fence = None if self.leases is None else self._fence_coordinator
        self.transactions = PgStateStore(self.pool, "transactions", "transaction store",
                                         _states(conn, "transactions"), fence)
        self.share_state = PgStateStore(self.pool, "share_groups", "share group state store",
                                        _states(conn, "share_groups"), fence)
        self.security = PgSecurityStore(self.pool, _states(conn, "security"), fence)

    def _read_catalog(self, conn: psycopg.Connection, names: list[str] | None = None) -> dict[str, Topic]:
        """The topics of the database (the `names` only, when given) with their partitions: logs of what this
        engine writes, `ForeignPartition`s for the other members' (cluster mode)."""
        where, args = ("", ()) if names is None else (" WHERE t.name = ANY(%s)", (names,))
        partitions: dict[uuid.UUID, list] = {}
        for pid, topic_id, number, log_start in conn.execute(
                "SELECT p.partition_id, p.topic_id, p.partition, p.log_start FROM partitions p JOIN topics t ON "
                f"t.topic_id = p.topic_id{where} ORDER BY p.partition", args):
            partitions.setdefault(topic_id, []).append((pid, number, log_start))
        mine = [pid for topic_id, parts in partitions.items() for pid, _, _ in parts]
        if self.leases is not None:
            names_by_id = {}
            for topic_id, name in conn.execute(f"SELECT t.topic_id, t.name FROM topics t{where}", args):
                names_by_id[topic_id] = name
            mine = [pid for topic_id, parts in partitions.items() for pid, number, _ in parts
                    if self._leads(names_by_id.get(topic_id), number)]
        states = self._partition_states(conn, mine)
        topics = {}
        for topic_id, name, count, overrides, created_ms in conn.execute(
                f"SELECT t.topic_id, t.name, t.partitions, t.config, t.created_ms FROM topics t{where}", args):
            overrides, fixed = clamped_overrides(overrides or {})
            if fixed:
                log.warning("topic %s: %s: beyond what the setting can hold, brought within its range", name,
                            ", ".join(fixed))
            config = self.defaults.with_overrides(overrides)
            fmt = self.formats.get(config.format)
            if fmt is None:
                raise UnknownFormat(f"topic {name}: unknown storage format {config.format!r} (known: "
                                    f"{sorted(self.formats)})")
            logs = []
            for pid, number, log_start in partitions.get(topic_id, ()):
                self._pids[(name, number)] = pid
                if pid in states:
                    logs.append(PgPartitionLog(self, pid, name, number, fmt, config, log_start=log_start,
                                               epoch=self._epoch(name, number), **states[pid]))
                else:
                    logs.append(self._foreign(name, number))
            if len(logs) != count:
                raise StorageError(f"database {self.where}: topic {name} has {len(logs)} partitions of {count}")
            topics[name] = Topic(name, config, dict(overrides), self._partitions(logs), created_ms, topic_id)
        return topics

    @staticmethod
    def _partition_states(conn: psycopg.Connection, pids: list[int]) -> dict[int, dict]:
        """What `PgPartitionLog` is opened with, of each partition of `pids`, as the database holds it now."""
        if not pids:
            return {}
        stats = {pid: (rows, max_ts) for pid, rows, max_ts in conn.execute(
            "SELECT partition_id, count(*), max(max_ts) FROM batches WHERE partition_id = ANY(%s) "
            "GROUP BY partition_id", (pids,))}
        ends = {row[0]: row[1:] for row in conn.execute(_ENDS, (pids,))}
        txns: dict[int, list] = {}
        for pid, *row in conn.execute("SELECT partition_id, producer_id, first_offset, epoch, end_offset, ranges "
                                      "FROM txns WHERE partition_id = ANY(%s)", (pids,)):
            txns.setdefault(pid, []).append(row)
        out = {}
        for pid in pids:
            first_base, first_pos, last_end, last_pos, last_size = ends.get(pid, (None,) * 5)
            rows, max_ts = stats.get(pid, (0, -1))
            out[pid] = dict(first=None if first_base is None else (first_base, first_pos),
                            last=None if last_end is None else (last_end, last_pos, last_size), rows=rows,
                            max_ts=max_ts, txns=txns.get(pid, ()))
        return out

    # -- cluster mode ------------------------------------------------------------------------------------
    def _leads(self, topic: str | None, partition: int) -> bool:
        """Whether this engine writes the partition: always alone; in cluster mode, when it holds its slot."""
        return self.leases is None or (topic is not None and self.leases.slot_of(topic, partition)
                                       in self.leases.epochs)

    def _epoch(self, topic: str, partition: int) -> int | None:
        """The epoch of the partition's slot as this member holds it now (None: alone, or not held)."""
        return None if self.leases is None else self.leases.epochs.get(self.leases.slot_of(topic, partition))

    def _foreign(self, topic: str, partition: int) -> ForeignPartition:
        return ForeignPartition(topic, partition, self._holders.get(self.leases.slot_of(topic, partition), -1))

    def _partitions(self, logs: list):
        return logs if self.leases is None else WorkerPartitions(logs)

    # -- migration ---------------------------------------------------------------------------------------
    def begin_migration(self, source: str) -> None:
        """Mark the database as being filled by `logway migrate` from `source` (a data directory): until
        `end_migration`, no gateway opens it (MigrationUnfinished), so none serves a half-copied log."""
        with self.pool.connection("marking the migration") as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('migration', %s) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value", (source,))

    def end_migration(self) -> None:
        """The migration finished (copied and verified): gateways may open the database."""
        with self.pool.connection("ending the migration") as conn:
            conn.execute("DELETE FROM meta WHERE key = 'migration'")

    # -- topics ------------------------------------------------------------------------------------------
    def _check_compactable(self, config: TopicConfig) -> None:
        if config.compact:
            raise InvalidConfig(f"cleanup.policy {config.cleanup_policy} is not available with the postgres storage "
                                f"backend (its topics are not compacted yet): use delete")
        super()._check_compactable(config)

    def create_copy(self, source: Topic) -> Topic:
        """A topic made as `source` (of another engine) is — its name, id, creation time, config overrides and
        partition count — for `logway migrate` to copy its partitions into: TopicExists, LimitReached, and the
        checks of `create_topic` (a compacted topic: InvalidConfig)."""
        self._check_open()
        cfg = self.defaults.with_overrides(source.overrides)
        if cfg.format not in self.formats:
            raise UnknownFormat(f"unknown storage format {cfg.format!r} (known: {sorted(self.formats)})")
        self._check_compactable(cfg)
        with self._lock:
            if source.name in self.topics_by_name:
                raise TopicExists(f"topic {source.name!r} already exists")
            if self.topic_by_id(source.topic_id) is not None:
                raise TopicExists(f"topic id {source.topic_id} is taken by topic "
                                  f"{self.topic_by_id(source.topic_id).name!r}")
            self._check_room(topics=1, partitions=len(source.partitions))
            topic = self._create(source.name, len(source.partitions), dict(source.overrides), cfg,
                                 topic_id=source.topic_id, created_ms=source.created_ms)
            self.topics_by_name = {**self.topics_by_name, source.name: topic}
        log.info("created topic %s (id %s) with %d partition(s) as a copy", source.name, source.topic_id,
                 len(source.partitions))
        return topic

    def _create(self, name: str, partitions: int, overrides: dict, config: TopicConfig, *,
                topic_id: uuid.UUID | None = None, created_ms: int | None = None) -> Topic:
        created_ms = int(self.clock() * 1000) if created_ms is None else created_ms
        topic_id = new_topic_id() if topic_id is None else topic_id
        with self.pool.connection(f"creating topic {name}") as conn:
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO topics (topic_id, name, partitions, config, created_ms) VALUES "
                                 "(%s, %s, %s, %s, %s)", (topic_id, name, partitions, Jsonb(overrides), created_ms))
                    ids = self._insert_partitions(conn, topic_id, 0, partitions)
            except psycopg.errors.UniqueViolation:  # (cluster mode: another member created it a moment ago)
                raise TopicExists(f"topic {name!r} already exists") from None
        fmt = self.formats[config.format]
        logs = self._new_logs(name, fmt, config, 0, ids)
        return Topic(name, config, dict(overrides), self._partitions(logs), created_ms, topic_id)

    def _new_logs(self, name: str, fmt: BatchFormat, config: TopicConfig, first: int, ids: list[int]) -> list:
        """The logs of new partitions first, first + 1, … (ids: theirs), `ForeignPartition`s for other members'."""
        logs = []
        for number, pid in enumerate(ids, first):
            self._pids[(name, number)] = pid
            logs.append(PgPartitionLog(self, pid, name, number, fmt, config, epoch=self._epoch(name, number))
                        if self._leads(name, number) else self._foreign(name, number))
        return logs

    @staticmethod
    def _insert_partitions(conn: psycopg.Connection, topic_id: uuid.UUID, first: int, end: int) -> list[int]:
        """Rows of `partitions` for partitions first..end-1 of the topic; their ids in order."""
        made = conn.execute("INSERT INTO partitions (topic_id, partition) SELECT %s, g FROM "
                            "generate_series(%s::int, %s::int) g RETURNING partition, partition_id",
                            (topic_id, first, end - 1)).fetchall()
        return [pid for _, pid in sorted(made)]

    def _add_partitions(self, topic: Topic, count: int) -> list:
        have = len(topic.partitions)
        with self.pool.connection(f"adding partitions to topic {topic.name}") as conn:
            try:
                with conn.transaction():
                    ids = self._insert_partitions(conn, topic.topic_id, have, count)
                    conn.execute("UPDATE topics SET partitions = %s WHERE topic_id = %s", (count, topic.topic_id))
            except psycopg.errors.UniqueViolation:  # (cluster mode: another member added partitions meanwhile)
                raise InvalidPartitions(f"topic {topic.name!r} was given more partitions by another gateway "
                                        f"meanwhile: ask again") from None
        return self._new_logs(topic.name, self.formats[topic.config.format], topic.config, have, ids)

    def _store_overrides(self, topic: Topic, overrides: dict) -> None:
        with self.pool.connection(f"altering topic {topic.name}") as conn:
            conn.execute("UPDATE topics SET config = %s WHERE topic_id = %s", (Jsonb(overrides), topic.topic_id))

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its committed offsets (see the module docstring), committed before this returns."""
        self._check_open()
        with self._lock:
            topic = self.topic(name)
            with self._writer_lock:  # no commit under way writes its partitions; none after this will
                with self.pool.connection(f"deleting topic {name}") as conn, conn.transaction():
                    conn.execute("INSERT INTO dropped_partitions (partition_id) SELECT partition_id FROM partitions "
                                 "WHERE topic_id = %s ON CONFLICT DO NOTHING", (topic.topic_id,))
                    conn.execute("DELETE FROM topics WHERE topic_id = %s", (topic.topic_id,))
                for plog in topic.partitions:
                    plog.retire()
            rest = dict(self.topics_by_name)
            del rest[name]
            self.topics_by_name = rest
        self.offsets.delete_topic(name)
        self.offsets.sync()
        log.info("deleted topic %s", name)

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Retention of every partition (rows deleted: how many), and of the rows of deleted topics."""
        deleted = super().enforce_retention(now_ms)
        with self.pool.connection("deleting the rows of deleted topics") as conn:
            for (pid,) in conn.execute("SELECT partition_id FROM dropped_partitions").fetchall():
                with conn.transaction():
                    gone = conn.execute("DELETE FROM batches WHERE partition_id = %s AND end_offset <= (SELECT "
                                        "end_offset FROM batches WHERE partition_id = %s ORDER BY end_offset "
                                        "OFFSET %s LIMIT 1)", (pid, pid, SWEEP_ROWS - 1)).rowcount
                    if not gone:
                        conn.execute("DELETE FROM batches WHERE partition_id = %s", (pid,))
                        conn.execute("DELETE FROM txns WHERE partition_id = %s", (pid,))
                        conn.execute("DELETE FROM dropped_partitions WHERE partition_id = %s", (pid,))
        return deleted

    def cleaning_plans(self, now_ms: int | None = None) -> list:
        """No topic of this backend is compacted."""
        return []

    def refresh(self, names: Iterable[str] | None = None) -> list[str]:
        """Cluster mode: catch up with the topics other members created, deleted, grew or reconfigured — every
        topic, or the `names` given. The names of the topics that went away. Alone: nothing to do, []."""
        if self.leases is None:
            return []
        self._check_open()
        names = None if names is None else sorted(set(names))
        where, args = ("", ()) if names is None else (" WHERE name = ANY(%s)", (names,))
        with self._lock, self.pool.connection("reading the topics") as conn:
            listed = {name: (topic_id, count, overrides) for topic_id, name, count, overrides in conn.execute(
                f"SELECT topic_id, name, partitions, config FROM topics{where}", args)}
            current = dict(self.topics_by_name)
            gone = []
            for name in list(current if names is None else [n for n in names if n in current]):
                topic, row = current[name], listed.get(name)
                if row is not None and row[0] == topic.topic_id:
                    continue
                del current[name]  # deleted (and perhaps made again)
                for plog in topic.partitions:
                    plog.retire()
                gone.append(name)
            news = [name for name, (_, count, _) in listed.items()
                    if name not in current or count > len(current[name].partitions)]
            found = self._read_catalog(conn, news) if news else {}
            for name, new in found.items():
                topic = current.get(name)
                if topic is None:
                    current[name] = new
                elif len(new.partitions) > len(topic.partitions):
                    topic.partitions = topic.partitions + [new.partitions[p] for p in range(len(topic.partitions),
                                                                                             len(new.partitions))]
            for name, (_, _, overrides) in listed.items():
                topic = current.get(name)
                overrides = clamped_overrides(overrides or {})[0]
                if topic is not None and overrides != topic.overrides:
                    topic.overrides, topic.config = dict(overrides), self.defaults.with_overrides(overrides)
                    for plog in topic.partitions:
                        plog.apply_config(topic.config)
            self.topics_by_name = current
        return gone

    def tick(self) -> View:
        """Cluster mode, every `lease_ms` / 3: renew this member's lease, let go of the slots another member took
        (fenced), give back those that are another live member's now (after committing what their partitions have
        pending), take the free ones that are this member's (their partitions opened as the database holds them
        now) — see logway.storage.pg.leases. What it saw."""
        self._check_open()
        leases = self.leases
        with self.pool.connection("renewing the lease") as conn:
            view, take, give = leases.renew(conn)
            before, self._holders = self._holders, dict(enumerate(view.holders))
            self._holders.update({slot: -1 for slot in give})
            held = self._held_logs()
            lost = {slot for slot in held if slot not in leases.epochs}
            if give:
                plogs = [p for slot in give for p in held.get(slot, ())]
                try:
                    self.sync_many(plogs)
                except StorageError as exc:
                    log.warning("database %s: giving slots back: what was pending not committed (%s)", self.where,
                                exc)
            if lost | give:
                self._swap(lost | give, take_over=False)
            if give:
                leases.give_back(conn, give)
            if take:
                got = leases.claim(conn, take)
                leases.epochs.update(got)
                if got:
                    self._holders.update({slot: leases.member_id for slot in got})
                    self._swap(set(got), take_over=True, conn=conn)
            view = View(view.me, view.members, tuple(self._holders[s] for s in range(len(view.holders))))
        if self._holders != before:
            self._name_holders()
        return view

    def _name_holders(self) -> None:
        """Each `ForeignPartition` names its slot's holder as the last tick saw it."""
        slot_of, holders = self.leases.slot_of, self._holders
        for topic in self.topics():
            partitions = topic.partitions
            for p in range(len(partitions)):
                entry = partitions[p]
                if type(entry) is ForeignPartition:
                    entry.owner = holders.get(slot_of(topic.name, p), -1)

    def _held_logs(self) -> dict[int, list]:
        """The partition logs this member has open, by slot."""
        out: dict[int, list] = {}
        for topic in self.topics():
            for plog in topic.partitions:
                out.setdefault(self.leases.slot_of(plog.topic, plog.partition), []).append(plog)
        return out

    def _swap(self, slots: set[int], *, take_over: bool, conn: psycopg.Connection | None = None) -> None:
        """The partitions of `slots` become logs opened as the database holds them now (`take_over`) or
        `ForeignPartition`s (their logs stop taking appends: those not committed get a PartitionNotOwned)."""
        slot_of = self.leases.slot_of
        with self._lock:
            topics = self.topics()
            if take_over:
                pids = [self._pids[(t.name, p)] for t in topics for p in range(len(t.partitions))
                        if slot_of(t.name, p) in slots and (t.name, p) in self._pids]
                states = self._partition_states(conn, pids)
                log_starts = dict(conn.execute("SELECT partition_id, log_start FROM partitions WHERE "
                                               "partition_id = ANY(%s)", (pids,)).fetchall())
            for topic in topics:
                entries = [topic.partitions[p] for p in range(len(topic.partitions))]
                changed = False
                for p, entry in enumerate(entries):
                    if slot_of(topic.name, p) not in slots:
                        continue
                    if take_over:
                        pid = self._pids.get((topic.name, p))
                        if pid not in states:  # (deleted meanwhile: the next refresh sees it)
                            continue
                        if isinstance(entry, PgPartitionLog):
                            entry.lose(self._lost(topic.name, p))
                        entries[p] = PgPartitionLog(self, pid, topic.name, p, self.formats[topic.config.format],
                                                    topic.config, log_start=log_starts.get(pid, 0),
                                                    epoch=self._epoch(topic.name, p), **states[pid])
                    else:
                        if isinstance(entry, PgPartitionLog):
                            entry.lose(self._lost(topic.name, p))
                        entries[p] = self._foreign(topic.name, p)
                    changed = True
                if changed:
                    topic.partitions = WorkerPartitions(entries)
        if 0 in slots and take_over:
            self._reload_coordinator_state(conn)

    def _lost(self, topic: str, partition: int) -> PartitionNotOwned:
        return PartitionNotOwned(f"partition {partition} of topic {topic!r} is now written by another gateway of "
                                 f"the cluster")

    def _reload_coordinator_state(self, conn: psycopg.Connection) -> None:
        """This member took slot 0 over: the committed offsets and the coordinators' states as the previous holder
        left them."""
        self.offsets.reload(conn.execute(_OFFSETS))
        for store in (self.transactions, self.share_state, self.security):
            store.reload_rows(_states(conn, store.store))

    def _fence_coordinator(self, conn: psycopg.Connection) -> None:
        """(cluster mode, in a transaction writing a coordinator's state) PartitionNotOwned unless this member holds
        slot 0 at its epoch."""
        epoch = self.leases.epochs.get(0)
        with conn.cursor() as cur:
            if epoch is None or (0, epoch) not in self.leases.fence(cur, [(0, epoch)]):
                raise self._lost_coordinator()

    @staticmethod
    def _lost_coordinator() -> PartitionNotOwned:
        return PartitionNotOwned("the group and transaction coordinator is another gateway of the cluster now")

    # -- committing --------------------------------------------------------------------------------------
    def sync_many(self, targets: Iterable) -> None:
        """Commit everything `targets` (partition logs, the offset store) have pending, in one transaction (see the
        module docstring). StorageIOError when it could not be committed. (Cluster mode: what belongs to slots this
        member lost is not written: its writers get a PartitionNotOwned through the log's `cuts`, before the lock
        is let go of — no other commit can meanwhile take `_fenced` for its own.)"""
        with self._writer_lock:
            try:
                self._sync_locked(targets)
            finally:
                fenced, self._fenced = self._fenced, []
                for work in fenced:
                    work.fenced()

    def _claim_of(self, work) -> tuple[int, int | None]:
        """(slot, epoch) a work is fenced by: a partition's, the epoch its log was opened under; the coordinator
        stores', slot 0 as held now."""
        plog = getattr(work, "plog", None)
        if plog is None:
            return 0, self.leases.epochs.get(0)
        return self.leases.slot_of(plog.topic, plog.partition), plog.epoch

    def _sync_locked(self, targets: Iterable) -> None:
        """`sync_many`, the caller holding `_writer_lock`."""
        self._check_open()
        works = []
        if self._in_doubt is not None:  # first, what a lost connection left unknown (raises: still unknown)
            seq, doubtful = self._in_doubt
            if self._learn(seq, time.monotonic() + self._retry_s):
                for work in doubtful:
                    work.committed()
            else:
                works = doubtful
            self._in_doubt = None
        works += [w for w in (target._take() for target in targets) if w is not None]
        if not works:
            return
        try:
            self._commit(works)
        except BaseException:
            if self._in_doubt is None:  # known not committed: pending again, for the next commit
                for work in reversed(works):
                    if not any(work is f for f in self._fenced):
                        work.give_back()
            raise
        for work in works:
            if not any(work is f for f in self._fenced):
                work.committed()

    def _commit(self, works: list) -> None:
        """Write `works` in one transaction, until committed or `commit_retry_ms` passed (then `_in_doubt` is set
        when the outcome is still unknown)."""
        self._seq += 1
        seq = self._seq
        deadline = time.monotonic() + self._retry_s
        wait = RECONNECT_FIRST_S
        while True:
            conn = self._connection(deadline)
            try:
                self._write(conn, seq, works)
                return
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:  # lost: was it committed?
                self._drop_writer()
                log.warning("database %s: the connection was lost during a commit (%s): looking it up",
                            self.where, " ".join(str(exc).split()))
                try:
                    if self._learn(seq, deadline):
                        return
                except StorageIOError:
                    self._in_doubt = (seq, [w for w in works if not any(w is f for f in self._fenced)])
                    raise
                if time.monotonic() >= deadline:
                    raise io_error(self.where, "commit not made (the database was lost and came back too late)",
                                   exc) from exc
            except psycopg.Error as exc:  # refused: nothing of it was committed
                raise io_error(self.where, "commit refused", exc) from exc
            time.sleep(wait)
            wait = min(wait * 2, RECONNECT_MAX_S)

    def _write(self, conn: psycopg.Connection, seq: int, works: list) -> None:
        with conn.transaction(), conn.cursor() as cur:
            if self.leases is not None:  # only what this member still holds (see logway.storage.pg.leases)
                claims = {id(w): self._claim_of(w) for w in works if not w.lost}
                held = self.leases.fence(cur, claims.values())
                self._fenced = [w for w in works if w.lost or (w.live and claims[id(w)] not in held)]
                if self._fenced:
                    works = [w for w in works if not any(w is f for f in self._fenced)]
            live = [w for w in works if w.live]  # (not a deleted topic's)
            rows = [(w.plog.partition_id, row) for w in live for row in w.rows]
            if rows:
                with cur.copy(_COPY) as copy:
                    copy.set_types(_COPY_TYPES)
                    for pid, row in rows:
                        copy.write_row((pid, row.end, row.base, row.pos, row.size, row.max_ts, row.time_ms,
                                        row.data))
            for work in live:
                work.write(cur)
            cur.execute("UPDATE writers SET last_commit = %s WHERE writer_id = %s", (seq, self.writer_id))
            if cur.rowcount != 1:
                raise DatabaseInUse(f"database {self.where}: this gateway's writer row is gone: another gateway took "
                                    f"the database over")

    def _learn(self, seq: int, deadline: float) -> bool:
        """Whether commit `seq` was committed, asked of the database once the writer session that sent it is gone
        (StorageIOError when that cannot be known by `deadline`)."""
        conn = self._connection(deadline)
        try:
            row = conn.execute("SELECT last_commit FROM writers WHERE writer_id = %s", (self.writer_id,)).fetchone()
        except psycopg.Error as exc:
            self._drop_writer()
            raise io_error(self.where, "cannot learn whether a commit was made", exc) from exc
        if row is None:
            raise DatabaseInUse(f"database {self.where}: this gateway's writer row is gone: another gateway took the "
                                f"database over")
        committed = row[0] >= seq
        log.warning("database %s: the commit whose connection was lost was %s", self.where,
                    "made" if committed else "not made: writing it again")
        return committed

    def _connection(self, deadline: float) -> psycopg.Connection:
        """The writer connection, made again (with the writer lock) when it was lost, trying until `deadline`."""
        if self._writer is not None and not self._writer.closed:
            return self._writer
        wait = RECONNECT_FIRST_S
        while True:
            conn = None
            try:
                conn = self.connector.connect()
                self._lock_writer(conn, deadline)
                self._writer = conn
                return conn
            except (StorageIOError, psycopg.Error) as exc:
                if conn is not None:
                    conn.close()
                if time.monotonic() >= deadline:
                    if isinstance(exc, StorageIOError):
                        raise
                    raise io_error(self.where, "cannot reconnect", exc) from exc
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            time.sleep(wait)
            wait = min(wait * 2, RECONNECT_MAX_S)

    def _drop_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def sync(self) -> None:
        """Commit everything pending (every partition and the offset store)."""
        self.sync_many([p for t in self.topics() for p in t.partitions] + [self.offsets])

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self, *, clean: bool = True) -> None:
        """Commit what is pending and record the clean stop (`clean`), then close every connection. Never raises
        for the database: what could not be committed makes the stop unclean, kept in `close_error`.
        `clean=False` closes without committing anything, as a crash would (tests)."""
        if self._closed:
            return
        if clean:
            try:
                self.sync()
                with self._writer_lock:
                    self._connection(time.monotonic() + self._wait_s).execute(
                        "UPDATE writers SET stopped_ms = %s WHERE writer_id = %s",
                        (int(self.clock() * 1000), self.writer_id))
            except (OSError, StorageError, psycopg.Error) as exc:
                self.close_error = exc if isinstance(exc, OSError) else io_error(self.where, "closing", exc)
                log.error("database %s: closed without committing everything (%s): the next start is unclean",
                          self.where, exc)
        if clean and self.leases is not None and self.leases.writer_id is not None:
            try:
                with self.pool.connection("leaving the cluster") as conn:
                    self.leases.leave(conn)
            except (StorageError, psycopg.Error) as exc:
                log.warning("database %s: could not leave the cluster (%s): the others take this gateway's slots "
                            "once its lease passes", self.where, exc)
        self._closed = True
        with self._writer_lock:
            self._drop_writer()
        self.pool.close()
        for store in (self.offsets, self.transactions, self.share_state, self.security):
            store.close()


def _states(conn: psycopg.Connection, store: str) -> list:
    return conn.execute("SELECT key, state FROM states WHERE store = %s", (store,)).fetchall()
