"""logway.gateway — the server, on trio: listeners, per-connection pumps, dispatch, long-poll waits,
group commit and configuration. The packages below it, storage and codecs, never import trio (tests/test_layering.py);
the tooling around it uses trio too — the clients' trio variants, `logway serve`, a benchmark — and none of it is
imported from here (clients are `logway.clients`, the command `logway.cli`, benchmarks `logway.bench`).

Public names: `Gateway` (server), `load_config`/`Config`/`ConfigError` (configuration).
"""

from .config import Config, ConfigError, load_config

__all__ = ["Config", "ConfigError", "Gateway", "load_config"]


def __getattr__(name: str):
    if name == "Gateway":  # imported lazily: the server pulls in trio and every codec
        from .server import Gateway

        return Gateway
    raise AttributeError(name)
