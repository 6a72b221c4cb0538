"""The native (RustLog-style length-prefixed JSON) protocol: `NativeProtocol` for the registry, the per-connection
`NativeSession` (the optional access token) and `handler.NativeHandler` (the requests on the log).

One request at a time per connection, answered in order (the protocol has no request ids). A frame that is not
valid JSON or not a known request gets an `Error` answer and the connection stays open; a frame whose declared
length exceeds `limits.max_frame_bytes` gets `max frame size exceeded` and the connection is closed, since the
stream cannot be resynchronised.

The internal requests of `cluster/txn_peers.py` (transactions across `workers: N`) are served on a worker's relay socket
only; on a client's connection they are unknown request types, as in the codec.

With `auth.native_login` (or the legacy `auth.native_token`) set, the first request must be `Auth`: a user and
password (`security.Users`), a SCRAM exchange (two `Auth` requests, `codecs.scram`), or the token (whose holder is a
super user, `security.TOKEN_PRINCIPAL`); any other request first, or a failed login, is answered with an `Error` and
the connection is closed. Until then the codec takes frames of at most `limits.auth_max_frame_bytes` (a larger one
is answered `max frame size exceeded` and closed before its body is read), and the connection must have
authenticated within `limits.auth_timeout_ms` of its accept — unless it presented a client certificate its TLS
listener verified (mutual TLS): that authenticates it as its subject. Where no login is required, `Auth` with a user may
still change who the connection is, and a token `Auth` succeeds without (as before tokens were required).

Every request is authorized (`authz.NativeAuthz`: an `Error` "not authorized: …" and the connection goes on) for
the connection's principal — its login, else its client certificate's, else the listener's — and charged to its
client quotas (`security.quotas`: an answer past one is delayed by its throttle time).
"""

from __future__ import annotations

import hmac
import logging
import math
from time import perf_counter

import trio

from logway.codecs.native import (AuthRequest, AuthResponse, ErrorResponse, FetchResponse, NativeConnection,
                                  ProduceRequest)
from logway.codecs.scram import MECHANISMS as SCRAM_MECHANISMS
from logway.codecs.scram import ScramError

from ...pump import Close, Session
from ...waiting import LongPoll
from ...security import TOKEN_PRINCIPAL, listener_requires_login, user_principal
from ...security.quotas import ConnectionQuota
from ...cluster.txn_peers import INTERNAL_REQUESTS
from ...cluster.txn_peers import serve as serve_internal
from ..base import INFO, Protocol
from .authz import NativeAuthz
from .handler import NativeHandler

log = logging.getLogger("logway.gateway.native")

__all__ = ["NativeProtocol", "NativeSession", "token_matches"]


def token_matches(expected: str, given: str) -> bool:
    """The shared token, compared in constant time."""
    return hmac.compare_digest(expected.encode(), given.encode())


class NativeProtocol(Protocol):
    name = "native"
    data_requests = frozenset({"Produce", "Fetch"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # One member of several (`ctx.cluster`): requests for the others' partitions are relayed to their leader,
        # and those on committed offsets and groups to the coordinator (`cluster/forwarding.py`); topics another
        # member may have just created are looked up before a request naming one is refused.
        cluster = ctx.cluster
        forward = look_up = offsets_owner = None
        if cluster is not None:
            forward = cluster.native_forwarder()
            look_up = cluster.look_up_unknown
            if forward is not None:  # (another member may coordinate: with leases, which one can change)
                offsets_owner = lambda: None if not cluster.several or cluster.is_coordinator else cluster.coordinator()
            max_frame = self.config.limits.max_frame_bytes
            # one-partition connections go to their leader (`cluster/handover.py`)
            self.hand_over = cluster.hand_overs(self.name, NativeConnection("client", max_frame=max_frame).send,
                                                4 + max_frame)  # (the u32 length, then the JSON)
        # The Kafka groups (every type), looked up per request (protocols are all made before any listener starts):
        # membership for the group admin requests, None without a Kafka listener.
        self.handler = NativeHandler(self.steps, self.config, lambda: getattr(ctx.protocols.get("kafka"),
                                                                              "groups", None), forward, look_up,
                                     offsets_owner=offsets_owner, security_admin=ctx.security.admin)
        self.token = self.config.auth.native_token
        self.login_required = listener_requires_login(self.config, self.name)
        self.users = ctx.security.users
        self.authz = NativeAuthz(ctx.security.authorizer, self.steps)

    def codec(self) -> NativeConnection:
        return NativeConnection("server", max_frame=self.config.limits.max_frame_bytes)

    def session(self, conn, codec) -> "NativeSession":
        return NativeSession(conn, codec, self)

    async def handle_as(self, event, who):
        """`event` answered for `who` (a connection, or the admin listener's caller): authorized, handled, its
        answer filtered to what `who` may see."""
        refusal = self.authz.refusal(event, who)
        if refusal is not None:
            return refusal
        answer = await self.handler.handle(event)
        if type(answer) is LongPoll:  # (a fetch: nothing to filter)
            return answer
        return self.authz.filtered(answer, who)

    def security_notes(self):
        if self.config.auth.native_login:
            return [(INFO, "native listener requires a login (a user's password or SCRAM"
                           + (", or its access token)" if self.token else ")"))]
        return [(INFO, "native listener requires its access token")] if self.token else []


class NativeSession(Session):
    def __init__(self, conn, codec, protocol: NativeProtocol) -> None:
        super().__init__(conn, codec)
        self.protocol = protocol
        self.token = protocol.token
        # A verified client certificate (mutual TLS) authenticates the connection as its subject; another worker's
        # relay connection (`workers: N`: of this user only) carries requests its worker authorized.
        self.authenticated = not protocol.login_required or bool(conn.principal) or conn.internal
        self.logged_in = False  # as a user or with the token (not merely the listener's principal)
        self._scram = None  # a SCRAM login under way
        self.quota = ConnectionQuota(protocol.ctx.security.quotas, conn)
        conn.principal = conn.principal or protocol.config.listeners[protocol.name].principal
        self._max_frame = codec.max_frame
        if not self.authenticated:  # nothing but a small Auth until it has
            limits = protocol.config.limits
            codec.max_frame = min(codec.max_frame, limits.auth_max_frame_bytes)
            conn.auth_deadline = trio.current_time() + limits.auth_timeout_ms / 1000

    def _authenticated(self, principal: str | None) -> AuthResponse:
        if principal is not None:
            self.conn.principal = principal
            self.logged_in = True
        if not self.authenticated:
            self.authenticated = True
            self.codec.max_frame = self._max_frame
            self.conn.auth_deadline = math.inf
        return AuthResponse(True, principal=self.conn.principal)

    def protocol_error(self, exc):
        return ErrorResponse(exc.message)  # answered; the pump closes after a fatal one

    def handover_state(self) -> dict:
        return {"authenticated": self.authenticated, "principal": self.conn.principal}

    def resume(self, state: dict) -> None:
        if state.get("authenticated") is True:
            self._authenticated(None)
        if isinstance(state.get("principal"), str) and state["principal"]:
            self.conn.principal = state["principal"]

    def _failed(self, why: str) -> Close:
        log.warning("%s: native authentication failed (%s)", self.conn.peer, why)
        return Close(ErrorResponse(f"authentication failed: {why}"))

    async def login(self, event: AuthRequest):
        """An `Auth` request's answer (see the module docstring)."""
        if self.logged_in and self._scram is None:
            return ErrorResponse(f"already logged in as {self.conn.principal}")
        if event.token is not None:
            if not self.token:
                return self._failed("no access token is configured") if self.protocol.login_required \
                    else self._authenticated(None)
            if not token_matches(self.token, event.token):
                return self._failed("wrong token")
            return self._authenticated(TOKEN_PRINCIPAL)
        if event.user is not None:
            if not await self.protocol.users.check_password(event.user, event.password):
                return self._failed("invalid user name or password")
            return self._authenticated(user_principal(event.user))
        return self._scram_step(event)

    def _scram_step(self, event: AuthRequest):
        scram = self._scram
        try:
            if scram is None:
                if event.mechanism not in SCRAM_MECHANISMS:
                    return self._failed(f"unknown mechanism {event.mechanism!r} (SCRAM-SHA-256, SCRAM-SHA-512)")
                scram = self._scram = self.protocol.users.scram(event.mechanism)
                return AuthResponse(False, scram.first(event.message.encode()).decode())
            if event.mechanism != scram.mechanism:
                raise ScramError("SCRAM: the mechanism changed within the exchange")
            answer = scram.final(event.message.encode()).decode()
        except ScramError as exc:
            self._scram = None
            return self._failed(exc.message)
        self._scram = None
        response = self._authenticated(user_principal(scram.user))
        return AuthResponse(True, answer, response.principal)

    async def handle(self, event):
        if isinstance(event, AuthRequest):
            return await self.login(event)
        if not self.authenticated or self._scram is not None:
            log.info("%s: closing: %s before Auth", self.conn.peer, type(event).__name__)
            return Close(ErrorResponse("authentication required: log in with Auth first"))
        if type(event) in INTERNAL_REQUESTS:  # the other workers' (`cluster/txn_peers.py`), on a relay socket only
            if not self.conn.internal:
                return ErrorResponse(f"unknown request type: {INTERNAL_REQUESTS[type(event)]}")
            return await serve_internal(self.protocol.ctx.transactions, event)
        quota = self.quota
        if not quota.quotas.active:  # (no quota set: nothing to measure)
            return await self.protocol.handle_as(event, self.conn)
        await quota.wait()
        started = perf_counter()
        reply = await self.protocol.handle_as(event, self.conn)
        produced = sum(len(r.value or b"") + len(r.key or b"") for r in event.records) \
            if type(event) is ProduceRequest else 0
        return await quota.answered(reply, perf_counter() - started, produced, _fetched)


def _fetched(answer) -> int:
    """The bytes of records a native answer carries (a Fetch's values)."""
    return answer.records.value_bytes if type(answer) is FetchResponse else 0
