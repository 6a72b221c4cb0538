"""The Kafka wire protocol: `KafkaProtocol` for the registry, the per-connection `KafkaSession` (SASL), and the
broker (`broker.KafkaBroker` and the API modules), the group coordinators — classic (`coordinator`, `group_state`),
KIP-848 consumer groups (`consumer_coordinator`, `assignors`), KIP-932 share groups (`share_coordinator`,
`share_partitions`), every type's ids in one namespace (`group_types`) —
and the idempotent producers' state (`producers`).

Requests are served one at a time in arrival order, as Kafka brokers do (clients may pipeline several; the answers
go out in request order): a Fetch that waits for data is a `LongPoll` the pump waits for before the next request, and
the append that brings the data writes its answer. A Produce with acks=0 gets no answer. Fetch responses carry file
ranges that the pump sends between the bytes the codec built. A request that cannot be parsed, is too large or uses an
unsupported API/version closes the connection (Kafka's behaviour); other connections are unaffected.

With `auth.kafka_sasl_plain` or `auth.kafka_sasl_scram` a connection must authenticate first (`sasl.KafkaSasl`:
PLAIN, SCRAM-SHA-256/512): SaslHandshake and SaslAuthenticate are answered by the session, not the broker, since
they concern this connection only; the user it logged in as is the connection's principal (else its client
certificate's, or the listener's), which the broker's authorization layer (`authz.py`) checks every request
against. Until it has, the codec reads only requests of those keys (and ApiVersions) of at most
`limits.auth_max_frame_bytes` — any other key or a larger frame closes the connection before its body is read —
and the connection must have authenticated within `limits.auth_timeout_ms` of its accept.

Client quotas (`quotas.KafkaQuotas`): each answer is charged to the connection's user and client id; one past a
quota carries `throttle_time_ms`, and the connection's next request waits that long.

One member of a cluster (`workers: N` > 1: `Context.cluster`), the broker is node i of N brokers
(`routing.KafkaRouting`).
"""

from __future__ import annotations

import logging
import math
from time import perf_counter

import trio

from logway.codecs.kafka.api.sasl import SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY
from logway.codecs.kafka.connection import KafkaResponse, KafkaServerConnection, SaslToken

from ...pump import Close, Session
from ...waiting import LongPoll
from ...security import user_principal
from ..base import INFO, WARNING, Protocol
from .broker import SERVED_BY_WORKERS, KafkaBroker
from .coordinator import GroupCoordinator
from .quotas import KafkaQuotas
from .routing import KafkaRouting
from .sasl import PRE_AUTH_API_KEYS, KafkaSasl, mechanisms

log = logging.getLogger("logway.gateway.kafka")

__all__ = ["KafkaProtocol", "KafkaSession"]


class KafkaProtocol(Protocol):
    name = "kafka"
    data_requests = frozenset({"Produce", "Fetch"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        kc = self.config.kafka
        self.coordinator = GroupCoordinator(initial_rebalance_delay_ms=kc.group_initial_rebalance_delay_ms,
                                            min_session_timeout_ms=kc.group_min_session_timeout_ms,
                                            max_session_timeout_ms=kc.group_max_session_timeout_ms)
        listener = self.config.listeners[self.name]
        self.broker = KafkaBroker(self.steps, self.config, self.coordinator, (listener.host, listener.port),
                                  ctx.transactions, ctx.security)
        cluster = ctx.cluster
        if cluster is not None:  # one member of several: node `cluster.me` of a cluster of brokers
            self.broker.cluster = KafkaRouting(cluster)
            self.broker.node_id = cluster.me
            self.broker.served = SERVED_BY_WORKERS
            cluster.on_topic_gone.append(self.broker.producers.forget)
        #: Every group of every type, as the operator's tools read them (`group_types.GroupDirectory.views`).
        self.groups = self.broker.groups

    def codec(self) -> KafkaServerConnection:
        return KafkaServerConnection(self.config.kafka.max_request_bytes, api_versions=self.broker.served)

    def session(self, conn, codec) -> "KafkaSession":
        return KafkaSession(conn, codec, self)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.broker.producers.run)
            nursery.start_soon(self.broker.consumer_groups.run)
            nursery.start_soon(self.broker.share_groups.run)
            await self.coordinator.run()  # (until the coordinator is closed)
            nursery.cancel_scope.cancel()

    def listening(self, address: tuple[str, int]) -> None:
        kc = self.config.kafka
        self.broker.advertised = (kc.advertised_host or address[0], kc.advertised_port or address[1])

    def security_notes(self):
        auth = self.config.auth
        enabled = mechanisms(auth)
        if not enabled:
            return []
        notes = [(INFO, f"kafka listener requires SASL ({', '.join(enabled)}; {len(auth.users)} configured user(s))")]
        if auth.kafka_sasl_plain and not self.config.listeners[self.name].tls:
            notes.append((WARNING, "kafka listener takes SASL/PLAIN passwords without TLS: they cross the network "
                                   "in clear text"))
        return notes

    def close(self) -> None:
        self.coordinator.close()
        self.broker.consumer_groups.close()
        self.broker.share_groups.close()


class KafkaSession(Session):
    def __init__(self, conn, codec: KafkaServerConnection, protocol: KafkaProtocol) -> None:
        super().__init__(conn, codec)
        self.broker = protocol.broker
        security = protocol.ctx.security
        self.sasl = KafkaSasl(protocol.config.auth, security.users, conn.peer)
        self.quota = KafkaQuotas(security.quotas, conn)
        conn.principal = conn.principal or protocol.config.listeners[protocol.name].principal
        self._max_frame = codec.max_frame
        if not self.sasl.authenticated:  # nothing but small SASL requests until it has
            limits = protocol.config.limits
            codec.max_frame = min(codec.max_frame, limits.auth_max_frame_bytes)
            codec.allowed_keys = PRE_AUTH_API_KEYS
            conn.auth_deadline = trio.current_time() + limits.auth_timeout_ms / 1000

    def _authenticated(self) -> None:
        codec = self.codec
        codec.max_frame = self._max_frame
        codec.allowed_keys = None
        self.conn.auth_deadline = math.inf
        self.conn.principal = user_principal(self.sasl.user)

    async def handle(self, request):
        sasl = self.sasl
        if isinstance(request, SaslToken):  # a raw token after a v0 handshake, answered by a raw token
            # Kafka closes the connection on a failed v0 login.
            answer = await sasl.authenticate(request.data)
            if answer is None:
                return Close()
            if sasl.authenticated:
                self._authenticated()
            else:  # (SCRAM: the client-final token comes next)
                self.codec.expect_sasl_token()
            return SaslToken(answer)
        if not sasl.allows(request.api_key):
            log.info("%s: closing: api key %d before SASL authentication", self.conn.peer, request.api_key)
            return Close()
        self.conn.client_id = request.client_id
        close = False
        if request.api_key == SASL_HANDSHAKE_KEY:
            body, close = sasl.handshake(request.body)
            if not close and request.api_version == 0:
                self.codec.expect_sasl_token()
        elif request.api_key == SASL_AUTHENTICATE_KEY:
            body, close = await sasl.authenticate_request(request.body)
            if sasl.authenticated and not close:
                self._authenticated()
        elif not self.quota.quotas.active:  # (no quota set: nothing to measure)
            body = await self.broker.handle(request, self.conn)
            if type(body) is LongPoll:  # a Fetch that may wait: its answer, whoever writes it, gets our header
                return _answering(request.correlation_id, body)
        else:
            quota = self.quota
            await quota.wait()  # (muted while the throttle time of its last answer runs)
            started = perf_counter()
            body = await self.broker.handle(request, self.conn)
            if type(body) is LongPoll:
                spent = perf_counter() - started
                return _answering(request.correlation_id, body, lambda answer: quota.charged(request, answer, spent))
            body = quota.charged(request, body, perf_counter() - started)
        reply = None if body is None else KafkaResponse(correlation_id=request.correlation_id, body=body)
        return Close(reply) if close else reply


def _as_it_is(body):
    return body


def _answering(correlation_id: int, poll: LongPoll, charged=_as_it_is) -> LongPoll:
    """`poll`, whose answer is a response body, made to produce the `KafkaResponse` to `correlation_id` (the body
    `charged` to the connection's quotas first)."""
    return poll.then(lambda body: KafkaResponse(correlation_id=correlation_id, body=charged(body)))
