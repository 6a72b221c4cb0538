"""logway.gateway — the only package with trio: listeners, per-connection pumps, dispatch, long-poll waits,
group commit, configuration, the CLI and benchmarks.

Public names: `Gateway` (server), `load_config`/`Config` (configuration), `NativeClient` (blocking client).
"""

from .client import NativeClient, NativeError
from .config import Config, ConfigError, load_config

__all__ = ["Config", "ConfigError", "Gateway", "NativeClient", "NativeError", "load_config"]


def __getattr__(name: str):
    if name == "Gateway":  # imported lazily: the server pulls in trio and every codec
        from .server import Gateway

        return Gateway
    raise AttributeError(name)
