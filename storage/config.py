"""Per-topic storage settings (`TopicConfig`) and the Kafka-style override names users set them with."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

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
