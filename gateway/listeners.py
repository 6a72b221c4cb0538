"""Listening: a protocol's listener bound with `open_tcp_listeners`, connections taken from the backlog in batches,
admitted against the connection limits, wrapped in TLS when the listener asks for it, and served by the pump.
A listener that cannot bind raises `errors.ListenerError` (the listener, the address and what to change).
`warn_if_exposed` logs the warning for a listener bound to a non-loopback address. `listen_relay` serves a worker's
relay socket (`cluster/relays.py`): the other workers' connections, from this user only, outside the limits, never TLS;
`listen_cluster_relay` the TCP relay socket of a gateway of a cluster over one database (the others' connections,
each opening with the cluster's secret).

A listener with `tls: true` wraps each accepted connection in a trio SSL stream; the handshake must finish within
`limits.request_timeout_ms` (a client that stalls it is dropped like any slow client). With mutual TLS the verified
client certificate's subject becomes the connection's principal (`tls.client_principal`); one no mapping rule names
is closed.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import ssl

import trio

from .connections import Connection, ConnectionRegistry
from .errors import ListenerError
from .pump import serve_connection
from .cluster.relays import PREAMBLE_BYTES, PREAMBLE_TIMEOUT, preamble_protocol, same_user
from .tls import NoMatchingRule, client_principal

log = logging.getLogger("logway.gateway")

#: How a connection ends when the client goes away: not an error worth a traceback.
_PEER_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


async def listen(protocol, listener_config, connections: ConnectionRegistry, limits, ssl_context,
                 conn_nursery: trio.Nursery, *, bound: socket.socket | None = None,
                 task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind `protocol`'s listener — or take `bound`, a listening socket made elsewhere (with `workers: N`, this
    worker's socket on the shared port) —, report the bound (host, port), and serve its connections in
    `conn_nursery`."""
    name = protocol.name
    if bound is not None:
        sockets = [trio.SocketListener(trio.socket.from_stdlib_socket(bound))]
    else:
        try:
            sockets = await trio.open_tcp_listeners(listener_config.port, host=listener_config.host)
        except OSError as exc:  # port in use, privileged port, unknown host: one line naming listener and address
            raise ListenerError(name, listener_config.host, listener_config.port, exc) from exc
    sockname = sockets[0].socket.getsockname()
    task_status.started((sockname[0], sockname[1]))

    async def accepted(stream: trio.SocketStream) -> None:
        conn = connections.admit(name, stream)
        if conn is None:
            log.warning("%s: connection limit reached (%d in all, %d per address); closing a new connection",
                        name, connections.limit, connections.per_address)
            await stream.aclose()
            return
        await serve(stream, conn, protocol, connections, limits, ssl_context)

    async with trio.open_nursery() as accepting:
        for sock in sockets:
            accepting.start_soon(serve_backlog, sock, accepted, conn_nursery)


async def listen_relay(protocol, sock: socket.socket, connections: ConnectionRegistry, limits,
                       conn_nursery: trio.Nursery, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve the other workers' connections to this worker's relay socket for `protocol` (`sock`, bound and
    listening: `cluster.relays.bind_relay`) in `conn_nursery`: a peer of another user is closed unserved."""
    task_status.started()
    name = protocol.name

    async def accepted(stream: trio.SocketStream) -> None:
        if not same_user(stream.socket):
            log.warning("%s relay socket: a process of another user connected; closed", name)
            await stream.aclose()
            return
        conn = connections.admit_internal(name)
        if conn is None:  # shutting down
            await stream.aclose()
            return
        await serve(stream, conn, protocol, connections, limits)

    await serve_backlog(trio.SocketListener(trio.socket.from_stdlib_socket(sock)), accepted, conn_nursery)


async def listen_cluster_relay(protocols: dict, host: str, port: int, secret: str, connections: ConnectionRegistry,
                               limits, conn_nursery: trio.Nursery, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind the TCP relay socket of a gateway of a cluster over one database (`cluster/relays.py`), report its
    (host, port), and serve the other gateways' connections in `conn_nursery`: each names its protocol (one of
    `protocols`) and the cluster's `secret` in its first `PREAMBLE_BYTES` bytes, or is closed unserved."""
    try:
        sockets = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ListenerError("relay", host, port, exc) from exc
    sockname = sockets[0].socket.getsockname()
    task_status.started((sockname[0], sockname[1]))

    async def accepted(stream: trio.SocketStream) -> None:
        data = b""
        with trio.move_on_after(PREAMBLE_TIMEOUT):
            try:
                while len(data) < PREAMBLE_BYTES:
                    got = await stream.receive_some(PREAMBLE_BYTES - len(data))
                    if not got:
                        break
                    data += got
            except _PEER_GONE:
                pass
        protocol = protocols.get(preamble_protocol(data, secret) or "")
        if protocol is None:
            log.warning("relay socket: a connection from %s did not name a protocol with the cluster's secret; "
                        "closed", _peer(stream))
            await stream.aclose()
            return
        conn = connections.admit_internal(protocol.name)
        if conn is None:  # shutting down
            await stream.aclose()
            return
        await serve(stream, conn, protocol, connections, limits)

    async with trio.open_nursery() as accepting:
        for sock in sockets:
            accepting.start_soon(serve_backlog, sock, accepted, conn_nursery)


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


async def serve(stream: trio.abc.Stream, conn: Connection, protocol, connections: ConnectionRegistry,
                limits, ssl_context=None, resumed=None) -> None:
    """Serve one admitted connection with the pump until it ends (after a TLS handshake when `ssl_context` is given;
    from a handed-over state with `resumed`, a `pump.Resumed`) or is handed over, then release and close it (closing
    this process's descriptor: a connection handed over stays open at its new worker). A peer that goes away is not an
    error; anything else is logged, and never reaches the other connections."""
    try:
        with conn.scope:
            if ssl_context is not None:
                tls = await _tls_handshake(stream, ssl_context, conn, limits.request_timeout_ms / 1000)
                if tls is None:
                    return
                stream = tls
                if ssl_context.verify_mode != ssl.CERT_NONE:  # mutual TLS: the certificate names the principal
                    try:
                        conn.principal = client_principal(tls, protocol.config.tls) or conn.principal
                    except NoMatchingRule as exc:
                        log.warning("%s: closing: client certificate refused: %s", conn.peer, exc)
                        return
            await serve_connection(stream, conn, protocol, limits, resumed)
    except _PEER_GONE:
        pass
    except ExceptionGroup as group:  # the pump's nursery (parked answers) reports the peer leaving as a group
        rest = group.subgroup(lambda e: not isinstance(e, (*_PEER_GONE, ExceptionGroup)))
        if rest is not None:
            log.error("%s: connection handler crashed", protocol.name, exc_info=rest)
    except Exception:
        log.exception("%s: connection handler crashed", protocol.name)
    finally:
        connections.release(conn)
        await _close(stream, conn)


async def _close(stream: trio.abc.Stream, conn: Connection) -> None:
    if type(stream) is trio.SocketStream:  # (its `aclose` closes the socket, then adds a scheduler pass: not needed)
        stream.socket.close()
        return
    with trio.move_on_after(1) as cleanup:
        cleanup.shield = True
        try:
            await stream.aclose()
        except Exception as exc:  # e.g. a TLS close_notify to a peer that vanished: nothing to do
            log.debug("%s: closing: %r", conn.peer, exc)


async def _tls_handshake(tcp: trio.SocketStream, context, conn: Connection, timeout: float) -> trio.SSLStream | None:
    """The TLS stream over `tcp`, or None when the client failed or stalled the handshake (it is closed)."""
    stream = trio.SSLStream(tcp, context, server_side=True)
    with trio.move_on_after(timeout):
        try:
            await stream.do_handshake()
            return stream
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("%s: TLS handshake failed: %s", conn.peer, exc.__cause__ or exc)
            return None
    log.info("%s: TLS handshake not complete in time", conn.peer)
    return None


#: Connections taken from a listening socket's backlog per wake-up. trio's own accept loop takes one per scheduler
#: pass: a dozen a second when a thousand busy connections share the loop, so clients arriving under load waited
#: for seconds (`logway bench load --storm`).
ACCEPT_BATCH = 256
#: accept() failures that mean "out of resources": pause instead of spinning (trio's SocketListener does the same).
_ACCEPT_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
#: accept() failures that concern only the connection being accepted (it was reset before we took it).
_ACCEPT_SKIP_ERRNOS = {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}


async def serve_backlog(listener: trio.SocketListener, accepted, nursery: trio.Nursery) -> None:
    """Accept connections on `listener` in batches and start `accepted(stream)` for each in `nursery`."""
    raw = socket.socket(fileno=listener.socket.detach())
    raw.setblocking(False)
    try:
        while True:
            await trio.lowlevel.wait_readable(raw)
            for _ in range(ACCEPT_BATCH):
                try:
                    sock, _ = raw.accept()
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno in _ACCEPT_SKIP_ERRNOS:
                        continue
                    if exc.errno not in _ACCEPT_RESOURCE_ERRNOS:
                        raise
                    log.error("accept failed: %s; pausing for 100 ms", exc)
                    await trio.sleep(0.1)
                    break
                nursery.start_soon(accepted, trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
    finally:
        trio.lowlevel.notify_closing(raw)
        raw.close()


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def warn_if_exposed(name: str, host: str, *, logins: bool = False, tls: bool = False) -> None:
    """Log a warning when listener `name` is bound to `host` reachable from other hosts (the gateway's own
    listeners, and a `workers: N` supervisor's admin listener); for the admin listener, `logins`: it asks who you
    are (the gateway requires logins), `tls`: it serves HTTPS."""
    if is_loopback(host):
        return
    if name == "admin" and not logins:
        log.warning("admin listener is bound to %s: its metrics and console (topics, groups, record contents, and "
                    "actions that change them) are reachable from other hosts, held only to the ACLs of "
                    "listeners.admin.principal (no login is required: see docs/security.md)", host)
    elif name == "admin" and not tls:
        log.warning("admin listener is bound to %s without TLS: its logins (HTTP Basic passwords, the access "
                    "token) cross the network in clear text (set listeners.admin.tls)", host)
    else:
        log.warning("%s listener is bound to %s: reachable from other hosts (an explicit config choice; see the "
                    "threat model in docs/security.md)", name, host)
