"""What `logway topics …` and `logway groups …` share: one connection to the gateway's native listener and the
one-line errors.

The connection starts with a Ping, so an address that is not a native listener is told apart from a gateway that
refused a request: the Kafka port closes the connection at the first native frame, the TANK port answers with
bytes that are no native frame; either way the message is "H:P does not speak logway's native protocol".

Exit status: 0 done, 1 the gateway refused or could not be reached, 2 arguments the command cannot use.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from logway.clients.errors import ConnectionClosed, NativeError
from logway.clients.native import NativeClient
from logway.codecs.errors import LocalProtocolError, RemoteProtocolError

#: Seconds to wait for the gateway's answers.
TIMEOUT = 30.0


class Usage(Exception):
    """An argument the command cannot use (exit 2)."""


def fail(message: str, status: int = 1) -> int:
    print(f"logway: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace, check: Callable[[argparse.Namespace], object],
        action: Callable[[NativeClient, argparse.Namespace, object], int]) -> int:
    """`check(args)` (raises Usage) before connecting, then `action(client, args, checked)` on a connection."""
    host, port = args.gateway
    where = f"{host}:{port}"
    try:
        checked = check(args)
    except Usage as exc:
        return fail(str(exc), 2)
    try:
        client = NativeClient(host, port, timeout=TIMEOUT, connect_timeout=TIMEOUT)
    except OSError as exc:
        return fail(f"cannot reach the gateway at {where}: {exc.strerror or exc}")
    with client:
        try:
            client.ping()
        except NativeError as exc:  # a native gateway that refuses (e.g. it wants its access token first)
            return fail(exc.message)
        except TimeoutError:
            return fail(f"{where} did not answer a native Ping within {TIMEOUT:g} s (is it logway's native port?)")
        except (ConnectionClosed, RemoteProtocolError, ConnectionError):
            return fail(f"{where} does not speak logway's native protocol (is it the Kafka or TANK port?)")
        try:
            return action(client, args, checked)
        except Usage as exc:
            return fail(str(exc), 2)
        except NativeError as exc:
            return fail(exc.message)
        except LocalProtocolError as exc:  # a value the request cannot carry (caught by the codec)
            return fail(f"invalid argument: {exc}", 2)
        except RemoteProtocolError as exc:
            return fail(f"the gateway at {where} sent an answer that is not understood: {exc}")
        except TimeoutError:
            return fail(f"no answer from the gateway at {where} within {TIMEOUT:g} s")
        except OSError as exc:  # ConnectionClosed included
            return fail(f"lost the connection to the gateway at {where}: {exc.strerror or exc}")
