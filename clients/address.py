"""What every client shares before any byte moves: `host:port` addresses and the client-side TLS context.

- `parse_address(text, default_port)` -> (host, port): `host:port`, `[v6addr]:port`, or a bare host (the default
  port); raises `AddressError`. `format_address(host, port)` is the reverse.
- `tls_context(cafile, check_hostname)`: the `ssl.SSLContext` a client verifies the gateway's certificate with
  (TLS 1.2+, as the gateway's listeners serve; `cafile` None = the system's store).
"""

from __future__ import annotations

import ssl

from .errors import AddressError

__all__ = ["parse_address", "format_address", "tls_context"]


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """(host, port) of `host:port`, `[v6addr]:port` or a bare host (then `default_port`)."""
    if not text or not isinstance(text, str):
        raise AddressError(f"address {text!r} is not host:port")
    address = text.strip()
    host, port = address, default_port
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise AddressError(f"address {text!r}: missing ']'")
        host, rest = address[1:end], address[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise AddressError(f"address {text!r}: expected ':port' after ']'")
            port = rest[1:]
    elif address.count(":") == 1:
        host, port = address.split(":")
    try:
        port = int(port)
    except ValueError:
        raise AddressError(f"address {text!r}: port {port!r} is not a number") from None
    if not host or not 0 < port < 65536:
        raise AddressError(f"address {text!r} is not host:port")
    return host, port


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tls_context(cafile: str | None = None, check_hostname: bool = True) -> ssl.SSLContext:
    """A client context trusting `cafile` (PEM; None: the system's store), TLS 1.2 or newer."""
    context = ssl.create_default_context(cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    return context
