"""Connections to the postgres backend's database: how they are made (`Connector`), a small pool of them for reads
and topic changes (`Pool`), and PostgreSQL's errors mapped once onto storage's.

Every connection sets, through libpq's `options`, the schema logway's tables live in (`search_path`), the
statement timeout, and TCP keepalives on the server's side (a gateway that vanished without closing its socket —
a cut network — is noticed in seconds, and its session, with the advisory lock that makes it the writer, ends);
its `application_name` names the gateway's host and pid, so the lock's holder can be named (`DatabaseInUse`).

Errors: a connection that cannot be made at start is `DatabaseUnreachable` or `DatabaseAuthFailed` (each a
one-line message with what to do); any later failure of the connection or of a statement is a `StorageIOError`
(an OSError too: the gateway answers it as a storage failure and carries on) whose message names the database.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg import conninfo as libpq

from ..errors import DatabaseAuthFailed, DatabaseUnreachable, StorageError, StorageIOError

log = logging.getLogger("logway.storage.pg")

#: Server-side TCP keepalives (seconds): idle before the first probe, between probes, probes lost before the
#: connection counts as dead — a writer whose host vanished loses its session (and its lock) in about 20 s.
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 10, 3, 3
#: SQLSTATEs that mean the server refused who we are (invalid_authorization_specification, invalid_password).
AUTH_FAILED = frozenset({"28000", "28P01"})
#: What libpq says, without a SQLSTATE, when the server refused who we are before any query.
AUTH_WORDS = ("password authentication failed", "no password supplied", "authentication failed",
              "role \"", "pg_hba.conf")


def conninfo(dsn: str = "", **keys) -> str:
    """A libpq connection string: `dsn` (a keyword string or a URI), with each of `keys` (host, port, dbname, user,
    password) that is set winning over it."""
    given = {k: v for k, v in keys.items() if v not in ("", 0, None)}
    try:
        return libpq.make_conninfo(dsn, **given)
    except psycopg.ProgrammingError as exc:
        raise StorageError(f"storage.postgres.dsn is not a connection string libpq reads: {exc}") from None


def describe(info: str) -> str:
    """Where a connection string leads, for messages: `host:port/dbname` as far as it says (never a password); a
    list of servers (libpq's `host=a,b port=1,2`, e.g. a primary and its standby) as `a:1,b:2`."""
    try:
        keys = libpq.conninfo_to_dict(info)
    except psycopg.ProgrammingError:
        keys = {}
    hosts = (keys.get("host") or os.environ.get("PGHOST") or "localhost").split(",")
    ports = (keys.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    if len(ports) == 1:  # (one port: every host's)
        ports *= len(hosts)
    dbname = keys.get("dbname") or os.environ.get("PGDATABASE") or keys.get("user") or "(the user's)"
    return f"postgresql://{','.join(f'{h}:{p}' for h, p in zip(hosts, ports))}/{dbname}"


def io_error(where: str, what: str, exc: BaseException) -> StorageIOError:
    """A failure of the database while logway used it: a StorageIOError naming the database."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return StorageIOError(f"database {where}: {what}: {reason}")


class Connector:
    """Makes connections to one database, each set up as the module docstring says."""

    def __init__(self, info: str, schema: str, *, statement_timeout_ms: int, connect_timeout_ms: int) -> None:
        self.where = describe(info)
        self.schema = schema
        keys = libpq.conninfo_to_dict(info)
        options = " ".join(filter(None, (keys.get("options", ""), f"-c search_path={schema}",
                                         f"-c statement_timeout={statement_timeout_ms}",
                                         f"-c tcp_keepalives_idle={KEEPALIVE_IDLE_S}",
                                         f"-c tcp_keepalives_interval={KEEPALIVE_INTERVAL_S}",
                                         f"-c tcp_keepalives_count={KEEPALIVE_COUNT}")))
        self.info = libpq.make_conninfo(info, options=options,
                                        connect_timeout=max(2, -(-connect_timeout_ms // 1000)),
                                        application_name=f"logway {socket.gethostname()} pid {os.getpid()}"[:63])

    def connect(self) -> psycopg.Connection:
        """A new connection in autocommit mode (transactions are explicit). StorageIOError when it fails."""
        try:
            return psycopg.connect(self.info, autocommit=True)
        except psycopg.Error as exc:
            raise io_error(self.where, "cannot connect", exc) from exc

    def first_connection(self) -> psycopg.Connection:
        """The first connection of a start: its failure is the one line that stops the start (unreachable, no such
        database, or refused credentials)."""
        try:
            return psycopg.connect(self.info, autocommit=True)
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            if reason.startswith("connection failed: "):
                reason = reason[len("connection failed: "):]
            if getattr(exc, "sqlstate", None) in AUTH_FAILED or any(w in reason for w in AUTH_WORDS):
                raise DatabaseAuthFailed(f"database {self.where} refused the login: {reason}: set "
                                         f"storage.postgres.user and storage.postgres.password (or the dsn, "
                                         f"PGPASSWORD, ~/.pgpass)") from None
            if getattr(exc, "sqlstate", None) == "3D000" or "does not exist" in reason:
                raise DatabaseUnreachable(f"database {self.where} does not exist: {reason}: create it (createdb) "
                                          f"or set storage.postgres.dbname") from None
            raise DatabaseUnreachable(f"database {self.where} is unreachable: {reason}: start PostgreSQL there or "
                                      f"set storage.postgres.host and storage.postgres.port (or the dsn)") from None


class Pool:
    """At most `size` connections for reads and topic changes, made when first needed and kept; one that failed
    is closed (the next use makes another)."""

    def __init__(self, connector: Connector, size: int) -> None:
        self.connector = connector
        self.where = connector.where
        self._idle: list[psycopg.Connection] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self, what: str) -> Iterator[psycopg.Connection]:
        """A connection for the block (waiting for one while `size` are in use). A failure of the database in the
        block (`psycopg.Error`) is raised as a StorageIOError saying `what` failed; the connection is closed."""
        self._slots.acquire()
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = self.connector.connect()
            try:
                yield conn
            except psycopg.Error as exc:
                conn.close()
                raise io_error(self.where, what, exc) from exc
            except BaseException:
                conn.close()  # (its state is unknown: a transaction may be half done)
                raise
            with self._lock:
                if self._closed:
                    conn.close()
                else:
                    self._idle.append(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
