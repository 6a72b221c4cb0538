"""Who may do what, durably: ACL bindings, SCRAM credentials and client quotas (`SecurityState`), their keys over a
store of keyed JSON states (`SecurityStates`), and the store that keeps them in the data directory (`SecurityStore`;
the postgres backend's is `logway.storage.pg.states.PgSecurityStore`).

`SecurityState` is the interface the gateway uses (its authorizer, its user directory and its quotas keep what it
returns in memory, and read it again when `version` moved): the postgres backend implements the same methods on its
`states` table. Every change is durable when the method returns; a batch (`change_acls`, `change_credentials`)
costs one fdatasync (one commit). The values are plain: names, numbers, bytes — no wire type.

`SecurityStore` keeps them as a map of keys to JSON states, exactly as the transaction coordinator's store
(`transactions.TransactionStore`: CRC-framed records, the last one per key wins, a torn tail cut at open, compaction
into a new file renamed over the log). On disk, in `<data>/security/`:

    security.log   := magic "LOGWAYSC" (8 bytes) | version u32 (= 1) | record*
    record payload := JSON {"id": key, "state": {...}}, or {"id": key, "state": null} (removed)
    key            := "acl " + JSON [resource_type, name, pattern, principal, host, operation, permission]
                    | "scram " + JSON [user, mechanism]   state: {"salt", "stored_key", "server_key": base64,
                                                                  "iterations": int}
                    | "quota " + JSON [[entity type, name or null], ...]   state: {quota key: float}

A credential holds what SCRAM needs to check a login — a salt, the iteration count, StoredKey and ServerKey — never
a password.

Several processes over one data directory (the gateway's `workers: N`): worker 0 writes the store, the others open
it `read_only` — nothing written, a torn tail left to its writer — and `reload()` it when it changed (the file's
identity or size moved), so every worker serves the same ACLs, users and quotas.
"""

from __future__ import annotations

import base64
import os
import struct
import threading
from typing import Iterable, NamedTuple, Protocol

import orjson

from .errors import StorageError
from .framing import Frames
from .transactions import MAX_RECORD_BYTES, MIN_RECORD_BYTES, TransactionStore

__all__ = ["AclRecord", "QuotaEntity", "SecurityState", "SecurityStates", "SecurityStore", "StoredCredential"]


class AclRecord(NamedTuple):
    """One ACL binding, in Kafka's terms, as names: ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ",
    "ALLOW")."""

    resource_type: str
    name: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str


class StoredCredential(NamedTuple):
    """A user's SCRAM credential of one mechanism."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


#: A quota entity: ((entity type, name or None for the default), ...), e.g. (("user", "alice"),).
QuotaEntity = tuple[tuple[str, "str | None"], ...]


class SecurityState(Protocol):
    """What a storage backend keeps for the gateway's security (see the module docstring)."""

    version: int  # moves on every change, whoever made it

    def acls(self) -> list[AclRecord]: ...

    def change_acls(self, added: Iterable[AclRecord], removed: Iterable[AclRecord]) -> None: ...

    def credentials(self) -> dict[tuple[str, str], StoredCredential]: ...

    def change_credentials(self, put: dict[tuple[str, str], StoredCredential],
                           deleted: Iterable[tuple[str, str]]) -> None: ...

    def quotas(self) -> dict[QuotaEntity, dict[str, float]]: ...

    def set_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None: ...


_ACL, _SCRAM, _QUOTA = "acl ", "scram ", "quota "


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class SecurityStates:
    """`SecurityState`'s methods over a store of keyed JSON states — `items()`, `put(key, state)` and
    `put_all([(key, state), ...])` (durable at once) — with the keys of the module docstring."""

    def _states_of(self, prefix: str) -> list[tuple[str, dict]]:
        return [(key[len(prefix):], state) for key, state in self.items() if key.startswith(prefix)]

    # -- ACLs ------------------------------------------------------------------------------------------------
    def acls(self) -> list[AclRecord]:
        return [AclRecord(*orjson.loads(key)) for key, _ in self._states_of(_ACL)]

    def change_acls(self, added: Iterable[AclRecord], removed: Iterable[AclRecord]) -> None:
        items: list[tuple[str, dict | None]] = [(_ACL + orjson.dumps(list(a)).decode(), None) for a in removed]
        items += [(_ACL + orjson.dumps(list(a)).decode(), {}) for a in added]
        self.put_all(items)

    # -- SCRAM credentials -----------------------------------------------------------------------------------
    def credentials(self) -> dict[tuple[str, str], StoredCredential]:
        out = {}
        for key, s in self._states_of(_SCRAM):
            user, mechanism = orjson.loads(key)
            out[(user, mechanism)] = StoredCredential(base64.b64decode(s["salt"]), s["iterations"],
                                                      base64.b64decode(s["stored_key"]),
                                                      base64.b64decode(s["server_key"]))
        return out

    def change_credentials(self, put: dict[tuple[str, str], StoredCredential],
                           deleted: Iterable[tuple[str, str]]) -> None:
        items: list[tuple[str, dict | None]] = [(_SCRAM + orjson.dumps(list(k)).decode(), None) for k in deleted]
        items += [(_SCRAM + orjson.dumps(list(k)).decode(),
                   {"salt": _b64(c.salt), "iterations": c.iterations, "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key)}) for k, c in put.items()]
        self.put_all(items)

    # -- client quotas ---------------------------------------------------------------------------------------
    def quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {tuple((t, n) for t, n in orjson.loads(key)): dict(state) for key, state in self._states_of(_QUOTA)}

    def set_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        """`entity`'s quotas become `values` (empty: it has none)."""
        self.put(_QUOTA + orjson.dumps([list(p) for p in entity]).decode(), dict(values) or None)


class SecurityStore(SecurityStates, TransactionStore):
    """`SecurityState` in `<data>/security/` (see the module docstring); thread-safe."""

    log_name = "security.log"
    file_header = struct.pack(">8sI", b"LOGWAYSC", 1)
    what = "security store"

    def __init__(self, directory, *, read_only: bool = False, **kwargs) -> None:
        self.version = 0
        self.read_only = read_only
        if not read_only:
            super().__init__(directory, **kwargs)
            return
        self.directory = os.fspath(directory)
        self._path = os.path.join(self.directory, self.log_name)
        self._lock = threading.Lock()
        self._states: dict = {}
        self._records = 0
        self._fd = -1
        self._seen: tuple | None = None  # (device, inode, size) of the log as last read
        self.dropped_bytes = 0
        self.reload()

    def reload(self) -> bool:
        """(read-only) Read the log again if its writer changed it (a new record, a compaction); True when it did.
        A record the writer has not finished yet is left for the next reload."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:  # (its writer has not made it yet)
            return False
        seen = (st.st_dev, st.st_ino, st.st_size)
        if seen == self._seen:
            return False
        states: dict = {}
        with open(self._path, "rb") as f:
            if f.read(len(self.file_header)) != self.file_header:
                raise StorageError(f"{self._path} is not a {self.what} log")
            for payload in Frames(f, len(self.file_header), st.st_size, min_payload=MIN_RECORD_BYTES,
                                  max_payload=MAX_RECORD_BYTES):
                try:
                    record = orjson.loads(payload)
                    key, state = record["id"], record["state"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    break
                if state is None:
                    states.pop(key, None)
                else:
                    states[key] = state
        with self._lock:
            self._states = states
            self._seen = seen
            self.version += 1
        return True

    def put(self, tid, state, *, sync: bool = True) -> None:
        if self.read_only:
            raise StorageError(f"{self.what} {self.directory} is read-only here (another process writes it)")
        super().put(tid, state, sync=sync)

    def _apply(self, tid, state) -> None:
        super()._apply(tid, state)
        self.version += 1

    def put_all(self, items: list[tuple[str, dict | None]]) -> None:
        """Write every (key, state) and sync once, after the last."""
        for i, (key, state) in enumerate(items):
            self.put(key, state, sync=i == len(items) - 1)
