"""`ShareStateStore`: the durable state of share groups (KIP-932; Kafka's `__share_group_state`), a map of keys to
JSON states kept like the transaction coordinator's (`transactions.TransactionStore`: CRC-framed records, the last
one per key wins, a torn tail cut at open, compaction into a new file renamed over the log).

On disk, in `<data>/share_groups/`:

    share_groups.log := magic "LOGWAYSG" (8 bytes) | version u32 (= 1) | record*
    record payload   := JSON {"id": key, "state": {...}}, or {"id": key, "state": null} (forgotten)

The store knows nothing of what a key or a state means: the gateway's share-group coordinator writes one state
per share-partition (its start offset and the records in flight that are done, or were delivered before) and one
per group's configuration.
"""

from __future__ import annotations

import struct

from .transactions import TransactionStore

__all__ = ["ShareStateStore"]


class ShareStateStore(TransactionStore):
    log_name = "share_groups.log"
    file_header = struct.pack(">8sI", b"LOGWAYSG", 1)
    what = "share group state store"
