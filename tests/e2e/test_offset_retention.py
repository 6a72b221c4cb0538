"""Retention of committed offsets through a real gateway (`storage.offsets_retention_ms`, gateway/offset_retention.py):
a native consumer's offset (a group without members) is forgotten once older than the retention, while a
kafka-python group member's offset, however old, stays as long as the member does, and goes a retention after it
left. The rules in detail, with a test clock: tests/gateway/test_offset_retention.py."""

from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import OffsetAndMetadata, TopicPartition

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient

from ..kafka_groups import group_consumer, poll_values

pytestmark = pytest.mark.slow
RETENTION_MS = 1000


def _committed(gw, group: str) -> int | None:
    with NativeClient(*gw.native) as n:
        return n.committed("ev", 0, group)


def _wait_forgotten(gw, group: str, seconds: float, started: float | None = None) -> float:
    """Seconds from `started` (default: now) until `group`'s offset is gone (fails after `seconds`)."""
    started = time.monotonic() if started is None else started
    while _committed(gw, group) is not None:
        assert time.monotonic() - started < seconds, f"{group}'s offset still committed"
        time.sleep(0.05)
    return time.monotonic() - started


def test_an_offset_goes_a_retention_after_its_last_commit_or_its_groups_last_member(tmp_path):
    with GatewayProcess(str(tmp_path / "data"), "log_level=INFO",
                        f"storage.offsets_retention_ms={RETENTION_MS}") as gw:
        with NativeClient(*gw.native) as n:
            n.create_topic("ev", 1)
            n.produce("ev", 0, [b"a"] * 4)
            n.commit("ev", 0, "native-g", 2)
        consumer = group_consumer("%s:%d" % tuple(gw.addresses["kafka"]), "ev", "kafka-g",
                                  enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                  max_poll_interval_ms=20000)
        try:
            assert len(poll_values(consumer, 4)) == 4
            consumer.commit({TopicPartition("ev", 0): OffsetAndMetadata(3, "")})
            assert _committed(gw, "native-g") == 2 and _committed(gw, "kafka-g") == 3
            _wait_forgotten(gw, "native-g", 10 * RETENTION_MS / 1000)  # (from the start: two passes at most)
            time.sleep(2.5 * RETENTION_MS / 1000)  # two passes more with kafka-g's commit older than the retention
            assert _committed(gw, "kafka-g") == 3  # its member is still there
        finally:
            leaving = time.monotonic()
            consumer.close()  # LeaveGroup: Empty from now on
        left = _wait_forgotten(gw, "kafka-g", 10 * RETENTION_MS / 1000, leaving)
        assert left >= RETENTION_MS / 1000  # a retention after it was seen without members, not sooner
        metrics = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses["admin"]), timeout=10).read()
        assert b'logway_expired_total{what="committed_offsets"} 2.0' in metrics, metrics
