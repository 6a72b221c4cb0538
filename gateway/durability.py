"""Group commit: acknowledge writes only after fdatasync, with one sync covering every waiting write.

`GroupCommitter.sync(target)` parks the caller until a sync round that started after the call has finished
`target.sync()` (a PartitionLog or the OffsetStore; with the postgres backend the round is one database transaction
that commits every target's writes, `sync_all`); `schedule(target)` asks for the same round without waiting
(an append nobody acknowledges, e.g. Kafka acks=0, must still become durable and visible). While a round runs in a
worker thread, new callers collect for the next round, so N concurrent producers cost one fdatasync per round,
not N. After each round `on_synced(target)` runs for every target synced (the gateway wakes the long-polls of a
partition there: with `flush: always` readers see only synced data). A failed sync raises in every caller of that
round: their writes are not acknowledged.

The policies themselves (`storage.flush`) and what each promises are `flush.Flush`. `SyncStats` counts sync passes
(a group-commit round, an interval flush), their duration and how many writers one round acknowledged (the metrics
read it).
"""

from __future__ import annotations

import logging
from time import perf_counter

import trio

from .admin.stats import BATCH_BOUNDS, DURATION_BOUNDS, Histogram

log = logging.getLogger("logway.gateway")


class SyncStats:
    """Sync passes by trigger ("group_commit": a round of `GroupCommitter`; "interval": a flush of everything under
    `flush: interval`): how many, how long each took (fdatasync of every target it covered), and per group-commit
    round the writers it acknowledged (produces and offset commits waiting in `GroupCommitter.sync`)."""

    TRIGGERS = ("group_commit", "interval")

    def __init__(self) -> None:
        self.passes = dict.fromkeys(self.TRIGGERS, 0)
        self.failed = dict.fromkeys(self.TRIGGERS, 0)
        self.seconds = {trigger: Histogram(DURATION_BOUNDS) for trigger in self.TRIGGERS}
        self.batch = Histogram(BATCH_BOUNDS)

    def synced(self, trigger: str, seconds: float, *, ok: bool = True) -> None:
        self.passes[trigger] += 1
        if not ok:
            self.failed[trigger] += 1
        self.seconds[trigger].observe(seconds)


class _Round:
    __slots__ = ("done", "error", "targets", "waiters")

    def __init__(self) -> None:
        self.targets: dict[int, object] = {}
        self.done = trio.Event()
        self.error: BaseException | None = None
        self.waiters = 0  # callers of `sync` waiting for this round


class GroupCommitter:
    def __init__(self, on_synced=None, stats: SyncStats | None = None) -> None:
        #: Syncs a round's targets in a worker thread: each target's `sync()` by default; the gateway gives it the
        #: engine's `sync_many` (a database backend commits the whole round in one transaction).
        self.sync_all = _sync_all
        self._next = _Round()
        self._wakeup = trio.Event()
        self.on_synced = on_synced
        self.rounds = 0  # finished rounds (for tests and stats)
        self.stats = stats or SyncStats()

    def schedule(self, target) -> _Round:
        """Make sure the next round syncs `target`; returns that round."""
        rnd = self._next
        rnd.targets[id(target)] = target
        self._wakeup.set()
        return rnd

    async def sync(self, target) -> None:
        rnd = self.schedule(target)
        rnd.waiters += 1
        await rnd.done.wait()
        if rnd.error is not None:
            raise rnd.error

    async def run(self) -> None:
        """The sync loop; runs for the life of the gateway."""
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            rnd, self._next = self._next, _Round()
            if not rnd.targets:
                continue
            started = perf_counter()
            try:
                await trio.to_thread.run_sync(self.sync_all, list(rnd.targets.values()))
            except OSError as exc:
                log.error("fdatasync failed: %s", exc)
                rnd.error = exc
            self.stats.synced("group_commit", perf_counter() - started, ok=rnd.error is None)
            self.stats.batch.observe(rnd.waiters)
            self.rounds += 1
            rnd.done.set()
            if self.on_synced is not None:
                for target in rnd.targets.values():
                    self.on_synced(target)


def _sync_all(targets) -> None:
    for target in targets:
        target.sync()
