"""Per-topic storage settings (`TopicConfig`) and the Kafka-style override names users set them with.

A topic's overrides (in its topic.json) may name a setting by its field name or its Kafka-style name;
`canonical_overrides` maps them to the Kafka-style names, which is how altered configurations are written back.
Every setting but `format` (`storage.format`) may change after creation. Values are numbers of bytes or
milliseconds (Java longs), except `storage.format` (text), `cleanup.policy` (`delete`, `compact` or both, written
`compact,delete`) and `min.cleanable.dirty.ratio` (a fraction). `describe` lists a topic's settings
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

#: `cleanup.policy` values, indexed by (compact) + 2 * (delete) - 1 (`_policy`).
DELETE, COMPACT = "delete", "compact"
POLICIES = (COMPACT, DELETE, "compact,delete")

#: A segment's index stores file positions as u32, so a segment can never exceed 4 GiB; keep a margin.
MAX_SEGMENT_BYTES = 2 * GiB
#: The largest value of a setting in bytes or milliseconds: Kafka's configs are Java longs, and the native protocol's
#: JSON (orjson) carries 64-bit integers at most. A value from the wire beyond it (TANK's log.retention.secs=10^30,
#: in ms) is refused, never stored.
MAX_LONG = 2**63 - 1
#: Partitions of one topic at most, whatever `EngineLimits` allows: each partition is a directory and a few files,
#: so a wire request must not be able to ask for millions.
MAX_PARTITIONS = 1000


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """What an engine lets clients create and keep open (the gateway's `limits.*`). Creating a topic or partitions
    beyond them is refused (`InvalidPartitions` for one topic's count, `LimitReached` for the totals); topics that
    exist are opened whatever the limits say now."""

    #: segment files (data, indexes) kept open or mapped at once, across the engine (see logway.storage.openfiles)
    open_segment_files: int = 1024
    max_topics: int = 10_000
    max_partitions_per_topic: int = MAX_PARTITIONS
    max_partitions: int = 10_000


@dataclass(frozen=True, slots=True)
class TopicConfig:
    format: str = "kafka"  # storage format of the segment files: "kafka" (RecordBatch v2) or "tank"
    segment_bytes: int = GiB  # roll the active segment when an append would take it past this size
    segment_ms: int = 7 * DAY_MS  # roll the active segment once it is this old
    retention_bytes: int = -1  # per partition; -1 = no size limit
    retention_ms: int = 7 * DAY_MS  # -1 = keep forever
    index_interval_bytes: int = 4096  # one sparse index entry per this many bytes of batches
    max_batch_bytes: int = 10 * MiB  # the largest single batch an append accepts
    #: "delete" (retention deletes whole old segments), "compact" (the cleaner keeps the last record of each key;
    #: see logway.storage.cleaner) or "compact,delete" (both)
    cleanup_policy: str = DELETE
    min_cleanable_dirty_ratio: float = 0.5  # clean once this share of the cleanable log was written since last time
    min_compaction_lag_ms: int = 0  # a segment is cleaned only once its newest record is this old
    max_compaction_lag_ms: int = MAX_LONG  # ... and at the latest (whatever the ratio) once it is this old
    delete_retention_ms: int = DAY_MS  # tombstones and transaction markers outlive their segment's last write so long

    def validate(self) -> "TopicConfig":
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise InvalidConfig(f"{name} must be between {low} and {high}, got {value}")
        if self.cleanup_policy not in POLICIES:
            raise InvalidConfig(f"cleanup_policy must be one of {', '.join(POLICIES)}, got {self.cleanup_policy!r}")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfig(f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not be greater than "
                                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})")
        return self

    @property
    def compact(self) -> bool:
        """The cleaner compacts the topic's partitions (`cleanup.policy` compact or compact,delete)."""
        return self.cleanup_policy != DELETE

    @property
    def delete(self) -> bool:
        """Retention deletes the topic's old segments (`cleanup.policy` delete or compact,delete)."""
        return self.cleanup_policy != COMPACT

    @property
    def roll_ms(self) -> int:
        """The age at which the active segment rolls: `segment.ms`, and for a compacted topic at most
        `max.compaction.lag.ms` (as Kafka: the active segment is never cleaned, so it must not outlive the lag)."""
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compact else self.segment_ms

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> "TopicConfig":
        """Apply overrides given by field name or Kafka-style name ("retention.ms"); reject unknown keys."""
        if not overrides:
            return self
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = KAFKA_NAMES.get(key, key)
            if name not in FIELD_NAMES:
                raise InvalidConfig(f"unknown topic config {key!r}")
            changes[name] = PARSERS.get(name, _long)(key, value)
        return replace(self, **changes).validate()

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _long(key: str, value: Any) -> int:
    """A number of bytes or milliseconds: an int or its decimal text (a bool is an int and a float converts,
    silently truncated: neither is a number of bytes or ms here)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not a valid int")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not a valid int") from None


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not text")
    return value


def _ratio(key: str, value: Any) -> float:
    """A fraction in [0, 1]: a number or its text ("0.5")."""
    try:
        ratio = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        ratio = None
    if ratio is None or not 0 <= ratio <= 1:  # (NaN fails the comparison too)
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not a number between 0 and 1")
    return ratio


def _policy(key: str, value: Any) -> str:
    """`delete`, `compact` or both, as Kafka's list config: "compact,delete", "delete, compact", or a list of the
    words (the native protocol's JSON); written back as one of `POLICIES`."""
    try:
        chosen = {w.lower() for w in list_words(value)}
    except InvalidConfig:
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not a list of cleanup policies") from None
    if not chosen or not chosen <= {DELETE, COMPACT}:
        raise InvalidConfig(f"topic config {key!r}: {value!r} is not a cleanup policy (delete, compact or "
                            f"compact,delete)")
    return POLICIES[(COMPACT in chosen) + 2 * (DELETE in chosen) - 1]


#: How each setting that is not a number of bytes or ms is read from an override (the rest: `_long`).
PARSERS = {"format": _text, "cleanup_policy": _policy, "min_cleanable_dirty_ratio": _ratio}

#: The values each numeric setting may take (`validate`): -1 is "unlimited" for retention.
RANGES = {
    "segment_bytes": (1024, MAX_SEGMENT_BYTES),
    "segment_ms": (1, MAX_LONG),
    "retention_bytes": (-1, MAX_LONG),
    "retention_ms": (-1, MAX_LONG),
    "index_interval_bytes": (1, 64 * MiB),
    "max_batch_bytes": (64, MAX_SEGMENT_BYTES),  # (a batch must fit in a segment)
    "min_compaction_lag_ms": (0, MAX_LONG),
    "max_compaction_lag_ms": (1, MAX_LONG),
    "delete_retention_ms": (0, MAX_LONG),
}
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
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
}
#: Field name -> its Kafka-style name (what DescribeConfigs shows and altered configurations are written as).
NAME_OF_FIELD = {field: kafka for kafka, field in KAFKA_NAMES.items()}
#: The settings that cannot change once the topic exists (its segment files are in that format).
READ_ONLY = frozenset({"storage.format"})
#: The settings whose value is a list (of comma-separated words): an alteration may add words or take some away.
LIST_CONFIGS = frozenset({"cleanup.policy"})


def clamped_overrides(overrides: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A stored topic's overrides with every number beyond what its setting can hold (`RANGES`) brought to the
    nearest bound, and what was changed ("retention.ms=10^33 → 9223372036854775807"): a value an older logway let
    through must not hide a topic's data. Anything else is left for `TopicConfig.with_overrides` to judge."""
    out: dict[str, Any] = {}
    changed = []
    for key, value in overrides.items():
        bounds = RANGES.get(KAFKA_NAMES.get(key, key))
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            number = int(value)
        if bounds is not None and number is not None and not bounds[0] <= number <= bounds[1]:
            value = min(max(number, bounds[0]), bounds[1])
            changed.append(f"{key}={number} → {value}")
        out[key] = value
    return out, changed


def canonical_name(key: str) -> str:
    """The Kafka-style name of a topic setting given by either name; InvalidConfig for an unknown one."""
    if key in KAFKA_NAMES:
        return key
    kafka = NAME_OF_FIELD.get(key)
    if kafka is None:
        raise InvalidConfig(f"unknown topic config {key!r}")
    return kafka


def list_words(value: Any) -> frozenset[str]:
    """The words of a list setting's value (`LIST_CONFIGS`): text split at its commas, or a list of texts; blanks
    left out. InvalidConfig for anything else."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, frozenset, set)) or not all(isinstance(w, str) for w in items):
        raise InvalidConfig(f"{value!r} is not a list of words")
    return frozenset(w.strip() for w in items if w.strip())


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
    value: int | float | str  # what the topic uses
    source: str  # SOURCE_TOPIC, SOURCE_BROKER or SOURCE_DEFAULT
    default: int | float | str  # what the topic would use without its override (the engine's default)
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
