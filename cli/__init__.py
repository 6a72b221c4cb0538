"""logway.cli — the `logway` command: `serve`, `topics create|list|describe|delete|…`, `groups
list|describe|reset-offsets`, `bench <name>`.

Public names: `main(argv=None) -> exit status` (the console script `logway`, also `python -m logway.cli`) and
`build_parser()`. Modules: `main` (the parser and the dispatch), `serve` (run the gateway; one-line start-up
errors), `topics` and `groups` (admin over the native protocol), `connect` (their connection and one-line errors).
The benchmarks are `logway.bench`'s registry.
"""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["main", "build_parser"]
