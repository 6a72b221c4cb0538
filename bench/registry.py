"""The `logway bench <name>` registry: each benchmark module declares its benchmarks, this module collects them.

A benchmark module holds `BENCHMARKS`, a list of `Benchmark(name, help, arguments, run)`: `arguments(parser)`
declares its flags (every one with a help text and a default), `run(args)` runs it and returns the exit status.
`add_subcommands(parser)` gives a parser one subcommand per benchmark, in the order of `MODULES`, with the defaults
shown in `--help`; `run(args)` runs the one chosen. Modules are imported when the parser is built and keep their
heavy imports (Spark, FUSE, the storage engine) inside their functions, so `logway bench --help` stays quick.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib import import_module
from typing import Callable

__all__ = ["Benchmark", "MODULES", "benchmarks", "add_subcommands", "run"]

#: The modules of logway.bench that declare benchmarks, in the order `logway bench --help` lists them.
MODULES = ("storage", "cleaner", "native", "tank", "accept", "floor", "kafka", "failover", "spark", "load", "requests",
           "workers", "handover", "chaos", "powerloss", "abuse")


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str  # the subcommand: `logway bench <name>`
    help: str  # one line for `logway bench --help`
    arguments: Callable[[argparse.ArgumentParser], None]  # declares its flags, each with help text and default
    run: Callable[[argparse.Namespace], int]  # runs it; the exit status


def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark by name, in the order of `MODULES`."""
    found: dict[str, Benchmark] = {}
    for module in MODULES:
        for bench in import_module(f"{__package__}.{module}").BENCHMARKS:
            if bench.name in found:
                raise ValueError(f"two benchmarks are named {bench.name!r}")
            found[bench.name] = bench
    return found


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """One subcommand per benchmark on `parser` (the `bench` command's)."""
    sub = parser.add_subparsers(dest="bench", required=True, metavar="NAME")
    for bench in benchmarks().values():
        p = sub.add_parser(bench.name, help=bench.help, description=bench.help,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        bench.arguments(p)
        p.set_defaults(benchmark=bench)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark `add_subcommands` parsed; its exit status."""
    return args.benchmark.run(args)
