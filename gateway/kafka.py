"""The per-connection pump for the Kafka wire protocol.

Requests are served one at a time in arrival order, as Kafka brokers do (clients may pipeline several; the
answers go out in request order). A Produce with acks=0 gets no answer. Fetch responses carry file slices that
are sent with `os.sendfile` between the bytes the codec built. A request that cannot be parsed, is too large or
uses an unsupported API/version closes the connection (Kafka's behaviour); other connections are unaffected.

With `auth.kafka_sasl_plain` the connection must authenticate first (see `auth.KafkaSasl`): SaslHandshake and
SaslAuthenticate are answered here, not by the dispatcher, since they concern this connection only.
"""

from __future__ import annotations

import logging

import trio

from logway.codecs.kafka.api.sasl import SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY
from logway.codecs.kafka.connection import KafkaServerConnection, SaslToken

from .auth import KafkaSasl
from .connections import Connection
from .reading import RequestReader
from .sendfile import send_pieces

log = logging.getLogger("logway.gateway.kafka")


async def serve_kafka_connection(stream: trio.abc.Stream, conn: Connection, gateway) -> None:
    limits = gateway.config.limits
    codec = KafkaServerConnection(gateway.config.kafka.max_request_bytes)
    dispatch = gateway.kafka_dispatch
    sasl = KafkaSasl(gateway.config.auth, conn.peer)
    reader = RequestReader(stream, codec, conn, limits)
    while (request := await reader.next()) is not None:
        if isinstance(request, SaslToken):  # the raw token after a v0 handshake: success = an empty token back
            if not sasl.authenticate(request.data):
                return  # Kafka closes the connection on a failed v0 login
            await stream.send_all(codec.encode_sasl_token(b""))
            continue
        if not sasl.allows(request.api_key):
            log.info("%s: closing: api key %d before SASL authentication", conn.peer, request.api_key)
            return
        conn.start_request()
        conn.client_id = request.client_id
        close = False
        if request.api_key == SASL_HANDSHAKE_KEY:
            body, close = sasl.handshake(request.body)
            if not close and request.api_version == 0:
                codec.expect_sasl_token()
        elif request.api_key == SASL_AUTHENTICATE_KEY:
            body, close = sasl.authenticate_request(request.body)
        else:
            body = await dispatch.handle(request, conn)
        if body is not None:
            await send_pieces(stream, codec.encode_response(request, body))
        if not conn.end_request() or close:
            return
