"""`Users`: who can log in, and how a login is checked — for Kafka SASL (PLAIN, SCRAM-SHA-256/512), the native
protocol's Auth and HTTP Basic on the admin listener alike.

Two sources: the configuration's `auth.users` (name: password, for bootstrapping and small setups: each gets a
SCRAM credential of each mechanism made at start, in memory only, never written) and the credentials made with
AlterUserScramCredentials or `logway users` (salted, iterated, in the storage backend: `SecurityState`; read again
whenever its version moved). A stored credential wins over a configured password for SCRAM.

A password login (PLAIN, native user + password, HTTP Basic) is checked against the configured password (constant
time), else against the user's stored SCRAM credential — one PBKDF2, run in a worker thread at most
`PASSWORD_CHECKS` at a time so that logins cannot take the event loop or every core; an unknown user costs the same
PBKDF2 as a wrong password (no telling which names exist from the time an answer takes).
"""

from __future__ import annotations

import hmac
import secrets

import trio

from logway.codecs.scram import (MECHANISMS, ScramCredential, ScramServer, check_password,
                                 make_credential, new_nonce)
from logway.storage.security import StoredCredential

__all__ = ["Users", "PASSWORD_CHECKS"]

#: Password checks against SCRAM credentials (PBKDF2) running at once; more wait their turn.
PASSWORD_CHECKS = 2


class Users:
    def __init__(self, configured: dict[str, str], state) -> None:
        """`configured`: `auth.users`; `state`: the storage backend's `SecurityState` (None: configured users only)."""
        self.configured = dict(configured)
        self.state = state
        self._secret = secrets.token_bytes(32)  # salts the fake credentials of unknown users (`ScramServer`)
        self._derived = {(user, mechanism): make_credential(mechanism, password)
                         for user, password in self.configured.items() for mechanism in MECHANISMS}
        self._fake = make_credential("SCRAM-SHA-256", secrets.token_hex(16))
        self._stored: dict[tuple[str, str], ScramCredential] = {}
        self._version = -1
        self._checks = trio.CapacityLimiter(PASSWORD_CHECKS)
        self.refresh()

    def refresh(self) -> None:
        """Read the stored credentials again if they changed."""
        state = self.state
        if state is None or state.version == self._version:
            return
        version = state.version
        self._stored = {(user, mechanism): ScramCredential(mechanism, c.salt, c.iterations, c.stored_key,
                                                           c.server_key)
                        for (user, mechanism), c in state.credentials().items()}
        self._version = version

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        self.refresh()
        return self._stored.get((user, mechanism)) or self._derived.get((user, mechanism))

    def stored(self) -> dict[tuple[str, str], ScramCredential]:
        """The stored credentials by (user, mechanism) (DescribeUserScramCredentials, `logway users list`)."""
        self.refresh()
        return dict(self._stored)

    def scram(self, mechanism: str) -> ScramServer:
        """A new exchange of `mechanism` (ValueError for an unknown one)."""
        return ScramServer(mechanism, lambda user: self.credential(user, mechanism), new_nonce(), self._secret)

    async def check_password(self, user: str, password: str) -> bool:
        """Whether `password` is `user`'s (see the module docstring)."""
        known = self.configured.get(user)
        if known is not None:
            return hmac.compare_digest(known.encode(), password.encode())
        self.refresh()
        credential = next((self._stored[(user, m)] for m in MECHANISMS if (user, m) in self._stored), None)
        ok = await trio.to_thread.run_sync(check_password, credential or self._fake, password,
                                           limiter=self._checks)
        return ok and credential is not None

    def change(self, put: dict[tuple[str, str], ScramCredential], deleted: list[tuple[str, str]]) -> None:
        """Write credentials and deletions durably (blocking: callers run it in a worker thread)."""
        self.state.change_credentials({key: StoredCredential(c.salt, c.iterations, c.stored_key, c.server_key)
                                       for key, c in put.items()}, deleted)
        self.refresh()

