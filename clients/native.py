"""The native protocol's client, blocking (`NativeClient`) and trio (`AsyncNativeClient`), on the codec's client
side (`logway.codecs.native.NativeConnection("client")`).

Both flavours have the same calls (the async ones are awaited); each typed call is written once, as an operation
generator both flavours drive (`blocking.drive`, `trio_io.drive`)::

    c = NativeClient("127.0.0.1", 9898, timeout=30, ssl_context=None, token=None)  # or user=, password=, mechanism=
    c.create_topic("orders", 3); c.produce("orders", 0, [b"a", Record(b"b", key=b"k")])  # -> [0, 1]
    c.fetch("orders", 0, 0, 1 << 20, group_id=None, max_wait_ms=0, min_bytes=0)       # -> FetchResponse
    c.commit("orders", 0, "g", 2); c.committed("orders", 0, "g")                     # -> True, 2
    c.list_topics(); c.describe_topic("orders"); c.delete_topic("orders"); c.ping()
    c.create_partitions("orders", 6)                                  # -> 6 (the count now)
    c.delete_records("orders", 0, 100)                                # -> 100 (the log start offset now; -1: all)
    c.alter_topic_config("orders", {"retention.ms": 3600000}, delete=["segment.bytes"])  # -> True
    c.describe_topic_config("orders", keys=None)                      # -> [TopicConfigEntry, ...]
    c.delete_group_offsets("g", [("orders", 0)])                      # -> 1 (None: the whole group)
    c.describe_topic("orders", details=True)           # + size_bytes, segments per partition, the storage format
    c.list_groups()                                                   # -> [GroupSummary(group_id, state, ...), ...]
    c.describe_group("g")            # -> DescribeGroupResponse: members, per partition committed/log end (.lag)
    c.reset_group_offsets("g", "earliest", topics=[("orders", None)], validate_only=True)  # -> the plan
    c.login("alice", "secret", mechanism="SCRAM-SHA-256")            # -> "User:alice" (None: user and password)
    c.create_acls([nv.AclEntry("Topic", "orders", "LITERAL", "User:bob", "*", "Read", "Allow")])   # -> 1
    c.describe_acls(nv.AclEntry(principal="User:bob")); c.delete_acls(nv.AclEntry(name="orders"))
    c.set_password("bob", "pw", "SCRAM-SHA-512", iterations=8192)    # salted here: the password stays here
    c.delete_credential("bob", "SCRAM-SHA-512"); c.describe_users(["bob"])
    c.alter_quotas([("user", "bob")], set={"producer_byte_rate": 1048576}, delete=["request_percentage"])  # -> True
    c.describe_quotas([nv.QuotaComponent("user", "bob")], strict=False)  # -> [QuotaEntry(entity, values), ...]

    c = await AsyncNativeClient.connect("127.0.0.1", 9898)   # or AsyncNativeClient(trio_stream)

Errors: an `Error` answer raises `NativeError` (its `message`), a closed connection `ConnectionClosed`, a frame
that breaks the protocol the codec's `RemoteProtocolError`; `TimeoutError` when no answer comes within `timeout`
seconds (a long-polling fetch gets its `max_wait_ms` on top). With `raise_errors=False`, `request` returns
`ErrorResponse` and `CLOSED` as they come instead (the typed calls always raise).

Low level, for tests and benchmarks: `send(event)` writes one request and `receive()` returns the next event as
it is (a response, an `ErrorResponse`, or `CLOSED`), so several requests can be pipelined (answers come in
order); `prepare(event)` encodes a frame without sending it, `send_raw(bytes)` writes any bytes, `send_eof()`
half-closes, `closed_by_peer(timeout)` tells whether the gateway hung up; `sock` / `stream` is what lies beneath.
"""

from __future__ import annotations

import secrets
from typing import Any, Generator, Iterable, Mapping

from logway.codecs import native as nv
from logway.codecs.errors import RemoteProtocolError
from logway.codecs.records import Record
from logway.codecs.scram import MIN_ITERATIONS, SALT_BYTES, ScramClient, new_nonce, salted_password

from .blocking import BlockingClient, BlockingStream
from .blocking import drive as drive_blocking
from .errors import ConnectionClosed, NativeError
from .trio_io import TrioClient, TrioStream
from .trio_io import drive as drive_trio

__all__ = ["NativeClient", "AsyncNativeClient", "DEFAULT_PORT"]

DEFAULT_PORT = 9898
DEFAULT_FETCH_BYTES = 1024 * 1024

Operation = Generator[Any, Any, Any]


# -- operations: written once, driven by both flavours (each yields a request and gets its checked answer) --------

def _records(records: Iterable[bytes | Record]) -> list[Record]:
    return [r if isinstance(r, Record) else Record(bytes(r)) for r in records]


def _produce(topic: str, partition: int, records: Iterable[bytes | Record]) -> Operation:
    return (yield nv.ProduceRequest(topic, partition, _records(records))).offsets


def _fetch(topic: str, partition: int, offset: int, max_bytes: int, group_id: str | None, max_wait_ms: int,
           min_bytes: int) -> Operation:
    return (yield nv.FetchRequest(topic, partition, offset, max_bytes, group_id, max_wait_ms, min_bytes))


def _commit(topic: str, partition: int, group_id: str, offset: int, metadata: str) -> Operation:
    return (yield nv.OffsetCommitRequest(topic, partition, group_id, offset, metadata)).success


def _committed(topic: str, partition: int, group_id: str) -> Operation:
    return (yield nv.OffsetFetchRequest(topic, partition, group_id)).offset


def _create_topic(topic: str, partitions: int) -> Operation:
    return (yield nv.CreateTopicRequest(topic, partitions)).created


def _delete_topic(topic: str) -> Operation:
    return (yield nv.DeleteTopicRequest(topic)).deleted


def _list_topics() -> Operation:
    return (yield nv.ListTopicsRequest()).topics


def _describe_topic(topic: str, details: bool = False, partitions: Iterable[int] | None = None,
                    at_timestamp: int | None = None) -> Operation:
    return (yield nv.DescribeTopicRequest(topic, details, None if partitions is None else list(partitions),
                                          at_timestamp))


def _create_partitions(topic: str, partitions: int, validate_only: bool) -> Operation:
    return (yield nv.CreatePartitionsRequest(topic, partitions, validate_only)).partitions


def _delete_records(topic: str, partition: int, offset: int) -> Operation:
    return (yield nv.DeleteRecordsRequest(topic, partition, offset)).log_start_offset


def _alter_topic_config(topic: str, set: Mapping[str, int | str] | None, delete: Iterable[str],
                        validate_only: bool) -> Operation:
    return (yield nv.AlterTopicConfigRequest(topic, dict(set or {}), list(delete), validate_only)).altered


def _describe_topic_config(topic: str, keys: Iterable[str] | None) -> Operation:
    return (yield nv.DescribeTopicConfigRequest(topic, None if keys is None else list(keys))).configs


def _delete_group_offsets(group_id: str, partitions: Iterable[tuple[str, int]] | None) -> Operation:
    pairs = None if partitions is None else [tuple(p) for p in partitions]
    return (yield nv.DeleteGroupOffsetsRequest(group_id, pairs)).deleted


def _list_groups() -> Operation:
    """Every group, page after page (the gateway answers as many as fit one frame)."""
    groups: list[nv.GroupSummary] = []
    after = None
    while True:
        page = yield nv.ListGroupsRequest(after)
        groups += page.groups
        if page.next is None:
            return groups
        after = page.next


def _describe_group(group_id: str) -> Operation:
    return (yield nv.DescribeGroupRequest(group_id))


def _reset_group_offsets(group_id: str, to: str, value: int | None, topics, validate_only: bool) -> Operation:
    pairs = None if topics is None else [(t, None if ps is None else list(ps)) for t, ps in topics]
    return (yield nv.ResetGroupOffsetsRequest(group_id, to, value, pairs, validate_only))


def _ping() -> Operation:
    answer = yield nv.PingRequest()
    if not isinstance(answer, nv.PongResponse):
        raise RemoteProtocolError(f"a Ping answered with {answer!r:.200}")


def _authenticate(token: str) -> Operation:
    yield nv.AuthRequest(token)


def _login(user: str, password: str, mechanism: str | None) -> Operation:
    """Log in as `user`: with a SCRAM `mechanism` the password never crosses the connection (and the gateway proves
    it knows the user's credential); without, the password is sent (use TLS). Returns the principal."""
    if mechanism is None:
        return (yield nv.AuthRequest(user=user, password=password)).principal
    scram = ScramClient(mechanism, user, password, new_nonce())
    first = yield nv.AuthRequest(mechanism=mechanism, message=scram.first().decode())
    final = yield nv.AuthRequest(mechanism=mechanism, message=scram.final((first.message or "").encode()).decode())
    scram.verify((final.message or "").encode())
    return final.principal


def _set_password(user: str, password: str, mechanism: str, iterations: int) -> Operation:
    salt = secrets.token_bytes(SALT_BYTES)
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return (yield nv.AlterUserRequest(user, mechanism, iterations, salt, salted)).altered


def _security(event: Any, field: str | None) -> Operation:
    answer = yield event
    return answer if field is None else getattr(answer, field)


def _timeout(timeout: float | None, event: Any) -> float | None:
    """A long-polling fetch may be answered only after its wait: the timeout starts after it."""
    wait = getattr(event, "max_wait_ms", 0)
    return timeout if timeout is None or not wait else timeout + wait / 1000


def _checked(event: Any) -> Any:
    if isinstance(event, nv.ErrorResponse):
        raise NativeError(event.message)
    if event is nv.CLOSED:
        raise ConnectionClosed("the gateway closed the connection")
    return event


# -- blocking ----------------------------------------------------------------------------------------------------

class NativeClient(BlockingClient):
    """A blocking native-protocol client over one connection (see the module docstring). Not thread-safe."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, timeout: float | None = 30.0,
                 connect_timeout: float | None = 10.0, ssl_context=None, server_hostname: str | None = None,
                 token: str | None = None, raise_errors: bool = True, user: str | None = None,
                 password: str | None = None, mechanism: str | None = None) -> None:
        """Connect (over TLS with `ssl_context`) and, with `token` or `user` (and `password`, and a SCRAM
        `mechanism` or None), log in before anything else."""
        self.timeout = timeout
        self.raise_errors = raise_errors
        self.stream = BlockingStream.connect(host, port, connect_timeout=connect_timeout, timeout=timeout,
                                             ssl_context=ssl_context, server_hostname=server_hostname)
        self.codec = nv.NativeConnection("client")
        try:
            if token is not None:
                self.authenticate(token)
            elif user is not None:
                self.login(user, password or "", mechanism)
        except BaseException:
            self.close()
            raise

    # -- low level --------------------------------------------------------------------------------------------
    def prepare(self, event: Any) -> bytes:
        """The frame of one request, not sent (write it later with `send_raw`)."""
        return self.codec.send(event)

    def send(self, event: Any) -> None:
        """Write one request; `receive()` returns its answer (answers come in request order)."""
        self.stream.send_all(self.codec.send(event))

    def receive(self, *, timeout: float | None = None) -> Any:
        """The next event as it comes: a response, an `ErrorResponse`, or `CLOSED`."""
        return self.next_event(self._deadline(timeout))

    def request(self, event: Any, *, timeout: float | None = None) -> Any:
        """Send one request and return its answer (errors raised unless `raise_errors` is off)."""
        self.send(event)
        answer = self.receive(timeout=_timeout(self.timeout if timeout is None else timeout, event))
        return _checked(answer) if self.raise_errors else answer

    def _exchange(self, event: Any) -> Any:
        self.send(event)
        return _checked(self.receive(timeout=_timeout(self.timeout, event)))

    def _run(self, operation: Operation) -> Any:
        return drive_blocking(operation, self._exchange)

    # -- requests ---------------------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: Iterable[bytes | Record]) -> list[int]:
        """Append records (bytes or `Record`s with key / timestamp); their offsets."""
        return self._run(_produce(topic, partition, records))

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_FETCH_BYTES, *,
              group_id: str | None = None, max_wait_ms: int = 0, min_bytes: int = 0) -> nv.FetchResponse:
        return self._run(_fetch(topic, partition, offset, max_bytes, group_id, max_wait_ms, min_bytes))

    def commit(self, topic: str, partition: int, group_id: str, offset: int, metadata: str = "") -> bool:
        return self._run(_commit(topic, partition, group_id, offset, metadata))

    def committed(self, topic: str, partition: int, group_id: str) -> int | None:
        return self._run(_committed(topic, partition, group_id))

    def create_topic(self, topic: str, partitions: int = 1) -> bool:
        return self._run(_create_topic(topic, partitions))

    def delete_topic(self, topic: str) -> bool:
        return self._run(_delete_topic(topic))

    def list_topics(self) -> list[nv.TopicSummary]:
        return self._run(_list_topics())

    def describe_topic(self, topic: str, *, details: bool = False, partitions: Iterable[int] | None = None,
                       at_timestamp: int | None = None) -> nv.DescribeTopicResponse:
        """Each partition's offsets (or those of `partitions` only); with `details` also its size on disk and
        segments, and the topic's format; with `at_timestamp` (ms) also where a reader starting then begins."""
        return self._run(_describe_topic(topic, details, partitions, at_timestamp))

    def create_partitions(self, topic: str, partitions: int, *, validate_only: bool = False) -> int:
        """Grow `topic` to `partitions` partitions in all; the count it has after the call."""
        return self._run(_create_partitions(topic, partitions, validate_only))

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Delete the partition's records below `offset` (-1: all visible ones); its log start offset after."""
        return self._run(_delete_records(topic, partition, offset))

    def alter_topic_config(self, topic: str, set: Mapping[str, int | str] | None = None, delete: Iterable[str] = (),
                           *, validate_only: bool = False) -> bool:
        """Set and remove config overrides (Kafka names); True when altered (False with `validate_only`)."""
        return self._run(_alter_topic_config(topic, set, delete, validate_only))

    def describe_topic_config(self, topic: str, keys: Iterable[str] | None = None) -> list[nv.TopicConfigEntry]:
        return self._run(_describe_topic_config(topic, keys))

    def delete_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None) -> int:
        """Delete the group's committed offsets (all, or those of the (topic, partition) pairs); how many."""
        return self._run(_delete_group_offsets(group_id, partitions))

    def list_groups(self) -> list[nv.GroupSummary]:
        """Every group: those with committed offsets and the Kafka groups the gateway's coordinator holds."""
        return self._run(_list_groups())

    def describe_group(self, group_id: str) -> nv.DescribeGroupResponse:
        """State, members (a live Kafka group) and per partition the committed and log end offsets."""
        return self._run(_describe_group(group_id))

    def reset_group_offsets(self, group_id: str, to: str, value: int | None = None, *,
                            topics: Iterable[tuple[str, Iterable[int] | None]] | None = None,
                            validate_only: bool = False) -> nv.ResetGroupOffsetsResponse:
        """Move the group's offsets to `to` ("earliest", "latest", "offset" `value`, "timestamp" `value` ms) on
        `topics` ((topic, partitions or None) pairs; None: the partitions it committed). Refused while its Kafka
        group is active; with `validate_only` only the plan comes back."""
        return self._run(_reset_group_offsets(group_id, to, value, topics, validate_only))

    def ping(self) -> None:
        self._run(_ping())

    def authenticate(self, token: str) -> None:
        """The `Auth` request (the first request on a gateway with `auth.native_token`)."""
        self._run(_authenticate(token))

    def login(self, user: str, password: str, mechanism: str | None = None) -> str:
        """Log in as `user` (see `_login`); the principal the connection now is."""
        return self._run(_login(user, password, mechanism))

    # -- security administration (ACLs, users' SCRAM credentials, client quotas) ------------------------------
    def describe_acls(self, flt: nv.AclEntry = nv.AclEntry()) -> list[nv.AclEntry]:
        return self._run(_security(nv.DescribeAclsRequest(flt), "acls"))

    def create_acls(self, acls: Iterable[nv.AclEntry]) -> int:
        return self._run(_security(nv.CreateAclsRequest(list(acls)), "created"))

    def delete_acls(self, flt: nv.AclEntry) -> list[nv.AclEntry]:
        return self._run(_security(nv.DeleteAclsRequest(flt), "acls"))

    def describe_users(self, users: Iterable[str] | None = None) -> list[nv.UserCredentials]:
        return self._run(_security(nv.DescribeUsersRequest(None if users is None else list(users)), "users"))

    def set_password(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                     iterations: int = MIN_ITERATIONS) -> bool:
        """Give `user` a SCRAM credential of `mechanism` for `password`, salted here."""
        return self._run(_set_password(user, password, mechanism, iterations))

    def delete_credential(self, user: str, mechanism: str) -> bool:
        return self._run(_security(nv.AlterUserRequest(user, mechanism, delete=True), "altered"))

    def describe_quotas(self, components: Iterable[nv.QuotaComponent] = (), strict: bool = False
                        ) -> list[nv.QuotaEntry]:
        """The quotas of the entities the components match (none: every entity; `strict`: no other entity type)."""
        return self._run(_security(nv.DescribeQuotasRequest(list(components), strict), "quotas"))

    def alter_quotas(self, entity: Iterable[tuple[str, str | None]], set: Mapping[str, float] | None = None,
                     delete: Iterable[str] = (), validate_only: bool = False) -> bool:
        """Set and delete quotas of `entity` ((type, name or None for the default) pairs); False with
        `validate_only`."""
        return self._run(_security(nv.AlterQuotasRequest(list(entity), dict(set or {}), list(delete), validate_only),
                                   "altered"))


# -- trio --------------------------------------------------------------------------------------------------------

class AsyncNativeClient(TrioClient):
    """The trio twin of `NativeClient`: the same calls, awaited. `timeout` defaults to None (use cancel scopes)."""

    def __init__(self, stream, *, timeout: float | None = None, raise_errors: bool = True) -> None:
        """Over an open trio stream (a `trio.SocketStream`, `trio.SSLStream`, or a `TrioStream`)."""
        self.transport = stream if isinstance(stream, TrioStream) else TrioStream(stream)
        self.timeout = timeout
        self.raise_errors = raise_errors
        self.codec = nv.NativeConnection("client")

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, timeout: float | None = None,
                      connect_timeout: float | None = 10.0, ssl_context=None, server_hostname: str | None = None,
                      token: str | None = None, raise_errors: bool = True) -> "AsyncNativeClient":
        transport = await TrioStream.connect(host, port, connect_timeout=connect_timeout, ssl_context=ssl_context,
                                             server_hostname=server_hostname)
        client = cls(transport, timeout=timeout, raise_errors=raise_errors)
        if token is not None:
            try:
                await client.authenticate(token)
            except BaseException:
                await client.aclose()
                raise
        return client

    # -- low level --------------------------------------------------------------------------------------------
    def prepare(self, event: Any) -> bytes:
        return self.codec.send(event)

    async def send(self, event: Any) -> None:
        await self.transport.send_all(self.codec.send(event))

    async def receive(self, *, timeout: float | None = None) -> Any:
        return await self.next_event(self._deadline(timeout))

    async def request(self, event: Any, *, timeout: float | None = None) -> Any:
        await self.send(event)
        answer = await self.receive(timeout=_timeout(self.timeout if timeout is None else timeout, event))
        return _checked(answer) if self.raise_errors else answer

    async def _exchange(self, event: Any) -> Any:
        await self.send(event)
        return _checked(await self.receive(timeout=_timeout(self.timeout, event)))

    async def _run(self, operation: Operation) -> Any:
        return await drive_trio(operation, self._exchange)

    # -- requests ---------------------------------------------------------------------------------------------
    async def produce(self, topic: str, partition: int, records: Iterable[bytes | Record]) -> list[int]:
        return await self._run(_produce(topic, partition, records))

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_FETCH_BYTES, *,
                    group_id: str | None = None, max_wait_ms: int = 0, min_bytes: int = 0) -> nv.FetchResponse:
        return await self._run(_fetch(topic, partition, offset, max_bytes, group_id, max_wait_ms, min_bytes))

    async def commit(self, topic: str, partition: int, group_id: str, offset: int, metadata: str = "") -> bool:
        return await self._run(_commit(topic, partition, group_id, offset, metadata))

    async def committed(self, topic: str, partition: int, group_id: str) -> int | None:
        return await self._run(_committed(topic, partition, group_id))

    async def create_topic(self, topic: str, partitions: int = 1) -> bool:
        return await self._run(_create_topic(topic, partitions))

    async def delete_topic(self, topic: str) -> bool:
        return await self._run(_delete_topic(topic))

    async def list_topics(self) -> list[nv.TopicSummary]:
        return await self._run(_list_topics())

    async def describe_topic(self, topic: str, *, details: bool = False, partitions: Iterable[int] | None = None,
                             at_timestamp: int | None = None) -> nv.DescribeTopicResponse:
        return await self._run(_describe_topic(topic, details, partitions, at_timestamp))

    async def create_partitions(self, topic: str, partitions: int, *, validate_only: bool = False) -> int:
        return await self._run(_create_partitions(topic, partitions, validate_only))

    async def delete_records(self, topic: str, partition: int, offset: int) -> int:
        return await self._run(_delete_records(topic, partition, offset))

    async def alter_topic_config(self, topic: str, set: Mapping[str, int | str] | None = None,
                                 delete: Iterable[str] = (), *, validate_only: bool = False) -> bool:
        return await self._run(_alter_topic_config(topic, set, delete, validate_only))

    async def describe_topic_config(self, topic: str, keys: Iterable[str] | None = None) -> list[nv.TopicConfigEntry]:
        return await self._run(_describe_topic_config(topic, keys))

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None) -> int:
        return await self._run(_delete_group_offsets(group_id, partitions))

    async def list_groups(self) -> list[nv.GroupSummary]:
        return await self._run(_list_groups())

    async def describe_group(self, group_id: str) -> nv.DescribeGroupResponse:
        return await self._run(_describe_group(group_id))

    async def reset_group_offsets(self, group_id: str, to: str, value: int | None = None, *,
                                  topics: Iterable[tuple[str, Iterable[int] | None]] | None = None,
                                  validate_only: bool = False) -> nv.ResetGroupOffsetsResponse:
        return await self._run(_reset_group_offsets(group_id, to, value, topics, validate_only))

    async def ping(self) -> None:
        await self._run(_ping())

    async def authenticate(self, token: str) -> None:
        await self._run(_authenticate(token))

    async def login(self, user: str, password: str, mechanism: str | None = None) -> str:
        return await self._run(_login(user, password, mechanism))
