"""Per-topic storage settings (`TopicConfig`) and the Kafka-style override names users set them with.

A topic's overrides (in its topic.json) may name a setting by its field name or its Kafka-style name;
`canonical_overrides` maps them to the Kafka-style names, which is how altered configurations are written back.
Every setting but `format` (`storage.format`) may change after creation. `describe` lists a topic's settings
with where each value comes from (DescribeConfigs): the topic's override, the engine's defaults (the gateway's
`storage.*` configuration: "broker"), or the built-in default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Iterable, Mapping

from .errors import InvalidConfig

GiB = 1024 * 1024 * 1024
MiB = 1024 * 1024
DAY_MS = 24 * 3600 * 1000

#: A segment's index stores file positions as u32, so a segment can never exceed 4 GiB; keep a margin.
MAX_SEGMENT_BYTES = 2 * GiB


@dataclass(frozen=True, slots=True)
class TopicConfig:
    format: str = "kafka"  # storage format of the segment files: "kafka" (RecordBatch v2) or "tank"
    segment_bytes: int = GiB  # roll the active segment when an append would take it past this size
    segment_ms: int = 7 * DAY_MS  # roll the active segment once it is this old
    retention_bytes: int = -1  # per partition; -1 = no size limit
    retention_ms: int = 7 * DAY_MS  # -1 = keep forever
    index_interval_bytes: int = 4096  # one sparse index entry per this many bytes of batches
    max_batch_bytes: int = 10 * MiB  # the largest single batch an append accepts

    def validate(self) -> "TopicConfig":
        if not 1024 <= self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise InvalidConfig(f"segment_bytes must be between 1024 and {MAX_SEGMENT_BYTES}")
        if self.segment_ms < 1:
            raise InvalidConfig("segment_ms must be positive")
        if self.retention_bytes < -1 or self.retention_ms < -1:
            raise InvalidConfig("retention_bytes / retention_ms must be -1 (unlimited) or >= 0")
        if not 1 <= self.index_interval_bytes <= 64 * MiB:
            raise InvalidConfig("index_interval_bytes must be between 1 and 64 MiB")
        if not 64 <= self.max_batch_bytes <= MAX_SEGMENT_BYTES:
            raise InvalidConfig("max_batch_bytes must be between 64 bytes and the maximum segment size")
        return self

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> "TopicConfig":
        """Apply overrides given by field name or Kafka-style name ("retention.ms"); reject unknown keys."""
        if not overrides:
            return self
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = KAFKA_NAMES.get(key, key)
            if name not in FIELD_NAMES:
                raise InvalidConfig(f"unknown topic config {key!r}")
            expected = str if name == "format" else int
            # bool is an int and a float converts, silently truncated: neither is a number of bytes or ms here
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise InvalidConfig(f"topic config {key!r}: {value!r} is not a valid {expected.__name__}")
            try:
                value = expected(value)
            except (TypeError, ValueError):
                raise InvalidConfig(f"topic config {key!r}: {value!r} is not a valid {expected.__name__}") from None
            changes[name] = value
        return replace(self, **changes).validate()

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


FIELD_NAMES = frozenset(f.name for f in fields(TopicConfig))
#: The Kafka topic-config names users know, mapped to our field names.
KAFKA_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.bytes": "retention_bytes",
    "retention.ms": "retention_ms",
    "index.interval.bytes": "index_interval_bytes",
    "max.message.bytes": "max_batch_bytes",
    "storage.format": "format",
}
#: Field name -> its Kafka-style name (what DescribeConfigs shows and altered configurations are written as).
NAME_OF_FIELD = {field: kafka for kafka, field in KAFKA_NAMES.items()}
#: The settings that cannot change once the topic exists (its segment files are in that format).
READ_ONLY = frozenset({"storage.format"})


def canonical_name(key: str) -> str:
    """The Kafka-style name of a topic setting given by either name; InvalidConfig for an unknown one."""
    if key in KAFKA_NAMES:
        return key
    kafka = NAME_OF_FIELD.get(key)
    if kafka is None:
        raise InvalidConfig(f"unknown topic config {key!r}")
    return kafka


def canonical_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A topic's overrides keyed by Kafka-style names (a later spelling of the same setting wins)."""
    return {canonical_name(key): value for key, value in (overrides or {}).items()}


#: Where a setting's value comes from (`ConfigEntry.source`).
SOURCE_TOPIC = "topic"  # the topic's own override
SOURCE_BROKER = "broker"  # the engine's defaults, where they differ from the built-in ones (gateway `storage.*`)
SOURCE_DEFAULT = "default"  # the built-in default
BUILT_IN = TopicConfig()


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting of a topic, as DescribeConfigs shows it."""

    name: str  # the Kafka-style name
    value: int | str  # what the topic uses
    source: str  # SOURCE_TOPIC, SOURCE_BROKER or SOURCE_DEFAULT
    default: int | str  # what the topic would use without its override (the engine's default)
    read_only: bool  # cannot change once the topic exists (storage.format)


def describe(config: TopicConfig, overrides: Mapping[str, Any] | None, defaults: TopicConfig,
             keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every setting of a topic whose effective config is `config` (its `overrides` over the engine's `defaults`),
    sorted by name; with `keys` (either spelling) only those, InvalidConfig for an unknown one."""
    overridden = set(canonical_overrides(overrides))
    names = sorted(KAFKA_NAMES) if keys is None else sorted({canonical_name(key) for key in keys})
    entries = []
    for name in names:
        field = KAFKA_NAMES[name]
        default = getattr(defaults, field)
        if name in overridden:
            source = SOURCE_TOPIC
        elif default != getattr(BUILT_IN, field):
            source = SOURCE_BROKER
        else:
            source = SOURCE_DEFAULT
        entries.append(ConfigEntry(name, getattr(config, field), source, default, name in READ_ONLY))
    return entries
