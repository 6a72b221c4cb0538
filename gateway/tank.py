"""The per-connection pump for the TANK protocol.

On accept the broker sends a Ping. Requests carry ids and answers may go out of order: a consume whose
partitions are all at EOF is parked in a task of this connection's nursery (several may be parked at once)
while later requests are answered; every answer is written whole under a send lock. Malformed frames, 0x04 and
unknown message types close the connection, as TANK does.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.tank import CLOSED, NEED_DATA, ConsumeRequest, TankServerConnection
from logway.codecs.tank.messages import PingEvent

from .connections import Connection
from .sendfile import send_pieces

log = logging.getLogger("logway.gateway.tank")

#: Bytes asked of the socket per receive.
RECEIVE_CHUNK = 256 * 1024


async def serve_tank_connection(stream: trio.SocketStream, conn: Connection, gateway) -> None:
    codec = TankServerConnection()
    dispatch = gateway.tank_dispatch
    idle = gateway.config.limits.idle_timeout_ms / 1000
    send_lock = trio.Lock()

    async def answer(response) -> None:
        async with send_lock:
            await send_pieces(stream, codec.send_chunks(response))

    async def parked(request: ConsumeRequest) -> None:
        try:
            await answer(await dispatch.poll(request))
        finally:
            conn.end_request()

    await stream.send_all(codec.ping_bytes())
    async with trio.open_nursery() as polls:
        try:
            while True:
                try:
                    request = codec.next_event()
                except RemoteProtocolError as exc:
                    log.info("%s: closing: %s", conn.peer, exc.message)
                    return
                if request is NEED_DATA:
                    if conn.inflight:  # parked long-polls keep the connection alive
                        data = await stream.receive_some(RECEIVE_CHUNK)
                    else:
                        with trio.move_on_after(idle) as timer:
                            data = await stream.receive_some(RECEIVE_CHUNK)
                        if timer.cancelled_caught:
                            return
                    codec.receive_data(data)
                    continue
                if request is CLOSED:
                    return
                if isinstance(request, PingEvent):
                    continue
                conn.start_request()
                if isinstance(request, ConsumeRequest):
                    response = dispatch.consume_now(request)
                    if response is None:
                        polls.start_soon(parked, request)
                        continue
                else:
                    response = await dispatch.handle(request)
                await answer(response)
                if not conn.end_request():
                    return
        finally:
            polls.cancel_scope.cancel()
