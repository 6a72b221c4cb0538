"""A small blocking client for the native protocol, on top of `logway.codecs.native`.

Used by the `logway topics` and `logway bench` commands and by tests; it is also the simplest example of
speaking the native protocol. Errors from the gateway raise `NativeError` with the gateway's message.
"""

from __future__ import annotations

import socket
import ssl
from typing import Iterable

from logway.codecs import native as nv
from logway.codecs.records import Record

RECEIVE_CHUNK = 1024 * 1024


class NativeError(Exception):
    """The gateway answered with an Error response."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NativeClient:
    def __init__(self, host: str = "127.0.0.1", port: int = 9898, *, timeout: float | None = 30.0,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 token: str | None = None) -> None:
        """Connect (over TLS with `ssl_context`) and, with `token`, authenticate before anything else."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        self.sock = sock
        self.codec = nv.NativeConnection("client")
        if token is not None:
            self.request(nv.AuthRequest(token))

    # -- plumbing ----------------------------------------------------------------------------------------
    def request(self, event):
        """Send one request and return the response event (ErrorResponse raises NativeError)."""
        self.sock.sendall(self.codec.send(event))
        return self._response()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _response(self):
        while True:
            event = self.codec.next_event()
            if event is nv.NEED_DATA:
                data = self.sock.recv(RECEIVE_CHUNK)
                self.codec.receive_data(data)
                continue
            if event is nv.CLOSED:
                raise ConnectionError("the gateway closed the connection")
            if isinstance(event, nv.ErrorResponse):
                raise NativeError(event.message)
            return event

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "NativeClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: Iterable[bytes | Record]) -> list[int]:
        recs = [r if isinstance(r, Record) else Record(bytes(r)) for r in records]
        return self.request(nv.ProduceRequest(topic, partition, recs)).offsets

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1024 * 1024, *,
              group_id: str | None = None, max_wait_ms: int = 0, min_bytes: int = 0) -> nv.FetchResponse:
        return self.request(nv.FetchRequest(topic, partition, offset, max_bytes, group_id, max_wait_ms, min_bytes))

    def commit(self, topic: str, partition: int, group_id: str, offset: int) -> bool:
        return self.request(nv.OffsetCommitRequest(topic, partition, group_id, offset)).success

    def committed(self, topic: str, partition: int, group_id: str) -> int | None:
        return self.request(nv.OffsetFetchRequest(topic, partition, group_id)).offset

    def create_topic(self, topic: str, partitions: int = 1) -> bool:
        return self.request(nv.CreateTopicRequest(topic, partitions)).created

    def delete_topic(self, topic: str) -> bool:
        return self.request(nv.DeleteTopicRequest(topic)).deleted

    def list_topics(self) -> list:
        return self.request(nv.ListTopicsRequest()).topics

    def describe_topic(self, topic: str):
        return self.request(nv.DescribeTopicRequest(topic))

    def ping(self) -> None:
        self.request(nv.PingRequest())
