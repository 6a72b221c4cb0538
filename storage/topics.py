"""What every storage engine does with its topics, whatever holds them: the `Topic` record, topic ids, and `Engine`
— the topic catalogue's rules (names, partition counts, the limits, configuration changes validated as a whole),
lookups by name and id, retention and group-commit entry points — which `LogEngine` (files, logway.storage.engine)
and `PgEngine` (PostgreSQL, logway.storage.pg) extend with where topics, partitions and offsets are kept.

A subclass provides `_create(name, partitions, overrides, config)` → Topic (made durably),
`_add_partitions(topic, count)` → the new partition logs (made durably, `topic.partitions` not yet changed),
`_store_overrides(topic, overrides)` (durably), and may wrap every change in `_changing(name)`; it sets the
attributes `__init__` documents.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .config import (KAFKA_NAMES, LIST_CONFIGS, MAX_PARTITIONS, READ_ONLY, ConfigEntry, EngineLimits, TopicConfig,
                     canonical_name, canonical_overrides, describe, list_words)
from .errors import (InvalidConfig, InvalidPartitions, LimitReached, StorageClosed, TopicExists, UnknownFormat,
                     UnknownPartition, UnknownTopic)
from .formats import BatchFormat
from .names import validate_topic_name

__all__ = ["Engine", "Topic", "new_topic_id"]

log = logging.getLogger("logway.storage")


def _acceptable_topic_id(topic_id: uuid.UUID) -> bool:
    """Kafka never hands out the zero id or 1 (both reserved), nor one whose base64 form starts with "-" (command
    line tools would take it for an option): ids of this engine follow the same rules."""
    return topic_id.int > 1 and topic_id.bytes[0] >> 2 != 62


def new_topic_id() -> uuid.UUID:
    """A random topic id (version 4) Kafka would accept."""
    while True:
        topic_id = uuid.uuid4()
        if _acceptable_topic_id(topic_id):
            return topic_id


@dataclass(slots=True)
class Topic:
    name: str
    config: TopicConfig
    overrides: dict[str, Any]
    partitions: list  # its partition logs (`PartitionLog`, or another backend's), by number
    created_ms: int
    topic_id: uuid.UUID  # stable for the topic's life, across restarts; another topic of the name gets another

    @property
    def format(self) -> str:
        return self.config.format


class Engine:
    """The part of a storage engine that does not depend on where topics are kept (see the module docstring)."""

    #: Whether an append outlives a crash of this process before it is synced: written to a file, it is in the
    #: page cache (what Kafka's acks=1 promises: the leader wrote it); kept in memory until a commit (the postgres
    #: backend), it is not — every acknowledgement then waits for the commit.
    appends_outlive_the_process = True

    def __init__(self, formats: Mapping[str, BatchFormat], defaults: TopicConfig | None, clock: Callable[[], float],
                 limits: EngineLimits | None) -> None:
        self.formats = dict(formats)
        self.defaults = (defaults or TopicConfig()).validate()
        self.clock = clock
        self.limits = limits or EngineLimits()
        self.topics_by_name: dict[str, Topic] = {}  # replaced, never changed in place, when topics come and go
        self._ids: tuple[dict[str, Topic], dict[uuid.UUID, Topic]] = ({}, {})  # see `topic_by_id`
        #: The committed-offset store (an `offsets.OffsetMap`), set by the subclass once open.
        self.offsets = None
        self._lock = threading.Lock()  # topic creation, deletion and changes, one at a time
        self._closed = False

    # -- what a subclass provides ------------------------------------------------------------------------
    def _create(self, name: str, partitions: int, overrides: dict, config: TopicConfig) -> Topic:
        raise NotImplementedError

    def _add_partitions(self, topic: Topic, count: int) -> list:
        raise NotImplementedError

    def _store_overrides(self, topic: Topic, overrides: dict) -> None:
        raise NotImplementedError

    def _changing(self, name: str):
        """Around a topic's creation or change (the caller holds `_lock`)."""
        return contextlib.nullcontext()

    # -- topics ------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None, *,
                     validate_only: bool = False) -> Topic | None:
        """Create a topic durably, or with `validate_only` only check that it could be (None). InvalidTopicName,
        InvalidPartitions (not in 1..`limits.max_partitions_per_topic`), InvalidConfig, UnknownFormat, TopicExists,
        LimitReached (the engine's topics or partitions in all); an OSError leaves nothing behind."""
        self._check_open()
        self._check_name(name)
        self._check_count(partitions, 1)
        overrides = dict(config or {})
        cfg = self.defaults.with_overrides(overrides)
        if cfg.format not in self.formats:
            raise UnknownFormat(f"unknown storage format {cfg.format!r} (known: {sorted(self.formats)})")
        self._check_compactable(cfg)
        with self._lock, self._changing(name):
            if name in self.topics_by_name:
                raise TopicExists(f"topic {name!r} already exists")
            self._check_room(topics=1, partitions=partitions)
            if validate_only:
                return None
            topic = self._create(name, partitions, overrides, cfg)
            self.topics_by_name = {**self.topics_by_name, name: topic}
        log.info("created topic %s with %d partition(s), format %s", name, partitions, cfg.format)
        return topic

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> Topic:
        """Grow a topic to `count` partitions in all: UnknownTopic; InvalidPartitions unless `count` is more than
        the topic has and at most the limit per topic; LimitReached past the partitions in all. Readers see the
        new partitions once they exist durably (`Topic.partitions` is replaced, never changed in place)."""
        self._check_open()
        with self._lock, self._changing(name):
            topic = self.topic(name)
            have = len(topic.partitions)
            if isinstance(count, int) and not isinstance(count, bool) and count <= have:
                raise InvalidPartitions(f"topic {name!r} has {have} partition(s) and partitions can only be added: "
                                        f"asked for {count}")
            self._check_count(count, have + 1)
            self._check_room(topics=0, partitions=count - have)
            if validate_only:
                return topic
            topic.partitions = topic.partitions + self._add_partitions(topic, count)
        log.info("topic %s: %d partition(s) now (was %d)", name, count, have)
        return topic

    def alter_topic_config(self, name: str, set: Mapping[str, Any] | None = None, delete: Iterable[str] = (), *,
                           append: Mapping[str, Iterable[str]] | None = None,
                           subtract: Mapping[str, Iterable[str]] | None = None, replace: bool = False,
                           validate_only: bool = False) -> Topic:
        """Change a topic's config overrides and apply them live to every partition (the next append, roll and
        retention run use them).

        `set` gives settings by Kafka-style or field name (as `TopicConfig.with_overrides`; values may be ints or
        their decimal strings), `delete` names the ones that fall back to the engine's defaults (deleting one
        that is not overridden is a no-op); `append` and `subtract` add words to and take words from a list setting
        (`LIST_CONFIGS`: Kafka's IncrementalAlterConfigs APPEND and SUBTRACT), over its value after `set` and
        `delete`; `replace` makes `set` the whole set of overrides (Kafka's non-incremental AlterConfigs) — except
        `storage.format`, which is kept. The result is validated as a
        whole before anything is written: UnknownTopic, InvalidConfig (an unknown key, a bad value, a changed
        storage format). With `validate_only` nothing is written. The overrides are stored by their Kafka-style
        names with typed values, durably, before this returns."""
        self._check_open()
        set = dict(set or {})
        delete = [canonical_name(key) for key in delete]
        with self._lock, self._changing(name):
            topic = self.topic(name)
            current = canonical_overrides(topic.overrides)
            overrides = {k: v for k, v in current.items() if k in READ_ONLY} if replace else dict(current)
            for key in delete:
                overrides.pop(key, None)
            overrides.update(canonical_overrides(set))
            for words, add in ((append or {}, True), (subtract or {}, False)):
                for key, given in words.items():
                    key = canonical_name(key)
                    if key not in LIST_CONFIGS:
                        raise InvalidConfig(f"config {key!r} is not a list: words cannot be added or taken away")
                    value = list_words(getattr(self.defaults.with_overrides(overrides), KAFKA_NAMES[key]))
                    given = list_words(given)
                    overrides[key] = ",".join(sorted(value | given if add else value - given))
            config = self.defaults.with_overrides(overrides)
            if config.format != topic.config.format:
                raise InvalidConfig(f"storage.format of topic {name!r} is {topic.config.format!r} and cannot change")
            self._check_compactable(config)
            overrides = {key: getattr(config, KAFKA_NAMES[key]) for key in sorted(overrides)}
            if validate_only:
                return topic
            self._store_overrides(topic, overrides)
            for plog in topic.partitions:
                plog.apply_config(config)
            topic.config, topic.overrides = config, overrides
        log.info("altered the config of topic %s: %s", name, overrides or "defaults")
        return topic

    def topic_config(self, name: str, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """A topic's settings with their values, sources and defaults (see `logway.storage.config.describe`):
        UnknownTopic; InvalidConfig for an unknown key in `keys`."""
        topic = self.topic(name)
        return describe(topic.config, topic.overrides, self.defaults, keys)

    def _check_name(self, name: str) -> None:
        """InvalidTopicName unless `name` is a legal topic name."""
        validate_topic_name(name)

    def _check_compactable(self, config: TopicConfig) -> None:
        """InvalidConfig for a compacted topic whose storage format the cleaner cannot read (no `CompactionFormat`)."""
        if config.compact and not hasattr(self.formats[config.format], "batch_keys"):
            raise InvalidConfig(f"topics of storage format {config.format!r} cannot be compacted "
                                f"(cleanup.policy {config.cleanup_policy})")

    def _check_count(self, count: object, least: int) -> None:
        """InvalidPartitions unless `count` is a partition count in least..the limit per topic."""
        most = min(self.limits.max_partitions_per_topic, MAX_PARTITIONS)
        if isinstance(count, bool) or not isinstance(count, int) or not least <= count <= most:
            limit = " (max_partitions_per_topic)" if most < MAX_PARTITIONS else ""
            raise InvalidPartitions(f"partition count {count!r} is not in {least}..{most}{limit}")

    def _check_room(self, *, topics: int, partitions: int) -> None:
        """LimitReached unless `topics` more topics and `partitions` more partitions stay within the limits (the
        caller holds `_lock`; in share mode every worker's engine knows every topic and its partition count)."""
        limits = self.limits
        have = len(self.topics_by_name)
        if topics and have + topics > limits.max_topics:
            raise LimitReached(f"{have} topics exist, the most allowed (max_topics {limits.max_topics}): delete "
                               f"topics or raise the limit")
        held = sum(len(t.partitions) for t in self.topics_by_name.values())
        if held + partitions > limits.max_partitions:
            raise LimitReached(f"{held} partitions exist and {partitions} more would pass the limit of "
                               f"{limits.max_partitions} in all (max_partitions): delete topics or raise the limit")

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosed("the log engine is closed")

    # -- looking up --------------------------------------------------------------------------------------
    def topics(self) -> list[Topic]:
        return [self.topics_by_name[n] for n in sorted(self.topics_by_name)]

    def topic(self, name: str) -> Topic:
        topic = self.topics_by_name.get(name)
        if topic is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        return topic

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        """The topic with this id, or None. (The index follows `topics_by_name`, which is replaced, never changed
        in place, when topics come and go.)"""
        by_name, index = self._ids
        if by_name is not self.topics_by_name:
            by_name = self.topics_by_name
            index = {t.topic_id: t for t in by_name.values()}
            self._ids = (by_name, index)
        return index.get(topic_id)

    def partition(self, name: str, partition: int):
        topic = self.topics_by_name.get(name)
        if topic is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        if not 0 <= partition < len(topic.partitions):
            raise UnknownPartition(f"topic {name!r} has no partition {partition}")
        return topic.partitions[partition]

    def recovery_reports(self) -> dict:
        """(topic, partition) → what opening it had to recover (`partition.RecoveryReport`)."""
        return {(t.name, p.partition): p.recovery for t in self.topics() for p in t.partitions}

    def disk_usage(self) -> dict[tuple[str, int], int]:
        """Bytes of stored batches per (topic, partition) (indexes not included), as Kafka's DescribeLogDirs counts
        them."""
        return {(t.name, p.partition): p.size_bytes for t in self.topics() for p in t.partitions}

    # -- maintenance -------------------------------------------------------------------------------------
    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Retention of every partition; how many segments (or rows) were deleted. A partition whose retention
        fails (an OSError: out of descriptors, an I/O error, a lost database) does not keep the others from theirs:
        the first such error is raised once they all ran."""
        deleted, failure = 0, None
        for t in self.topics():
            for p in t.partitions:
                try:
                    deleted += p.enforce_retention(now_ms)
                except OSError as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure
        return deleted

    def delete_group_offsets(self, group: str, partitions: Iterable[tuple[str, int]] | None = None) -> int:
        """Delete a group's committed offsets — all of them, or those of the (topic, partition) pairs given — and
        make the deletion durable (under every flush policy, like topic deletion) before returning. Returns how many
        offsets were removed; ValueError for a malformed group, topic or partition."""
        self._check_open()
        if partitions is None:
            removed = self.offsets.delete_group(group)
        else:
            removed = self.offsets.delete(group, partitions)
        self.offsets.sync()
        return removed

    def sync_many(self, targets: Iterable) -> None:
        """Make durable everything written to each of `targets` (partition logs, the offset store) before this
        call: the group committer's round (`logway.gateway.durability`). Here one sync each; a backend that can
        commit them together (PostgreSQL: one transaction) does."""
        for target in targets:
            target.sync()
