"""logway.cli — the `logway` command: `serve`, `config`, `produce`, `consume`, `topics create|list|describe|delete|…`,
`groups list|describe|reset-offsets`, `bench <name>` (docs/cli.md).

Public names: `main(argv=None) -> exit status` (the console script `logway`, also `python -m logway.cli`) and
`build_parser()`. Modules: `main` (the parser and the dispatch), `serve` (run the gateway; one-line start-up
errors), `config` (the effective configuration and each value's source), `produce` and `consume` (records in and
out), `links` (a connection per protocol for those two), `topics` and `groups` (admin over the native protocol),
`connect` (the native connection, the clients' errors as one line, times as arguments), `output` (tables, JSON
lines, one-line errors). The benchmarks are `logway.bench`'s registry.
"""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["main", "build_parser"]
