"""The per-connection pump for the native JSON protocol: socket bytes → codec events → dispatch → bytes.

One request at a time per connection, answered in order (the protocol has no request ids). A frame that is
not valid JSON or not a known request gets an `Error` answer and the connection stays open; a frame whose
declared length exceeds the limit gets `max frame size exceeded` and the connection is closed, since the stream
cannot be resynchronised. A connection that sends nothing for `limits.idle_timeout_ms` is closed.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.native import CLOSED, NEED_DATA, ErrorResponse, NativeConnection

from .connections import Connection

log = logging.getLogger("logway.gateway.native")

#: Bytes asked of the socket per receive: large enough for big produce frames, small enough to stay fair.
RECEIVE_CHUNK = 256 * 1024


async def serve_native_connection(stream: trio.SocketStream, conn: Connection, gateway) -> None:
    limits = gateway.config.limits
    codec = NativeConnection("server", max_frame=limits.max_frame_bytes)
    dispatcher = gateway.native_dispatch
    idle = limits.idle_timeout_ms / 1000
    while True:
        try:
            event = codec.next_event()
        except RemoteProtocolError as exc:
            log.debug("%s: protocol error: %s", conn.peer, exc.message)
            await stream.send_all(codec.send(ErrorResponse(exc.message)))
            if exc.fatal:
                return
            continue
        if event is NEED_DATA:
            with trio.move_on_after(idle) as timer:
                data = await stream.receive_some(RECEIVE_CHUNK)
            if timer.cancelled_caught:
                log.debug("%s: idle for %.0f s, closing", conn.peer, idle)
                return
            codec.receive_data(data)
            continue
        if event is CLOSED:
            return
        conn.start_request()
        response = await dispatcher.handle(event)
        await stream.send_all(codec.send(response))
        if not conn.end_request():
            return
