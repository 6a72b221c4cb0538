"""A throwaway PostgreSQL server for the postgres storage backend's benchmarks and tests: `PostgresServer` runs
Debian's PostgreSQL (or any on PATH) from a data directory of its own — `initdb` into a temporary directory (as the
`postgres` user when run as root: initdb refuses root), `pg_ctl start` on a free port on 127.0.0.1 with its own
socket directory — and can be stopped, killed (SIGKILL of the postmaster and its processes: a crash) and started
again. Settings are PostgreSQL's defaults (fsync and synchronous_commit on), but for the port and the sockets.

`add_standby()` gives a running server a synchronous standby, a server of its own (its own temporary directory,
port and socket directory) made with `pg_basebackup -R` and started; the primary waits for it on every commit
(`synchronous_standby_names = '*'`, set on the primary only after the copy, so a promoted standby waits for none),
and it returns once the primary shows it streaming as 'sync'. `promote()` makes a standby the primary
(`pg_ctl promote`), returning once it takes writes: a failover, when the old primary was killed.

Logins over TCP need a password (scram-sha-256: the tests of a refused login need one to refuse); over the socket
they are trusted. The test fixtures (tests/conftest.py: `pg_server`, `pg_database`) and `logway bench
kafka-throughput --backend postgres` use it.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PASSWORD = "logway-test-password"
USER = "postgres"
#: How often a wait for the server's state (a standby streaming, a promotion done) asks it again.
POLL_S = 0.05


def postgres_bin() -> str | None:
    """The directory of PostgreSQL's server programs (initdb, pg_ctl): Debian's newest, else on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    pg_ctl = shutil.which("pg_ctl")
    return os.path.dirname(pg_ctl) if pg_ctl else None


def postgres_problem(*, standby: bool = False) -> str | None:
    """Why no test server (with `standby`: and no standby of one) can run here, or None."""
    if postgres_bin() is None:
        return ("PostgreSQL is not installed (no initdb/pg_ctl: Debian's postgresql package, which .ci/run installs)")
    if standby and not os.path.exists(os.path.join(postgres_bin(), "pg_basebackup")):
        return (f"PostgreSQL's pg_basebackup is not installed beside {postgres_bin()}/pg_ctl (Debian's "
                f"postgresql-client package, which the postgresql package .ci/run installs brings)")
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(USER)
        except KeyError:
            return "running as root, but there is no postgres user to run initdb as (initdb refuses root)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """A server of its own data directory: made by initdb, or — `base_backup_of` a running server — a standby of it
    made by pg_basebackup (not started: see `add_standby`)."""

    def __init__(self, *, base_backup_of: PostgresServer | None = None) -> None:
        self.bin = postgres_bin()
        self.root = tempfile.mkdtemp(prefix="logway-pg-")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "server.log")
        self.port = free_port()
        self._databases = itertools.count(1)
        if os.geteuid() == 0:
            import pwd

            entry = pwd.getpwnam(USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", USER, "--"]
        else:
            self._as = []
        if base_backup_of is not None:  # (-R: standby.signal, and primary_conninfo naming the primary's socket)
            self._run("pg_basebackup", "-D", self.data, "-R", "-X", "stream", "-c", "fast", "--no-sync",
                      "-h", base_backup_of.root, "-p", str(base_backup_of.port), "-U", USER)
            return
        with open(os.path.join(self.root, "pw"), "w") as f:
            f.write(PASSWORD + "\n")
        if self._as:
            os.chown(os.path.join(self.root, "pw"), entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", self.data, "-U", USER, "--pwfile", os.path.join(self.root, "pw"),
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        os.unlink(os.path.join(self.root, "pw"))

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self._as, os.path.join(self.bin, program), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip() or done.stdout.strip()}")

    # -- the server --------------------------------------------------------------------------------------
    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 "
                   f"-c shared_buffers=64MB")
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self) -> None:
        if self.pid() is not None:
            self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def kill(self) -> None:
        """SIGKILL the postmaster and its processes, as a crash of the server would; the next `start` recovers from
        the WAL."""
        pid = self.pid()
        if pid is None:
            return
        doomed = [pid, *_children(pid)]
        for victim in doomed:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(_alive(victim) for victim in doomed) and time.monotonic() < deadline:
            time.sleep(0.02)
        # Dead, but maybe not reaped yet (a zombie passes kill(pid, 0), and a new postmaster would take the lock
        # file for a live one's): its lock files go, as an operator would remove them after a crash.
        for lock in (os.path.join(self.data, "postmaster.pid"), os.path.join(self.root, f".s.PGSQL.{self.port}.lock")):
            try:
                os.unlink(lock)
            except FileNotFoundError:
                pass

    # -- a synchronous standby -----------------------------------------------------------------------------
    def add_standby(self, timeout: float = 60.0) -> PostgresServer:
        """A synchronous standby of this running server, started, that the primary waits for on every commit (see
        the module docstring); destroy it when done."""
        standby = PostgresServer(base_backup_of=self)
        try:
            standby.start()
            # ALTER SYSTEM after the copy: postgresql.auto.conf of the standby (which a promotion keeps) has none
            # of it, so the promoted standby waits for no standby of its own.
            self._sql("ALTER SYSTEM SET synchronous_standby_names = '*'", "ALTER SYSTEM SET synchronous_commit = on",
                      "SELECT pg_reload_conf()")
            self._wait(lambda conn: conn.execute("SELECT count(*) FROM pg_stat_replication WHERE state = "
                                                 "'streaming' AND sync_state = 'sync'").fetchone()[0] > 0,
                       timeout, f"the standby on port {standby.port} did not stream as 'sync'")
        except BaseException:
            standby.destroy()
            raise
        return standby

    def promote(self, timeout: float = 60.0) -> None:
        """Make this standby the primary (`pg_ctl promote`), returning once it takes writes."""
        self._run("pg_ctl", "-D", self.data, "-w", "-t", str(int(timeout)), "promote")
        self._wait(lambda conn: not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0], timeout,
                   f"the standby on port {self.port} was promoted but is still in recovery")

    def _sql(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def _wait(self, done, timeout: float, failure: str) -> None:
        """Until `done(connection)` (asked again every POLL_S), or RuntimeError(`failure`) after `timeout`."""
        import psycopg

        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            while not done(conn):
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"{failure} within {timeout:g} s")
                time.sleep(POLL_S)

    def cpu_seconds(self) -> float:
        """CPU seconds the server's processes (the postmaster and its children now) have used."""
        from .proc import proc_cpu_seconds

        pid = self.pid()
        return 0.0 if pid is None else sum(proc_cpu_seconds(p) for p in (pid, *_children(pid)))

    def pid(self) -> int | None:
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def destroy(self) -> None:
        try:
            if self.pid() is not None:
                self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- databases ---------------------------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres", *, password: str = PASSWORD) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} password={password} dbname={dbname}"

    def create_database(self) -> str:
        import psycopg

        name = f"test_{os.getpid()}_{next(self._databases)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().split(") ")[-1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out
