"""`logway config`: the configuration `logway serve` would run with (the same `--config`, `--data-dir`, `--set` and
`LOGWAY_*` environment), one key per row with its value and where the value comes from:

    key                         value     source
    storage.flush               always    environment LOGWAY_STORAGE__FLUSH
    listeners.native.port       9898      default
    data_dir                    /srv/lw   flag --data-dir

Sources: `default` (the embedded configuration), `file PATH`, `environment NAME`, `flag --set KEY`,
`flag --data-dir`. Secrets (`auth.native_token`, the passwords of `auth.users`) are shown as `(set)`, never as
their value. Exit status 2 with one `logway: configuration error: …` line for a configuration `serve` would refuse.
"""

from __future__ import annotations

import argparse
import typing

from .output import Output, fail

#: What a secret's value is shown as.
HIDDEN = "(set)"


def show_config(args: argparse.Namespace) -> int:
    from logway.gateway.config import ConfigError, load_config, settings, yaml_value

    overrides = list(args.set)
    if args.data_dir is not None:
        overrides.append(f"data_dir={args.data_dir}")
    sources: dict[str, str] = {}
    try:
        config = load_config(args.config, overrides=overrides, sources=sources)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}", 2)
    if args.data_dir is not None:
        sources["data_dir"] = "flag --data-dir"
    out = Output(args.json)
    out.header(("key", "value", "source"))
    for key, hint, meta in settings():
        value = _at(config.raw, key)
        if typing.get_origin(hint) is dict:  # a free-form mapping (user names): a row per entry
            entries = sorted(value.items()) or [(None, None)]
            for name, item in entries:
                path = key if name is None else f"{key}.{name}"
                shown = "{}" if name is None else HIDDEN if meta.get("secret") else yaml_value(item)
                _row(out, args, path, shown, sources.get(path, sources.get(key, "default")))
            continue
        shown = HIDDEN if meta.get("secret") and value else yaml_value(value)
        _row(out, args, key, shown, sources.get(key, "default"))
    return 0


def _row(out: Output, args: argparse.Namespace, key: str, value: str, source: str) -> None:
    if args.changed and source == "default":
        return
    out.row(key, value, source)


def _at(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree[part]
    return tree
