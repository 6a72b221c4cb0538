"""The engine's limits and the bounds on what it stores: topics and partitions (`EngineLimits`), a failed creation
that leaves nothing, offsets a batch may jump to, configuration values, topic names the file system takes."""

from __future__ import annotations

import json
import os

import pytest

from logway.storage import (EngineLimits, InvalidBatchOffset, InvalidConfig, InvalidPartitions, InvalidTopicName,
                            LimitReached, LogEngine, TopicConfig)
from logway.storage.config import MAX_LONG, clamped_overrides
from logway.storage.segment import MAX_JUMP_OFFSET

from .helpers import FORMATS, Clock, batch, tank_engine, tank_values

MiB = 1 << 20


def limited(path, **limits) -> LogEngine:
    return LogEngine(path, FORMATS, clock=Clock(), limits=EngineLimits(**limits))


def test_topics_past_max_topics_are_refused(tmp_path):
    eng = limited(tmp_path, max_topics=3)
    for name in "abc":
        eng.create_topic(name)
    with pytest.raises(LimitReached, match=r"3 topics exist, the most allowed \(max_topics 3\)"):
        eng.create_topic("d")
    with pytest.raises(LimitReached):
        eng.create_topic("d", validate_only=True)
    assert sorted(os.listdir(tmp_path / "topics")) == ["a", "b", "c"]
    eng.delete_topic("a")
    eng.create_topic("d")  # room again


def test_partitions_past_the_limits_are_refused(tmp_path):
    eng = limited(tmp_path, max_partitions_per_topic=12, max_partitions=23)
    with pytest.raises(InvalidPartitions, match=r"not in 1\.\.12 \(max_partitions_per_topic\)"):
        eng.create_topic("wide", 13)
    eng.create_topic("a", 10)
    eng.create_topic("b", 10)
    with pytest.raises(LimitReached, match="20 partitions exist and 6 more would pass the limit of 23"):
        eng.create_topic("c", 6)
    with pytest.raises(InvalidPartitions, match=r"not in 11\.\.12"):
        eng.create_partitions("a", 13)
    eng.create_partitions("a", 12)
    with pytest.raises(LimitReached, match="22 partitions exist and 2 more"):
        eng.create_partitions("b", 12)
    assert eng.create_topic("c", 1, validate_only=True) is None
    assert "c" not in eng.topics_by_name
    eng.create_topic("c", 1)
    assert sum(len(t.partitions) for t in eng.topics()) == 23
    eng.close()
    # topics that exist open whatever the limits say now
    eng = limited(tmp_path, max_partitions_per_topic=2, max_partitions=3, max_topics=1)
    assert [len(t.partitions) for t in eng.topics()] == [12, 10, 1]
    eng.close()


def test_a_creation_that_fails_midway_leaves_nothing(tmp_path, small_fs):
    """Out of inodes while the partitions' first segments are made: the partitions opened are closed, the topic's
    directory taken back (through trash/), nothing stays open, and the inodes come back for the next creation."""
    disk = small_fs(16, inodes=512)
    eng = LogEngine(disk / "data", FORMATS, clock=Clock(), limits=EngineLimits(open_segment_files=32))
    before = len(eng.files)
    with pytest.raises(OSError) as failed:
        eng.create_topic("many", 200)
    assert failed.value.errno == 28  # ENOSPC: no inode left
    assert os.listdir(disk / "data" / "topics") == [] and os.listdir(disk / "data" / "tmp") == []
    assert os.listdir(disk / "data" / "trash") == [] and "many" not in eng.topics_by_name
    assert len(eng.files) == before
    eng.create_topic("few", 4).partitions[3].append(batch(2))
    eng.close()


def test_a_batch_may_not_jump_past_the_furthest_offset(tmp_path):
    """A TANK bundle with offsets of its own may jump ahead of the log end, up to MAX_JUMP_OFFSET and no further;
    the partition takes writes after a refused one."""
    from logway.codecs.records import Record
    from logway.codecs.tank import encode_bundle, wrap

    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]

    def sparse(seq: int) -> bytes:
        return wrap(encode_bundle([Record(b"at-%d" % seq, timestamp=1)], sparse_seqs=[seq]))

    with pytest.raises(InvalidBatchOffset, match="beyond 4611686018427387904"):
        plog.append(sparse(MAX_JUMP_OFFSET + 2))  # (seq = offset + 1)
    plog.append(sparse(10))
    assert plog.append(sparse(MAX_JUMP_OFFSET + 1)).base_offset == MAX_JUMP_OFFSET  # the furthest it may reach
    assert tank_values(plog)[-1] == b"at-%d" % (MAX_JUMP_OFFSET + 1)
    eng.close()


def test_a_segment_based_past_the_furthest_offset_is_set_aside_at_open(tmp_path):
    eng = limited(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3))
    directory = plog.directory
    eng.close()
    far = os.path.join(directory, f"{MAX_JUMP_OFFSET + 1:020d}.log")
    with open(far, "wb") as f:
        f.write(b"anything")
    eng = limited(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == 3 and plog.append(batch(1)).base_offset == 3
    assert not os.path.exists(far) and len(os.listdir(tmp_path / "quarantine")) == 1
    eng.close()


def test_configs_are_bounded_by_what_a_long_holds():
    assert TopicConfig().with_overrides({"retention.ms": MAX_LONG}).retention_ms == MAX_LONG
    for key, value in [("retention.ms", MAX_LONG + 1), ("retention.bytes", 10**30), ("segment.ms", 2**64),
                       ("retention.ms", -2), ("segment.ms", 0)]:
        with pytest.raises(InvalidConfig, match="must be between"):
            TopicConfig().with_overrides({key: value})
    assert clamped_overrides({"retention.ms": 10**33, "segment_ms": "0", "storage.format": "tank"}) == (
        {"retention.ms": MAX_LONG, "segment_ms": 1, "storage.format": "tank"},
        [f"retention.ms={10**33} → {MAX_LONG}", "segment_ms=0 → 1"])


def test_a_stored_config_beyond_its_range_opens_within_it(tmp_path):
    eng = limited(tmp_path)
    eng.create_topic("t", 1).partitions[0].append(batch(2))
    eng.close()
    path = tmp_path / "topics" / "t" / "topic.json"
    meta = json.loads(path.read_text())
    meta["config"] = {"retention.ms": str(10**33)}
    path.write_text(json.dumps(meta))
    eng = limited(tmp_path)
    assert eng.topic("t").config.retention_ms == MAX_LONG
    assert eng.partition("t", 0).log_end_offset == 2
    eng.close()


def test_names_as_long_as_kafka_allows_and_what_is_derived_from_them(tmp_path):
    """A 249-character name is a topic; the temporary and trash names made from it are cut to fit, and so is a
    quarantine name."""
    from logway.storage.files import aside_name, quarantine

    eng = limited(tmp_path)
    name = "x" * 249
    eng.create_topic(name, 2)
    eng.delete_topic(name)
    with pytest.raises(InvalidTopicName, match="longer than 249"):
        eng.create_topic("x" * 250)
    assert len(os.path.basename(aside_name(str(tmp_path), "y" * 300))) == 255
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    moved = quarantine(str(victim), str(tmp_path / "quarantine"), f"{name}-999.{0:020d}.timeindex")
    assert len(os.path.basename(moved)) == 255 and os.path.exists(moved)
    eng.close()
