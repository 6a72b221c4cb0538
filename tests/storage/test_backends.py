"""The behaviours both storage backends share, each test run on the file backend (`LogEngine`, with readers seeing
synced data only, as under `flush: always`) and on the postgres one (`PgEngine`, a real server): appends and reads,
visibility at the high watermark, transactions and the last stable offset, committed offsets, the coordinators'
states, producer ids, topic changes, retention and DeleteRecords, timestamps — each kept across a reopen."""

from __future__ import annotations

import pytest

from logway.codecs.kafka.records import KafkaFormat, decode_records
from logway.codecs.tank import TankFormat, decode_chunk
from logway.storage import (InvalidBatchOffset, InvalidConfig, LogEngine, OffsetOutOfRange, TopicConfig, TopicExists,
                            UnknownTopic)

from .helpers import T0, Clock, batch, bundle

FORMATS = {"kafka": KafkaFormat(), "tank": TankFormat()}


class Backend:
    """Opens (and reopens) one backend's engine over the same storage."""

    def __init__(self, name: str, where, clock: Clock) -> None:
        self.name, self.where, self.clock = name, where, clock

    def open(self, **cfg):
        if self.name == "local":
            return LogEngine(self.where, FORMATS, TopicConfig(**cfg), clock=self.clock, reads_need_sync=True)
        from logway.storage.pg import PgEngine

        return PgEngine(self.where, FORMATS, TopicConfig(**cfg), clock=self.clock)


@pytest.fixture(params=["local", "postgres"])
def backend(request, tmp_path):
    where = tmp_path / "data" if request.param == "local" else request.getfixturevalue("pg_database")
    return Backend(request.param, where, Clock())


def records(plog, offset=0, max_bytes=1 << 30):
    rng = plog.read(offset, max_bytes)
    return [] if rng is None else decode_records(rng.read(), min_offset=offset)


def offsets(plog, start=None):
    """Every offset readable, walking the log read by read."""
    out, offset = [], plog.log_start_offset if start is None else start
    while (rng := plog.read(offset, 300)) is not None:
        got = [r.offset for r in decode_records(rng.read(), min_offset=offset)]
        out += got
        offset = rng.end_offset
    return out


def test_appends_are_read_back_once_synced_and_kept_across_a_reopen(backend):
    eng = backend.open()
    plog = eng.create_topic("t", 2).partitions[1]
    first = plog.append(batch(3, tag="a"))
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert plog.log_end_offset == 3 and plog.high_watermark == 0  # not visible before its sync
    assert plog.read(0, 100) is None
    plog.append(batch(2, tag="b"))
    assert plog.sync() == 5 and plog.high_watermark == 5
    got = records(plog)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4] and got[3].value.startswith(b"b0")
    rng = plog.read(1, 1)  # at least the batch that holds the offset, whatever max_bytes says
    assert (rng.first_offset, rng.end_offset) == (0, 3)
    assert plog.read(5, 100) is None
    with pytest.raises(OffsetOutOfRange):
        plog.read(6, 100)
    eng.close()
    eng = backend.open()
    plog = eng.partition("t", 1)
    assert (plog.log_start_offset, plog.high_watermark, plog.log_end_offset) == (0, 5, 5)
    assert offsets(plog) == [0, 1, 2, 3, 4]
    assert plog.append(batch(1)).base_offset == 5
    eng.close()


def test_many_appends_read_in_bounded_slices_are_contiguous(backend):
    eng = backend.open(segment_bytes=4096)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(60):
        plog.append(batch(1 + i % 4, size=20, tag=f"{i}."))
        if i % 7 == 0:
            plog.sync()
    plog.sync()
    assert offsets(plog) == list(range(plog.high_watermark)) and plog.high_watermark == sum(1 + i % 4 for i in
                                                                                             range(60))
    assert offsets(plog, 37) == list(range(37, plog.high_watermark))
    eng.close()
    eng = backend.open(segment_bytes=4096)
    plog = eng.partition("t", 0)
    assert offsets(plog) == list(range(plog.high_watermark))
    eng.close()


def test_tank_bundles_with_their_own_sequence_numbers_leave_gaps(backend):
    eng = backend.open()
    plog = eng.create_topic("t", 1, {"storage.format": "tank"}).partitions[0]
    plog.append(bundle(b"a", b"b"))
    from logway.codecs.records import Record
    from logway.codecs.tank import encode_bundle, wrap

    plog.append(wrap(encode_bundle([Record(b"c")], sparse_seqs=[11], default_timestamp=T0)))  # seq 11: offset 10
    with pytest.raises(InvalidBatchOffset):
        plog.append(wrap(encode_bundle([Record(b"d")], sparse_seqs=[5], default_timestamp=T0)))
    plog.sync()
    assert plog.high_watermark == 11
    rng = plog.read(0, 1 << 20)
    got = decode_chunk(rng.read(), rng.first_offset + 1).records
    assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b"), (10, b"c")]
    rng = plog.read(5, 1 << 20)  # in the gap: the next records
    assert rng.first_offset == 10
    eng.close()


def test_transactions_bound_what_committed_readers_see_and_are_remembered(backend):
    eng = backend.open()
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    plog.append(batch(3), producer=(7, 0))  # offsets 2..4, open
    plog.append(batch(1))
    plog.sync()
    assert plog.stable_bounds() == (2, 6) and plog.last_stable_offset == 2
    assert plog.read(0, 1 << 20, until=2).end_offset == 2
    assert plog.read(2, 1 << 20, until=2) is None
    eng.close()
    eng = backend.open()
    plog = eng.partition("t", 0)
    assert plog.txns.open_transactions() == {7: (0, 2)} and plog.last_stable_offset == 2
    assert plog.end_transaction(7, 0, committed=False, marker=None)
    assert not plog.end_transaction(7, 0, committed=False, marker=None)  # (ended already)
    plog.append(batch(1), producer=(8, 1))
    assert plog.end_transaction(8, 1, committed=True)
    plog.sync()
    assert plog.last_stable_offset == plog.high_watermark == 7
    assert [(t.producer_id, t.first, t.ranges) for t in plog.aborted(0, 7)] == [(7, 2, ((2, 4),))]
    eng.close()
    eng = backend.open()
    plog = eng.partition("t", 0)
    assert not plog.txns.has_open
    assert [(t.producer_id, t.first, t.end) for t in plog.aborted(0, 100)] == [(7, 2, 6)]
    eng.close()


def test_committed_offsets_changes_and_deletions_survive_a_reopen(backend):
    eng = backend.open()
    store = eng.offsets
    store.commit("g1", "t", 0, 5, "m")
    store.commit_many("g1", [("t", 1, 7, ""), ("u", 0, 1, "x")])
    store.commit("g2", "t", 0, 9)
    store.commit("g3", "t", 3, 1)
    store.delete("g1", [("u", 0)])
    store.delete_group("g3")
    store.commit("g2", "t", 0, 10, "later")
    store.sync()
    eng.close()
    eng = backend.open()
    store = eng.offsets
    assert store.groups() == ["g1", "g2"]
    assert {k: v.offset for k, v in store.fetch_group("g1").items()} == {("t", 0): 5, ("t", 1): 7}
    assert store.fetch("g2", "t", 0).metadata == "later"
    eng.create_topic("t", 1)
    eng.delete_topic("t")  # takes its offsets along, durably
    assert store.groups() == [] and eng.delete_group_offsets("g1") == 0
    eng.close()
    eng = backend.open()
    assert eng.offsets.groups() == []
    eng.close()


def test_coordinator_states_and_producer_ids_survive_a_reopen(backend):
    eng = backend.open()
    ids = {eng.producer_ids.next_id() for _ in range(5)}
    eng.transactions.put("tx\0odd", {"status": "Ongoing", "partitions": [["t", 0]]})
    eng.transactions.put("gone", {"status": "Empty"})
    eng.transactions.put("gone", None)
    eng.share_state.put("g\0share", {"start": 4}, sync=False)
    eng.close()
    eng = backend.open()
    assert len(ids | {eng.producer_ids.next_id() for _ in range(5)}) == 10  # never handed out again
    assert dict(eng.transactions.items()) == {"tx\0odd": {"status": "Ongoing", "partitions": [["t", 0]]}}
    assert eng.share_state.get("g\0share") == {"start": 4} and eng.transactions.get("gone") is None
    eng.close()


def test_topic_catalogue_changes_are_durable(backend):
    eng = backend.open()
    topic = eng.create_topic("orders", 2, {"retention.ms": 1000})
    topic_id = topic.topic_id
    with pytest.raises(TopicExists):
        eng.create_topic("orders", 1)
    assert eng.create_topic("never", 1, validate_only=True) is None and "never" not in eng.topics_by_name
    eng.alter_topic_config("orders", {"retention.bytes": 4096}, ["retention.ms"])
    eng.create_partitions("orders", 4)
    eng.partition("orders", 3).append(batch(2))
    eng.partition("orders", 3).sync()
    eng.create_topic("doomed", 1).partitions[0].append(batch(1))
    eng.delete_topic("doomed")
    with pytest.raises(UnknownTopic):
        eng.partition("doomed", 0)
    eng.close()
    eng = backend.open()
    topic = eng.topic("orders")
    assert topic.topic_id == topic_id and eng.topic_by_id(topic_id) is topic
    assert len(topic.partitions) == 4 and topic.config.retention_bytes == 4096
    assert topic.config.retention_ms == TopicConfig().retention_ms and topic.overrides == {"retention.bytes": 4096}
    assert eng.partition("orders", 3).high_watermark == 2
    assert "doomed" not in eng.topics_by_name
    assert eng.create_topic("doomed", 1).partitions[0].log_end_offset == 0  # a new topic of the name is empty
    eng.close()


def test_retention_and_delete_records_move_the_log_start(backend):
    eng = backend.open(segment_bytes=1024, retention_bytes=2048)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(20):
        plog.append(batch(2, size=100, tag=f"{i}."))
        plog.sync()
    assert eng.enforce_retention() > 0
    start = plog.log_start_offset
    assert 0 < start < 40 and offsets(plog) == list(range(start, 40))
    with pytest.raises(OffsetOutOfRange):
        plog.read(start - 1, 100)
    assert plog.delete_records(start + 3) == start + 3
    assert plog.delete_records(1) == start + 3  # (not below the start)
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records(41)
    assert offsets(plog)[0] <= start + 3 and offsets(plog)[-1] == 39
    eng.close()
    eng = backend.open(segment_bytes=1024, retention_bytes=2048)
    plog = eng.partition("t", 0)
    assert plog.log_start_offset == start + 3 and plog.high_watermark == 40
    assert plog.delete_records(-1) == 40 and plog.read(40, 100) is None
    assert plog.append(batch(1)).base_offset == 40
    eng.close()
    eng = backend.open(segment_bytes=1024, retention_bytes=2048)
    assert eng.partition("t", 0).log_start_offset == 40 and eng.partition("t", 0).log_end_offset in (40, 41)
    eng.close()


def test_retention_by_age(backend):
    eng = backend.open(segment_bytes=1024, retention_ms=60_000)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(6):
        plog.append(batch(2, ts=T0 + i * 30_000, size=400))
        plog.sync()
    eng.enforce_retention(now_ms=T0 + 200_000)  # older than 60 s: everything but the newest
    assert plog.log_start_offset > 0 and offsets(plog)[-1] == 11
    eng.close()


def test_timestamps_are_found(backend):
    eng = backend.open()
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(5):
        plog.append(batch(3, ts=T0 + i * 100))
    plog.sync()
    assert plog.max_timestamp == T0 + 402
    assert plog.offset_for_timestamp(T0) == 0
    assert plog.offset_for_timestamp(T0 + 201) == 7
    assert plog.offset_for_timestamp(T0 + 10_000) is None
    assert plog.tail_offset(10) <= 12 and plog.tail_offset(1 << 30) == 0
    eng.close()


def test_compacted_topics_are_refused_only_where_they_cannot_be_kept(backend):
    eng = backend.open()
    if backend.name == "postgres":
        with pytest.raises(InvalidConfig, match="postgres"):
            eng.create_topic("c", 1, {"cleanup.policy": "compact"})
        eng.create_topic("d", 1)
        with pytest.raises(InvalidConfig, match="postgres"):
            eng.alter_topic_config("d", {"cleanup.policy": "compact,delete"})
    else:
        eng.create_topic("c", 1, {"cleanup.policy": "compact"})
    eng.close()
