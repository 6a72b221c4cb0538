"""The TLS server contexts of the listeners with `tls: true` (TLS 1.2+, the certificate and key from the config; a
bad file is a `ConfigError` at start, not at the first client), and the principal of a client certificate.

A listener with `tls_client_auth: requested | required` (mutual TLS) also asks the client for a certificate signed by
one of `tls.client_ca_file`'s authorities — `required` refuses the handshake without one — and the subject of a
certificate it verified becomes the connection's principal (`client_principal`, through
`tls.principal_mapping_rules`) — on the admin listener too, whose requests it makes that principal's
(`certificate_principal` of the certificate its connection verified)."""

from __future__ import annotations

import os
import ssl

from .config import ConfigError, TlsSettings
from .security.principals import NoMatchingRule, mapper, subject_name, user_principal

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_ssl_context(tls: TlsSettings, client_auth: str = "none") -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except FileNotFoundError:
        missing = [path for path in (tls.cert_file, tls.key_file) if not os.path.isfile(path)]
        raise ConfigError(f"tls: no such file: {', '.join(missing) or tls.cert_file}") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"tls: cannot load the certificate {tls.cert_file} with the key {tls.key_file}: "
                          f"{exc}") from None
    if client_auth != "none":
        try:
            ctx.load_verify_locations(cafile=tls.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"tls.client_ca_file: cannot load {tls.client_ca_file}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    ctx.verify_mode = _VERIFY[client_auth]
    return ctx


def client_principal(stream, tls: TlsSettings) -> str | None:
    """The principal of the client certificate `stream` (after its handshake) verified, or None when it has none;
    NoMatchingRule when no mapping rule gives its subject a name."""
    return certificate_principal(stream.getpeercert(), tls)


def certificate_principal(cert: dict | None, tls: TlsSettings) -> str | None:
    """The principal of a verified client certificate as `getpeercert()` gives it (None: it has none);
    NoMatchingRule when no mapping rule gives its subject a name."""
    if not cert or not cert.get("subject"):
        return None
    return user_principal(mapper(tls.principal_mapping_rules).name(subject_name(cert["subject"])))


__all__ = ["NoMatchingRule", "certificate_principal", "client_principal", "server_ssl_context"]
