"""A commit storm for tests/storage/test_offsets.py's kill -9 test. Runs until killed.

usage: offset_storm.py DIRECTORY SEED COMPACT_AFTER MODE     (MODE: inline | thread)

Commits ever-growing offsets to many (group, topic, partition) keys, with metadata f"m{offset}", and every 50th
operation a commit_many to the group "atomic" that sets all its partitions to the same generation number.
Prints "READY" once open, then — only after a sync() covering them has returned — one line per acknowledged
key, flushed at once:
    ACK <group> <topic> <partition> <offset>
    ATOMIC <generation>
    SYNCED <operations synced by this process> <compactions completed by this process>
inline: the committing thread calls sync() every SYNC_EVERY operations.
thread: a second thread loops on sync() and acknowledges what each sync covered (the gateway's group commit).
Small COMPACT_AFTER values make compactions (run inside sync) frequent, so kills land in them too.
"""

from __future__ import annotations

import collections
import random
import sys
import threading

from logway.storage.offsets import OffsetStore

GROUPS = [f"group-{i}" for i in range(6)]
TOPICS = ["alpha", "beta.events"]
PARTITIONS = 4
ATOMIC_GROUP = "atomic"
SYNC_EVERY = 200


def main() -> None:
    directory, seed, compact_after, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(seed)
    store = OffsetStore(directory, compact_after=compact_after)
    keys = [(g, t, p) for g in GROUPS for t in TOPICS for p in range(PARTITIONS)]
    current = {}
    for key in keys:  # offsets only grow, across restarts too
        found = store.fetch(*key)
        current[key] = found.offset if found else 0
    atomic_keys = [(t, p) for t in TOPICS for p in range(PARTITIONS)]
    generation = max((c.offset for c in store.fetch_group(ATOMIC_GROUP).values()), default=0)

    out = sys.stdout
    pending: collections.deque = collections.deque()  # (seq, key or None for atomic, offset)

    def acknowledge() -> None:
        synced = store.synced_seq
        acked: dict = {}
        while pending and pending[0][0] <= synced:
            _, key, offset = pending.popleft()
            acked[key] = offset
        if acked:
            lines = [
                f"ATOMIC {offset}\n" if key is None else f"ACK {key[0]} {key[1]} {key[2]} {offset}\n"
                for key, offset in acked.items()
            ]
            lines.append(f"SYNCED {synced} {store.compactions}\n")
            out.write("".join(lines))
            out.flush()

    def syncer() -> None:
        while True:
            store.sync()
            acknowledge()

    out.write("READY\n")
    out.flush()
    if mode == "thread":
        threading.Thread(target=syncer, daemon=True).start()
    i = 0
    while True:
        i += 1
        if i % 50 == 0:
            generation += 1
            store.commit_many(ATOMIC_GROUP, [(t, p, generation, f"gen{generation}") for t, p in atomic_keys])
            pending.append((store.written_seq, None, generation))
        else:
            key = rng.choice(keys)
            current[key] += rng.randint(1, 3)
            store.commit(*key, current[key], metadata=f"m{current[key]}")
            pending.append((store.written_seq, key, current[key]))
        if mode == "inline" and i % SYNC_EVERY == 0:
            store.sync()
            acknowledge()


if __name__ == "__main__":
    main()
