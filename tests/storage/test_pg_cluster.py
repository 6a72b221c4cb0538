"""Several engines over one database in cluster mode (`PgEngine(leases=...)`, logway.storage.pg.leases), against a
real server: members and their ids, the slots spread over the live members and taken over from a dead one, every
commit fenced by the slots it writes (a member whose slot was taken writes nothing more of it, and its writers are
told), the catalog caught up with, the coordinator's stores fenced and reloaded, a lone gateway and a cluster
refusing each other, a gateway of another named cluster refused, and a version-1 schema migrated."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from logway.codecs.kafka.records import KafkaFormat, decode_records, encode_batch
from logway.codecs.records import Record
from logway.gateway.cluster.leases import slot_of
from logway.storage import DatabaseInUse, PartitionNotOwned, TopicConfig, TopicExists
from logway.storage.engine import ForeignPartition
from logway.storage.pg import SCHEMA_VERSION, PgEngine, PgPartitionLog
from logway.storage.pg.leases import SLOTS, Leases
from logway.storage.pg.schema import MIGRATIONS

from .helpers import Clock

FORMATS = {"kafka": KafkaFormat()}
LEASE_MS = 1000


def member(dsn, cluster_name: str = "", **kw) -> PgEngine:
    kw.setdefault("connect_timeout_ms", 1000)
    return PgEngine(dsn, FORMATS, TopicConfig(), clock=Clock(), leases=Leases(slot_of, LEASE_MS, cluster_name), **kw)


def batch(values: list[bytes]) -> bytes:
    return encode_batch([Record(v, key=b"k", timestamp=1_700_000_000_000) for v in values],
                        default_timestamp=1_700_000_000_000)


def rows(dsn, sql, *args):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def expire(dsn, engine) -> None:
    """`engine`'s lease has passed, as when it was cut off from the database for longer than the lease."""
    rows(dsn, "UPDATE logway.members SET lease_until = clock_timestamp() - interval '1 second' WHERE writer_id = %s "
              "RETURNING 1", engine.writer_id)


def held(engine) -> int:
    return len(engine.leases.epochs)


def values(plog, start=0) -> list[bytes]:
    out, offset = [], start
    while offset < plog.high_watermark:
        piece = plog.read(offset, 1 << 20)
        records = [r for r in decode_records(bytes(piece.data)) if r.offset >= offset]
        out += [r.value for r in records]
        offset = records[-1].offset + 1
    return out


@pytest.fixture
def engines():
    made = []
    yield made
    for engine in made:
        engine.close()


def test_members_share_the_slots_and_take_over_a_dead_ones(pg_database, engines):
    a = member(pg_database)
    engines.append(a)
    assert a.leases.member_id == 0
    view = a.tick()
    assert held(a) == SLOTS and set(view.holders) == {0}
    topic = a.create_topic("t", 8)
    assert all(isinstance(p, PgPartitionLog) for p in topic.partitions)
    for p in range(8):
        a.topic("t").partitions[p].append(batch([b"a%d" % p]))
    a.sync()

    b = member(pg_database)
    engines.append(b)
    assert b.leases.member_id == 1
    assert b.tick().holders == view.holders  # nothing free yet: a gives back first
    assert len(a.topic("t").partitions) == len(b.topic("t").partitions) == 8
    a.tick()  # a sees b: gives back the half beyond its share
    assert held(a) == SLOTS // 2
    final = b.tick()  # b takes what was given back
    assert held(b) == SLOTS // 2
    assert a.tick().holders == final.holders
    assert sorted(final.holders) == [0] * (SLOTS // 2) + [1] * (SLOTS // 2)
    assert [p.member_id for p in final.members] == [0, 1]
    for p in range(8):  # each partition is a log in its holder's engine, a stub in the other's
        holder = final.holders[slot_of("t", p)]
        mine, other = (a, b) if holder == 0 else (b, a)
        assert isinstance(mine.topic("t").partitions[p], PgPartitionLog)
        assert isinstance(other.topic("t").partitions[p], ForeignPartition)
        assert other.topic("t").partitions[p].owner == holder
        assert values(mine.topic("t").partitions[p]) == [b"a%d" % p]  # taken over as the database holds it
    moved = [p for p in range(8) if final.holders[slot_of("t", p)] == 1]
    assert moved, "the 8 partitions all stayed with member 0"

    # b dies (its lease passes): a takes every slot back, with what b committed
    for p in moved:
        b.topic("t").partitions[p].append(batch([b"b%d" % p]))
    b.sync()
    expire(pg_database, b)
    a.tick()
    assert held(a) == SLOTS
    for p in moved:
        assert values(a.topic("t").partitions[p]) == [b"a%d" % p, b"b%d" % p]
        assert a.topic("t").partitions[p].log_end_offset == 2


def test_a_member_whose_slot_was_taken_commits_nothing_more_of_it(pg_database, engines):
    a = member(pg_database)
    engines.append(a)
    a.tick()  # alone: every slot
    b = member(pg_database)
    engines.append(b)
    a.create_topic("t", 1)
    plog = a.topic("t").partitions[0]
    plog.append(batch([b"one"]))
    a.sync()
    expire(pg_database, a)  # a is cut off for longer than its lease ...
    b.tick()  # ... and b takes its slots
    assert held(b) == SLOTS
    since = plog.cuts
    plog.append(batch([b"lost"]))  # a does not know yet: it appends, and commits
    a.sync()
    assert plog.cuts != since and isinstance(plog.cut_error, PartitionNotOwned)  # its writer is told, not acked
    with pytest.raises(PartitionNotOwned, match="another gateway"):
        plog.append(batch([b"later"]))
    assert rows(pg_database, "SELECT count(*) FROM logway.batches")[0][0] == 1  # nothing of a's after the take-over
    b.refresh()  # (b learns of the topic a created: it leads its partition)
    theirs = b.topic("t").partitions[0]
    theirs.append(batch([b"two"]))
    b.sync()
    assert values(theirs) == [b"one", b"two"]

    # a's next tick sees it lost everything; it takes its share again once b gives it back
    a.tick()
    assert held(a) == 0 and isinstance(a.topic("t").partitions[0], ForeignPartition)
    b.tick()
    a.tick()
    assert held(a) + held(b) == SLOTS and held(a) == SLOTS // 2


def test_a_commit_tried_again_after_its_partition_was_lost_neither_writes_nor_acknowledges_it(pg_database,
                                                                                                 engines):
    # a's commit loses its connection (a failover), and before a can reconnect its lease passes, b takes its slots
    # and a's tick lets go of the partition: the commit, tried again, writes nothing of the partition and its
    # writers are told so (not told their records are committed).
    a = member(pg_database)
    engines.append(a)
    a.tick()
    b = member(pg_database)
    engines.append(b)
    a.create_topic("t", 1)
    plog = a.topic("t").partitions[0]
    plog.append(batch([b"one"]))
    a.sync()
    with psycopg.connect(pg_database, autocommit=True) as blocker:
        # a's writer session ends, and a cannot take its writer lock again until the blocker lets it
        blocker.execute("SELECT pg_terminate_backend(%s, 5000)", (a._writer_pid,))
        blocker.execute("SELECT pg_advisory_lock(%s, %s)", a._owner_lock)
        since = plog.cuts
        plog.append(batch([b"in doubt"]))
        committing = threading.Thread(target=a.sync)
        committing.start()
        deadline = time.monotonic() + 20
        while a._writer is not None:  # (the commit found its connection lost: it is reconnecting)
            assert time.monotonic() < deadline, "the commit did not lose its connection"
            time.sleep(0.01)
        expire(pg_database, a)
        b.tick()
        a.tick()
        assert isinstance(a.topic("t").partitions[0], ForeignPartition)
        blocker.execute("SELECT pg_advisory_unlock(%s, %s)", a._owner_lock)
        committing.join(30)
    assert not committing.is_alive()
    assert plog.cuts != since and isinstance(plog.cut_error, PartitionNotOwned)
    b.refresh()
    assert values(b.topic("t").partitions[0]) == [b"one"]


def test_a_partitions_rows_are_fenced_by_the_epoch_its_log_was_opened_under(pg_database, engines):
    # Rows a log numbered under one epoch of its slot are never written under a later one: a member that lost the
    # slot and took it back (a new epoch; another member may have written the partition meanwhile) cannot commit
    # them, even when a commit took them before its tick let go of the log.
    a = member(pg_database)
    engines.append(a)
    a.tick()
    a.create_topic("t", 1)
    plog = a.topic("t").partitions[0]
    plog.append(batch([b"one"]))
    a.sync()
    plog.append(batch([b"stale"]))
    work = plog._take()  # (a commit under way took it)
    slot = slot_of("t", 0)
    rows(pg_database, "UPDATE logway.slots SET epoch = epoch + 2 WHERE slot = %s RETURNING 1", slot)
    a.leases.epochs[slot] += 2  # (lost and taken back, the log not let go of yet)
    with a._writer_lock:
        a._commit([work])
    assert a._fenced == [work]
    assert rows(pg_database, "SELECT count(*) FROM logway.batches")[0][0] == 1


def test_the_coordinators_stores_are_written_by_the_holder_of_slot_0_only(pg_database, engines):
    a = member(pg_database)
    engines.append(a)
    a.tick()
    b = member(pg_database)
    engines.append(b)
    a.create_topic("t", 1)
    a.offsets.commit("g", "t", 0, 5)
    a.offsets.sync()
    a.transactions.put("tx", {"state": "open"})
    expire(pg_database, a)
    b.tick()  # b holds slot 0 now: it reads what a left
    assert b.offsets.fetch("g", "t", 0).offset == 5
    assert b.transactions.get("tx") == {"state": "open"}
    a.offsets.commit("g", "t", 0, 9)  # a, not knowing yet, commits an offset: not written
    a.offsets.sync()
    assert isinstance(a.offsets.lost, PartitionNotOwned)
    with pytest.raises(PartitionNotOwned, match="coordinator"):
        a.transactions.put("tx", {"state": "done"})
    assert rows(pg_database, "SELECT committed_offset FROM logway.offsets") == [(5,)]
    b.offsets.commit("g", "t", 0, 7)
    b.offsets.sync()
    assert b.offsets.lost is None and rows(pg_database, "SELECT committed_offset FROM logway.offsets") == [(7,)]


def test_members_catch_up_with_the_topics_the_others_change(pg_database, engines):
    a, b = member(pg_database), member(pg_database)
    engines += [a, b]
    a.create_topic("t", 2, {"retention.ms": 1000})
    assert "t" not in b.topics_by_name
    assert b.refresh(["t"]) == [] and len(b.topic("t").partitions) == 2
    with pytest.raises(TopicExists):  # (b knows it now; another member's creation is refused by the database too)
        b.create_topic("t", 1)
    a.create_topic("u", 1)
    with pytest.raises(TopicExists):
        b.create_topic("u", 1)  # b has not looked: the database refuses it
    a.create_partitions("t", 4)
    a.alter_topic_config("t", {"retention.ms": 2000})
    b.refresh()
    assert len(b.topic("t").partitions) == 4 and b.topic("t").config.retention_ms == 2000
    a.delete_topic("t")
    assert b.refresh() == ["t"] and "t" not in b.topics_by_name


def test_a_lone_gateway_and_a_cluster_refuse_each_other(pg_database, engines):
    a = member(pg_database)
    engines.append(a)
    with pytest.raises(DatabaseInUse, match="in use by a cluster of logway gateways.*storage.postgres.cluster"):
        PgEngine(pg_database, FORMATS, TopicConfig(), clock=Clock(), connect_timeout_ms=1000)
    a.close()
    engines.clear()
    alone = PgEngine(pg_database, FORMATS, TopicConfig(), clock=Clock(), connect_timeout_ms=1000)
    engines.append(alone)
    with pytest.raises(DatabaseInUse, match="in use by a logway gateway that is not in cluster mode"):
        member(pg_database)


def test_a_gateway_of_another_named_cluster_is_refused(pg_database, engines):
    engines.append(member(pg_database, "blue"))
    engines.append(member(pg_database))  # (no name: whichever cluster the database holds)
    with pytest.raises(DatabaseInUse, match="belongs to logway cluster 'blue'.*configured for cluster 'green'"):
        member(pg_database, "green")
    engines.append(member(pg_database, "blue"))
    assert [e.leases.member_id for e in engines] == [0, 1, 2]


def test_a_version_1_schema_is_migrated(pg_database, engines):
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA logway")
        conn.execute("SET search_path TO logway")
        conn.execute(MIGRATIONS[1])
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    engines.append(member(pg_database))
    assert rows(pg_database, "SELECT value FROM logway.meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert rows(pg_database, "SELECT count(*) FROM logway.slots") == [(SLOTS,)]
