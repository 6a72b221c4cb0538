"""The per-connection pump for the native JSON protocol: socket bytes → codec events → dispatch → bytes.

One request at a time per connection, answered in order (the protocol has no request ids). A frame that is
not valid JSON or not a known request gets an `Error` answer and the connection stays open; a frame whose
declared length exceeds the limit gets `max frame size exceeded` and the connection is closed, since the stream
cannot be resynchronised. Idle and slow connections are closed (see `reading`).

With `auth.native_token` set, the first request must be `Auth` with that token: any other request first, or a
wrong token, is answered with an `Error` and the connection is closed. Without a token `Auth` always succeeds.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.native import AuthRequest, AuthResponse, ErrorResponse, NativeConnection

from .auth import token_matches
from .connections import Connection
from .reading import RequestReader

log = logging.getLogger("logway.gateway.native")


async def serve_native_connection(stream: trio.abc.Stream, conn: Connection, gateway) -> None:
    limits = gateway.config.limits
    token = gateway.config.auth.native_token
    codec = NativeConnection("server", max_frame=limits.max_frame_bytes)
    dispatcher = gateway.native_dispatch
    reader = RequestReader(stream, codec, conn, limits)
    authenticated = not token

    async def answer_error(exc) -> None:
        log.debug("%s: protocol error: %s", conn.peer, exc.message)
        await stream.send_all(codec.send(ErrorResponse(exc.message)))

    while (event := await reader.next(answer_error)) is not None:
        if isinstance(event, AuthRequest):
            if token and not token_matches(token, event.token):
                log.warning("%s: native authentication failed", conn.peer)
                await stream.send_all(codec.send(ErrorResponse("authentication failed: wrong token")))
                return
            authenticated = True
            await stream.send_all(codec.send(AuthResponse(True)))
            continue
        if not authenticated:
            log.info("%s: closing: %s before Auth", conn.peer, type(event).__name__)
            await stream.send_all(codec.send(ErrorResponse(
                "authentication required: send Auth with the gateway's token first")))
            return
        conn.start_request()
        response = await dispatcher.handle(event)
        await stream.send_all(codec.send(response))
        if not conn.end_request():
            return
