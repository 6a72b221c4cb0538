"""Group commit: acknowledge writes only after fdatasync, with one sync covering every waiting write.

`GroupCommitter.sync(target)` parks the caller until a sync round that started after the call has finished
`target.sync()` (a PartitionLog or the OffsetStore). While a round runs in a worker thread, new callers
collect for the next round, so N concurrent producers cost one fdatasync per round, not N.
A failed sync raises in every caller of that round: their writes are not acknowledged.
"""

from __future__ import annotations

import logging

import trio

log = logging.getLogger("logway.gateway")


class _Round:
    __slots__ = ("targets", "done", "error")

    def __init__(self) -> None:
        self.targets: dict[int, object] = {}
        self.done = trio.Event()
        self.error: BaseException | None = None


class GroupCommitter:
    def __init__(self) -> None:
        self._next = _Round()
        self._wakeup = trio.Event()
        self.rounds = 0  # finished rounds (for tests and stats)

    async def sync(self, target) -> None:
        rnd = self._next
        rnd.targets[id(target)] = target
        self._wakeup.set()
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
            try:
                await trio.to_thread.run_sync(_sync_all, list(rnd.targets.values()))
            except OSError as exc:
                log.error("fdatasync failed: %s", exc)
                rnd.error = exc
            self.rounds += 1
            rnd.done.set()


def _sync_all(targets) -> None:
    for target in targets:
        target.sync()
