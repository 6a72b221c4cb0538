"""Growing a topic (LogEngine.create_partitions): new partitions usable at once, the count durable across clean and
unclean restarts, bad counts refused, and a crash between the new directories and topic.json leaving the old
count (the next attempt clears what it left)."""

from __future__ import annotations

import json
import os

import pytest

from logway.storage import MAX_PARTITIONS, InvalidPartitions, UnknownPartition, UnknownTopic

from .helpers import batch, open_engine, values


def test_grow_a_topic(tmp_path):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 1, {"retention.ms": 1000})
    eng.partition("t", 0).append(batch(2))
    old = topic.partitions
    assert eng.create_partitions("t", 3) is topic
    assert [p.partition for p in topic.partitions] == [0, 1, 2]
    assert old == topic.partitions[:1] and len(old) == 1  # replaced, never changed in place
    assert all(p.config == topic.config for p in topic.partitions)
    assert eng.partition("t", 2).append(batch(3)).base_offset == 0
    assert [r.offset for r in values(eng.partition("t", 2))] == [0, 1, 2]
    meta = json.loads((tmp_path / "topics" / "t" / "topic.json").read_text())
    assert meta["partitions"] == 3 and meta["config"] == {"retention.ms": 1000}
    assert eng.disk_usage() == {("t", 0): eng.partition("t", 0).size_bytes, ("t", 1): 0,
                                ("t", 2): eng.partition("t", 2).size_bytes}
    assert eng.disk_usage()[("t", 2)] > 0
    eng.close()


@pytest.mark.parametrize("clean", [True, False])
def test_the_new_count_survives_a_restart(tmp_path, clean):
    eng = open_engine(tmp_path)
    eng.create_topic("t", 2)
    eng.create_partitions("t", 5)
    eng.partition("t", 4).append(batch(2))
    eng.close(clean=clean)
    eng = open_engine(tmp_path)
    assert len(eng.topic("t").partitions) == 5
    assert eng.partition("t", 4).log_end_offset == 2
    eng.close()


@pytest.mark.parametrize("count", [2, 1, 0, -1, MAX_PARTITIONS + 1, True, 3.0, "4", None])
def test_bad_counts_are_refused(tmp_path, count):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 2)
    with pytest.raises(InvalidPartitions):
        eng.create_partitions("t", count)
    assert len(topic.partitions) == 2 and sorted(os.listdir(tmp_path / "topics" / "t")) == ["0", "1", "topic.json"]
    with pytest.raises(UnknownPartition):
        eng.partition("t", 2)
    eng.close()


def test_unknown_topic_validate_only_and_the_maximum(tmp_path):
    eng = open_engine(tmp_path)
    with pytest.raises(UnknownTopic):
        eng.create_partitions("nope", 2)
    topic = eng.create_topic("t", 1)
    assert eng.create_partitions("t", MAX_PARTITIONS, validate_only=True) is topic
    assert len(topic.partitions) == 1 and not (tmp_path / "topics" / "t" / "1").exists()
    eng.create_partitions("t", 20)
    assert len(eng.topic("t").partitions) == 20
    eng.close()


def test_an_interrupted_attempt_leaves_the_old_count_and_is_cleared_by_the_next(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("t", 1)
    eng.close(clean=False)
    # A crash after the new partitions' directories were made, before topic.json named them.
    for p in (1, 2):
        os.makedirs(tmp_path / "topics" / "t" / str(p))
        (tmp_path / "topics" / "t" / str(p) / ("0" * 20 + ".log")).write_bytes(b"")
        (tmp_path / "topics" / "t" / str(p) / ("0" * 20 + ".index")).write_bytes(b"")
    eng = open_engine(tmp_path)
    assert len(eng.topic("t").partitions) == 1
    eng.create_partitions("t", 3)
    assert [p.log_end_offset for p in eng.topic("t").partitions] == [0, 0, 0]
    assert not (tmp_path / "quarantine").exists()
    eng.close()


def test_a_leftover_directory_with_records_is_set_aside(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("t", 1)
    eng.create_topic("other", 1).partitions[0].append(batch(3))
    eng.close()
    os.rename(tmp_path / "topics" / "other" / "0", tmp_path / "topics" / "t" / "1")  # not ours to delete
    eng = open_engine(tmp_path)
    eng.create_partitions("t", 2)
    assert eng.partition("t", 1).log_end_offset == 0
    assert [n.startswith("t-1.") for n in os.listdir(tmp_path / "quarantine")] == [True]
    eng.close()
    eng = open_engine(tmp_path)
    assert len(eng.topic("t").partitions) == 2
    eng.close()


def test_added_partitions_survive_a_power_cut(powerfs):
    data = os.path.join(powerfs.path, "data")
    eng = open_engine(data)
    eng.create_topic("t", 1)
    eng.create_partitions("t", 3)
    plog = eng.partition("t", 2)
    plog.append(batch(2))
    plog.sync()  # what a `flush: always` acknowledgement waits for
    powerfs.cut()  # no close: the power went
    eng = open_engine(data)
    assert len(eng.topic("t").partitions) == 3
    assert [r.offset for r in values(eng.partition("t", 2))] == [0, 1]
    eng.close()
