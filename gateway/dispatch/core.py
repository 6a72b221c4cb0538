"""The dispatch core shared by every protocol: the storage steps whose rules must not differ between protocols.

An append wakes parked long-polls and, with `flush: always`, is answered only after the group-commit sync that
covers it; an offset commit follows the same durability rule. Protocol dispatchers (`native`, `kafka`) map
their codec events to these steps and to storage reads.
"""

from __future__ import annotations

from logway.storage import LogEngine, PartitionLog

from ..config import Config
from ..durability import GroupCommitter
from ..notify import AppendNotifier

#: Reads larger than this run in a worker thread so a cold read does not stall other connections.
INLINE_READ_BYTES = 4 * 1024 * 1024


class Dispatcher:
    def __init__(self, engine: LogEngine, notifier: AppendNotifier, committer: GroupCommitter, config: Config):
        self.engine = engine
        self.notifier = notifier
        self.committer = committer
        self.config = config
        self.sync_acks = config.storage.flush == "always"

    def append(self, plog: PartitionLog, data):
        """Append whole batches and wake the long-polls parked on this partition (no waiting). With `flush:
        always` readers see the batches only once synced: the append asks for a sync round, whose end wakes them
        (`synced`)."""
        result = plog.append(data)
        if self.sync_acks:
            self.committer.schedule(plog)
        else:
            self.notifier.notify((plog.topic, plog.partition))
        return result

    def synced(self, target) -> None:
        """A group-commit round synced `target`: what it made visible wakes the partition's long-polls."""
        if isinstance(target, PartitionLog):
            self.notifier.notify((target.topic, target.partition))

    async def make_durable(self, plog: PartitionLog) -> None:
        """With `flush: always`, return once a sync covering every append made so far has finished."""
        if self.sync_acks:
            await self.committer.sync(plog)

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        self.engine.offsets.commit(group, topic, partition, offset, metadata)
        if self.sync_acks:
            await self.committer.sync(self.engine.offsets)
