"""logway's own blocking Kafka client, built on the sans-I/O codec `logway.codecs.kafka`.

The Spark data source runs it on the driver (planning: metadata, offsets) and inside tasks on executors (fetch,
produce), so:

- `ClientConfig` is a small frozen dataclass of plain values: it pickles into every Spark task;
- `LogwayClient` opens its socket lazily, on the first request, in whatever process uses it; pickling a client
  carries only its config (an unpickled client reconnects on its first request);
- every request is retried on connection errors (connect refused, reset, EOF, timeout) with a fresh connection,
  `ClientConfig.retries` times. The request is re-sent unchanged: metadata, offsets and fetches are reads, and
  produce batches carry an idempotent producer's (id, epoch, sequence), so the gateway answers a re-sent batch
  with its original offset instead of appending it twice (see `producer`);
- a Kafka error code in an answer raises `GatewayError` with the gateway's message; a gateway that cannot be
  reached raises `GatewayUnavailable`.

Security: `security_protocol` SSL / SASL_SSL wraps the socket in TLS (trusting `ssl_cafile`, or the system's
store), SASL_PLAINTEXT / SASL_SSL log in with SASL/PLAIN (SaslHandshake v1 + SaslAuthenticate) right after
connecting, on every new connection. A refused login raises `GatewayError` and an untrusted certificate
`GatewayUnavailable` at once: neither is retried.

One request is in flight per client at a time, except `send_fetch`/`receive_fetch`, which let a reader ask for
the next range while it decodes the previous one.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass, field

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka.api import admin, fetch, list_offsets, metadata, produce, sasl
from logway.codecs.kafka.connection import CLOSED, NEED_DATA, KafkaClientConnection
from logway.codecs.kafka.error_codes import ErrorCode

from .errors import GatewayError, GatewayUnavailable, OptionError

__all__ = ["ClientConfig", "LogwayClient", "FetchResult", "EARLIEST", "LATEST", "DEFAULT_PORT"]

DEFAULT_PORT = 9092
#: ListOffsets timestamps with a special meaning (Kafka's): the log start and the log end (next offset).
EARLIEST = -2
LATEST = -1
#: Bytes asked from the socket per recv: large, since fetch responses are megabytes.
RECV_BYTES = 4 * 1024 * 1024
#: API versions we speak: the highest non-flexible ones the gateway implements.
V_PRODUCE, V_FETCH, V_LIST_OFFSETS, V_METADATA = 8, 11, 5, 7
V_CREATE_TOPICS, V_DELETE_TOPICS, V_INIT_PRODUCER_ID = 4, 3, 1
V_SASL = 1  # SaslHandshake v1 then SaslAuthenticate v1
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where the gateway's Kafka listener is and how patient to be. Plain values only: it is pickled."""

    host: str
    port: int = DEFAULT_PORT
    client_id: str = "logway-spark"
    connect_timeout: float = 10.0
    request_timeout: float = 60.0
    retries: int = 5
    retry_backoff: float = 0.2
    security_protocol: str = "PLAINTEXT"  # one of SECURITY_PROTOCOLS
    ssl_cafile: str | None = None  # PEM certificates to trust (None: the system's store)
    ssl_check_hostname: bool = True
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def parse(cls, address: str, **settings) -> "ClientConfig":
        """`host:port` (`[v6addr]:port` for IPv6; the port defaults to 9092) plus any field by keyword."""
        if not address or not isinstance(address, str):
            raise OptionError("option 'gateway' is required: host:port of the logway gateway's Kafka listener")
        text = address.strip()
        host, port = text, DEFAULT_PORT
        if text.startswith("["):
            end = text.find("]")
            if end < 0:
                raise OptionError(f"gateway address {address!r}: missing ']'")
            host, rest = text[1:end], text[end + 1:]
            if rest:
                if not rest.startswith(":"):
                    raise OptionError(f"gateway address {address!r}: expected ':port' after ']'")
                port = rest[1:]
        elif text.count(":") == 1:
            host, port = text.split(":")
        try:
            port = int(port)
        except ValueError:
            raise OptionError(f"gateway address {address!r}: port {port!r} is not a number") from None
        if not host or not 0 < port < 65536:
            raise OptionError(f"gateway address {address!r} is not host:port")
        return cls(host, port, **settings)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(slots=True)
class FetchResult:
    """One partition's fetch answer: whole RecordBatches (the first may start before the offset asked for)."""

    records: bytes
    high_watermark: int
    log_start_offset: int


class LogwayClient:
    """A blocking Kafka client for one gateway (see the module docstring). Not thread-safe."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._sock: socket.socket | None = None
        self._codec: KafkaClientConnection | None = None
        self.bytes_received = 0  # every byte read from the gateway, for the readers' statistics
        self.requests = 0

    # -- pickling: the config only; sockets stay in the process that opened them ---------------------------
    def __getstate__(self):
        return {"config": self.config}

    def __setstate__(self, state) -> None:
        self.__init__(state["config"])

    def __enter__(self) -> "LogwayClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        sock, self._sock, self._codec = self._sock, None, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    # -- plumbing ------------------------------------------------------------------------------------------
    def _connection(self) -> tuple[socket.socket, KafkaClientConnection]:
        if self._sock is None:
            cfg = self.config
            sock = socket.create_connection((cfg.host, cfg.port), timeout=cfg.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if cfg.tls:
                context = ssl.create_default_context(cafile=cfg.ssl_cafile)
                context.check_hostname = cfg.ssl_check_hostname
                try:
                    sock = context.wrap_socket(sock, server_hostname=cfg.host)
                except BaseException:
                    sock.close()
                    raise
            sock.settimeout(cfg.request_timeout)
            self._sock, self._codec = sock, KafkaClientConnection()
            if cfg.sasl:
                try:
                    self._login()
                except BaseException:
                    self.close()
                    raise
        return self._sock, self._codec

    def _login(self) -> None:
        cfg = self.config
        self._send(sasl.SASL_HANDSHAKE_KEY, V_SASL, sasl.SaslHandshakeRequest("PLAIN"))
        answer = self._receive()
        if answer.error_code != ErrorCode.NONE:
            raise GatewayError(answer.error_code, f"the gateway offers {answer.mechanisms}",
                               operation="SASL handshake")
        token = b"\0" + (cfg.sasl_username or "").encode() + b"\0" + (cfg.sasl_password or "").encode()
        self._send(sasl.SASL_AUTHENTICATE_KEY, V_SASL, sasl.SaslAuthenticateRequest(token))
        answer = self._receive()
        if answer.error_code != ErrorCode.NONE:
            raise GatewayError(answer.error_code, answer.error_message, operation="SASL authentication")

    def _send(self, api_key: int, version: int, body) -> None:
        sock, codec = self._connection()
        sock.sendall(codec.send_request(api_key, version, body, client_id=self.config.client_id))
        self.requests += 1

    def _receive(self, extra_wait: float = 0.0):
        sock, codec = self._sock, self._codec
        if sock is None:
            raise ConnectionError("not connected")
        if extra_wait:
            sock.settimeout(self.config.request_timeout + extra_wait)
        try:
            while True:
                event = codec.next_event()
                if event is NEED_DATA:
                    data = sock.recv(RECV_BYTES)
                    self.bytes_received += len(data)
                    codec.receive_data(data)
                elif event is CLOSED:
                    raise ConnectionError("the gateway closed the connection")
                else:
                    return event.body
        finally:
            if extra_wait and self._sock is not None:
                self._sock.settimeout(self.config.request_timeout)

    def request(self, api_key: int, version: int, body, *, extra_wait: float = 0.0):
        """Send one request and return the parsed response body, retrying on connection errors.

        A request that was sent but not answered is sent again on a new connection: every request this
        package makes is safe to repeat (reads, and idempotent produce batches).
        """
        cfg = self.config
        attempts = max(cfg.retries, 0) + 1
        for attempt in range(attempts):
            try:
                self._send(api_key, version, body)
                return self._receive(extra_wait)
            except ssl.SSLCertVerificationError as exc:  # will not change on a retry
                self.close()
                raise GatewayUnavailable(f"the logway gateway at {cfg.address} presented a certificate that "
                                         f"is not trusted (option ssl.cafile): {exc}") from exc
            except (OSError, ConnectionError, RemoteProtocolError) as exc:
                self.close()
                if attempt + 1 >= attempts:
                    raise GatewayUnavailable(f"cannot reach the logway gateway at {cfg.address} "
                                             f"(Kafka listener) after {attempts} attempts: {exc}") from exc
                time.sleep(cfg.retry_backoff * (2 ** attempt))
        raise AssertionError("unreachable")

    # -- metadata and offsets ------------------------------------------------------------------------------
    def partition_counts(self, topics: list[str] | None = None, *, auto_create: bool = False) -> dict[str, int]:
        """{topic: number of partitions} for `topics` (None = every topic). Unknown topics are left out, unless
        `auto_create` and the gateway's `kafka.auto_create_topics` create them (as for any Kafka producer)."""
        body = metadata.MetadataRequest(
            topics=None if topics is None else [metadata.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto_create)
        resp = self.request(metadata.API_KEY, V_METADATA, body)
        counts = {}
        for t in resp.topics:
            if t.error_code == ErrorCode.NONE:
                counts[t.name] = len(t.partitions)
            elif t.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
                raise GatewayError(t.error_code, topic=t.name, operation="metadata")
        return counts

    def list_offsets(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """{(topic, partition): timestamp} -> {(topic, partition): offset}, in one request.

        Timestamp `LATEST` (-1) gives the log end (next offset), `EARLIEST` (-2) the log start, any other the
        first offset whose record timestamp is >= it, or -1 when no record is that recent.
        """
        by_topic: dict[str, list] = {}
        for (topic, partition), ts in wanted.items():
            by_topic.setdefault(topic, []).append(
                list_offsets.ListOffsetsPartition(partition_index=partition, timestamp=ts))
        body = list_offsets.ListOffsetsRequest(
            replica_id=-1, isolation_level=0,
            topics=[list_offsets.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = self.request(list_offsets.API_KEY, V_LIST_OFFSETS, body)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise GatewayError(p.error_code, topic=t.name, partition=p.partition_index,
                                       operation="list offsets")
                out[(t.name, p.partition_index)] = p.offset
        missing = set(wanted) - set(out)
        if missing:
            topic, partition = sorted(missing)[0]
            raise GatewayError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no answer for this partition",
                               topic=topic, partition=partition, operation="list offsets")
        return out

    # -- fetch ---------------------------------------------------------------------------------------------
    def _fetch_request(self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int):
        return fetch.FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1 if max_wait_ms > 0 else 0, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, *, max_wait_ms: int = 0) -> FetchResult:
        """Whole batches from `offset` on, about `max_bytes` (at least one batch when there is one)."""
        body = self._fetch_request(topic, partition, offset, max_bytes, max_wait_ms)
        resp = self.request(fetch.API_KEY, V_FETCH, body, extra_wait=max_wait_ms / 1000)
        return self._fetch_result(resp, topic, partition)

    def send_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> bool:
        """Send a fetch without waiting for its answer (a prefetch); False if it could not be sent."""
        try:
            self._send(fetch.API_KEY, V_FETCH, self._fetch_request(topic, partition, offset, max_bytes, 0))
            return True
        except (OSError, ConnectionError, RemoteProtocolError):
            self.close()
            return False

    def receive_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchResult:
        """The answer to `send_fetch` (same arguments); on a broken connection the fetch is simply re-sent."""
        try:
            resp = self._receive()
        except (OSError, ConnectionError, RemoteProtocolError):
            self.close()
            return self.fetch(topic, partition, offset, max_bytes)
        return self._fetch_result(resp, topic, partition)

    @staticmethod
    def _fetch_result(resp, topic: str, partition: int) -> FetchResult:
        if resp.error_code != ErrorCode.NONE:
            raise GatewayError(resp.error_code, topic=topic, partition=partition, operation="fetch")
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise GatewayError(p.error_code, topic=topic, partition=partition, operation="fetch")
                return FetchResult(p.records or b"", p.high_watermark, p.log_start_offset)
        raise GatewayError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the answer holds no partition",
                           topic=topic, partition=partition, operation="fetch")

    # -- produce -------------------------------------------------------------------------------------------
    def init_producer_id(self, name: str | None = None) -> tuple[int, int]:
        """An idempotent producer's (id, epoch): a new one, or with `name` the stable id the gateway keeps for
        that name (sent as the transactional id; logway has no transactions), so a replay is recognised."""
        resp = self.request(admin.INIT_PRODUCER_ID_KEY, V_INIT_PRODUCER_ID,
                            admin.InitProducerIdRequest(transactional_id=name, transaction_timeout_ms=60000))
        if resp.error_code != ErrorCode.NONE:
            raise GatewayError(resp.error_code, operation="init producer id")
        return resp.producer_id, resp.producer_epoch

    def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = -1, timeout_ms: int = 30000) -> int:
        """Append one encoded RecordBatch; returns its base offset (-1 with acks=0)."""
        body = produce.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            produce.TopicProduceData(name=topic, partition_data=[
                produce.PartitionProduceData(index=partition, records=batch)])])
        if acks == 0:  # no answer comes back: nothing to wait for, nothing to retry
            try:
                self._send(produce.API_KEY, V_PRODUCE, body)
            except OSError as exc:
                self.close()
                raise GatewayUnavailable(f"cannot send to the gateway at {self.config.address}: {exc}") from exc
            return -1
        resp = self.request(produce.API_KEY, V_PRODUCE, body)
        part = resp.responses[0].partition_responses[0]
        if part.error_code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            message = part.error_message or "; ".join(
                e.batch_index_error_message for e in part.record_errors if e.batch_index_error_message) or None
            raise GatewayError(part.error_code, message, topic=topic, partition=partition, operation="produce")
        return part.base_offset

    # -- admin ---------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = True,
                     configs: dict[str, str] | None = None) -> bool:
        """Create a topic; False when it already existed (and `exist_ok`)."""
        topic = admin.CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1, assignments=[],
                                     configs=[admin.CreatableTopicConfig(name=k, value=v)
                                              for k, v in (configs or {}).items()])
        resp = self.request(admin.CREATE_TOPICS_KEY, V_CREATE_TOPICS,
                            admin.CreateTopicsRequest(topics=[topic], timeout_ms=30000, validate_only=False))
        result = resp.topics[0]
        if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and exist_ok:
            return False
        if result.error_code != ErrorCode.NONE:
            raise GatewayError(result.error_code, result.error_message, topic=name, operation="create topic")
        return True

    def delete_topic(self, name: str) -> None:
        resp = self.request(admin.DELETE_TOPICS_KEY, V_DELETE_TOPICS,
                            admin.DeleteTopicsRequest(topic_names=[name], timeout_ms=30000))
        code = resp.responses[0].error_code
        if code != ErrorCode.NONE:
            raise GatewayError(code, topic=name, operation="delete topic")
