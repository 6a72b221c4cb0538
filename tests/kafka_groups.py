"""kafka-python consumer-group members for the end-to-end tests, built around a kafka-python 3.0.x bug.

The bug: a member whose first assignment was made before its own metadata held the topic (the leader assigns
nothing: "No partition metadata for topic ...") rejoins once the metadata arrives. If a poll() times out while
that second JoinGroup is in flight, the leader's next assignment matches the metadata, `need_rejoin()` turns False,
and no later poll ever awaits the finished join: the member keeps its empty assignment and spins, heartbeating,
for good. The race is the client's own (its first JoinGroup goes out before its first Metadata request), so these
helpers load the topic's metadata before subscribing and poll one second at a time.
"""

from __future__ import annotations

import time

from kafka import KafkaConsumer

# session/heartbeat short enough for eviction tests; a poll interval that tolerates a slow CI machine
GROUP_OPTS = dict(session_timeout_ms=3000, heartbeat_interval_ms=300, max_poll_interval_ms=10000)
POLL_MS = 1000


def group_consumer(bootstrap: str, topic: str, group: str, **opts) -> KafkaConsumer:
    """A member of `group` subscribed to `topic`, whose first JoinGroup already sees the topic's partitions."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **{**GROUP_OPTS, **opts})
    if not consumer.partitions_for_topic(topic):
        consumer.close()
        raise AssertionError(f"topic {topic!r} has no partitions in the gateway's metadata")
    consumer.subscribe([topic])
    return consumer


def poll_values(consumer: KafkaConsumer, count: int, timeout: float = 30) -> list[bytes]:
    """The values of the next `count` records the member is given (fewer only when `timeout` runs out)."""
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=POLL_MS, max_records=count - len(values)).values():
            values.extend(r.value for r in records)
    return values
