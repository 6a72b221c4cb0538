"""logway's own Kafka client, blocking (`KafkaClient`) and trio (`AsyncKafkaClient`), on the codec's client side
(`logway.codecs.kafka.KafkaClientConnection`). No Kafka library is needed.

Both flavours have the same calls (the async ones are awaited); each typed call is written once, as an operation
generator both flavours drive (`blocking.drive`, `trio_io.drive`)::

    c = KafkaClient(KafkaConfig.parse("127.0.0.1:9092", client_id="me", security_protocol="PLAINTEXT"))
    c.create_topic("events", 3, configs={"retention.ms": "3600000"})   # -> True (False: it existed)
    c.partition_counts(["events"])                                     # -> {"events": 3}
    c.list_offsets({("events", 0): EARLIEST, ("events", 1): LATEST})   # -> {(topic, partition): offset}
    pid, epoch = c.init_producer_id()                                 # init_producer_id("tid"): transactional
    c.produce("events", 0, record_batch_bytes, acks=-1)               # -> base offset
    c.fetch("events", 0, offset, 1 << 20, max_wait_ms=0)              # -> FetchResult(records, hwm, log start)
    c.fetch(..., isolation_level=READ_COMMITTED)                      # up to the LSO, with the aborted txns
    c.add_partitions_to_txn("tid", pid, epoch, {"events": [0]})       # transactions: add partitions, then
    c.add_offsets_to_txn("tid", pid, epoch, "group")                  # produce transactional batches, commit
    c.txn_offset_commit("tid", "group", pid, epoch, {("events", 0): 42})  # offsets in the transaction,
    c.end_txn("tid", pid, epoch, committed=True)                      # and commit (or abort) it
    c.offset_fetch("group")                                           # -> {(topic, partition): offset}
    c.send_fetch(...); c.receive_fetch(...)                           # one fetch ahead while decoding the last
    c.delete_topic("events"); c.api_versions()
    c.request(api_key, version, body)                                 # any API: the response body

    async with AsyncKafkaClient(config) as c: await c.produce(...)

- `KafkaConfig` is a small frozen dataclass of plain values: it pickles (the Spark data source sends it into every
  task);
- the config's address is the bootstrap broker. A gateway with `workers: N > 1` is N brokers: as every Kafka client,
  the client learns them (`kafka_routes.Routes`: Metadata, FindCoordinator, asked once and kept) and sends each
  partition's Produce, Fetch and ListOffsets to its leader (a ListOffsets over several brokers is split), group and
  transaction requests to their coordinator and DeleteTopics to the controller, over one more connection per
  broker; an answer saying another broker serves the call (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR,
  NOT_CONTROLLER) has the routes looked up again and the call made again, within `retries`. With one broker every
  call uses the one connection (one Metadata request more than before, per client). `for_partition(topic, p)` and
  `for_coordinator(key, key_type)` give the client of that broker for low-level calls;
- a client opens its connection lazily, on the first request (or `connect()`), in whatever process uses it;
  pickling a blocking client carries only its config (an unpickled client reconnects on its first request);
- `request` (and every typed call) is retried on connection errors (connect refused, reset, EOF, timeout, a
  garbled answer) with a fresh connection, `KafkaConfig.retries` times. The request is re-sent unchanged: the
  typed calls are reads, admin requests answered by an error when repeated, produce batches carrying an
  idempotent producer's (id, epoch, sequence), which the gateway answers with their original offset instead of
  appending them twice, and transaction requests, which the coordinator accepts again (an EndTxn that already
  happened succeeds; a repeated InitProducerId bumps the epoch once more);
- a Kafka error code in an answer raises `KafkaError` with the gateway's message; a gateway that cannot be reached
  raises `GatewayUnavailable`.

Security: `security_protocol` SSL / SASL_SSL wraps the connection in TLS (trusting `ssl_cafile`, or the system's
store), SASL_PLAINTEXT / SASL_SSL log in with SASL (`sasl_mechanism`: PLAIN, or SCRAM-SHA-256/512 — the password
never crosses the connection; SaslHandshake v1 + SaslAuthenticate) right after connecting, on every new
connection. A refused login raises `KafkaError` and an untrusted certificate `GatewayUnavailable` at once: neither
is retried.

Low level, for tests and benchmarks (on this client's own connection — the bootstrap broker's, or the one
`for_partition` / `for_coordinator` returned —, never retried): `send(api_key, version, body) ->
correlation id` and `receive()` (the next event as it is: a `KafkaResponse`, a `SaslToken`, or `CLOSED`) pipeline
requests (answers come in request order); `call(api_key, version, body)` is one exchange returning the
`KafkaResponse`; `prepare(...)` encodes a request without sending it, `send_raw(bytes)`, `send_sasl_token(data)`,
`send_eof()`, `closed_by_peer(timeout)`; `produce_answer(...)` returns a partition's produce answer unchecked
(from this client's broker, whoever leads the partition: a test of a misrouted produce uses it).
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka.api import (admin, api_versions, fetch, list_offsets, metadata, offsets, produce, sasl,
                                     transactions)
from logway.codecs.kafka.connection import CLOSED, KafkaClientConnection, KafkaRequest, SaslToken
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.scram import ScramClient, new_nonce

from .address import format_address, parse_address, tls_context
from .blocking import BlockingClient, BlockingStream
from .blocking import drive as drive_blocking
from .errors import ConnectionClosed, GatewayUnavailable, KafkaError
from .kafka_routes import (CONTROLLER, GROUP, MISROUTED, TRANSACTION, V_METADATA, Call, Coordinator, Leader, Operation,
                           Routes)
from .trio_io import TrioClient, TrioStream
from .trio_io import drive as drive_trio

__all__ = ["KafkaConfig", "KafkaClient", "AsyncKafkaClient", "FetchResult", "EARLIEST", "LATEST",
           "READ_UNCOMMITTED", "READ_COMMITTED", "DEFAULT_PORT", "SASL_MECHANISMS", "SECURITY_PROTOCOLS", "GROUP",
           "TRANSACTION"]

DEFAULT_PORT = 9092
#: ListOffsets timestamps with a special meaning (Kafka's): the log start and the log end (next offset).
EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = fetch.READ_UNCOMMITTED, fetch.READ_COMMITTED  # (re-exported for callers)
#: Bytes asked from the connection per read: large, since fetch responses are megabytes.
RECEIVE_BYTES = 4 * 1024 * 1024
#: API versions we speak: the highest non-flexible ones the gateway implements.
V_PRODUCE, V_FETCH, V_LIST_OFFSETS, V_API_VERSIONS = 8, 11, 5, 2  # V_METADATA (7): kafka_routes
V_CREATE_TOPICS, V_DELETE_TOPICS, V_INIT_PRODUCER_ID = 4, 3, 1
V_OFFSET_FETCH = 5
V_TXN = 2  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (v2 knows PRODUCER_FENCED)
V_SASL = 1  # SaslHandshake v1 then SaslAuthenticate v1
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Errors after which a request is sent again on a fresh connection (TimeoutError and resets are OSErrors).
_RETRYABLE = (OSError, ConnectionError, RemoteProtocolError)


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """Where the gateway's Kafka listener is and how patient to be. Plain values only: it is pickled."""

    host: str
    port: int = DEFAULT_PORT
    client_id: str = "logway"
    connect_timeout: float | None = 10.0
    timeout: float | None = 60.0  # seconds for each answer (a long-polling fetch gets its wait on top)
    retries: int = 5
    retry_backoff: float = 0.2  # seconds before the first retry, doubled for each further one
    security_protocol: str = "PLAINTEXT"  # one of SECURITY_PROTOCOLS
    ssl_cafile: str | None = None  # PEM certificates to trust (None: the system's store)
    ssl_check_hostname: bool = True
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_mechanism: str = "PLAIN"  # or SCRAM-SHA-256 / SCRAM-SHA-512

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def parse(cls, address: str, **settings) -> "KafkaConfig":
        """`host:port` (`[v6addr]:port` for IPv6; the port defaults to 9092) plus any field by keyword;
        raises `AddressError` for an address that is not one."""
        return cls(*parse_address(address, DEFAULT_PORT), **settings)

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def ssl_context(self) -> ssl.SSLContext | None:
        return tls_context(self.ssl_cafile, self.ssl_check_hostname) if self.tls else None


@dataclass(slots=True)
class FetchResult:
    """One partition's fetch answer: whole RecordBatches (the first may start before the offset asked for).
    A read_committed fetch also has the last stable offset and the aborted transactions among the batches, as
    (producer id, first offset) pairs: a reader drops those producers' transactional batches from that offset
    on, up to their next control batch (the abort marker)."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] = ()


# -- operations: written once, driven by both flavours (each yields `kafka_routes.Call`s) -------------------------

def _login(username: str | None, password: str | None, mechanism: str = "PLAIN") -> Operation:
    answer = yield Call(sasl.SASL_HANDSHAKE_KEY, V_SASL, sasl.SaslHandshakeRequest(mechanism))
    if answer.error_code != ErrorCode.NONE:
        raise KafkaError(answer.error_code, f"the gateway offers {answer.mechanisms}", operation="SASL handshake")
    if mechanism == "PLAIN":
        yield from _sasl_token(b"\0" + (username or "").encode() + b"\0" + (password or "").encode())
        return
    scram = ScramClient(mechanism, username or "", password or "", new_nonce())  # the password stays here
    server_first = yield from _sasl_token(scram.first())
    scram.verify((yield from _sasl_token(scram.final(server_first))))


def _sasl_token(token: bytes) -> Operation:
    """One SaslAuthenticate: the gateway's token in answer."""
    answer = yield Call(sasl.SASL_AUTHENTICATE_KEY, V_SASL, sasl.SaslAuthenticateRequest(token))
    if answer.error_code != ErrorCode.NONE:
        raise KafkaError(answer.error_code, answer.error_message, operation="SASL authentication")
    return answer.auth_bytes


def _api_versions() -> Operation:
    answer = yield Call(api_versions.API_KEY, V_API_VERSIONS, api_versions.ApiVersionsRequest())
    if answer.error_code != ErrorCode.NONE:
        raise KafkaError(answer.error_code, operation="api versions")
    return answer


def _partition_counts(topics: list[str] | None, auto_create: bool) -> Operation:
    body = metadata.MetadataRequest(
        topics=None if topics is None else [metadata.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create)
    resp = yield Call(metadata.API_KEY, V_METADATA, body)
    counts = {}
    for t in resp.topics:
        if t.error_code == ErrorCode.NONE:
            counts[t.name] = len(t.partitions)
        elif t.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
            raise KafkaError(t.error_code, topic=t.name, operation="metadata")
    return counts


def _list_offsets(wanted: dict[tuple[str, int], int], isolation_level: int, routes: Routes) -> Operation:
    """One ListOffsets per broker leading some of the partitions (one request with a single broker)."""
    by_broker: dict[Any, tuple[Leader, dict[str, list]]] = {}
    for (topic, partition), ts in wanted.items():
        leader = Leader(topic, partition)
        address = yield from routes.address(leader)
        by_topic = by_broker.setdefault(address, (leader, {}))[1]
        by_topic.setdefault(topic, []).append(list_offsets.ListOffsetsPartition(partition_index=partition,
                                                                                timestamp=ts))
    out = {}
    for leader, by_topic in by_broker.values():
        body = list_offsets.ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level,
            topics=[list_offsets.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = yield Call(list_offsets.API_KEY, V_LIST_OFFSETS, body, route=leader)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(p.error_code, topic=t.name, partition=p.partition_index,
                                     operation="list offsets")
                out[(t.name, p.partition_index)] = p.offset
    missing = set(wanted) - set(out)
    if missing:
        topic, partition = sorted(missing)[0]
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no answer for this partition", topic=topic,
                         partition=partition, operation="list offsets")
    return out


def _fetch_call(topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int = 0,
                min_bytes: int | None = None, isolation_level: int = READ_UNCOMMITTED) -> Call:
    body = fetch.FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=(1 if max_wait_ms > 0 else 0) if min_bytes is None
        else min_bytes, max_bytes=max_bytes, isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    return Call(fetch.API_KEY, V_FETCH, body, extra_wait=max_wait_ms / 1000, route=Leader(topic, partition))


def _fetch_result(resp, topic: str, partition: int) -> FetchResult:
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, topic=topic, partition=partition, operation="fetch")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise KafkaError(p.error_code, topic=topic, partition=partition, operation="fetch")
            aborted = tuple(sorted((a.first_offset, a.producer_id) for a in p.aborted_transactions or ()))
            return FetchResult(p.records or b"", p.high_watermark, p.log_start_offset, p.last_stable_offset,
                               tuple((pid, first) for first, pid in aborted))
    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the answer holds no partition", topic=topic,
                     partition=partition, operation="fetch")


def _fetch(topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int,
           min_bytes: int | None, isolation_level: int = READ_UNCOMMITTED) -> Operation:
    resp = yield _fetch_call(topic, partition, offset, max_bytes, max_wait_ms, min_bytes, isolation_level)
    return _fetch_result(resp, topic, partition)


def _init_producer_id(transactional_id: str | None, timeout_ms: int = 60000) -> Operation:
    resp = yield Call(admin.INIT_PRODUCER_ID_KEY, V_INIT_PRODUCER_ID,
                      admin.InitProducerIdRequest(transactional_id=transactional_id,
                                                  transaction_timeout_ms=timeout_ms),
                      route=None if transactional_id is None else Coordinator(transactional_id, TRANSACTION))
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, None if transactional_id is None else f"transactional id "
                         f"{transactional_id!r}", operation="init producer id")
    return resp.producer_id, resp.producer_epoch


# Transactions (Kafka's transactional producer protocol; each request goes to the transactional id's coordinator).

def _add_partitions_to_txn(tid: str, producer_id: int, epoch: int, partitions: dict[str, list[int]]) -> Operation:
    body = transactions.AddPartitionsToTxnRequest(
        transactional_id=tid, producer_id=producer_id, producer_epoch=epoch,
        topics=[transactions.AddPartitionsToTxnTopic(name=t, partitions=list(ps)) for t, ps in partitions.items()])
    resp = yield Call(transactions.ADD_PARTITIONS_TO_TXN_KEY, V_TXN, body, route=Coordinator(tid, TRANSACTION))
    failed = [(t.name, p.partition_index, p.error_code) for t in resp.results for p in t.results
              if p.error_code != ErrorCode.NONE]
    # OPERATION_NOT_ATTEMPTED only says another partition of the request failed: report that one.
    failed.sort(key=lambda f: f[2] == ErrorCode.OPERATION_NOT_ATTEMPTED)
    if failed:
        topic, partition, code = failed[0]
        raise KafkaError(code, f"transactional id {tid!r}", topic=topic, partition=partition,
                         operation="add partitions to transaction")


def _add_offsets_to_txn(tid: str, producer_id: int, epoch: int, group: str) -> Operation:
    resp = yield Call(transactions.ADD_OFFSETS_TO_TXN_KEY, V_TXN, transactions.AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=producer_id, producer_epoch=epoch, group_id=group),
        route=Coordinator(tid, TRANSACTION))
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, f"transactional id {tid!r}, group {group!r}",
                         operation="add offsets to transaction")


def _txn_offset_commit(tid: str, group: str, producer_id: int, epoch: int,
                       committed: dict[tuple[str, int], int]) -> Operation:
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in sorted(committed.items()):
        by_topic.setdefault(topic, []).append(transactions.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""))
    resp = yield Call(transactions.TXN_OFFSET_COMMIT_KEY, V_TXN, transactions.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=producer_id, producer_epoch=epoch,
        topics=[transactions.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()]),
        route=Coordinator(group))
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise KafkaError(p.error_code, f"transactional id {tid!r}, group {group!r}", topic=t.name,
                                 partition=p.partition_index, operation="transactional offset commit")


def _end_txn(tid: str, producer_id: int, epoch: int, committed: bool) -> Operation:
    resp = yield Call(transactions.END_TXN_KEY, V_TXN, transactions.EndTxnRequest(
        transactional_id=tid, producer_id=producer_id, producer_epoch=epoch, committed=committed),
        route=Coordinator(tid, TRANSACTION))
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, f"transactional id {tid!r}",
                         operation="commit transaction" if committed else "abort transaction")


def _offset_fetch(group: str, partitions: list[tuple[str, int]] | None) -> Operation:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [offsets.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    resp = yield Call(offsets.OFFSET_FETCH_KEY, V_OFFSET_FETCH,
                      offsets.OffsetFetchRequest(group_id=group, topics=topics), route=Coordinator(group))
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, f"group {group!r}", operation="offset fetch")
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise KafkaError(p.error_code, f"group {group!r}", topic=t.name, partition=p.partition_index,
                                 operation="offset fetch")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def _produce_answer(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int,
                    transactional_id: str | None = None, routed: bool = True) -> Operation:
    """The partition's answer; `routed` False: from the bootstrap broker, whoever leads the partition."""
    body = produce.ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
        produce.TopicProduceData(name=topic, partition_data=[
            produce.PartitionProduceData(index=partition, records=batch)])])
    resp = yield Call(produce.API_KEY, V_PRODUCE, body, answered=acks != 0,
                      route=Leader(topic, partition) if routed else None)
    return None if resp is None else resp.responses[0].partition_responses[0]


def _produce(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int,
             transactional_id: str | None = None) -> Operation:
    part = yield from _produce_answer(topic, partition, batch, acks, timeout_ms, transactional_id)
    if part is None:  # acks=0: nothing comes back
        return -1
    if part.error_code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
        message = part.error_message or "; ".join(
            e.batch_index_error_message for e in part.record_errors if e.batch_index_error_message) or None
        raise KafkaError(part.error_code, message, topic=topic, partition=partition, operation="produce")
    return part.base_offset


def _create_topic(name: str, partitions: int, exist_ok: bool, configs: dict[str, str] | None) -> Operation:
    topic = admin.CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1, assignments=[],
                                 configs=[admin.CreatableTopicConfig(name=k, value=v)
                                          for k, v in (configs or {}).items()])
    resp = yield Call(admin.CREATE_TOPICS_KEY, V_CREATE_TOPICS,
                      admin.CreateTopicsRequest(topics=[topic], timeout_ms=30000, validate_only=False))
    result = resp.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and exist_ok:
        return False
    if result.error_code != ErrorCode.NONE:
        raise KafkaError(result.error_code, result.error_message, topic=name, operation="create topic")
    return True


def _delete_topic(name: str) -> Operation:
    resp = yield Call(admin.DELETE_TOPICS_KEY, V_DELETE_TOPICS,
                      admin.DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), route=CONTROLLER)
    code = resp.responses[0].error_code
    if code != ErrorCode.NONE:
        raise KafkaError(code, topic=name, operation="delete topic")


def _encode(codec: KafkaClientConnection, api_key: int, version: int, body: Any,
            client_id: str) -> tuple[int, bytes]:
    """(correlation id, frame) of one request: the codec numbers it, and remembers its (key, version) to parse
    the answer."""
    cid = codec.next_correlation_id
    return cid, codec.send(KafkaRequest(api_key, version, None, client_id, body))


def _untrusted(config: KafkaConfig, exc: BaseException) -> GatewayUnavailable:
    return GatewayUnavailable(f"the logway gateway at {config.address} presented a certificate that is not "
                              f"trusted (option ssl.cafile): {exc}")


def _unreachable(config: KafkaConfig, attempts: int, exc: BaseException) -> GatewayUnavailable:
    return GatewayUnavailable(f"cannot reach the logway gateway at {config.address} (Kafka listener) after "
                              f"{attempts} attempts: {exc}")


def _answer(event: Any) -> Any:
    if event is CLOSED:
        raise ConnectionClosed("the gateway closed the connection")
    return event


def _broker(client, address: tuple[str, int] | None):
    """`client` itself for its own broker (`address` None, or its own), else its connection to `address` (a client
    of the same flavour, made on first use)."""
    if address is None or address == (client.config.host, client.config.port):
        return client
    peer = client._peers.get(address)
    if peer is None:
        peer = client._peers[address] = type(client)(replace(client.config, host=address[0], port=address[1]))
    return peer


def _rerun_delay(exc: Exception, attempt: int, config: KafkaConfig, routes: Routes) -> float:
    """After `exc` (a `KafkaError` or `GatewayUnavailable`) ended an operation: the back-off before running it
    again when a broker answered that another serves it (up to `retries` times); otherwise `exc` is raised. Either
    way the routes are forgotten when they may be stale (a misrouted answer, a broker gone)."""
    misrouted = isinstance(exc, KafkaError) and exc.code in MISROUTED
    if misrouted or isinstance(exc, GatewayUnavailable):
        routes.forget()
    if misrouted and attempt < config.retries:
        return config.retry_backoff * (2 ** attempt)
    raise exc


# -- blocking ----------------------------------------------------------------------------------------------------

class KafkaClient(BlockingClient):
    """A blocking Kafka client for one gateway (see the module docstring). Not thread-safe."""

    receive_bytes = RECEIVE_BYTES

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.timeout = config.timeout
        self.stream: BlockingStream | None = None  # opened on the first request
        self.codec: KafkaClientConnection | None = None
        self.requests = 0  # requests written on this client's own connection, every retry included
        self.routes = Routes()
        self._peers: dict[tuple[str, int], KafkaClient] = {}  # connections to the other brokers, by address

    # -- pickling: the config only; connections stay in the process that opened them ---------------------------
    def __getstate__(self):
        return {"config": self.config}

    def __setstate__(self, state) -> None:
        self.__init__(state["config"])

    @property
    def _sock(self):
        """The socket of the open connection, None when none is open."""
        return None if self.stream is None else self.stream.sock

    def close(self) -> None:
        stream, self.stream, self.codec = self.stream, None, None
        peers, self._peers = self._peers, {}
        if stream is not None:
            stream.close()
        for peer in peers.values():
            peer.close()

    # -- the connection ---------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Open the connection now (and log in), unless one is open; otherwise the first request does."""
        if self.stream is not None:
            return
        cfg = self.config
        self.stream = BlockingStream.connect(cfg.host, cfg.port, connect_timeout=cfg.connect_timeout,
                                             timeout=cfg.timeout, ssl_context=cfg.ssl_context())
        self.codec = KafkaClientConnection()
        if cfg.sasl:
            try:
                drive_blocking(_login(cfg.sasl_username, cfg.sasl_password, cfg.sasl_mechanism), self._exchange)
            except BaseException:
                self.close()
                raise

    def prepare(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        """(correlation id, frame) of one request, not sent (write it with `send_raw`; `receive` parses the
        answer). Opens the connection if needed: the frame belongs to its codec."""
        self.connect()
        return _encode(self.codec, api_key, version, body, self.config.client_id)

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Write one request on the current connection (opened if needed); its correlation id."""
        cid, frame = self.prepare(api_key, version, body)
        self.stream.send_all(frame)
        self.requests += 1
        return cid

    def send_sasl_token(self, data: bytes) -> None:
        """A raw SASL token frame (after a v0 SaslHandshake); its answer arrives as a `SaslToken`."""
        self.connect()
        self.stream.send_all(self.codec.send(SaslToken(data)))

    def receive(self, *, timeout: float | None = None) -> Any:
        """The next event as it comes: a `KafkaResponse`, a `SaslToken`, or `CLOSED`."""
        if self.stream is None:
            raise ConnectionClosed("not connected")
        return self.next_event(self._deadline(timeout))

    def call(self, api_key: int, version: int, body: Any, *, timeout: float | None = None) -> Any:
        """One request and its `KafkaResponse` on the current connection: never retried."""
        self.send(api_key, version, body)
        return _answer(self.receive(timeout=timeout))

    def _exchange(self, call: Call) -> Any:
        """One operation step on the current connection: the answer's body (None when none comes)."""
        self.send(call.api_key, call.version, call.body)
        if not call.answered:
            return None
        timeout = None if self.timeout is None else self.timeout + call.extra_wait
        return _answer(self.receive(timeout=timeout)).body

    def _attempt(self, call: Call) -> Any:
        """`_attempt_here` on the broker the call's route leads to."""
        if call.route is None:
            return self._attempt_here(call)
        return _broker(self, drive_blocking(self.routes.address(call.route), self._attempt_here))._attempt_here(call)

    def for_partition(self, topic: str, partition: int) -> "KafkaClient":
        """The client of the partition's leader (this one with a single broker), for low-level calls."""
        return _broker(self, drive_blocking(self.routes.address(Leader(topic, partition)), self._attempt_here))

    def for_coordinator(self, key: str, key_type: int = GROUP) -> "KafkaClient":
        """The client of the coordinator of group `key` (`key_type` GROUP) or transactional id `key`
        (TRANSACTION), for low-level calls (JoinGroup, Heartbeat, ...)."""
        return _broker(self, drive_blocking(self.routes.address(Coordinator(key, key_type)), self._attempt_here))

    def _attempt_here(self, call: Call) -> Any:
        """`_exchange` on this client's connection, with the retries of the module docstring."""
        cfg = self.config
        attempts = max(cfg.retries, 0) + 1
        for attempt in range(attempts):
            try:
                self.connect()
                return self._exchange(call)
            except ssl.SSLCertVerificationError as exc:  # will not change on a retry
                self.close()
                raise _untrusted(cfg, exc) from exc
            except _RETRYABLE as exc:
                self.close()
                if attempt + 1 >= attempts or not call.answered:
                    raise _unreachable(cfg, attempt + 1, exc) from exc
                time.sleep(cfg.retry_backoff * (2 ** attempt))
        raise AssertionError("unreachable")

    def request(self, api_key: int, version: int, body: Any, *, extra_wait: float = 0.0) -> Any:
        """Send one request and return the parsed response body, retrying on connection errors (see the module
        docstring): every request this client makes on its own is safe to repeat."""
        return self._attempt(Call(api_key, version, body, extra_wait))

    def _run(self, operation: Callable[..., Operation], *args) -> Any:
        """Drive `operation(*args)`; run it again when a broker answers that another one serves it (routes
        looked up anew, up to `retries` times, with the connection retries' back-off). A broker that cannot be
        reached makes the next call look the routes up again too."""
        attempt = 0
        while True:
            try:
                return drive_blocking(operation(*args), self._attempt)
            except (KafkaError, GatewayUnavailable) as exc:
                delay = _rerun_delay(exc, attempt, self.config, self.routes)
            time.sleep(delay)
            attempt += 1

    # -- typed requests ---------------------------------------------------------------------------------------
    def api_versions(self) -> api_versions.ApiVersionsResponse:
        return self._run(_api_versions)

    def partition_counts(self, topics: list[str] | None = None, *, auto_create: bool = False) -> dict[str, int]:
        """{topic: number of partitions} for `topics` (None = every topic). Unknown topics are left out, unless
        `auto_create` and the gateway's `kafka.auto_create_topics` create them (as for any Kafka producer)."""
        return self._run(_partition_counts, topics, auto_create)

    def list_offsets(self, wanted: dict[tuple[str, int], int], *,
                     isolation_level: int = READ_UNCOMMITTED) -> dict[tuple[str, int], int]:
        """{(topic, partition): timestamp} -> {(topic, partition): offset}, in one request.

        Timestamp `LATEST` (-1) gives the log end (next offset) — with `READ_COMMITTED` the last stable offset —,
        `EARLIEST` (-2) the log start, any other the first offset whose record timestamp is >= it, or -1 when no
        record is that recent.
        """
        return self._run(_list_offsets, wanted, isolation_level, self.routes)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, *, max_wait_ms: int = 0,
              min_bytes: int | None = None, isolation_level: int = READ_UNCOMMITTED) -> FetchResult:
        """Whole batches from `offset` on, about `max_bytes` (at least one batch when there is one); with
        `max_wait_ms` a long poll until `min_bytes` (default 1) arrived. `READ_COMMITTED`: batches up to the
        last stable offset, with the aborted transactions among them (`FetchResult`)."""
        return self._run(_fetch, topic, partition, offset, max_bytes, max_wait_ms, min_bytes, isolation_level)

    def send_fetch(self, topic: str, partition: int, offset: int, max_bytes: int, *,
                   isolation_level: int = READ_UNCOMMITTED) -> bool:
        """Send a fetch without waiting for its answer (a prefetch); False if it could not be sent."""
        call = _fetch_call(topic, partition, offset, max_bytes, isolation_level=isolation_level)
        try:
            leader = self.for_partition(topic, partition)
            leader.send(call.api_key, call.version, call.body)
            return True
        except _RETRYABLE:
            self.close()
            return False

    def receive_fetch(self, topic: str, partition: int, offset: int, max_bytes: int, *,
                      isolation_level: int = READ_UNCOMMITTED) -> FetchResult:
        """The answer to `send_fetch` (same arguments); on a broken connection the fetch is simply re-sent."""
        try:
            resp = _answer(self.for_partition(topic, partition).receive()).body
        except _RETRYABLE:
            self.close()
            return self.fetch(topic, partition, offset, max_bytes, isolation_level=isolation_level)
        return _fetch_result(resp, topic, partition)

    def init_producer_id(self, transactional_id: str | None = None, *,
                         transaction_timeout_ms: int = 60000) -> tuple[int, int]:
        """A producer's (id, epoch): an idempotent producer's new id, or with `transactional_id` that id's
        producer id with a new epoch, which fences the previous producer of the id (its open transaction is
        aborted)."""
        return self._run(_init_producer_id, transactional_id, transaction_timeout_ms)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, epoch: int,
                              partitions: dict[str, list[int]]) -> None:
        """Add {topic: [partitions]} to the open transaction (beginning one), before producing to them."""
        self._run(_add_partitions_to_txn, transactional_id, producer_id, epoch, partitions)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> None:
        """The transaction will commit offsets of consumer group `group` (`txn_offset_commit` follows)."""
        self._run(_add_offsets_to_txn, transactional_id, producer_id, epoch, group)

    def txn_offset_commit(self, transactional_id: str, group: str, producer_id: int, epoch: int,
                          committed: dict[tuple[str, int], int]) -> None:
        """Offsets {(topic, partition): offset} that `group` gets when (and only if) the transaction commits."""
        self._run(_txn_offset_commit, transactional_id, group, producer_id, epoch, committed)

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> None:
        """Commit (True) or abort (False) the open transaction; a repeated end that already happened succeeds."""
        self._run(_end_txn, transactional_id, producer_id, epoch, committed)

    def offset_fetch(self, group: str, partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
        """{(topic, partition): offset} committed by `group`, for `partitions` (None: every partition the group
        committed); partitions without a committed offset are left out."""
        return self._run(_offset_fetch, group, partitions)

    def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = -1, timeout_ms: int = 30000,
                transactional_id: str | None = None) -> int:
        """Append one encoded RecordBatch; returns its base offset (-1 with acks=0). A transactional producer's
        batches (attribute bit 4) go with its `transactional_id`."""
        return self._run(_produce, topic, partition, batch, acks, timeout_ms, transactional_id)

    def produce_answer(self, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                       timeout_ms: int = 30000):
        """The partition's `PartitionProduceResponse` as this client's broker sent it (None with acks=0): no check,
        no routing (a test of a produce to the wrong broker uses it)."""
        return self._run(_produce_answer, topic, partition, batch, acks, timeout_ms, None, False)

    def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = True,
                     configs: dict[str, str] | None = None) -> bool:
        """Create a topic; False when it already existed (and `exist_ok`)."""
        return self._run(_create_topic, name, partitions, exist_ok, configs)

    def delete_topic(self, name: str) -> None:
        self._run(_delete_topic, name)


# -- trio --------------------------------------------------------------------------------------------------------

class AsyncKafkaClient(TrioClient):
    """The trio twin of `KafkaClient`: the same calls, awaited; `async with` closes it."""

    receive_bytes = RECEIVE_BYTES

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.timeout = config.timeout
        self.transport: TrioStream | None = None  # opened on the first request
        self.codec: KafkaClientConnection | None = None
        self.requests = 0  # requests written on this client's own connection, every retry included
        self.routes = Routes()
        self._peers: dict[tuple[str, int], AsyncKafkaClient] = {}  # connections to the other brokers, by address

    async def aclose(self) -> None:
        transport, self.transport, self.codec = self.transport, None, None
        peers, self._peers = self._peers, {}
        if transport is not None:
            import trio

            with trio.CancelScope(shield=True):
                await transport.aclose()
        for peer in peers.values():
            await peer.aclose()

    async def connect(self) -> None:
        """Open the connection now (and log in), unless one is open; otherwise the first request does."""
        if self.transport is not None:
            return
        cfg = self.config
        self.transport = await TrioStream.connect(cfg.host, cfg.port, connect_timeout=cfg.connect_timeout,
                                                  ssl_context=cfg.ssl_context())
        self.codec = KafkaClientConnection()
        if cfg.sasl:
            try:
                await drive_trio(_login(cfg.sasl_username, cfg.sasl_password, cfg.sasl_mechanism), self._exchange)
            except BaseException:
                await self.aclose()
                raise

    async def prepare(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        await self.connect()
        return _encode(self.codec, api_key, version, body, self.config.client_id)

    async def send(self, api_key: int, version: int, body: Any) -> int:
        cid, frame = await self.prepare(api_key, version, body)
        await self.transport.send_all(frame)
        self.requests += 1
        return cid

    async def send_sasl_token(self, data: bytes) -> None:
        await self.connect()
        await self.transport.send_all(self.codec.send(SaslToken(data)))

    async def receive(self, *, timeout: float | None = None) -> Any:
        if self.transport is None:
            raise ConnectionClosed("not connected")
        return await self.next_event(self._deadline(timeout))

    async def call(self, api_key: int, version: int, body: Any, *, timeout: float | None = None) -> Any:
        await self.send(api_key, version, body)
        return _answer(await self.receive(timeout=timeout))

    async def _exchange(self, call: Call) -> Any:
        await self.send(call.api_key, call.version, call.body)
        if not call.answered:
            return None
        timeout = None if self.timeout is None else self.timeout + call.extra_wait
        return _answer(await self.receive(timeout=timeout)).body

    async def _attempt(self, call: Call) -> Any:
        if call.route is None:
            return await self._attempt_here(call)
        address = await drive_trio(self.routes.address(call.route), self._attempt_here)
        return await _broker(self, address)._attempt_here(call)

    async def for_partition(self, topic: str, partition: int) -> "AsyncKafkaClient":
        return _broker(self, await drive_trio(self.routes.address(Leader(topic, partition)), self._attempt_here))

    async def for_coordinator(self, key: str, key_type: int = GROUP) -> "AsyncKafkaClient":
        return _broker(self, await drive_trio(self.routes.address(Coordinator(key, key_type)), self._attempt_here))

    async def _attempt_here(self, call: Call) -> Any:
        import trio

        cfg = self.config
        attempts = max(cfg.retries, 0) + 1
        for attempt in range(attempts):
            try:
                await self.connect()
                return await self._exchange(call)
            except ssl.SSLCertVerificationError as exc:
                await self.aclose()
                raise _untrusted(cfg, exc) from exc
            except (*_RETRYABLE, trio.BrokenResourceError) as exc:
                await self.aclose()
                if attempt + 1 >= attempts or not call.answered:
                    raise _unreachable(cfg, attempt + 1, exc) from exc
                await trio.sleep(cfg.retry_backoff * (2 ** attempt))
        raise AssertionError("unreachable")

    async def request(self, api_key: int, version: int, body: Any, *, extra_wait: float = 0.0) -> Any:
        return await self._attempt(Call(api_key, version, body, extra_wait))

    async def _run(self, operation: Callable[..., Operation], *args) -> Any:
        import trio

        attempt = 0
        while True:
            try:
                return await drive_trio(operation(*args), self._attempt)
            except (KafkaError, GatewayUnavailable) as exc:
                delay = _rerun_delay(exc, attempt, self.config, self.routes)
            await trio.sleep(delay)
            attempt += 1

    # -- typed requests ---------------------------------------------------------------------------------------
    async def api_versions(self) -> api_versions.ApiVersionsResponse:
        return await self._run(_api_versions)

    async def partition_counts(self, topics: list[str] | None = None, *,
                               auto_create: bool = False) -> dict[str, int]:
        return await self._run(_partition_counts, topics, auto_create)

    async def list_offsets(self, wanted: dict[tuple[str, int], int], *,
                           isolation_level: int = READ_UNCOMMITTED) -> dict[tuple[str, int], int]:
        return await self._run(_list_offsets, wanted, isolation_level, self.routes)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, *, max_wait_ms: int = 0,
                    min_bytes: int | None = None, isolation_level: int = READ_UNCOMMITTED) -> FetchResult:
        return await self._run(_fetch, topic, partition, offset, max_bytes, max_wait_ms, min_bytes, isolation_level)

    async def init_producer_id(self, transactional_id: str | None = None, *,
                               transaction_timeout_ms: int = 60000) -> tuple[int, int]:
        return await self._run(_init_producer_id, transactional_id, transaction_timeout_ms)

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int, epoch: int,
                                    partitions: dict[str, list[int]]) -> None:
        await self._run(_add_partitions_to_txn, transactional_id, producer_id, epoch, partitions)

    async def add_offsets_to_txn(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> None:
        await self._run(_add_offsets_to_txn, transactional_id, producer_id, epoch, group)

    async def txn_offset_commit(self, transactional_id: str, group: str, producer_id: int, epoch: int,
                                committed: dict[tuple[str, int], int]) -> None:
        await self._run(_txn_offset_commit, transactional_id, group, producer_id, epoch, committed)

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> None:
        await self._run(_end_txn, transactional_id, producer_id, epoch, committed)

    async def offset_fetch(self, group: str,
                           partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
        return await self._run(_offset_fetch, group, partitions)

    async def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                      timeout_ms: int = 30000, transactional_id: str | None = None) -> int:
        return await self._run(_produce, topic, partition, batch, acks, timeout_ms, transactional_id)

    async def produce_answer(self, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                             timeout_ms: int = 30000):
        return await self._run(_produce_answer, topic, partition, batch, acks, timeout_ms, None, False)

    async def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = True,
                           configs: dict[str, str] | None = None) -> bool:
        return await self._run(_create_topic, name, partitions, exist_ok, configs)

    async def delete_topic(self, name: str) -> None:
        await self._run(_delete_topic, name)
