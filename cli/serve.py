"""`logway serve`: load the configuration, run the gateway until SIGINT/SIGTERM, report what stopped it.

`--print-config` prints the effective configuration instead; `--ready-file` gets the bound addresses (and the pid)
as JSON once every listener is up (how `logway.bench.launcher.GatewayProcess` knows the ephemeral ports).
Exit status: 0 after a graceful stop, 2 for a configuration error, 1 for a storage error (e.g. a locked data
directory), 130 on KeyboardInterrupt.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys


def serve(args: argparse.Namespace) -> int:
    from logway.gateway import ConfigError, load_config

    overrides = list(args.set)
    if args.data_dir:
        overrides.append(f"data_dir={args.data_dir}")
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as exc:
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        import yaml

        print(yaml.safe_dump(config.raw, sort_keys=False), end="")
        return 0
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import trio

    from logway.gateway import Gateway
    from logway.storage import StorageError

    try:
        gateway = Gateway(config)
    except ConfigError as exc:  # e.g. a TLS certificate that cannot be loaded
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            addresses = await nursery.start(lambda task_status: gateway.run(handle_signals=True,
                                                                             task_status=task_status))
            # Storage, config and imports live as long as the process: keep them out of the cyclic collector's
            # scans, and collect young objects less often. Under full load the default thresholds cost ~17 % of
            # the CPU and 50-110 ms pauses (probe p99 28 ms instead of 53 ms at 1,000 connections, BENCHMARKS.md).
            gc.freeze()
            gc.set_threshold(10_000, 10, 10)
            if args.ready_file:
                tmp = args.ready_file + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({name: list(addr) for name, addr in addresses.items()} | {"pid": os.getpid()}, f)
                os.replace(tmp, args.ready_file)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        return 130
    except (StorageError, BaseExceptionGroup) as exc:  # from inside the nurseries it comes in a group
        cause = _storage_error(exc)
        if cause is None:
            raise
        logging.getLogger("logway").error("%s", cause)
        return 1
    return 0


def _storage_error(exc: BaseException):
    """The StorageError `exc` is or (as the only kind of error) holds, or None."""
    from logway.storage import StorageError

    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [_storage_error(e) for e in exc.exceptions]
        if found and all(found):
            return found[0]
    return None
