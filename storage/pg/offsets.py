"""`PgOffsetStore`: committed consumer offsets in the `offsets` table (logway.storage.pg.schema).

The map and its API are the file store's (`OffsetMap`: the same checks, the same answers); the whole table is read
into it when the engine opens. A change is kept in memory as the (group, topic, partition) keys it touched and
written by the next commit of the engine — the group commit's database transaction, together with the batches of
that round — as upserts and deletes of those keys' rows: `sync()` returns once they are committed. A commit that
fails gives them back for the next one.

PostgreSQL's text cannot hold NUL: a group, topic or metadata with one is refused at commit (ValueError, as for
any malformed name), never at the database, where it would fail every commit after it.
"""

from __future__ import annotations

from typing import Iterable

from ..offsets import OP_COMMIT, OP_DELETE_GROUP, OP_DELETE_OFFSETS, CommittedOffset, OffsetMap

__all__ = ["PgOffsetStore"]

_UPSERT = ("INSERT INTO offsets (group_id, topic, partition, committed_offset, metadata, commit_time_ms) "
           "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (group_id, topic, partition) DO UPDATE SET "
           "committed_offset = excluded.committed_offset, metadata = excluded.metadata, "
           "commit_time_ms = excluded.commit_time_ms")
_DELETE = "DELETE FROM offsets WHERE group_id = %s AND topic = %s AND partition = %s"


class PgOffsetStore(OffsetMap):
    def __init__(self, engine, rows: Iterable[tuple]) -> None:
        """`engine`: the `PgEngine` whose commits write the changes; `rows`: the table (group_id, topic, partition,
        committed_offset, metadata, commit_time_ms)."""
        super().__init__()
        self.where = f"offset store of database {engine.where}"
        self._engine = engine
        #: (group, topic, partition) → its new value, or None (deleted), since the last commit
        self._dirty: dict[tuple[str, str, int], CommittedOffset | None] = {}
        #: (Cluster mode) why the last commit did not write this store's changes: this member is not the
        #: coordinator now (None: it wrote them); `reload` clears it.
        self.lost: Exception | None = None
        self._fill(rows)

    def _fill(self, rows: Iterable[tuple]) -> None:
        for group, topic, partition, offset, metadata, ts in rows:
            entries = self._groups.setdefault(group, {})
            entries[(topic, partition)] = CommittedOffset(offset, metadata, ts)
            self._live += 1

    def reload(self, rows: Iterable[tuple]) -> None:
        """(Cluster mode) the table as another member left it: this member coordinates from now on."""
        with self._lock:
            self._groups.clear()
            self._live = 0
            self._dirty = {}
            self._fill(rows)
            self.lost = None

    # -- the map's hooks ---------------------------------------------------------------------------------
    def _append(self, frame: bytes) -> None:
        self._check_open()

    def _apply(self, op: int, name: str, items: list | None) -> None:
        """Note the keys the change touches, then change the map."""
        dirty = self._dirty
        if op == OP_COMMIT:
            for (topic, partition), value in items:
                dirty[(name, topic, partition)] = value
        elif op == OP_DELETE_GROUP:
            for topic, partition in self._groups.get(name, ()):
                dirty[(name, topic, partition)] = None
        elif op == OP_DELETE_OFFSETS:
            for topic, partition in items:
                dirty[(name, topic, partition)] = None
        else:  # OP_DELETE_TOPIC
            for group, entries in self._groups.items():
                for topic, partition in entries:
                    if topic == name:
                        dirty[(group, topic, partition)] = None
        super()._apply(op, name, items)

    def commit(self, group: str, topic: str, partition: int, offset: int, metadata: str = "",
               commit_time_ms: int | None = None) -> None:
        _no_nul(group, topic, metadata)
        super().commit(group, topic, partition, offset, metadata, commit_time_ms)

    def commit_many(self, group: str, entries, commit_time_ms: int | None = None) -> None:
        entries = list(entries)
        _no_nul(group, *(text for entry in entries if isinstance(entry, tuple) and len(entry) == 4
                         for text in (entry[0], entry[3])))
        super().commit_many(group, entries, commit_time_ms)

    # -- durability --------------------------------------------------------------------------------------
    def sync(self) -> None:
        """Return once every change made so far is committed (StorageIOError when the commit failed)."""
        self._engine.sync_many([self])

    def _take(self):
        """The engine's commit takes what changed (see `storage.pg.engine.Work`)."""
        with self._lock:
            if not self._dirty:
                return None
            dirty, self._dirty = self._dirty, {}
        return _OffsetsWork(self, dirty)

    def close(self) -> None:
        with self._lock:
            self._closed = True


class _OffsetsWork:
    __slots__ = ("store", "dirty")
    rows = ()
    live = True
    lost = False

    def __init__(self, store: PgOffsetStore, dirty: dict) -> None:
        self.store, self.dirty = store, dirty

    def write(self, cur) -> None:
        upserts = [(*key, v.offset, v.metadata, v.commit_time_ms) for key, v in self.dirty.items() if v is not None]
        deletes = [key for key, v in self.dirty.items() if v is None]
        if upserts:
            cur.executemany(_UPSERT, upserts)
        if deletes:
            cur.executemany(_DELETE, deletes)

    def committed(self) -> None:
        pass

    def fenced(self) -> None:
        """Not written: another member coordinates now (cluster mode)."""
        self.store.lost = self.store._engine._lost_coordinator()

    def give_back(self) -> None:
        store = self.store
        with store._lock:
            store._dirty = {**self.dirty, **store._dirty}


def _no_nul(*texts) -> None:
    for text in texts:
        if isinstance(text, str) and "\0" in text:
            raise ValueError("a group, topic or metadata with a NUL character cannot be stored in PostgreSQL")
