"""The admin listener's HTTP/1.1 server: h11 (sans-I/O, the HTTP parser and state machine) over trio streams.

Bounded on every side: at most `MAX_CONNECTIONS` connections — a new one past it closes the connection idle the
longest (else the one whose request has been arriving the longest), so probes of `/health` and `/ready` are
answered whatever other clients hold open; one busy answering is never closed, and when all are, the new one is
closed at once and counted as refused —, request heads of at most `MAX_HEAD_BYTES` (431), bodies of at most
`MAX_BODY_BYTES` (413; only the console's actions have one), a keep-alive connection idle for `KEEPALIVE_S` is
closed, a request that started must arrive whole within `limits.request_timeout_ms` (408) and its answer must be
taken by the client within the same time. A request h11 cannot parse gets 400 and the connection closes; other
connections, and the listener, go on. What to answer is `api.AdminApi`'s business: this module only speaks HTTP.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import h11
import orjson
import trio

from ..errors import ListenerError

log = logging.getLogger("logway.gateway.admin")

__all__ = ["KEEPALIVE_S", "MAX_BODY_BYTES", "MAX_CONNECTIONS", "MAX_HEAD_BYTES", "NO_STORE", "HttpAnswer",
           "HttpRequest", "json_answer", "serve_http", "text_answer"]

#: Admin connections open at once; the admin listener is for a scraper, probes and a few consoles.
MAX_CONNECTIONS = 64
#: The request line and headers together.
MAX_HEAD_BYTES = 16 * 1024
#: A request body: only the console's actions have one, a native request (a test message's value is its largest
#: part; the JSON array of its bytes takes ~4 bytes per byte).
MAX_BODY_BYTES = 64 * 1024
#: A keep-alive connection with no request in progress is closed after this long.
KEEPALIVE_S = 30.0
RECEIVE_CHUNK = 16 * 1024

#: (status, headers, body): what a handler answers.
HttpAnswer = tuple[int, list[tuple[str, str]], bytes]


@dataclass(slots=True)
class HttpRequest:
    """One request as a handler gets it: header names in lower case (a repeated header's values joined by ", "),
    the body whole (at most MAX_BODY_BYTES), the client's address, and the client certificate its TLS connection
    verified (as `ssl.SSLSocket.getpeercert()` gives it; None: none, or no TLS)."""

    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    peer: str = ""
    peer_cert: dict | None = None


Handler = Callable[[HttpRequest], Awaitable[HttpAnswer]]

#: Sent with every answer that must not be cached (all but the console's static files).
NO_STORE = ("Cache-Control", "no-store")


def json_answer(status: int, body) -> HttpAnswer:
    return status, [("Content-Type", "application/json"), NO_STORE], orjson.dumps(body)


def text_answer(status: int, message: str, headers: list[tuple[str, str]] = ()) -> HttpAnswer:
    return status, [("Content-Type", "text/plain; charset=utf-8"), *headers], (message + "\n").encode()


#: Sent with every answer.
COMMON_HEADERS = [("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
                  ("X-Frame-Options", "DENY"), ("Server", "logway")]


class AdminConnections:
    """The admin listener's live connections, and their counts (for `logway_connections_*{listener="admin"}`)."""

    def __init__(self) -> None:
        self.open = 0
        self.accepted = 0
        self.refused = 0
        self.shed = 0
        self.live: set[HttpConnection] = set()

    def make_room(self) -> bool:
        """At the limit: close the connection idle the longest, else the one whose request began first; False when
        every one is busy answering."""
        waiting = [c for c in self.live if c.waiting_since is not None and not c.scope.cancel_called]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: (c.begun, c.waiting_since))  # idle ones first, the oldest first
        victim.scope.cancel()
        self.shed += 1
        return True


async def serve_http(host: str, port: int, handler: Handler, counts: AdminConnections, request_timeout: float,
                     ssl_context=None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind (host, port), report the bound (host, port), and serve HTTP with `handler(request)` until
    cancelled. A bind failure raises `ListenerError` (the admin listener, the address, the key to set)."""
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:  # one line naming the listener, the address and the key to change
        raise ListenerError("admin", host, port, exc) from None
    sockname = listeners[0].socket.getsockname()
    if ssl_context is not None:  # the handshake happens on the first receive, under the request timeouts
        listeners = [trio.SSLListener(lst, ssl_context, https_compatible=True) for lst in listeners]
    task_status.started((sockname[0], sockname[1]))

    async def connection(stream: trio.abc.Stream) -> None:
        if counts.open >= MAX_CONNECTIONS and not counts.make_room():
            counts.refused += 1
            await trio.aclose_forcefully(stream)
            return
        counts.accepted += 1
        counts.open += 1
        http = HttpConnection(stream, handler, request_timeout, _peer(stream))
        counts.live.add(http)
        try:
            with http.scope:
                await http.serve()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass  # the client went away
        except Exception:
            log.exception("admin: connection handler crashed")
        finally:
            counts.live.discard(http)
            counts.open -= 1
            await trio.aclose_forcefully(stream)

    await trio.serve_listeners(connection, listeners)


class HttpConnection:
    """One keep-alive connection: requests one at a time, each answered in full before the next is read."""

    def __init__(self, stream: trio.abc.Stream, handler: Handler, request_timeout: float, peer: str = "") -> None:
        self.stream = stream
        self.handler = handler
        self.request_timeout = request_timeout
        self.peer = peer
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._head = False  # the request being answered is a HEAD: no body goes out
        self.scope = trio.CancelScope()  # cancelled to make room for a newer connection (`AdminConnections`)
        self.waiting_since: float | None = None  # while reading a request: since when (None: answering one)
        self.begun = False  # ... and whether its first bytes arrived
        self.peer_cert: dict | None = None  # the verified client certificate, once the TLS handshake is done

    async def serve(self) -> None:
        conn = self.conn
        while True:
            try:
                request = await self._read_request()
                if request is None:
                    return
                self._head = request.method == "HEAD"
                status, headers, body = await self.handler(request)
                await self.respond(status, headers, body)
            except _Refuse as refusal:
                await self._refuse(refusal.status, refusal.message)
            except h11.RemoteProtocolError as exc:
                await self._refuse(exc.error_status_hint, f"bad request: {exc}")
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is not h11.DONE:
                await self._linger()
                return
            conn.start_next_cycle()

    async def _read_request(self) -> HttpRequest | None:
        """The next request, its body read; None when the client closed or stayed idle for `KEEPALIVE_S`. Once a
        request has begun, it must be complete within the request timeout (else 408)."""
        conn = self.conn
        request = None
        body = bytearray()
        begun = self.begun = False
        self.waiting_since = trio.current_time()
        deadline = self.waiting_since + KEEPALIVE_S
        try:
            return await self._read(conn, request, body, begun, deadline)
        finally:
            self.waiting_since = None

    async def _read(self, conn, request, body: bytearray, begun: bool, deadline: float) -> HttpRequest | None:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = None
                with trio.move_on_at(deadline):
                    data = await self.stream.receive_some(RECEIVE_CHUNK)
                if data is None:
                    if not begun:
                        return None
                    raise _Refuse(408, "request not complete in time")
                if data and not begun:
                    begun = self.begun = True
                    deadline = trio.current_time() + self.request_timeout
                conn.receive_data(data)
                continue
            etype = type(event)
            if etype is h11.Request:
                request = event
                if _head_bytes(event) > MAX_HEAD_BYTES:  # (h11 bounds only a head that arrives in pieces)
                    raise _Refuse(431, f"request head over {MAX_HEAD_BYTES} bytes")
                if not begun:  # it was already buffered (pipelined)
                    begun = self.begun = True
                    deadline = trio.current_time() + self.request_timeout
            elif etype is h11.Data:
                if len(body) + len(event.data) > MAX_BODY_BYTES:
                    raise _Refuse(413, f"request body over {MAX_BODY_BYTES} bytes")
                body += event.data
            elif etype is h11.EndOfMessage:
                headers: dict[str, str] = {}
                for name, value in request.headers:
                    key = name.decode("ascii", "replace")  # (h11 gives them in lower case)
                    text = value.decode("latin-1")
                    headers[key] = f"{headers[key]}, {text}" if key in headers else text
                if self.peer_cert is None and isinstance(self.stream, trio.SSLStream):  # (handshake done by now)
                    self.peer_cert = self.stream.getpeercert() or None
                return HttpRequest(request.method.decode("ascii", "replace"),
                                   request.target.decode("ascii", "replace"), headers, bytes(body), self.peer,
                                   self.peer_cert)
            else:  # ConnectionClosed (or PAUSED, which cannot come before our answer)
                return None

    async def respond(self, status: int, headers: list[tuple[str, str]], body: bytes, *,
                      close: bool = False) -> None:
        headers = [*headers, *COMMON_HEADERS, ("Content-Length", str(len(body)))]
        if close:
            headers.append(("Connection", "close"))
        with trio.move_on_after(self.request_timeout) as sending:
            await self._send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
            if body and not self._head:
                await self._send(h11.Data(data=body))
            await self._send(h11.EndOfMessage())
        if sending.cancelled_caught:  # the client does not take its answer
            raise trio.ClosedResourceError("answer not taken in time")

    async def _send(self, event) -> None:
        data = self.conn.send(event)
        if data:
            await self.stream.send_all(data)

    async def _refuse(self, status: int, message: str) -> None:
        """Answer a request we refuse (then the connection closes), when HTTP still allows an answer."""
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        await self.respond(status, [("Content-Type", "text/plain; charset=utf-8")],
                           (message + "\n").encode("utf-8", "replace"), close=True)

    async def _linger(self) -> None:
        """Before closing: tell the client we are done and take what it is still sending, briefly, so that closing
        with unread data does not reset the connection before it read our answer."""
        send_eof = getattr(self.stream, "send_eof", None)
        with trio.move_on_after(1.0):
            try:
                if send_eof is not None:
                    await send_eof()
                drained = 0
                while drained < MAX_BODY_BYTES * 16:
                    data = await self.stream.receive_some(RECEIVE_CHUNK)
                    if not data:
                        break
                    drained += len(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, OSError):
                pass


class _Refuse(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_REASONS = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found",
            405: b"Method Not Allowed", 408: b"Request Timeout", 413: b"Content Too Large",
            415: b"Unsupported Media Type", 431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
            503: b"Service Unavailable"}


def _head_bytes(request: h11.Request) -> int:
    """The size of a request's line and headers as they came (give or take their spacing)."""
    return (len(request.method) + len(request.target) + 11
            + sum(len(name) + len(value) + 4 for name, value in request.headers))


def _peer(stream: trio.abc.Stream) -> str:
    """The client's address as `host:port`, for the log ("" when the stream has no socket)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    try:
        host, port = stream.socket.getpeername()[:2]
    except (AttributeError, OSError):
        return ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reason(status: int) -> bytes:
    return _REASONS.get(status, b"")
