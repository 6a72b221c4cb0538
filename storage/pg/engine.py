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
from ..errors import (DatabaseError, DatabaseInUse, InvalidConfig, MigrationUnfinished, StorageError, StorageIOError,
                      TopicExists, UnknownFormat)
from ..formats import BatchFormat
from ..topics import Engine, Topic, new_topic_id
from .db import Connector, Pool, io_error
from .offsets import PgOffsetStore
from .partition import PgPartitionLog
from .rows import RowCache
from .schema import lock_keys, prepare
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
_HOLDER = ("SELECT a.application_name, host(a.client_addr), a.pid FROM pg_locks l JOIN pg_stat_activity a ON "
           "a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::int4::oid AND "
           "l.objid = %s::int4::oid AND l.objsubid = 2")
_ENDS = ("SELECT p.partition_id, f.base_offset, f.pos, l.end_offset, l.pos, l.size FROM partitions p "
         "LEFT JOIN LATERAL (SELECT base_offset, pos FROM batches b WHERE b.partition_id = p.partition_id "
         "ORDER BY end_offset LIMIT 1) f ON true "
         "LEFT JOIN LATERAL (SELECT end_offset, pos, size FROM batches b WHERE b.partition_id = p.partition_id "
         "ORDER BY end_offset DESC LIMIT 1) l ON true")


class PgEngine(Engine):
    reads_need_sync = True  # readers see what is committed
    appends_outlive_the_process = False  # (pending rows are in memory until the commit)
    share = None  # (one process: no worker shares)
    files = None  # (no segment files)

    def __init__(self, info: str, formats: Mapping[str, BatchFormat], defaults: TopicConfig | None = None, *,
                 schema: str = "logway", data_dir: str | None = None, pool_size: int = 4,
                 statement_timeout_ms: int = 30_000, connect_timeout_ms: int = 5000, commit_retry_ms: int = 15_000,
                 cache_bytes: int = 64 * 1024 * 1024, clock: Callable[[], float] = time.time,
                 limits: EngineLimits | None = None, migrating: bool = False) -> None:
        """`info`: a libpq connection string (`db.conninfo`); `schema`: a plain lower-case name; `data_dir`: the
        gateway's directory, named where it asks for one (DescribeLogDirs); `migrating`: opened by `logway
        migrate`, which may open a database its unfinished run left (see `begin_migration`). Raises
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
        self._owner_lock = lock_keys(schema)[1]
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
        deadline)."""
        while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", self._owner_lock).fetchone()[0]:
            holder = conn.execute(_HOLDER, self._owner_lock).fetchone()
            if holder is not None and holder[2] == self._writer_pid:
                conn.execute("SELECT pg_terminate_backend(%s, %s)", (holder[2], TERMINATE_WAIT_MS))
                continue
            if time.monotonic() >= deadline:
                who = "" if holder is None else f" ({holder[0]}" + (f" from {holder[1]}" if holder[1] else "") + ")"
                raise DatabaseInUse(f"database {self.where} is in use by another logway gateway{who}: stop it, or "
                                    f"give this one another database or schema (storage.postgres.schema)")
            time.sleep(RECONNECT_FIRST_S)
        self._writer_pid = conn.info.backend_pid

    def _register(self, conn: psycopg.Connection) -> None:
        """Record this start in `writers` (the previous starts' rows go; one that never stopped makes this start
        unclean)."""
        with conn.transaction():
            unstopped = conn.execute("SELECT count(*) FROM writers WHERE stopped_ms IS NULL").fetchone()[0]
            conn.execute("DELETE FROM writers")
            conn.execute("INSERT INTO writers (writer_id, host, pid, started_ms) VALUES (%s, %s, %s, %s)",
                         (self.writer_id, socket.gethostname(), os.getpid(), int(self.clock() * 1000)))
        self.clean_start = unstopped == 0

    def _load(self, conn: psycopg.Connection) -> None:
        """Read the catalogue, the partitions' ends and the small stores into memory."""
        stats = {pid: (rows, max_ts) for pid, rows, max_ts in conn.execute(
            "SELECT partition_id, count(*), max(max_ts) FROM batches GROUP BY partition_id")}
        ends = {row[0]: row[1:] for row in conn.execute(_ENDS)}
        txns: dict[int, list] = {}
        for pid, *row in conn.execute("SELECT partition_id, producer_id, first_offset, epoch, end_offset, ranges "
                                      "FROM txns"):
            txns.setdefault(pid, []).append(row)
        partitions: dict[uuid.UUID, list] = {}
        for pid, topic_id, number, log_start in conn.execute(
                "SELECT partition_id, topic_id, partition, log_start FROM partitions ORDER BY partition"):
            partitions.setdefault(topic_id, []).append((pid, number, log_start))
        topics = {}
        for topic_id, name, count, overrides, created_ms in conn.execute(
                "SELECT topic_id, name, partitions, config, created_ms FROM topics"):
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
                first_base, first_pos, last_end, last_pos, last_size = ends.get(pid, (None,) * 5)
                rows, max_ts = stats.get(pid, (0, -1))
                logs.append(PgPartitionLog(
                    self, pid, name, number, fmt, config, log_start=log_start,
                    first=None if first_base is None else (first_base, first_pos),
                    last=None if last_end is None else (last_end, last_pos, last_size), rows=rows,
                    max_ts=max_ts, txns=txns.get(pid, ())))
            if len(logs) != count:
                raise StorageError(f"database {self.where}: topic {name} has {len(logs)} partitions of {count}")
            topics[name] = Topic(name, config, dict(overrides), logs, created_ms, topic_id)
        self.topics_by_name = topics
        self.offsets = PgOffsetStore(self, conn.execute(
            "SELECT group_id, topic, partition, committed_offset, metadata, commit_time_ms FROM offsets"))
        def rows(store: str) -> list:
            return conn.execute("SELECT key, state FROM states WHERE store = %s", (store,)).fetchall()

        self.transactions = PgStateStore(self.pool, "transactions", "transaction store", rows("transactions"))
        self.share_state = PgStateStore(self.pool, "share_groups", "share group state store", rows("share_groups"))
        self.security = PgSecurityStore(self.pool, rows("security"))

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
        with self.pool.connection(f"creating topic {name}") as conn, conn.transaction():
            conn.execute("INSERT INTO topics (topic_id, name, partitions, config, created_ms) VALUES "
                         "(%s, %s, %s, %s, %s)", (topic_id, name, partitions, Jsonb(overrides), created_ms))
            ids = self._insert_partitions(conn, topic_id, 0, partitions)
        fmt = self.formats[config.format]
        logs = [PgPartitionLog(self, pid, name, p, fmt, config) for p, pid in enumerate(ids)]
        return Topic(name, config, dict(overrides), logs, created_ms, topic_id)

    @staticmethod
    def _insert_partitions(conn: psycopg.Connection, topic_id: uuid.UUID, first: int, end: int) -> list[int]:
        """Rows of `partitions` for partitions first..end-1 of the topic; their ids in order."""
        made = conn.execute("INSERT INTO partitions (topic_id, partition) SELECT %s, g FROM "
                            "generate_series(%s::int, %s::int) g RETURNING partition, partition_id",
                            (topic_id, first, end - 1)).fetchall()
        return [pid for _, pid in sorted(made)]

    def _add_partitions(self, topic: Topic, count: int) -> list:
        have = len(topic.partitions)
        with self.pool.connection(f"adding partitions to topic {topic.name}") as conn, conn.transaction():
            ids = self._insert_partitions(conn, topic.topic_id, have, count)
            conn.execute("UPDATE topics SET partitions = %s WHERE topic_id = %s", (count, topic.topic_id))
        fmt = self.formats[topic.config.format]
        return [PgPartitionLog(self, pid, topic.name, have + i, fmt, topic.config) for i, pid in enumerate(ids)]

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
        return []

    # -- committing --------------------------------------------------------------------------------------
    def sync_many(self, targets: Iterable) -> None:
        """Commit everything `targets` (partition logs, the offset store) have pending, in one transaction (see the
        module docstring). StorageIOError when it could not be committed."""
        with self._writer_lock:
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
                        work.give_back()
                raise
            for work in works:
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
                    self._in_doubt = (seq, works)
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
        self._closed = True
        with self._writer_lock:
            self._drop_writer()
        self.pool.close()
        for store in (self.offsets, self.transactions, self.share_state, self.security):
            store.close()
