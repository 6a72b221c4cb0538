"""Topic administration, the steps every protocol takes to look topics up and change them: create (or only check
that one could be created), delete, grow to more partitions, alter and describe a topic's settings, move a
partition's log start (delete records), and the disk each partition uses. `Steps.topics` is the one instance.

The blocking changes (they write and sync files, or rows) run in a worker thread here, so a handler awaits them
and never calls the engine itself. Failures are storage's exceptions, answered through `errors.kind_of` like every
other step's. A topic's settings are described with the storage's own table of them (`BUILT_IN`, their Kafka
names, their sources): re-exported here, the module that owns a topic's configuration for the protocols.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Iterable, Mapping

import trio

from logway.storage import InvalidPartitions, LogEngine, Topic, TopicExists, validate_topic_name
from logway.storage.config import (BUILT_IN, KAFKA_NAMES, LIST_CONFIGS, SOURCE_BROKER, SOURCE_DEFAULT, SOURCE_TOPIC,
                                   ConfigEntry, TopicConfig, describe)

__all__ = ["TopicAdmin", "BUILT_IN", "KAFKA_NAMES", "LIST_CONFIGS", "SOURCE_BROKER", "SOURCE_DEFAULT",
           "SOURCE_TOPIC", "describe", "validate_topic_name"]


class TopicAdmin:
    def __init__(self, engine: LogEngine) -> None:
        self._engine = engine

    # -- looking up ----------------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        """The topic called `name`, or None."""
        return self._engine.topics_by_name.get(name)

    def topic(self, name: str) -> Topic:
        """The topic called `name`; UnknownTopic when there is none."""
        return self._engine.topic(name)

    def topic_by_id(self, topic_id) -> Topic | None:
        """The topic with this id (a `uuid.UUID`), or None."""
        return self._engine.topic_by_id(topic_id)

    def all(self) -> list[Topic]:
        """Every topic, by name."""
        return self._engine.topics()

    @property
    def names(self) -> Mapping[str, Topic]:
        """Topics by name (a mapping replaced, never changed in place, when topics come and go)."""
        return self._engine.topics_by_name

    @property
    def defaults(self) -> TopicConfig:
        """The settings a topic without overrides has."""
        return self._engine.defaults

    @property
    def data_dir(self) -> str:
        return self._engine.data_dir

    # -- changing ------------------------------------------------------------------------------------------
    def check_new(self, name: str, partitions: int, config: Mapping[str, Any] | None = None) -> None:
        """What `create` checks before it writes anything, at once: InvalidTopicName, TopicExists, InvalidPartitions
        (below 1), InvalidConfig."""
        validate_topic_name(name)
        if name in self._engine.topics_by_name:
            raise TopicExists(f"topic '{name}' already exists")
        if partitions < 1:
            raise InvalidPartitions(f"partition count {partitions} must be at least 1")
        self._engine.defaults.with_overrides(config or {})

    async def create(self, name: str, partitions: int, config: Mapping[str, Any] | None = None, *,
                     validate_only: bool = False) -> Topic | None:
        """Create a topic durably (or, `validate_only`, check that it could be: None)."""
        return await trio.to_thread.run_sync(functools.partial(
            self._engine.create_topic, name, partitions, config, validate_only=validate_only))

    async def delete(self, name: str) -> None:
        await trio.to_thread.run_sync(self._engine.delete_topic, name)

    def check_partitions(self, name: str, count: int) -> None:
        """What `create_partitions` checks first, at once: UnknownTopic, InvalidPartitions, LimitReached."""
        self._engine.create_partitions(name, count, validate_only=True)

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> Topic:
        """Grow a topic to `count` partitions in all; the topic (as it is: unchanged when `validate_only`)."""
        return await trio.to_thread.run_sync(functools.partial(self._engine.create_partitions, name, count,
                                                        validate_only=validate_only))

    async def alter_config(self, name: str, set: Mapping[str, Any] | None = None, delete: Iterable[str] = (),
                           **kwargs) -> None:
        """Change a topic's settings, validated as a whole and applied live (`Engine.alter_topic_config`'s
        keywords: append, subtract, replace, validate_only)."""
        await trio.to_thread.run_sync(functools.partial(self._engine.alter_topic_config, name, set, delete,
                                                        **kwargs))

    def config(self, name: str, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """A topic's settings with their values, sources and defaults: UnknownTopic; InvalidConfig for an unknown
        key in `keys`."""
        return self._engine.topic_config(name, keys)

    async def delete_records(self, plog, offset: int) -> int:
        """Move the partition's log start up to `offset` (-1: its high watermark), durably; its new log start."""
        return await trio.to_thread.run_sync(plog.delete_records, offset)

    async def disk_usage(self) -> tuple[dict[tuple[str, int], int], os.statvfs_result]:
        """(bytes of stored batches per (topic, partition), the file system of the data directory)."""
        usage = await trio.to_thread.run_sync(self._engine.disk_usage)
        return usage, await trio.to_thread.run_sync(os.statvfs, self._engine.data_dir)
