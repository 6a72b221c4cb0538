"""Kafka SASL (KIP-43 / KIP-152): PLAIN and SCRAM-SHA-256/512 (KIP-84), one connection's authentication state.

SaslHandshake names the mechanism (those `auth.kafka_sasl_plain` / `auth.kafka_sasl_scram` enable); after a v1
handshake the tokens arrive in SaslAuthenticate requests, after a v0 handshake as raw frames. PLAIN is one token
(`authzid NUL user NUL password`, checked by `security.Users`); SCRAM is two round trips (client-first →
server-first, client-final → server-final, `codecs.scram`), so the password never crosses the connection. Until
it is authenticated, a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate; anything else, a
failed login or an out-of-order SASL request closes it (as Kafka does: the client sees an error and reconnects).
"""

from __future__ import annotations

import logging

from logway.codecs.kafka.api import api_versions
from logway.codecs.kafka.api import sasl as S
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.scram import MECHANISMS as SCRAM_MECHANISMS
from logway.codecs.scram import ScramError

from ...security import Users

log = logging.getLogger("logway.gateway.kafka")

#: Requests a Kafka connection may send before it is authenticated.
PRE_AUTH_API_KEYS = frozenset({api_versions.API_KEY, S.SASL_HANDSHAKE_KEY, S.SASL_AUTHENTICATE_KEY})
#: A PLAIN token is `authzid NUL authcid NUL password`; longer ones are refused unread (names and passwords
#: are short; the request frame limit would otherwise allow 100 MiB).
MAX_PLAIN_TOKEN_BYTES = 4096
FAILED = "Authentication failed: Invalid username or password"


def mechanisms(auth) -> list[str]:
    """The mechanisms the configuration enables, in the order the handshake lists them."""
    return (["PLAIN"] if auth.kafka_sasl_plain else []) + (list(SCRAM_MECHANISMS) if auth.kafka_sasl_scram else [])


def parse_plain(token: bytes) -> tuple[str, str] | None:
    """(user, password) of a SASL/PLAIN token, or None (malformed, too long, or acting as another user)."""
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
    return user, password


class KafkaSasl:
    """One Kafka connection's authentication state; `required` is False when the listener needs no SASL."""

    def __init__(self, auth, users: Users, peer: str) -> None:
        self.mechanisms = mechanisms(auth)
        self.required = bool(self.mechanisms)
        self.users = users
        self.peer = peer
        self.authenticated = not self.required
        self.user: str | None = None
        self._mechanism: str | None = None  # set by a successful handshake, until the login ends
        self._scram = None  # the SCRAM exchange under way

    def allows(self, api_key: int) -> bool:
        return self.authenticated or api_key in PRE_AUTH_API_KEYS

    def handshake(self, body: S.SaslHandshakeRequest) -> tuple[S.SaslHandshakeResponse, bool]:
        """(answer, close after sending it)."""
        if not self.required or self.authenticated or self._mechanism is not None:
            return S.SaslHandshakeResponse(E.ILLEGAL_SASL_STATE, self.mechanisms), True
        if body.mechanism not in self.mechanisms:
            log.info("%s: SASL mechanism %r is not enabled", self.peer, body.mechanism)
            return S.SaslHandshakeResponse(E.UNSUPPORTED_SASL_MECHANISM, self.mechanisms), True
        self._mechanism = body.mechanism
        self._scram = self.users.scram(body.mechanism) if body.mechanism in SCRAM_MECHANISMS else None
        return S.SaslHandshakeResponse(E.NONE, self.mechanisms), False

    async def authenticate(self, token: bytes) -> bytes | None:
        """Take one token of the handshaken mechanism: the token to answer (the connection is authenticated once
        `authenticated` is True), or None when the login failed."""
        if self._mechanism is None or self.authenticated:
            return None
        if self._scram is not None:
            return self._scram_step(token)
        self._mechanism = None
        parsed = parse_plain(token)
        if parsed is None or not await self.users.check_password(*parsed):
            log.warning("%s: SASL/PLAIN authentication failed", self.peer)
            return None
        return self._done(parsed[0])

    def _scram_step(self, token: bytes) -> bytes | None:
        scram = self._scram
        try:
            if not scram.started:
                return scram.first(token)
            answer = scram.final(token)
        except ScramError as exc:
            log.warning("%s: SASL/%s authentication failed: %s", self.peer, self._mechanism, exc.message)
            self._mechanism = self._scram = None
            return None
        self._mechanism = self._scram = None
        return self._done(scram.user, answer)

    def _done(self, user: str, answer: bytes = b"") -> bytes:
        self.user = user
        self.authenticated = True
        log.info("%s: authenticated as %s", self.peer, user)
        return answer

    async def authenticate_request(self, body: S.SaslAuthenticateRequest) -> tuple[S.SaslAuthenticateResponse, bool]:
        """(answer, close after sending it) for a SaslAuthenticate request."""
        if self._mechanism is None:
            return S.SaslAuthenticateResponse(E.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake"), True
        mechanism = self._mechanism
        answer = await self.authenticate(body.auth_bytes)
        if answer is None:
            message = FAILED if mechanism == "PLAIN" else (  # (Kafka's words)
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{mechanism}")
            return S.SaslAuthenticateResponse(E.SASL_AUTHENTICATION_FAILED, message), True
        return S.SaslAuthenticateResponse(E.NONE, None, answer, 0), False
