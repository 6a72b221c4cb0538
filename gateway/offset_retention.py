"""Retention of committed consumer offsets (Kafka's offsets.retention.minutes, KIP-211's rules): `OffsetRetention`.

Committed offsets live in the engine's one offset store, whatever protocol committed them, and without a bound
every group that ever committed stays there for good — console consumers and tools make up a group per run, the
Spark writer one per task. So, as Kafka does, an offset is forgotten once it is older than
`storage.offsets_retention_ms` (7 days by default; 0 keeps offsets for good) and its group has been without
members for that long:

- a group with Kafka members (or members joining: any state but Empty and Dead in the Kafka group coordinator)
  keeps every offset, however old; its last activity is the first pass that sees it without them (it became
  empty at some time before: never sooner than Kafka, which counts from then);
- otherwise each offset committed before `now - retention` is deleted, once the group's last activity is older
  than that too — a group without Kafka membership (native consumers, standalone Kafka consumers) is active only
  through its commits, so its offsets expire one by one, as Kafka's standalone consumers' do.

Activity is remembered in memory only, so after a start every group counts as active at the start: nothing is
forgotten sooner than one retention after it. Looked at every `CHECK_MS` at most (Kafka's
offsets.retention.check.interval.ms), or as often as the retention when it is shorter; a delete keeps an offset
committed again meanwhile (`OffsetStore.delete(committed_before=)`). Deletes are not synced on their own: the next
synced commit covers them, and one a crash loses is made again. With `workers: N` the offsets and the Kafka groups
live on worker 0, which runs it.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import trio

from logway.storage import StorageError
from logway.storage.offsets import OffsetStore

log = logging.getLogger("logway.gateway.offsets")

__all__ = ["OffsetRetention", "CHECK_MS"]

#: Offsets are looked at for expiry at least this often.
CHECK_MS = 600_000
#: Offsets deleted per record at most (a group with more old offsets gets several).
DELETE_CHUNK = 1000


class OffsetRetention:
    """Forgets committed offsets as the module docstring says. `active()`: the groups with members now (read in
    the trio thread); `clock`: seconds, as time.time."""

    def __init__(self, offsets: OffsetStore, retention_ms: int, active: Callable[[], set[str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.offsets = offsets
        self.retention_ms = retention_ms
        self.active = active
        self.clock = clock
        self.started_ms = self._now_ms()
        self._seen: dict[str, int] = {}  # group -> its last activity (ms): the module docstring
        self._had_members: set[str] = set()  # the groups with members at the last pass
        self.expired = 0  # offsets forgotten so far (a metric)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def run(self) -> None:
        """Expire offsets for the gateway's life (a retention of 0: never)."""
        if self.retention_ms <= 0:
            return
        while True:
            await trio.sleep(min(self.retention_ms, CHECK_MS) / 1000)
            try:
                removed = await trio.to_thread.run_sync(self.expire, self.active())
            except StorageError as exc:
                log.warning("offsets retention: %s; trying again later", exc)
                continue
            if removed:
                log.info("offsets retention: forgot %d committed offset(s) older than %d ms", removed,
                         self.retention_ms)

    def expire(self, active: set[str]) -> int:
        """One pass (blocking): delete what has expired, given the groups with members now; how many offsets."""
        now = self._now_ms()
        cutoff = now - self.retention_ms
        for group in active | self._had_members:  # with members now, or until the last pass
            self._seen[group] = now
        self._had_members = set(active)
        if self.started_ms >= cutoff:
            return 0  # within one retention of the start, every group counts as active
        removed = 0
        groups = self.offsets.groups()
        for group in groups:
            if group in active or self._seen.get(group, self.started_ms) >= cutoff:
                continue
            old = [key for key, c in self.offsets.fetch_group(group).items() if c.commit_time_ms < cutoff]
            for i in range(0, len(old), DELETE_CHUNK):
                removed += self.offsets.delete(group, old[i:i + DELETE_CHUNK], committed_before=cutoff)
        self.expired += removed
        known = set(groups)
        for group in [g for g in self._seen if g not in known and g not in active]:
            del self._seen[group]
        return removed
