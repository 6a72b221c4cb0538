"""The postgres backend's small stores: `PgStateStore` — the transaction coordinator's and share groups' states
(the `states` table; the file backend's `TransactionStore` and `ShareStateStore`), `PgSecurityStore` — ACLs, SCRAM
credentials and quotas in the same table (the file backend's `SecurityStore`) — and `PgIdAllocator`, producer
ids in blocks (`meta.next_producer_id`; the file backend's `IdAllocator`).

A state store holds every key's state in memory (read when the engine opens) and writes each `put` at once, in
its own transaction on a pooled connection: committed when `put` returns — or, with `sync=False` (a state the
caller can rebuild), committed without waiting for the server's WAL flush (`synchronous_commit` off for it).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import orjson

from ..security import SecurityStates
from ..transactions import KeyedStates

__all__ = ["PgIdAllocator", "PgSecurityStore", "PgStateStore"]

#: Ids taken per database round trip (as the file allocator's blocks; ids of a block not used are skipped).
BLOCK = 1000


class PgStateStore(KeyedStates):
    """`store` names the coordinator's states in the table ("transactions", "share_groups")."""

    def __init__(self, pool, store: str, what: str, rows, fence: Callable | None = None) -> None:
        """`fence(conn)`: called in each transaction that writes, raises when this gateway may not (cluster mode:
        another member coordinates)."""
        self._pool = pool
        self.store = store
        self.what = what
        self._fence = fence
        self._lock = threading.Lock()
        self.version = 0  # moves on every change made here
        self._states: dict[str, dict[str, Any]] = _decoded(rows)

    def reload_rows(self, rows) -> bool:
        """The store's rows as read again (cluster mode: another member wrote them); whether anything changed."""
        states = _decoded(rows)
        with self._lock:
            if states == self._states:
                return False
            self._states = states
            self.version += 1
        return True

    def put(self, tid: str, state: dict[str, Any] | None, *, sync: bool = True) -> None:
        """Record `tid`'s new state (None: forget it), committed when this returns (see the module docstring).
        Raises StorageIOError (the state here is then the old one)."""
        self.put_all([(tid, state)], sync=sync)

    def put_all(self, items: list[tuple[str, dict[str, Any] | None]], *, sync: bool = True) -> None:
        """Record every (key, state) in one transaction (all or none); as `put`."""
        rows = [(tid.encode(), None if state is None else orjson.dumps(state)) for tid, state in items]
        if not rows:
            return
        with self._lock, self._pool.connection(f"writing the {self.what}") as conn:
            with conn.transaction():
                if self._fence is not None:
                    self._fence(conn)
                if not sync:
                    conn.execute("SET LOCAL synchronous_commit TO off")
                for key, record in rows:
                    if record is None:
                        conn.execute("DELETE FROM states WHERE store = %s AND key = %s", (self.store, key))
                    else:
                        conn.execute("INSERT INTO states (store, key, state) VALUES (%s, %s, %s) ON CONFLICT "
                                     "(store, key) DO UPDATE SET state = excluded.state", (self.store, key, record))
            for tid, state in items:
                if state is None:
                    self._states.pop(tid, None)
                else:
                    self._states[tid] = state
            self.version += 1

    def close(self) -> None:
        pass


class PgSecurityStore(SecurityStates, PgStateStore):
    """ACLs, SCRAM credentials and client quotas (`logway.storage.security.SecurityState`) as the `security` store's
    rows of `states`, keyed as the file backend's `SecurityStore`; a batch of changes is one transaction."""

    read_only = False  # (one gateway per database writes it)

    def __init__(self, pool, rows, fence: Callable | None = None) -> None:
        super().__init__(pool, "security", "security store", rows, fence)

    def reload(self) -> bool:
        """Read the store again when other gateways may write it (cluster mode); whether it changed."""
        if self._fence is None:
            return False  # (nobody else writes it)
        with self._pool.connection(f"reading the {self.what}") as conn:
            rows = conn.execute("SELECT key, state FROM states WHERE store = %s", (self.store,)).fetchall()
        return self.reload_rows(rows)


class PgIdAllocator:
    """Durable, never-repeating producer ids: a block of `BLOCK` taken from `meta.next_producer_id` at a time."""

    def __init__(self, pool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._next = self._end = 0

    def reserve_below(self, first: int) -> None:
        """Never hand out an id below `first` (those another store handed out: `logway migrate`)."""
        with self._lock, self._pool.connection("moving the producer ids on") as conn:
            conn.execute("UPDATE meta SET value = greatest(value::bigint, %s)::text WHERE key = 'next_producer_id'",
                         (first,))
            self._next = self._end = 0  # (a block taken before is given up)

    def position(self) -> int:
        """The first id of the next block the database hands out."""
        with self._pool.connection("reading the producer ids") as conn:
            return conn.execute("SELECT value::bigint FROM meta WHERE key = 'next_producer_id'").fetchone()[0]

    def next_id(self) -> int:
        """A new id, never handed out before from this database (one round trip per block). StorageIOError."""
        with self._lock:
            if self._next >= self._end:
                with self._pool.connection("taking producer ids") as conn:
                    end = conn.execute("UPDATE meta SET value = (value::bigint + %s)::text WHERE key = "
                                       "'next_producer_id' RETURNING value::bigint", (BLOCK,)).fetchone()[0]
                self._next, self._end = end - BLOCK, end
            value = self._next
            self._next += 1
            return value


def _decoded(rows) -> dict[str, dict[str, Any]]:
    return {bytes(key).decode(): orjson.loads(state) for key, state in rows}
