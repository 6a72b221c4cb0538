"""Moving a data directory into a database (logway.storage.pg.migrate, a real server): every kind of partition —
`kafka` batches across segments with a transaction open and one aborted and a log start inside a batch, a `tank`
log with a gap, a log whose records were all deleted — copied verbatim at its offsets, with its topic id, overrides,
committed offsets, states and producer ids; verified from the database; taken up again after an interruption;
and the refusals (a compacted topic, a target with topics of its own, another id, another offset, a copy that
differs). The entry points it adds to the postgres backend (`copy_batches`, `copy_log_start`) are tested on their
own at the end."""

from __future__ import annotations

import re

import psycopg
import pytest

from logway.codecs.kafka.records import KafkaFormat
from logway.codecs.records import Record
from logway.codecs.tank import TankFormat, encode_bundle, wrap
from logway.storage import (CorruptBatch, InvalidBatchOffset, LogEngine, MigrationRefused, MigrationUnfinished,
                            TopicConfig)
from logway.storage.pg import PgEngine
from logway.storage.pg import migrate as mig

from .helpers import T0, Clock, batch, bundle

FORMATS = {"kafka": KafkaFormat(), "tank": TankFormat()}


def local(path):
    return LogEngine(path, FORMATS, TopicConfig(segment_bytes=4096), clock=Clock())


def pg(dsn, **kw):
    return PgEngine(dsn, FORMATS, TopicConfig(), clock=Clock(), migrating=True, **kw)


def rows(dsn, sql, *args):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def source(path):
    """A data directory with every kind of partition (see the module docstring); closed."""
    eng = local(path)
    k = eng.create_topic("orders", 2, {"retention.ms": 3_600_000})
    p0 = k.partitions[0]
    for i in range(60):  # several segments of 4 KiB
        p0.append(batch(3, size=40, tag=f"b{i}-"))
    p0.append(batch(2), producer=(7, 0))  # aborted
    p0.end_transaction(7, 0, committed=False)
    p0.append(batch(4), producer=(9, 2))  # still open when the gateway stopped
    p0.delete_records(4)  # inside the second batch (offsets 3..5)
    k.partitions[1].append(batch(5))
    t = eng.create_topic("tanked", 1, {"storage.format": "tank"}).partitions[0]
    t.append(bundle(b"a", b"b"))
    t.append(wrap(encode_bundle([Record(b"c")], sparse_seqs=[11], default_timestamp=T0)))  # a gap: offset 10
    t.append(bundle(b"d"))
    gone = eng.create_topic("emptied", 1).partitions[0]
    gone.append(batch(6))
    gone.delete_records(-1)
    eng.offsets.commit("billing", "orders", 0, 42, "meta", 1234)
    eng.offsets.commit("billing", "orders", 1, 3)
    eng.transactions.put("tx-1", {"producer_id": 9, "epoch": 2, "state": "Ongoing"})
    eng.security.put("acl " + '["TOPIC","orders","LITERAL","User:alice","*","READ","ALLOW"]', {})
    for _ in range(1500):  # past the first block of ids
        eng.producer_ids.next_id()
    eng.close()
    return path


def run(src_path, dsn, **kw):
    """A whole `logway migrate`: refusal, copy, verify from the database."""
    src = local(src_path)
    dst = pg(dsn)
    try:
        refused = mig.refusal(src, dst, **kw)
        if refused:
            raise MigrationRefused(refused)
        done = mig.copy(src, dst)
        dst.close()
        dst = pg(dsn, cache_bytes=0)
        return mig.verify(src, dst, done)
    finally:
        dst.close()
        src.close()


def test_everything_is_copied_verbatim_and_verified_from_the_database(tmp_path, pg_database):
    src_path = source(tmp_path / "data")
    copied = {t.name: t for t in run(src_path, pg_database)}
    assert {n: t.status for n, t in copied.items()} == {"emptied": "copied", "orders": "copied", "tanked": "copied"}
    assert [(p.log_start, p.log_end) for p in copied["orders"].partitions] == [(4, 186), (0, 5)]
    assert [(p.log_start, p.log_end) for p in copied["tanked"].partitions] == [(0, 12)]
    assert [(p.log_start, p.log_end, p.records) for p in copied["emptied"].partitions] == [(6, 6, 0)]

    src, dst = local(src_path), PgEngine(pg_database, FORMATS, TopicConfig(), clock=Clock(), cache_bytes=0)
    try:
        for topic in src.topics():
            there = dst.topic(topic.name)
            assert (there.topic_id, there.overrides, there.created_ms) == (topic.topic_id, topic.overrides,
                                                                           topic.created_ms)
        a, b = src.partition("orders", 0), dst.partition("orders", 0)
        assert b.read(4, 100).first_offset == 3  # the batch that holds the log start, whole
        assert b.read(100, 1).read() == a.read(100, 1).read()  # the same bytes
        assert b.txns.open_transactions() == {9: (2, 182)} and b.last_stable_offset == 182
        assert [(t.producer_id, t.first, t.end) for t in b.aborted(0, 200)] == [(7, 180, 182)]
        assert dst.partition("tanked", 0).read(3, 1 << 20).first_offset == 10  # past the gap
        assert dst.offsets.fetch("billing", "orders", 0) == src.offsets.fetch("billing", "orders", 0)
        assert dst.transactions.items() == src.transactions.items()
        assert dst.security.acls() == src.security.acls()
        assert dst.producer_ids.next_id() >= 2000  # never one the directory handed out
        b.append(batch(1))  # a new append goes on at the log end
        assert b.sync() == 187
    finally:
        dst.close()
        src.close()


def test_a_gateway_does_not_open_a_database_whose_migration_did_not_finish(tmp_path, pg_database):
    dst = pg(pg_database)
    dst.begin_migration("/some/data")
    dst.close()
    with pytest.raises(MigrationUnfinished, match="unfinished `logway migrate` \\(of /some/data\\): run it again"):
        PgEngine(pg_database, FORMATS, TopicConfig(), clock=Clock())
    dst = pg(pg_database)
    dst.end_migration()
    dst.close()
    PgEngine(pg_database, FORMATS, TopicConfig(), clock=Clock()).close()


def test_an_interrupted_migration_is_taken_up_where_it_stopped(tmp_path, pg_database):
    src_path = source(tmp_path / "data")
    src, dst = local(src_path), pg(pg_database)
    topic = src.topic("orders")
    there = dst.create_copy(topic)  # what an interrupted run leaves: the topic, some committed batches
    rng = topic.partitions[0].read(4, 1000)
    there.partitions[0].copy_batches(rng.read(), rng.first_offset)
    there.partitions[0].sync()
    dst.close()
    src.close()
    copied = {t.name: t.status for t in run(src_path, pg_database)}
    assert copied == {"emptied": "copied", "orders": "resumed", "tanked": "copied"}
    assert run(src_path, pg_database)  # and once more: nothing to copy, everything verified again


@pytest.mark.parametrize("case", ["compacted", "foreign", "other-id", "other-offset", "grown"])
def test_what_would_overwrite_or_cannot_be_served_is_refused_before_anything_is_copied(tmp_path, pg_database, case):
    src = local(tmp_path / "data")
    src.create_topic("t", 1).partitions[0].append(batch(2))
    dst = pg(pg_database)
    if case == "compacted":
        src.create_topic("table", 1, {"cleanup.policy": "compact"})
        expected = "table are compacted.*does not compact yet"
    elif case == "foreign":
        dst.create_topic("theirs", 1)
        expected = "holds topics of its own \\(theirs\\).*--into-existing"
    elif case == "other-id":
        dst.create_topic("t", 1)
        expected = "topic t exists in the target with another id"
    elif case == "other-offset":
        src.offsets.commit("g", "t", 0, 1)
        dst.offsets.commit("g", "t", 0, 2)
        dst.offsets.sync()
        expected = "group g has committed another offset of t-0 in the target \\(2, here 1\\)"
    else:
        dst.create_copy(src.topic("t")).partitions[0].append(batch(3))
        dst.sync()
        expected = "t-0 ends at offset 3 in the target, past its end here \\(2\\)"
    try:
        assert re.search(expected, mig.refusal(src, dst, into_existing=case != "foreign") or "")
    finally:
        dst.close()
        src.close()


def test_into_existing_adds_topics_beside_the_targets_own(tmp_path, pg_database):
    src_path = source(tmp_path / "data")
    dst = pg(pg_database)
    dst.create_topic("theirs", 1).partitions[0].append(batch(1))
    dst.close()
    assert {t.name for t in run(src_path, pg_database, into_existing=True)} == {"orders", "tanked", "emptied"}
    assert rows(pg_database, "SELECT name FROM logway.topics ORDER BY name") == [
        ("emptied",), ("orders",), ("tanked",), ("theirs",)]


def test_verify_names_the_partition_that_differs(tmp_path, pg_database):
    src_path = source(tmp_path / "data")
    run(src_path, pg_database)
    rows(pg_database, "UPDATE logway.batches SET data = overlay(data placing '\\xff'::bytea from 70) WHERE "
                      "end_offset = (SELECT max(end_offset) FROM logway.batches) RETURNING 1")
    src, dst = local(src_path), pg(pg_database, cache_bytes=0)
    try:
        with pytest.raises(MigrationRefused, match="differs in the target: sha256"):
            mig.verify(src, dst, {})
    finally:
        dst.close()
        src.close()


# -- the postgres backend's entry points -------------------------------------------------------------------------

def test_copy_batches_keeps_the_bytes_at_their_offsets_and_refuses_what_does_not_fit(pg_database):
    eng = pg(pg_database)
    try:
        plog = eng.create_topic("t", 1).partitions[0]
        stored = bytearray(batch(3))
        stored[0:8] = (100).to_bytes(8, "big")  # a Kafka batch stored at offset 100 (its CRC does not cover it)
        assert plog.copy_batches(bytes(stored), 100) == 103
        with pytest.raises(InvalidBatchOffset, match="overwrite the log, which ends at 103"):
            plog.copy_batches(bytes(stored), 50)
        with pytest.raises(InvalidBatchOffset, match="records offset 100 was to be copied to offset 200"):
            plog.copy_batches(bytes(stored), 200)
        with pytest.raises(CorruptBatch):
            plog.copy_batches(bytes(stored[:-1]), 200)
        assert plog.sync() == 103
        assert plog.read(100, 1 << 20).read() == bytes(stored)  # verbatim
        plog.copy_log_start(101, plog.txns)
        assert (plog.log_start_offset, plog.log_end_offset) == (101, 103)
        empty = eng.create_topic("u", 1).partitions[0]
        empty.copy_log_start(40, empty.txns)  # every record was deleted: the log ends at its start
        assert (empty.log_start_offset, empty.log_end_offset, empty.high_watermark) == (40, 40, 40)
    finally:
        eng.close()
    eng = pg(pg_database)
    try:
        assert (eng.partition("t", 0).log_start_offset, eng.partition("t", 0).log_end_offset) == (101, 103)
        assert (eng.partition("u", 0).log_start_offset, eng.partition("u", 0).log_end_offset) == (40, 40)
    finally:
        eng.close()
