"""Who is asking the admin listener, and may they: the `Host` check (DNS rebinding), the login (HTTP Basic with a
user's password, or a bearer token) and the ACL checks of each endpoint.

- **Host.** A browser sends the name it resolved in `Host`; a page of another site whose name was made to resolve to
  this listener (DNS rebinding) sends *its* name. So every request but the probes (`/health`, `/ready`) must name
  this listener as an IP address, `localhost`, or one of `auth.admin_hosts`: anything else is 421 (Misdirected
  Request), before any data or action is looked at. A request without `Host` (HTTP/1.0 tools) is not a browser's.
- **Login.** Where the gateway requires authentication (`security.authentication_required`), every request but the
  probes, the console's static files and what it may do (`/api/console`) needs `Authorization: Basic
  <user:password>` (checked as a PLAIN login: `security.Users`) or `Bearer <auth.native_token>` (the token's
  principal, a super user); without one, 401 with a Basic challenge (none for the console's own requests, which
  show its login form instead: `X-Logway-Console`).
  Use TLS (`listeners.admin.tls`) so the password does not cross the network in clear text. With
  `listeners.admin.tls_client_auth` (mutual TLS), a request without `Authorization` over a connection whose client
  certificate the listener verified is that certificate's principal (`tls.principal_mapping_rules`, as on every
  listener: a subject no rule maps is refused, 401) — a login like the others. Without required authentication a
  request with neither is the listener's principal (`listeners.admin.principal`), held to its ACLs.
- **ACLs** (the same authorizer as every protocol; refusals are 403, counted as protocol `admin` and logged):
  `/metrics` and `/api/rates` need Describe on the cluster; `/api/topics` lists the topics the caller may
  Describe, `/api/groups` the groups (and their topics' partitions) it may Describe; the message browser needs Read
  on the topic; the console's actions need what their native request needs (`protocols/native/authz.py`). `/ready`
  tells an anonymous prober only whether the gateway is ready; its listeners and memory figures need Describe on the
  cluster.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
from dataclasses import dataclass

from ..security import CLUSTER, TOKEN_PRINCIPAL, Operation, ResourceType, authentication_required, user_principal
from ..tls import NoMatchingRule, certificate_principal
from .http import HttpAnswer, HttpRequest
from .http import json_answer as _json

log = logging.getLogger("logway.gateway.admin")

__all__ = ["AdminAccess", "Caller", "OPEN_PATHS", "STATIC_PATHS"]

#: Probes: answered whatever the Host and without a login, and without data for an anonymous caller.
OPEN_PATHS = frozenset({"/health", "/ready"})
#: The console's static files (no data in them): no login needed, but the Host must be this listener's.
STATIC_PATHS = frozenset({"/", "/console.js", "/console.css"})
#: The header the console sets on its requests: a refused login gets no Basic challenge (the browser's own
#: dialog would pop up over the console's login form).
CONSOLE_HEADER = "x-logway-console"
#: The longest Authorization header read (a user name and a password, base64): longer ones are refused unread.
MAX_CREDENTIALS_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made an admin request, as the authorizer sees a connection."""

    principal: str
    address: str
    peer: str
    protocol: str = "admin"
    internal: bool = False


def _address(peer: str) -> str:
    """The IP address of a `host:port` or `[v6]:port` peer."""
    host = peer.rsplit(":", 1)[0] if peer else ""
    return host.strip("[]")


def _host_name(header: str) -> str:
    """The host of a Host header, without its port (and without the brackets of an IPv6 address)."""
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class AdminAccess:
    def __init__(self, gateway) -> None:
        self.gateway = gateway
        config = gateway.config
        self.names = {"localhost"} | {n.strip().lower() for n in config.auth.admin_hosts.split(",") if n.strip()}
        self.default_principal = config.listeners["admin"].principal
        self.token = config.auth.native_token
        self.tls = config.tls
        self.required = authentication_required(config)

    @property
    def security(self):
        return self.gateway.security  # (None until storage is open)

    def misdirected(self, request: HttpRequest, path: str) -> HttpAnswer | None:
        """421 for a request whose Host is not this listener's (the probes excepted), else None."""
        host = request.headers.get("host")
        if host is None or path in OPEN_PATHS:
            return None
        name = _host_name(host.strip()).lower()
        try:
            ipaddress.ip_address(name)
            return None
        except ValueError:
            pass
        if name in self.names:
            return None
        log.warning("%s: refused a request for Host %r (not a name of this listener: auth.admin_hosts)",
                    request.peer or "?", host[:100])
        return _json(421, {"error": f"this listener does not serve {host[:100]!r}: add the name to auth.admin_hosts"})

    async def caller(self, request: HttpRequest) -> Caller | None:
        """Who `request` comes from: its login, else its verified client certificate's principal, else the
        listener's principal where no login is required; None when a login is required and there is none (or it
        fails, or the certificate's subject maps to no name)."""
        address = _address(request.peer)
        header = request.headers.get("authorization", "")
        if header:
            principal = await self._login(header, request.peer)
        elif request.peer_cert is not None:
            principal = self._certificate(request)
        else:
            return None if self.required else Caller(self.default_principal, address, request.peer or "?")
        return None if principal is None else Caller(principal, address, request.peer or "?")

    def _certificate(self, request: HttpRequest) -> str | None:
        try:
            return certificate_principal(request.peer_cert, self.tls)
        except NoMatchingRule as exc:
            log.warning("%s: admin: client certificate refused: %s", request.peer or "?", exc)
            return None

    async def _login(self, header: str, peer: str) -> str | None:
        if len(header) > MAX_CREDENTIALS_BYTES or self.security is None:
            return None
        scheme, _, value = header.partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer":
            from ..protocols.native import token_matches

            if self.token and token_matches(self.token, value):
                return TOKEN_PRINCIPAL
        elif scheme == "basic":
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, ValueError, UnicodeDecodeError):
                user, sep, password = "", "", ""
            if sep and user and await self.security.users.check_password(user, password):
                return user_principal(user)
        log.warning("%s: admin login failed (%s)", peer or "?", scheme or "no scheme")
        return None

    def unauthorized(self, request: HttpRequest) -> HttpAnswer:
        headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        if CONSOLE_HEADER not in request.headers:
            headers.append(("WWW-Authenticate", 'Basic realm="logway", charset="UTF-8"'))
        return 401, headers, (b'{"error":"authentication required: log in (HTTP Basic: a user and its password; or '
                              b'Bearer: the access token)","Error":{"message":"authentication required: log in"}}')

    def may(self, caller: Caller, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """The authorizer's answer for the caller, a refusal counted and logged."""
        return self.security.authorizer.check(caller, operation, resource_type, name)

    def sees(self, caller: Caller, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """The answer without counting a refusal (filtering what a list shows)."""
        return self.security.authorizer.allowed(caller.principal, caller.address, operation, resource_type, name)

    def may_describe_cluster(self, caller: Caller, *, quiet: bool = False) -> bool:
        return (self.sees if quiet else self.may)(caller, Operation.DESCRIBE, *CLUSTER)

    @staticmethod
    def forbidden(what: str) -> HttpAnswer:
        return _json(403, {"error": f"not authorized: {what}", "Error": {"message": f"not authorized: {what}"}})
