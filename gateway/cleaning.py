"""The log cleaner's background task: `LogCleaner` decides when compacted partitions are cleaned, off the event loop.

Every `storage.cleaner_check_interval_ms` it plans the partitions of compacted topics (`cleanup.policy` compact or
compact,delete; `LogEngine.cleaning_plans`, in a worker thread: planning looks at segment files) and cleans those
due one at a time, dirtiest first, each in a worker thread (`LogEngine.clean`, see logway.storage.cleaner) through
one `Throttle` of `storage.cleaner_io_bytes_per_second`: the cleaner never holds the event loop, and takes no more
of the disk — nor of the interpreter the event loop shares with it — than that. Cancelling the task (shutdown)
stops the throttle, so the thread discards what it was writing and returns within one read before the engine
closes. A cleaning that fails (an I/O error, a batch that does not decode) is logged and counted; the partition's
log is as before it, and the next check tries again. What the metrics show (`logway_cleaner_*`): the dirty bytes
of the cleanable parts at the last check, the bytes cleaned and reclaimed, partitions cleaned, failures, the time
of the last cleaning.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

import trio

from logway.storage import CleanerSettings, CleaningStopped, CleanPlan, LogEngine, StorageError, Throttle

from .errors import running_out_line

__all__ = ["LogCleaner"]

log = logging.getLogger("logway.gateway.cleaner")

T = TypeVar("T")


class LogCleaner:
    """See the module docstring. `interval_ms`: between checks; `bytes_per_second`: the throttle (0: none)."""

    def __init__(self, engine: LogEngine, *, interval_ms: int, bytes_per_second: int,
                 settings: CleanerSettings) -> None:
        self.engine = engine
        self.interval = interval_ms / 1000
        self.settings = settings
        self.throttle = Throttle(bytes_per_second)
        self.cleanable_bytes = 0  # dirty bytes of the compacted partitions' cleanable parts, at the last check
        self.cleaned_bytes = 0  # bytes of segments rewritten
        self.reclaimed_bytes = 0  # bytes those segments no longer take
        self.records_removed = 0
        self.cleanings = 0  # partitions cleaned
        self.errors = 0  # cleanings that failed
        self.last_run = 0.0  # when the last cleaning ended (Unix time); 0: none yet

    async def run(self) -> None:
        while True:
            await trio.sleep(self.interval)
            await self.check()

    async def check(self) -> int:
        """Plan, and clean every partition due; how many were cleaned."""
        try:
            plans = await self._in_thread(self.engine.cleaning_plans)
        except (OSError, StorageError) as exc:
            self.errors += 1
            what = running_out_line(exc, self.engine.data_dir) if isinstance(exc, OSError) else exc
            log.error("log cleaner: planning failed (tried again at the next check): %s", what)
            return 0
        self.cleanable_bytes = sum(p.dirty_bytes for p in plans)
        cleaned = 0
        for plan in plans:
            if plan.due:
                cleaned += await self._clean(plan)
        return cleaned

    async def _clean(self, plan: CleanPlan) -> int:
        plog = plan.plog
        started = time.perf_counter()
        try:
            stats = await self._in_thread(self.engine.clean, plan, self.throttle, self.settings)
        except CleaningStopped:
            return 0  # the partition is closing (its topic deleted): nothing wrong
        except (OSError, StorageError, ValueError) as exc:
            self.errors += 1
            what = running_out_line(exc, self.engine.data_dir) if isinstance(exc, OSError) else exc
            log.error("log cleaner: cleaning %s-%d failed (its log is as before; tried again at the next check): "
                      "%s", plog.topic, plog.partition, what)
            return 0
        self.cleanable_bytes = max(self.cleanable_bytes - plan.dirty_bytes, 0)
        self.cleaned_bytes += stats.bytes_before
        self.reclaimed_bytes += stats.reclaimed
        self.records_removed += stats.records_removed
        self.cleanings += 1
        self.last_run = time.time()
        log.info("log cleaner: cleaned %s-%d: %d segment(s) of %d bytes into %d of %d bytes, %d record(s) removed, "
                 "in %.1f s%s", plog.topic, plog.partition, stats.segments_before, stats.bytes_before,
                 stats.segments_after, stats.bytes_after, stats.records_removed, time.perf_counter() - started,
                 f" ({stats.groups_skipped} group(s) of segments that retention or DeleteRecords took out meanwhile "
                 f"left alone)" if stats.groups_skipped else "")
        return 1

    async def _in_thread(self, fn: Callable[..., T], *args) -> T:
        """`fn(*args)` in a worker thread. A worker thread cannot be cancelled (trio waits for it): cancelled, this
        stops the throttle, so the thread returns within one read, and then raises Cancelled."""
        done = False

        async def stop_when_cancelled() -> None:
            try:
                await trio.sleep_forever()
            finally:
                if not done:
                    self.throttle.stop()

        def call():
            try:
                return True, fn(*args)
            except Exception as exc:  # (raised below, outside the nursery: never wrapped in an exception group)
                return False, exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_when_cancelled)
            ok, result = await trio.to_thread.run_sync(call)
            done = True
            nursery.cancel_scope.cancel()
        if not ok:
            raise result
        return result
