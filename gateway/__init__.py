"""logway.gateway — the only package with trio: listeners, per-connection pumps, dispatch, long-poll waits,
group commit and configuration. (Clients are `logway.clients`, the command `logway.cli`, benchmarks
`logway.bench`: none of them is imported from here.)

Public names: `Gateway` (server), `load_config`/`Config`/`ConfigError` (configuration).
"""

from .config import Config, ConfigError, load_config

__all__ = ["Config", "ConfigError", "Gateway", "load_config"]


def __getattr__(name: str):
    if name == "Gateway":  # imported lazily: the server pulls in trio and every codec
        from .server import Gateway

        return Gateway
    raise AttributeError(name)
