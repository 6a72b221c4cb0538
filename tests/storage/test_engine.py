"""The log engine: topics created, listed, deleted and validated; damaged topic directories quarantined; one process
per data directory."""

from __future__ import annotations

import os

import pytest
from logway.storage import InvalidPartitions, InvalidTopicName, TopicExists, UnknownPartition, UnknownTopic

from .helpers import batch, open_engine


def test_topic_lifecycle_and_validation(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("orders", 3, {"retention.ms": 1000})
    eng.create_topic("a.b_c-1", 1)
    assert [t.name for t in eng.topics()] == ["a.b_c-1", "orders"]
    assert eng.topic("orders").config.retention_ms == 1000
    with pytest.raises(TopicExists):
        eng.create_topic("orders", 1)
    for bad in ("", ".", "..", "a/b", "../x", "x\x00", "é", "a" * 250, "sp ace"):
        with pytest.raises(InvalidTopicName):
            eng.create_topic(bad, 1)
    for bad in (0, -1, 10 ** 6, True):
        with pytest.raises(InvalidPartitions):
            eng.create_topic("p", bad)
    with pytest.raises(UnknownTopic):
        eng.partition("nope", 0)
    with pytest.raises(UnknownPartition):
        eng.partition("orders", 3)
    eng.partition("orders", 2).append(batch(2))
    eng.offsets.commit("g", "orders", 2, 2)
    eng.delete_topic("orders")
    assert [t.name for t in eng.topics()] == ["a.b_c-1"]
    assert eng.offsets.fetch("g", "orders", 2) is None
    assert not os.path.exists(tmp_path / "topics" / "orders")
    eng.close()
    eng = open_engine(tmp_path)
    assert [t.name for t in eng.topics()] == ["a.b_c-1"]
    eng.create_topic("orders", 1)
    assert eng.partition("orders", 0).log_end_offset == 0
    eng.close()


def test_topic_dir_without_metadata_is_quarantined(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("good", 1).partitions[0].append(batch(2))
    eng.close()
    os.makedirs(tmp_path / "topics" / "stray" / "0")
    (tmp_path / "topics" / "junk file").write_bytes(b"x")
    eng = open_engine(tmp_path)
    assert [t.name for t in eng.topics()] == ["good"]
    assert eng.partition("good", 0).log_end_offset == 2
    assert len(os.listdir(tmp_path / "quarantine")) == 2
    eng.close()


def test_data_dir_is_locked(tmp_path):
    from logway.storage import StorageError

    eng = open_engine(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        open_engine(tmp_path)
    eng.close()
    open_engine(tmp_path).close()
