"""SASL authentication APIs: SaslHandshake (17, v0-1, never flexible) and SaslAuthenticate (36, v0-2, flexible
from 2).

A SASL client first sends SaslHandshake naming a mechanism; the answer lists the mechanisms the broker enables.
After a v1 handshake the mechanism's tokens travel in SaslAuthenticate requests (KIP-152); after a v0 handshake
they travel as raw frames (`int32 size` + token, no request header; see `connection.SaslToken`), the way
clients before Kafka 1.0 did it. SaslAuthenticate v1 adds session_lifetime_ms to the response (KIP-368:
0 = the session never expires).

Bounds: the auth bytes are a `Bytes` field, bounded by the request frame (itself bounded by max_request_bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since
from ..primitives import Array, Bytes, Int16, Int64, NullableString, String

__all__ = [
    "SASL_HANDSHAKE_KEY",
    "SASL_AUTHENTICATE_KEY",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SCHEMAS",
]

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


@dataclass(slots=True)
class SaslHandshakeRequest:
    mechanism: str = ""


@dataclass(slots=True)
class SaslHandshakeResponse:
    error_code: int = 0
    mechanisms: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SaslAuthenticateRequest:
    auth_bytes: bytes = b""


@dataclass(slots=True)
class SaslAuthenticateResponse:
    error_code: int = 0
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0  # v1+


# v1 of the handshake only changes what follows it (SaslAuthenticate instead of raw tokens).
_HANDSHAKE_REQUEST_SCHEMAS = message(SaslHandshakeRequest, 1, flexible_since=None, mechanism=String)
_HANDSHAKE_RESPONSE_SCHEMAS = message(SaslHandshakeResponse, 1, flexible_since=None, error_code=Int16,
                                      mechanisms=Array(String))
_AUTHENTICATE_REQUEST_SCHEMAS = message(SaslAuthenticateRequest, 2, flexible_since=2, auth_bytes=Bytes)
_AUTHENTICATE_RESPONSE_SCHEMAS = message(SaslAuthenticateResponse, 2, flexible_since=2, error_code=Int16,
                                         error_message=NullableString, auth_bytes=Bytes,
                                         session_lifetime_ms=since(1, Int64))

#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    SASL_HANDSHAKE_KEY: (_HANDSHAKE_REQUEST_SCHEMAS, _HANDSHAKE_RESPONSE_SCHEMAS),
    SASL_AUTHENTICATE_KEY: (_AUTHENTICATE_REQUEST_SCHEMAS, _AUTHENTICATE_RESPONSE_SCHEMAS),
}
