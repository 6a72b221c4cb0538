"""What the commands that talk to a running gateway share: who they log in as (`Login`, from `--user` and the
environment), the connection to its native listener (`open_native`), the clients' errors as one line each
(`answers`: `Refused`, exit 1; `Usage`, exit 2), times given as arguments (`parse_time`), and for `logway topics …`,
`groups …`, `acls …` and `users …` the whole run (`run`).

Logging in: `--user USER` logs in as that user — with SCRAM (`--mechanism`, SCRAM-SHA-256 by default: the password
never crosses the connection) or `--mechanism PLAIN` (the password is sent: use it over TLS only) —, its password
taken from `LOGWAY_PASSWORD`, else asked on the terminal; without `--user`, `LOGWAY_TOKEN` is the gateway's access
token (`auth.native_token`) when set. Neither is ever an argument: arguments are visible to every user of the
machine (`ps`). `--tls-ca FILE` connects over TLS, trusting the certificates in FILE.

The connection starts with a Ping, so an address that is not a native listener is told apart from a gateway that
refused a request: the Kafka port closes the connection at the first native frame, the TANK port answers with
bytes that are no native frame; either way the message is "H:P does not speak logway's native protocol".

Exit status: 0 done, 1 the gateway refused or could not be reached, 2 arguments the command cannot use.
"""

from __future__ import annotations

import argparse
import getpass
import os
import ssl
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from logway.clients.errors import ConnectionClosed, GatewayUnavailable, KafkaError, NativeError, TankError
from logway.clients.native import NativeClient
from logway.codecs.errors import LocalProtocolError, RemoteProtocolError

from .output import Output, fail

#: Seconds to wait for the gateway's answers.
TIMEOUT = 30.0


class Usage(Exception):
    """An argument the command cannot use (exit 2)."""


#: The environment variables the CLI reads its secrets from (never settings of the gateway: `config.NOT_SETTINGS`).
PASSWORD_ENV, TOKEN_ENV = "LOGWAY_PASSWORD", "LOGWAY_TOKEN"


@dataclass(frozen=True)
class Login:
    """How a command connects and who it logs in as: over TLS trusting `cafile` (None: plain TCP); a user (with a
    password and a mechanism: SCRAM-SHA-256/512, or PLAIN), or the gateway's access token, or no one."""

    user: str | None = None
    password: str = field(default="", repr=False)
    mechanism: str = "SCRAM-SHA-256"
    token: str | None = field(default=None, repr=False)
    cafile: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace, environ=os.environ) -> "Login | None":
        """From `--user`/`--mechanism`/`--tls-ca` and the environment; asks for the password on a terminal."""
        user, cafile = getattr(args, "user", None), getattr(args, "tls_ca", None)
        if user is not None:
            password = environ.get(PASSWORD_ENV)
            if password is None:
                if not sys.stdin.isatty():
                    raise Usage(f"--user {user}: set {PASSWORD_ENV} (or run it on a terminal, which asks)")
                password = getpass.getpass(f"password of {user}: ")
            return cls(user, password, getattr(args, "mechanism", None) or "SCRAM-SHA-256", cafile=cafile)
        token = environ.get(TOKEN_ENV)
        return cls(token=token or None, cafile=cafile) if token or cafile else None

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.cafile is None:
            return None
        try:
            return ssl.create_default_context(cafile=self.cafile)
        except (OSError, ssl.SSLError) as exc:
            raise Usage(f"--tls-ca {self.cafile}: {getattr(exc, 'strerror', None) or exc}") from None

    def kafka(self) -> dict:
        """The `KafkaConfig` settings that connect and log in this way (a token is the native protocol's only)."""
        tls = {"ssl_cafile": self.cafile} if self.cafile else {}
        if self.user is None:
            return {"security_protocol": "SSL", **tls} if tls else {}
        return {"security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl_username": self.user,
                "sasl_password": self.password, "sasl_mechanism": self.mechanism, **tls}


def parse_time(text: str, option: str) -> int:
    """Milliseconds since the epoch, or ISO 8601 (`2024-05-01T12:00:00`, `…T12:00:00.000`, `…+02:00`, `…Z`; without
    a zone: local time, as kafka-consumer-groups) -> ms since the epoch; Usage naming `option` otherwise."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise Usage(f"{option} expects an ISO 8601 date and time (e.g. 2024-05-01T12:00:00 or "
                    f"2024-05-01T12:00:00+00:00) or milliseconds since 1970, got {text!r}") from None
    ms = int(when.timestamp() * 1000)  # a naive datetime is taken as local time
    if ms < 0:
        raise Usage(f"{option} must be after 1970-01-01, got {text!r}")
    return ms


def run(args: argparse.Namespace, check: Callable[[argparse.Namespace], object],
        action: Callable[[NativeClient, argparse.Namespace, object, Output], int]) -> int:
    """`check(args)` (raises Usage) before connecting, then `action(client, args, checked, output)` on a
    connection (`output`: text or, with `--json`, JSON lines)."""
    try:
        checked = check(args)
        with open_native(*args.gateway, Login.of(args)) as client, answers(args.gateway):
            return action(client, args, checked, Output(args.json))
    except Usage as exc:
        return fail(str(exc), 2)
    except Refused as exc:
        return fail(str(exc))


class Refused(Exception):
    """The gateway refused the request, could not be reached, or broke the connection (exit 1)."""


def where(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def open_native(host: str, port: int, login: Login | None = None) -> NativeClient:
    """A connection to the native listener at (host, port), logged in as `login` says and checked with a Ping;
    Refused naming what is wrong."""
    at = where((host, port))
    try:
        client = NativeClient(host, port, timeout=TIMEOUT, connect_timeout=TIMEOUT,
                              ssl_context=login.ssl_context() if login is not None else None)
    except ssl.SSLError as exc:
        raise Refused(f"TLS with the gateway at {at} failed: {exc.reason or exc}") from None
    except OSError as exc:
        raise Refused(f"cannot reach the gateway at {at}: {exc.strerror or exc}") from None
    try:
        if login is not None and login.user is not None:
            client.login(login.user, login.password, None if login.mechanism == "PLAIN" else login.mechanism)
        elif login is not None and login.token is not None:
            client.authenticate(login.token)
        client.ping()
    except NativeError as exc:  # a native gateway that refuses (e.g. it wants its access token first)
        client.close()
        raise Refused(exc.message) from None
    except TimeoutError:
        client.close()
        raise Refused(f"{at} did not answer a native Ping within {TIMEOUT:g} s (is it logway's native port?)") \
            from None
    except (ConnectionClosed, RemoteProtocolError, ConnectionError):
        client.close()
        raise Refused(f"{at} does not speak logway's native protocol (is it the Kafka or TANK port?)") from None
    return client


@contextmanager
def answers(address: tuple[str, int]):
    """The clients' errors while talking to the gateway at `address`, as Refused (or Usage: a value the request
    cannot carry) with one line saying what happened."""
    at = where(address)
    try:
        yield
    except NativeError as exc:
        raise Refused(exc.message) from None
    except (KafkaError, TankError, GatewayUnavailable) as exc:
        raise Refused(str(exc)) from None
    except LocalProtocolError as exc:  # a value the request cannot carry (caught by the codec)
        raise Usage(f"invalid argument: {exc}") from None
    except RemoteProtocolError as exc:
        raise Refused(f"the gateway at {at} sent an answer that is not understood: {exc}") from None
    except TimeoutError:
        raise Refused(f"no answer from the gateway at {at} within {TIMEOUT:g} s") from None
    except OSError as exc:  # ConnectionClosed included
        raise Refused(f"lost the connection to the gateway at {at}: {exc.strerror or exc}") from None
