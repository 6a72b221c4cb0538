"""`logway serve`: load the configuration, run the gateway until SIGINT/SIGTERM, report what stopped it.

`--print-config` prints the effective configuration instead; `--ready-file` gets the bound addresses (and the pid)
as JSON once every listener is up (how `logway.bench.launcher.GatewayProcess` knows the ephemeral ports).
Exit status: 0 after a graceful stop, 2 for a configuration error or anything else that keeps the gateway from
starting — a port in use (the listener, the address and the key to set are named), a data directory that is not a
directory or not writable, TLS files that cannot be read, a resource that ran out while storage opened (descriptors,
disk space: which, its limit, what to do; nothing is quarantined for it, and the next start opens everything) — 1
for a storage error (a data directory locked by another gateway: its pid is named; with `storage.backend: postgres`
a database that is unreachable or does not exist, a login it refuses, a schema a newer logway wrote, another gateway
writing it), 130 on KeyboardInterrupt. Each
of these is one line on stderr (`logway: …`) that says what to do, no traceback: the errors come out of trio's
nurseries wrapped in exception groups, which `_leaves` unwraps. An unexpected exception still shows its traceback.
A data directory that does not exist is created before the gateway starts, with a log line naming it (and the
parents created with it).

With `workers: N` > 1 this process is the supervisor of N worker processes (`logway.gateway.cluster.workers.supervise`):
they are `logway serve` again with the same arguments, told which worker they are by the environment
(LOGWAY_WORKER); the ready file then names every worker's listeners ("kafka", "kafka.1", ...). Exit status: as
above, or 1 when a worker died.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os

from .output import fail


def serve(args: argparse.Namespace) -> int:
    from logway.gateway import ConfigError, load_config

    overrides = list(args.set)
    if args.data_dir is not None:
        overrides.append(f"data_dir={args.data_dir}")
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}", 2)
    if args.print_config:
        import yaml

        print(yaml.safe_dump(config.raw, sort_keys=False), end="")
        return 0
    problem = data_dir_problem(config.data_dir)
    if problem is not None:
        return fail(problem, 2)
    from logway.gateway.cluster.workers import WorkerRole

    try:
        role = WorkerRole.from_env() if config.workers > 1 else None
    except ValueError as exc:
        return fail(str(exc), 2)
    if role is not None and role.count != config.workers:  # the configuration changed under the supervisor
        return fail(f"configuration error: this worker of {role.count} reads workers: {config.workers}", 2)
    who = "" if role is None else f"worker-{role.index} "
    logging.basicConfig(level=config.log_level, format=f"%(asctime)s %(levelname)s {who}%(name)s: %(message)s")
    from logway.gateway import log_limits

    log_limits.install(config.log_repeat_limit)  # a client cannot fill the log (a line per refused connection, …)
    if role is None:
        try:
            _create_data_dir(config.data_dir)
        except OSError as exc:
            return fail(_os_error(exc, config.data_dir), 2)
    if config.workers > 1 and role is None:
        return _supervise(args, config)
    import trio

    from logway.gateway import Gateway
    from logway.gateway.errors import ListenerError
    from logway.storage import StorageError

    try:
        gateway = Gateway(config, worker=role)
    except ConfigError as exc:  # e.g. a TLS certificate that cannot be loaded
        return fail(f"configuration error: {exc}", 2)
    started = False

    async def run() -> None:
        nonlocal started
        async with trio.open_nursery() as nursery:
            addresses = await nursery.start(lambda task_status: gateway.run(handle_signals=True,
                                                                             task_status=task_status))
            started = True
            # Storage, config and imports live as long as the process: keep them out of the cyclic collector's
            # scans, and collect young objects less often. Under full load the default thresholds cost ~17 % of
            # the CPU and 50-110 ms pauses (probe p99 28 ms instead of 53 ms at 1,000 connections, BENCHMARKS.md).
            gc.freeze()
            gc.set_threshold(10_000, 10, 10)
            if args.ready_file and role is None:  # (a worker's addresses go to its supervisor)
                tmp = args.ready_file + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({name: list(addr) for name, addr in addresses.items()} | {"pid": os.getpid()}, f)
                os.replace(tmp, args.ready_file)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # from inside the nurseries it comes in a group
        leaves = _leaves(exc)
        if any(isinstance(e, KeyboardInterrupt) for e in leaves):
            return 130
        bind = next((e for e in leaves if isinstance(e, ListenerError)), None)
        if bind is not None:  # the first listener that failed (the others were cancelled)
            return fail(str(bind), 2)
        if leaves and all(isinstance(e, StorageError) for e in leaves):
            return fail(_storage_error(leaves[0], config), 1)
        if not started and leaves and all(isinstance(e, OSError) for e in leaves):
            return fail(_os_error(leaves[0], config.data_dir), 2)
        raise
    return 0


def _supervise(args: argparse.Namespace, config) -> int:
    """`workers` > 1: start and watch the worker processes (each gets this command's arguments)."""
    from logway.gateway import ConfigError
    from logway.gateway.cluster.workers import supervise
    from logway.storage import StorageError

    argv = ["--config", args.config] if args.config is not None else []
    if args.data_dir is not None:
        argv += ["--data-dir", args.data_dir]
    for item in args.set:
        argv += ["--set", item]
    from logway.gateway.errors import ListenerError

    try:
        return supervise(config, argv, args.ready_file)
    except ListenerError as exc:  # the shared native or TANK port, the admin one (the workers bind the others)
        return fail(str(exc), 2)
    except ConfigError as exc:  # e.g. a TLS certificate that cannot be loaded (for the admin listener)
        return fail(f"configuration error: {exc}", 2)
    except StorageError as exc:  # e.g. the data directory is locked by another gateway
        return fail(_storage_error(exc), 1)
    except OSError as exc:
        return fail(_os_error(exc, config.data_dir), 2)


def _storage_error(exc: Exception, config=None) -> str:
    """A storage error that stops the start, with what to do about it."""
    from logway.storage import DatabaseError, DataDirLocked

    if isinstance(exc, DataDirLocked):
        return f"{exc}: stop that gateway, or give this one another data directory (--data-dir DIR)"
    if isinstance(exc, DatabaseError):  # (the message says what to do)
        return str(exc)
    if config is not None and config.storage.backend == "postgres":
        return f"cannot open the database: {exc}"
    return f"cannot open the data directory: {exc}"


def _create_data_dir(data_dir: str) -> None:
    """Create the data directory when it does not exist yet, parents included, and say so: a mistyped --data-dir
    would otherwise start an empty gateway without a word."""
    full = os.path.abspath(data_dir)
    if os.path.lexists(full):
        return
    missing = [full]
    while not os.path.lexists(os.path.dirname(missing[-1])):
        missing.append(os.path.dirname(missing[-1]))
    parents = f" and its parent directories {', '.join(reversed(missing[1:]))}" if len(missing) > 1 else ""
    logging.getLogger("logway").info("data_dir %s does not exist: creating it%s (a new, empty log)", full,
                                     parents)
    from logway.storage.files import makedirs_durably

    makedirs_durably(full)  # (an OSError here is reported as any other that stops the start)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, trio's Cancelled left out; [exc] for a plain one."""
    import trio

    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [] if isinstance(exc, trio.Cancelled) else [exc]


def _os_error(exc: OSError, data_dir: str) -> str:
    """An OSError while starting: a resource that ran out (descriptors, space: which, its limit, what to do), or a
    file of the data directory (or the configuration) the gateway cannot use."""
    from logway.gateway.errors import running_out_line
    from logway.storage import running_out

    if running_out(exc):
        return f"cannot start: {running_out_line(exc, data_dir)}"
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"cannot start: {reason}: {exc.filename} (data_dir is {data_dir}: check it and its permissions)"
    return f"cannot start: {reason}"


def data_dir_problem(path: str) -> str | None:
    """Why `path` cannot be the data directory — a file, not writable, or not creatable — or None. Checked before
    storage opens, so the message names the setting to change instead of a path deep inside the engine."""
    full = os.path.abspath(path)
    uid = os.geteuid()
    if os.path.lexists(full):
        if not os.path.isdir(full):
            return (f"data_dir {path} is not a directory: point data_dir (--data-dir, --set data_dir=DIR) at a "
                    f"directory")
        if not os.access(full, os.W_OK | os.X_OK):
            return f"data_dir {path} is not writable by this user (uid {uid}): fix its permissions or choose another"
        return None
    parent = os.path.dirname(full)
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"data_dir {path} cannot be created: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return (f"data_dir {path} cannot be created: {parent} is not writable by this user (uid {uid}): create it "
                f"or choose another")
    return None
