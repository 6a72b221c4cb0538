"""The log engine: topics created, listed, deleted and validated; damaged topic directories quarantined; one process
per data directory."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from logway.storage import engine
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


def test_topic_ids_are_made_with_the_topic_and_kept_across_restarts(tmp_path):
    eng = open_engine(tmp_path)
    orders = eng.create_topic("orders", 2)
    other = eng.create_topic("other", 1)
    assert orders.topic_id != other.topic_id and orders.topic_id.version == 4
    assert eng.topic_by_id(orders.topic_id) is orders and eng.topic_by_id(uuid.uuid4()) is None
    stored = json.loads((tmp_path / "topics" / "orders" / "topic.json").read_bytes())
    assert uuid.UUID(stored["id"]) == orders.topic_id  # durable with the topic's metadata
    first = orders.topic_id
    eng.alter_topic_config("orders", {"retention.ms": 5000})
    eng.create_partitions("orders", 3)
    eng.close()
    eng = open_engine(tmp_path)
    assert eng.topic("orders").topic_id == first and eng.topic_by_id(first).name == "orders"
    eng.delete_topic("orders")
    assert eng.topic_by_id(first) is None
    again = eng.create_topic("orders", 1)
    assert again.topic_id != first  # a new topic of the same name is another topic
    eng.close()


def test_topics_made_before_ids_get_a_stable_derived_id_kept_by_the_next_rewrite(tmp_path):
    eng = open_engine(tmp_path)
    eng.create_topic("old", 1)
    eng.close()
    path = tmp_path / "topics" / "old" / "topic.json"
    meta = json.loads(path.read_bytes())
    del meta["id"]  # as written before topic ids
    path.write_text(json.dumps(meta))
    eng = open_engine(tmp_path)
    derived = eng.topic("old").topic_id
    eng.close()
    eng = open_engine(tmp_path)
    assert eng.topic("old").topic_id == derived  # the same at every start
    eng.alter_topic_config("old", {"retention.ms": 1000})
    assert uuid.UUID(json.loads(path.read_bytes())["id"]) == derived
    eng.close()
    # ids Kafka would refuse are never made: not 0 or 1, no base64 form starting with "-"
    assert all(engine.new_topic_id().bytes[0] >> 2 != 62 for _ in range(2000))
