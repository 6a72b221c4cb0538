"""The TLS server context every listener with `tls: true` wraps its connections in (TLS 1.2+, the certificate and
key from the config; a bad file is a `ConfigError` at start, not at the first client)."""

from __future__ import annotations

import os
import ssl

from .config import ConfigError, TlsSettings


def server_ssl_context(tls: TlsSettings) -> ssl.SSLContext:
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
    return ctx
