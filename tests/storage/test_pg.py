"""What only the postgres backend does (a real server, logway.bench.postgres): its schema (created, kept, a newer one
refused), the start-up errors (unreachable, no such database, login refused, another gateway), commits whose
connection is lost — before COMMIT reached the server, or after it committed — looked up and never written twice,
a server that is killed and comes back, the readers' cache, NUL refused, deleted topics' rows swept."""

from __future__ import annotations

import socket
import threading
import time

import psycopg
import pytest

from logway.bench.postgres import free_port
from logway.codecs.kafka.records import KafkaFormat, decode_records
from logway.storage import (DatabaseAuthFailed, DatabaseInUse, DatabaseUnreachable, ReadWouldWait, SchemaTooNew,
                            StorageIOError, TopicConfig)
from logway.storage.pg import SCHEMA_VERSION, PgEngine

from .helpers import Clock, batch

FORMATS = {"kafka": KafkaFormat()}


def open_pg(dsn, **kw):
    kw.setdefault("connect_timeout_ms", 1000)
    return PgEngine(dsn, FORMATS, TopicConfig(), clock=Clock(), **kw)


def rows(dsn, sql, *args):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def test_the_schema_is_created_once_and_a_newer_one_is_refused(pg_database):
    eng = open_pg(pg_database)
    eng.create_topic("t", 1)
    eng.close()
    assert rows(pg_database, "SELECT value FROM logway.meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    eng = open_pg(pg_database)  # (opened again: nothing created twice)
    assert list(eng.topics_by_name) == ["t"]
    eng.close()
    rows(pg_database, "UPDATE logway.meta SET value = %s WHERE key = 'schema_version' RETURNING 1",
         str(SCHEMA_VERSION + 1))
    with pytest.raises(SchemaTooNew, match=f"version {SCHEMA_VERSION + 1}, newer than this logway's"):
        open_pg(pg_database)
    eng = open_pg(pg_database, schema="other")  # another schema of the same database is another store
    assert eng.topics_by_name == {}
    eng.close()


def test_start_up_errors_say_what_is_wrong(pg_server, pg_database):
    with pytest.raises(DatabaseUnreachable, match="unreachable.*start PostgreSQL there"):
        open_pg(f"host=127.0.0.1 port={free_port()} user=postgres dbname=x")
    with pytest.raises(DatabaseUnreachable, match="does not exist"):
        open_pg(pg_server.dsn("no_such_database"))
    first, second = free_port(), free_port()  # (a list of servers, as for a primary and its standby: each named)
    with pytest.raises(DatabaseUnreachable, match=f"127.0.0.1:{first},localhost:{second}/x is unreachable"):
        open_pg(f"host=127.0.0.1,localhost port={first},{second} user=postgres dbname=x "
                f"target_session_attrs=read-write")
    with pytest.raises(DatabaseAuthFailed, match="refused the login.*password authentication failed"):
        open_pg(pg_server.dsn("postgres", password="wrong"))


def test_one_gateway_writes_a_database(pg_database):
    eng = open_pg(pg_database)
    with pytest.raises(DatabaseInUse, match=r"in use by another logway gateway \(logway .* pid \d+"):
        open_pg(pg_database)
    eng.close()
    open_pg(pg_database).close()  # its lock went with it


def test_a_clean_stop_is_remembered(pg_database):
    open_pg(pg_database).close()
    eng = open_pg(pg_database)
    assert eng.clean_start
    eng.close(clean=False)  # as a kill
    eng = open_pg(pg_database)
    assert not eng.clean_start
    eng.close()


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


class Proxy:
    """A TCP relay to the server that, once armed, loses the writer's next COMMIT: `after=False` before it reaches
    the server (never committed), `after=True` once the server answered it (committed, the answer lost) — then
    closes both sides, as a cut connection."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed: bool | None = None
        self.tripped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            cut = threading.Event()  # the next answer from the server is lost, and the connection with it
            threading.Thread(target=self._up, args=(client, server, cut), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, cut), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self.armed is not None and b"COMMIT" in data:
                    after, self.armed = self.armed, None
                    if after:  # it reaches the server; its answer does not come back
                        cut.set()
                        server.sendall(data)
                        return
                    self.tripped.set()
                    break
                server.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if cut.is_set():
                    self.tripped.set()
                    break
                client.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize("after", [False, True], ids=["commit-lost-on-the-way", "answer-lost"])
def test_a_commit_whose_connection_is_lost_is_looked_up_and_never_written_twice(pg_server, pg_database, after):
    name = pg_database.split("dbname=")[1]
    proxy = Proxy(pg_server.port)
    try:
        eng = open_pg(pg_server.dsn(name).replace(f"port={pg_server.port}", f"port={proxy.port}"))
        plog = eng.create_topic("t", 1).partitions[0]
        plog.append(batch(2))
        plog.sync()
        plog.append(batch(3, tag="x"))
        eng.offsets.commit("g", "t", 0, 2)
        proxy.armed = after
        eng.sync_many([plog, eng.offsets])  # lost, looked up, done (written again when it was not committed)
        assert proxy.tripped.is_set()
        assert plog.high_watermark == 5 and eng.offsets.fetch("g", "t", 0).offset == 2
        assert rows(pg_database, "SELECT base_offset, end_offset FROM logway.batches ORDER BY end_offset") == [
            (0, 2), (2, 5)]
        assert rows(pg_database, "SELECT committed_offset FROM logway.offsets") == [(2,)]
        plog.append(batch(1))
        plog.sync()
        assert [r.offset for r in decode_records(plog.read(0, 1 << 20).read(), min_offset=0)] == list(range(6))
        eng.close()
    finally:
        proxy.close()


def test_a_server_that_dies_keeps_appends_pending_until_it_is_back(pg_server, pg_database):
    eng = open_pg(pg_database, commit_retry_ms=300)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    plog.sync()
    plog.append(batch(3))
    pg_server.kill()
    with pytest.raises(StorageIOError, match="database"):
        plog.sync()  # not committed (nor known to be): the caller is told, the batches stay
    assert plog.high_watermark == 2 and plog.log_end_offset == 5
    pg_server.start()
    plog.append(batch(1))
    plog.sync()
    assert plog.high_watermark == 6
    assert rows(pg_database, "SELECT base_offset, end_offset FROM logway.batches ORDER BY end_offset") == [
        (0, 2), (2, 5), (5, 6)]
    eng.close()


def test_a_commit_rides_out_a_server_restart_within_commit_retry(pg_server, pg_database):
    eng = open_pg(pg_database, commit_retry_ms=60_000)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    pg_server.kill()
    restart = threading.Timer(0.5, pg_server.start)
    restart.start()
    try:
        plog.sync()  # reconnects once the server is back
    finally:
        restart.join()
    assert plog.high_watermark == 2 and rows(pg_database, "SELECT count(*) FROM logway.batches") == [(1,)]
    eng.close()


def test_readers_at_the_end_read_from_memory_older_rows_from_the_database(pg_database):
    eng = open_pg(pg_database, cache_bytes=4096)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(10):
        plog.append(batch(4, size=200, tag=f"{i}."))
        plog.sync()
    tail = plog.read(36, 1 << 20, wait=False)  # the newest row: in memory
    assert (tail.first_offset, tail.end_offset) == (36, 40) and tail.file is None
    with pytest.raises(ReadWouldWait):
        plog.read(0, 1 << 20, wait=False)  # long let go
    old = plog.read(0, 2000)  # from the database: whole batches, about max_bytes of them
    assert old.first_offset == 0 and 4 <= old.end_offset <= 12
    assert [r.offset for r in decode_records(old.read(), min_offset=0)] == list(range(old.end_offset))
    assert plog.read(old.end_offset, 1, wait=False) is not None  # fetched along, now in memory
    eng.close()


def test_slices_know_their_place_in_the_partitions_byte_stream(pg_database):
    eng = open_pg(pg_database)
    plog = eng.create_topic("t", 1).partitions[0]
    sizes = []
    for i in range(3):
        data = batch(2, tag=f"{i}")
        sizes.append(len(data))
        plog.append(data)
    plog.sync()
    whole = plog.read(0, 1 << 20)
    second = plog.read(2, 1)
    assert whole.position == 0 and whole.length == sum(sizes)
    assert second.position == sizes[0] and second.length == sizes[1] and second.segment is whole.segment
    assert plog.watermark()[2] == sum(sizes)
    eng.close()


def test_nul_characters_are_refused_before_they_reach_the_database(pg_database):
    eng = open_pg(pg_database)
    with pytest.raises(ValueError, match="NUL"):
        eng.offsets.commit("g\0x", "t", 0, 1)
    with pytest.raises(ValueError, match="NUL"):
        eng.offsets.commit_many("g", [("t", 0, 1, "meta\0data")])
    eng.offsets.commit("g", "t", 0, 1)
    eng.offsets.sync()  # (nothing refused in the commit)
    assert rows(pg_database, "SELECT group_id FROM logway.offsets") == [("g",)]
    eng.close()


def test_a_deleted_topics_rows_are_swept_by_retention(pg_database):
    eng = open_pg(pg_database)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    plog.sync()
    eng.delete_topic("t")
    assert rows(pg_database, "SELECT count(*) FROM logway.batches") == [(1,)]
    assert rows(pg_database, "SELECT count(*) FROM logway.dropped_partitions") == [(1,)]
    eng.enforce_retention()
    eng.enforce_retention()
    assert rows(pg_database, "SELECT count(*) FROM logway.batches") == [(0,)]
    assert rows(pg_database, "SELECT count(*) FROM logway.dropped_partitions") == [(0,)]
    eng.close()


def test_concurrent_appenders_and_commits_keep_offsets_contiguous(pg_database):
    eng = open_pg(pg_database)
    topic = eng.create_topic("t", 3)
    stop = time.monotonic() + 1.5

    def produce(plog):
        while time.monotonic() < stop:
            plog.append(batch(3))

    def commit():
        while time.monotonic() < stop:
            eng.sync_many(topic.partitions)

    threads = [threading.Thread(target=produce, args=(p,)) for p in topic.partitions]
    threads += [threading.Thread(target=commit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eng.sync_many(topic.partitions)
    for plog in topic.partitions:
        ends = rows(pg_database, "SELECT base_offset, end_offset FROM logway.batches WHERE partition_id = %s "
                                 "ORDER BY end_offset", plog.partition_id)
        assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
        assert ends[-1][1] == plog.high_watermark == plog.log_end_offset
    eng.close()
