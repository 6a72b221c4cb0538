"""The per-connection pump for the TANK protocol.

On accept the broker sends a Ping. Requests carry ids and answers may go out of order: a consume whose
partitions are all at EOF is parked in a task of this connection's nursery (several may be parked at once)
while later requests are answered; every answer is written whole under a send lock. Malformed frames, 0x04 and
unknown message types close the connection, as TANK does.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.tank import ConsumeRequest, TankServerConnection
from logway.codecs.tank.messages import PingEvent

from .connections import Connection
from .reading import RequestReader
from .sendfile import send_pieces

log = logging.getLogger("logway.gateway.tank")

#: Long-polls one connection may have parked at once; further consumes are answered at once (as a timeout)
#: so a client that never reads its answers cannot make the gateway hold unbounded state for it.
MAX_PARKED_PER_CONNECTION = 256


async def serve_tank_connection(stream: trio.abc.Stream, conn: Connection, gateway) -> None:
    codec = TankServerConnection()
    dispatch = gateway.tank_dispatch
    reader = RequestReader(stream, codec, conn, gateway.config.limits)
    send_lock = trio.Lock()

    async def answer(response) -> None:
        async with send_lock:
            await send_pieces(stream, codec.send_chunks(response))

    async def parked(request: ConsumeRequest, watched: list) -> None:
        try:
            await answer(await dispatch.poll(request, watched))
        finally:
            conn.end_request()

    await stream.send_all(codec.ping_bytes())
    async with trio.open_nursery() as polls:
        try:
            while (request := await reader.next()) is not None:
                if isinstance(request, PingEvent):
                    continue
                conn.start_request()
                if isinstance(request, ConsumeRequest):
                    response = dispatch.consume_now(request)
                    if response is None:
                        if conn.inflight <= MAX_PARKED_PER_CONNECTION:
                            polls.start_soon(parked, request, dispatch.park(request))
                            continue
                        response = dispatch.timeout_response(request)
                else:
                    response = await dispatch.handle(request)
                await answer(response)
                if not conn.end_request():
                    return
        finally:
            polls.cancel_scope.cancel()
