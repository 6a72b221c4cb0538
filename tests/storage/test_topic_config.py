"""Altering a topic's config (LogEngine.alter_topic_config): validated as a whole, applied live to every partition,
persisted durably in topic.json across clean and unclean restarts; and describing it (storage.config.describe)."""

from __future__ import annotations

import json
import os

import pytest

from logway.storage import BatchTooLarge, InvalidConfig, StorageClosed, TopicConfig, UnknownTopic
from logway.storage.config import (SOURCE_BROKER, SOURCE_DEFAULT, SOURCE_TOPIC, ConfigEntry, canonical_name,
                                   canonical_overrides, describe)

from .helpers import T0, Clock, batch, open_engine


def topic_json(tmp_path, name="t"):
    return json.loads((tmp_path / "topics" / name / "topic.json").read_text())


def test_set_and_delete_apply_live_to_every_partition(tmp_path):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 2, {"retention_ms": 5000})
    got = eng.alter_topic_config("t", {"segment.bytes": "2048", "max_batch_bytes": 4096,
                                       "index.interval.bytes": 100})
    assert got is topic
    assert topic.overrides == {"index.interval.bytes": 100, "max.message.bytes": 4096, "retention.ms": 5000,
                               "segment.bytes": 2048}
    for plog in topic.partitions:
        assert plog.config == topic.config
        assert (plog.config.segment_bytes, plog.config.max_batch_bytes) == (2048, 4096)
        assert plog.segments[-1].index_interval == 100
    assert topic_json(tmp_path)["config"] == topic.overrides
    plog = topic.partitions[1]
    with pytest.raises(BatchTooLarge):
        plog.append(batch(100, size=60))
    for _ in range(20):
        plog.append(batch(4, size=60))
    assert len(plog.segments) > 3  # rolls at the new segment size
    assert all(s.size <= 2048 for s in plog.segments)
    # Deleting falls back to the engine's defaults; a key that is not overridden is a no-op.
    eng.alter_topic_config("t", delete=["segment.bytes", "max.message.bytes", "retention.bytes"])
    assert topic.config == TopicConfig(retention_ms=5000, index_interval_bytes=100)
    assert plog.config.max_batch_bytes == TopicConfig().max_batch_bytes
    plog.append(batch(100, size=60))
    assert topic_json(tmp_path)["config"] == {"index.interval.bytes": 100, "retention.ms": 5000}
    eng.close()


def test_retention_changes_take_effect_on_the_next_run(tmp_path):
    clock = Clock()
    eng = open_engine(tmp_path, clock=clock, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(30):
        plog.append(batch(4, ts=T0 + i, size=40))
    segments = len(plog.segments)
    clock.ms = T0 + 3600_000
    assert plog.enforce_retention() == 0  # 7 days by default
    eng.alter_topic_config("t", {"retention.ms": 60_000})
    assert plog.enforce_retention() == segments - 1
    eng.alter_topic_config("t", {"retention.ms": -1, "retention.bytes": 0})
    assert plog.enforce_retention() == 0  # only the active segment is left
    eng.close()


def test_replace_keeps_the_storage_format_and_validate_only_writes_nothing(tmp_path):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 1, {"storage.format": "kafka", "retention.ms": 1000, "segment_ms": 5000})
    before = topic_json(tmp_path)
    assert eng.alter_topic_config("t", {"retention.bytes": 10}, validate_only=True) is topic
    assert topic_json(tmp_path) == before and topic.config.retention_bytes == -1
    eng.alter_topic_config("t", {"retention.bytes": 10}, replace=True)
    assert topic.overrides == {"retention.bytes": 10, "storage.format": "kafka"}
    assert topic.config == TopicConfig(retention_bytes=10)
    eng.alter_topic_config("t", {}, replace=True)
    assert topic.overrides == {"storage.format": "kafka"}
    eng.close()


@pytest.mark.parametrize("change", [
    {"set": {"no.such.key": 1}},
    {"delete": ["no.such.key"]},
    {"set": {"segment.bytes": "abc"}},
    {"set": {"segment.bytes": 10}},  # below 1024
    {"set": {"segment.bytes": 2**40}},
    {"set": {"retention.ms": -2}},
    {"set": {"retention.bytes": True}},
    {"set": {"segment.ms": 1.5}},
    {"set": {"segment.ms": None}},
    {"set": {"max.message.bytes": [1]}},
    {"set": {"storage.format": "tank"}},  # the segment files are in the topic's format
    {"delete": ["storage.format"], "set": {"format": "tank"}},
    {"set": {"retention.ms": 5, "index.interval.bytes": 0}},  # one bad value: nothing is applied
])
def test_bad_changes_are_refused_and_change_nothing(tmp_path, change):
    eng = open_engine(tmp_path)
    topic = eng.create_topic("t", 1, {"retention.ms": 1000})
    before, config = topic_json(tmp_path), topic.config
    with pytest.raises(InvalidConfig):
        eng.alter_topic_config("t", change.get("set"), change.get("delete", ()))
    assert topic_json(tmp_path) == before and topic.config is config and topic.partitions[0].config is config
    assert not (tmp_path / "topics" / "t" / "topic.json.tmp").exists()
    eng.close()


def test_unknown_topic_and_closed_engine(tmp_path):
    eng = open_engine(tmp_path)
    with pytest.raises(UnknownTopic):
        eng.alter_topic_config("nope", {"retention.ms": 1})
    with pytest.raises(UnknownTopic):
        eng.topic_config("nope")
    eng.create_topic("t", 1)
    eng.close()
    with pytest.raises(StorageClosed):
        eng.alter_topic_config("t", {"retention.ms": 1})


@pytest.mark.parametrize("clean", [True, False])
def test_altered_config_survives_a_restart(tmp_path, clean):
    eng = open_engine(tmp_path)
    eng.create_topic("t", 2, {"segment_ms": 5000})
    eng.alter_topic_config("t", {"retention.ms": "60000", "segment.bytes": 4096})
    eng.partition("t", 1).append(batch(3))
    eng.close(clean=clean)
    eng = open_engine(tmp_path)
    topic = eng.topic("t")
    assert topic.config == TopicConfig(retention_ms=60000, segment_bytes=4096, segment_ms=5000)
    assert all(p.config == topic.config for p in topic.partitions)
    assert topic.overrides == {"retention.ms": 60000, "segment.bytes": 4096, "segment.ms": 5000}
    assert eng.partition("t", 1).log_end_offset == 3
    eng.close()


def test_an_interrupted_rewrite_leaves_the_old_metadata(tmp_path):
    """topic.json is replaced through topic.json.tmp: a crash before the rename leaves the old file whole and the
    temporary one behind, which the next open removes."""
    eng = open_engine(tmp_path)
    eng.create_topic("t", 1, {"retention.ms": 1000})
    eng.close(clean=False)
    (tmp_path / "topics" / "t" / "topic.json.tmp").write_text('{"name": "t", "partitions": 9, "conf')
    eng = open_engine(tmp_path)
    assert eng.topic("t").config.retention_ms == 1000 and len(eng.topic("t").partitions) == 1
    assert not (tmp_path / "topics" / "t" / "topic.json.tmp").exists()
    eng.close()


def test_describe_sources_defaults_and_keys(tmp_path):
    eng = open_engine(tmp_path, retention_ms=1000)  # the engine's defaults: a "broker" setting
    eng.create_topic("t", 1, {"segment_bytes": 4096})
    entries = {e.name: e for e in eng.topic_config("t")}
    assert sorted(entries) == ["cleanup.policy", "delete.retention.ms", "index.interval.bytes",
                               "max.compaction.lag.ms", "max.message.bytes", "min.cleanable.dirty.ratio",
                               "min.compaction.lag.ms", "retention.bytes", "retention.ms", "segment.bytes",
                               "segment.ms", "storage.format"]
    assert entries["segment.bytes"] == ConfigEntry("segment.bytes", 4096, SOURCE_TOPIC, 2**30, False)
    assert entries["retention.ms"] == ConfigEntry("retention.ms", 1000, SOURCE_BROKER, 1000, False)
    assert entries["retention.bytes"] == ConfigEntry("retention.bytes", -1, SOURCE_DEFAULT, -1, False)
    assert entries["storage.format"] == ConfigEntry("storage.format", "kafka", SOURCE_DEFAULT, "kafka", True)
    assert entries["cleanup.policy"] == ConfigEntry("cleanup.policy", "delete", SOURCE_DEFAULT, "delete", False)
    assert entries["min.cleanable.dirty.ratio"] == ConfigEntry("min.cleanable.dirty.ratio", 0.5, SOURCE_DEFAULT, 0.5,
                                                               False)
    eng.alter_topic_config("t", {"retention.ms": 7})
    assert eng.topic_config("t", ["retention_ms", "segment.ms"]) == [
        ConfigEntry("retention.ms", 7, SOURCE_TOPIC, 1000, False),
        ConfigEntry("segment.ms", 7 * 24 * 3600 * 1000, SOURCE_DEFAULT, 7 * 24 * 3600 * 1000, False)]
    with pytest.raises(InvalidConfig):
        eng.topic_config("t", ["retention.ms", "nope"])
    eng.close()


def test_names():
    assert canonical_name("retention_ms") == canonical_name("retention.ms") == "retention.ms"
    assert canonical_name("format") == "storage.format"
    with pytest.raises(InvalidConfig):
        canonical_name("log.retention.ms")
    assert canonical_overrides({"retention_ms": 1, "retention.ms": 2, "segment.bytes": 3}) == {
        "retention.ms": 2, "segment.bytes": 3}
    assert describe(TopicConfig(), None, TopicConfig(), []) == []


def test_concurrent_alters_and_appends_keep_one_consistent_config(tmp_path):
    import threading

    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    done = threading.Event()

    def append():
        while not done.is_set():
            plog.append(batch(2))

    t = threading.Thread(target=append)
    t.start()
    try:
        for i in range(50):
            eng.alter_topic_config("t", {"segment.bytes": 1024 + i, "retention.ms": i})
    finally:
        done.set()
        t.join()
    assert plog.config == eng.topic("t").config == TopicConfig(segment_bytes=1073, retention_ms=49)
    assert sorted(os.listdir(tmp_path / "topics" / "t")) == ["0", "topic.json"]
    eng.close()


def test_an_altered_config_survives_a_power_cut(powerfs):
    data = os.path.join(powerfs.path, "data")
    eng = open_engine(data)
    eng.create_topic("t", 1, {"retention.ms": 1000})
    eng.alter_topic_config("t", {"segment.bytes": 4096}, ["retention.ms"])
    powerfs.cut()  # no close: the power went
    eng = open_engine(data)
    assert eng.topic("t").config == TopicConfig(segment_bytes=4096)
    assert eng.topic("t").overrides == {"segment.bytes": 4096}
    eng.close()
