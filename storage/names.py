"""Topic-name validation: the only way a name from the wire may become part of a path.

Kafka's rules: 1–249 characters of [a-zA-Z0-9._-], and neither '.' nor '..'. The engine also checks a new name
against the longest file name its data directory's file system takes, and cuts the names it derives from a topic's
(being created, deleted, quarantined: `logway.storage.files.aside_name`) to fit.
"""

from __future__ import annotations

import re

from .errors import InvalidTopicName

#: Kafka's limit (it leaves Kafka room for "-<partition>" and suffixes within a 255-byte file name).
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+\Z")


def validate_topic_name(name: object) -> str:
    """Return `name` if it is a legal topic name, else raise InvalidTopicName saying why."""
    if not isinstance(name, str):
        raise InvalidTopicName(f"topic name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidTopicName("topic name is empty")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicName(f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if not _LEGAL.match(name):
        raise InvalidTopicName(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")
    return name
