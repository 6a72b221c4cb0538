"""The per-connection pump for the Kafka wire protocol.

Requests are served one at a time in arrival order, as Kafka brokers do (clients may pipeline several; the
answers go out in request order). A Produce with acks=0 gets no answer. Fetch responses carry file slices that
are sent with `os.sendfile` between the bytes the codec built. A request that cannot be parsed, is too large or
uses an unsupported API/version closes the connection (Kafka's behaviour); other connections are unaffected.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.kafka.connection import KafkaServerConnection

from .connections import Connection
from .reading import RequestReader
from .sendfile import send_pieces

log = logging.getLogger("logway.gateway.kafka")


async def serve_kafka_connection(stream: trio.SocketStream, conn: Connection, gateway) -> None:
    limits = gateway.config.limits
    codec = KafkaServerConnection(gateway.config.kafka.max_request_bytes)
    dispatch = gateway.kafka_dispatch
    reader = RequestReader(stream, codec, conn, limits)
    while (request := await reader.next()) is not None:
        conn.start_request()
        conn.client_id = request.client_id
        body = await dispatch.handle(request, conn)
        if body is not None:
            await send_pieces(stream, codec.encode_response(request, body))
        if not conn.end_request():
            return
