"""Kafka SASL/PLAIN (KIP-43 / KIP-152): one connection's authentication state.

SaslHandshake names the mechanism (PLAIN only); after a v1 handshake the token arrives in SaslAuthenticate, after a
v0 handshake as a raw frame. Until it is authenticated, a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate; anything else, a failed login or an out-of-order SASL request closes it (as Kafka does: the client
sees an error and reconnects). Passwords are compared in constant time, and an unknown user costs the same
comparison as a wrong password.
"""

from __future__ import annotations

import hmac
import logging

from logway.codecs.kafka.api import api_versions
from logway.codecs.kafka.api import sasl as S
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...config import AuthSettings

log = logging.getLogger("logway.gateway.kafka")

MECHANISMS = ["PLAIN"]
#: Requests a Kafka connection may send before it is authenticated.
PRE_AUTH_API_KEYS = frozenset({api_versions.API_KEY, S.SASL_HANDSHAKE_KEY, S.SASL_AUTHENTICATE_KEY})
#: A PLAIN token is `authzid NUL authcid NUL password`; longer ones are refused unread (names and passwords
#: are short; the request frame limit would otherwise allow 100 MiB).
MAX_PLAIN_TOKEN_BYTES = 4096
FAILED = "Authentication failed: Invalid username or password"


def check_plain(users: dict[str, str], token: bytes) -> str | None:
    """The user a SASL/PLAIN token authenticates, or None (malformed, unknown user, wrong password)."""
    if len(token) > MAX_PLAIN_TOKEN_BYTES:
        return None
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    if authzid and authzid != user:  # acting as another user is not something PLAIN users may do here
        return None
    known = users.get(user)
    ok = hmac.compare_digest((known if known is not None else "\0" + password).encode(), password.encode())
    return user if ok and known is not None else None


class KafkaSasl:
    """One Kafka connection's authentication state; `required` is False when the listener needs no SASL."""

    def __init__(self, auth: AuthSettings, peer: str) -> None:
        self.required = auth.kafka_sasl_plain
        self.users = auth.users
        self.peer = peer
        self.authenticated = not self.required
        self.user: str | None = None
        self._mechanism: str | None = None  # set by a successful handshake, until the token is checked

    def allows(self, api_key: int) -> bool:
        return self.authenticated or api_key in PRE_AUTH_API_KEYS

    def handshake(self, body: S.SaslHandshakeRequest) -> tuple[S.SaslHandshakeResponse, bool]:
        """(answer, close after sending it)."""
        if not self.required or self.authenticated or self._mechanism is not None:
            return S.SaslHandshakeResponse(E.ILLEGAL_SASL_STATE, MECHANISMS if self.required else []), True
        if body.mechanism not in MECHANISMS:
            log.info("%s: SASL mechanism %r is not enabled", self.peer, body.mechanism)
            return S.SaslHandshakeResponse(E.UNSUPPORTED_SASL_MECHANISM, MECHANISMS), True
        self._mechanism = body.mechanism
        return S.SaslHandshakeResponse(E.NONE, MECHANISMS), False

    def authenticate(self, token: bytes) -> bool:
        """Check the token of the handshaken mechanism; True when the connection is now authenticated."""
        if self._mechanism is None or self.authenticated:
            return False
        self._mechanism = None
        self.user = check_plain(self.users, token)
        if self.user is None:
            log.warning("%s: SASL/PLAIN authentication failed", self.peer)
            return False
        self.authenticated = True
        log.info("%s: authenticated as %s", self.peer, self.user)
        return True

    def authenticate_request(self, body: S.SaslAuthenticateRequest) -> tuple[S.SaslAuthenticateResponse, bool]:
        """(answer, close after sending it) for a SaslAuthenticate request."""
        if self._mechanism is None:
            return S.SaslAuthenticateResponse(E.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake"), True
        if not self.authenticate(body.auth_bytes):
            return S.SaslAuthenticateResponse(E.SASL_AUTHENTICATION_FAILED, FAILED), True
        return S.SaslAuthenticateResponse(E.NONE, None, b"", 0), False
