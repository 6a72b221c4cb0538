"""Topic ids (KIP-516) on the Kafka wire: the storage engine's `uuid.UUID` of a topic as the 16 bytes the codec
carries, and the requests that name topics by id (Produce v13+, Fetch v13+) given their names before anything
routes or serves them, so every handler (and the routing of `workers: N`) works with names as before.

An id no topic has resolves to the name "" (which no topic can have): the handlers answer it UNKNOWN_TOPIC_ID,
which clients take as a reason to refresh their metadata.
"""

from __future__ import annotations

import uuid

from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.primitives import ZERO_UUID

__all__ = ["UNKNOWN", "BY_ID_SINCE", "wire_id", "topic_of", "name_topics", "unknown_id_code"]

#: The name an unknown topic id resolves to.
UNKNOWN = ""
#: api key -> the first version whose requests name topics by id.
BY_ID_SINCE = {P.API_KEY: 13, F.API_KEY: 13}


def wire_id(topic) -> bytes:
    """A storage topic's id as the codec carries it (the zero id for None)."""
    return ZERO_UUID if topic is None else topic.topic_id.bytes


def topic_of(topics, raw: bytes):
    """The storage topic with this wire id (`topics`: the `TopicAdmin`, or anything with its `topic_by_id`), or None
    (the zero id included)."""
    if raw == ZERO_UUID or len(raw) != 16:
        return None
    return topics.topic_by_id(uuid.UUID(bytes=bytes(raw)))


def _name(topics, raw: bytes) -> str:
    topic = topic_of(topics, raw)
    return UNKNOWN if topic is None else topic.name


def name_topics(topics, api_key: int, version: int, body) -> None:
    """Fill in the topic names of a request that names its topics by id (in place; others are left alone)."""
    since = BY_ID_SINCE.get(api_key)
    if since is None or version < since:
        return
    if api_key == P.API_KEY:
        for t in body.topic_data:
            t.name = _name(topics, t.topic_id)
    else:
        for t in body.topics:
            t.topic = _name(topics, t.topic_id)
        for t in body.forgotten_topics_data:
            t.topic = _name(topics, t.topic_id)


def unknown_id_code(api_key: int, version: int, name: str, code: int) -> int:
    """The error for a topic a request named: UNKNOWN_TOPIC_ID instead of UNKNOWN_TOPIC_OR_PARTITION when the
    request named it by an id no topic has."""
    since = BY_ID_SINCE.get(api_key)
    if since is not None and version >= since and name == UNKNOWN and code == E.UNKNOWN_TOPIC_OR_PARTITION:
        return E.UNKNOWN_TOPIC_ID
    return code
