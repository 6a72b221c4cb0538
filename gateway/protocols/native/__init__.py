"""The native (RustLog-style length-prefixed JSON) protocol: `NativeProtocol` for the registry, the per-connection
`NativeSession` (the optional access token) and `handler.NativeHandler` (the requests on the log).

One request at a time per connection, answered in order (the protocol has no request ids). A frame that is not
valid JSON or not a known request gets an `Error` answer and the connection stays open; a frame whose declared
length exceeds `limits.max_frame_bytes` gets `max frame size exceeded` and the connection is closed, since the
stream cannot be resynchronised.

The internal requests of `txn_peers.py` (transactions across `workers: N`) are served on a worker's relay socket
only; on a client's connection they are unknown request types, as in the codec.

With `auth.native_token` set, the first request must be `Auth` with that token: any other request first, or a
wrong token, is answered with an `Error` and the connection is closed. Until then the codec takes frames of at
most `limits.auth_max_frame_bytes` (a larger one is answered `max frame size exceeded` and closed before its body
is read), and the connection must have authenticated within `limits.auth_timeout_ms` of its accept. Without a
token `Auth` always succeeds.
"""

from __future__ import annotations

import hmac
import logging
import math

import trio

from logway.codecs.native import AuthRequest, AuthResponse, ErrorResponse, NativeConnection

from ...forwarding import NativeForwarder
from ...handover import HandOvers
from ...pump import Close, Session
from ...txn_peers import INTERNAL_REQUESTS
from ...txn_peers import serve as serve_internal
from ..base import INFO, Protocol
from .handler import NativeHandler

log = logging.getLogger("logway.gateway.native")

__all__ = ["NativeProtocol", "NativeSession", "token_matches"]


def token_matches(expected: str, given: str) -> bool:
    """The shared token, compared in constant time."""
    return hmac.compare_digest(expected.encode(), given.encode())


class NativeProtocol(Protocol):
    name = "native"
    data_requests = frozenset({"Produce", "Fetch"})

    def __init__(self, gateway) -> None:
        super().__init__(gateway)
        # With workers: N, every worker relays requests for the others' partitions to their owner, and those on
        # committed offsets and groups to worker 0 (`forwarding.py`), and looks up topics another one may have just
        # created before refusing a request naming one.
        worker = gateway.worker
        several = worker is not None and worker.count > 1
        forward = (NativeForwarder(lambda: worker.natives, self.config.limits.max_frame_bytes,
                                   self.config.auth.native_token) if several else None)
        look_up = None if worker is None else (lambda names: worker.look_up_unknown(gateway.engine, names))
        # The Kafka groups (every type), looked up per request (protocols are all made before any listener starts):
        # membership for the group admin requests, None without a Kafka listener.
        self.handler = NativeHandler(self.steps, self.config, lambda: getattr(gateway.protocols.get("kafka"),
                                                                              "groups", None), forward, look_up,
                                     offsets_owner=0 if several and worker.index else None)
        self.token = self.config.auth.native_token
        if several and self.config.worker_handover:  # one-partition connections go to their owner (`handover.py`)
            max_frame = self.config.limits.max_frame_bytes
            self.hand_over = HandOvers(self.name, lambda: worker.handovers,
                                       NativeConnection("client", max_frame=max_frame).send,
                                       4 + max_frame)  # (the u32 length, then the JSON)

    def codec(self) -> NativeConnection:
        return NativeConnection("server", max_frame=self.config.limits.max_frame_bytes)

    def session(self, conn, codec) -> "NativeSession":
        return NativeSession(conn, codec, self)

    def security_notes(self):
        return [(INFO, "native listener requires its access token")] if self.token else []


class NativeSession(Session):
    def __init__(self, conn, codec, protocol: NativeProtocol) -> None:
        super().__init__(conn, codec)
        self.handler = protocol.handler
        self.protocol = protocol
        self.token = protocol.token
        self.authenticated = not self.token
        self._max_frame = codec.max_frame
        if self.token:  # nothing but a small Auth until it has
            limits = protocol.config.limits
            codec.max_frame = min(codec.max_frame, limits.auth_max_frame_bytes)
            conn.auth_deadline = trio.current_time() + limits.auth_timeout_ms / 1000

    def _authenticated(self) -> None:
        self.authenticated = True
        if self.token:
            self.codec.max_frame = self._max_frame
            self.conn.auth_deadline = math.inf

    def protocol_error(self, exc):
        return ErrorResponse(exc.message)  # answered; the pump closes after a fatal one

    def handover_state(self) -> dict:
        return {"authenticated": self.authenticated}

    def resume(self, state: dict) -> None:
        if state.get("authenticated") is True:
            self._authenticated()

    async def handle(self, event):
        if isinstance(event, AuthRequest):
            if self.token and not token_matches(self.token, event.token):
                log.warning("%s: native authentication failed", self.conn.peer)
                return Close(ErrorResponse("authentication failed: wrong token"))
            self._authenticated()
            return AuthResponse(True)
        if not self.authenticated:
            log.info("%s: closing: %s before Auth", self.conn.peer, type(event).__name__)
            return Close(ErrorResponse("authentication required: send Auth with the gateway's token first"))
        if type(event) in INTERNAL_REQUESTS:  # the other workers' (`txn_peers.py`), on a relay socket only
            if not self.conn.internal:
                return ErrorResponse(f"unknown request type: {INTERNAL_REQUESTS[type(event)]}")
            return await serve_internal(self.protocol.gateway.transactions, event)
        return await self.handler.handle(event)
