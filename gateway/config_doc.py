"""The table of every configuration key in docs/configuration.md, generated from the schema in `config.py` so the
docs cannot drift.

The table sits in docs/configuration.md between `BEGIN` and `END`; tests/gateway/test_config.py fails when it differs
from `table()`. To regenerate:

    python -m logway.gateway.config_doc --print                           # print the table
    python -m logway.gateway.config_doc --update docs/configuration.md   # rewrite it in place
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any

from .config import Config, choices_of, hints, readable_default, yaml_value

#: Where the table lives, from the repository's root.
DOC = "docs/configuration.md"
BEGIN = (f"<!-- config table: generated from gateway/config.py by `python -m logway.gateway.config_doc --update {DOC}`"
         " -->")
END = "<!-- end of config table -->"


def table() -> str:
    """The Markdown table of every key: its dotted path, its default and what it means."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [_row(*cells) for cells in _rows(Config(), "")]
    return "\n".join(rows) + "\n"


def table_in(doc: str) -> str:
    """The generated table as the document holds it today (between `BEGIN` and `END`)."""
    start, end = _bounds(doc)
    return doc[start:end].strip("\n") + "\n"


def with_table(doc: str) -> str:
    """The document's text with the table replaced by `table()` (blank lines around it, so Markdown sees a table
    after the HTML comment)."""
    start, end = _bounds(doc)
    return doc[:start] + "\n" + table() + "\n" + doc[end:]


def _bounds(doc: str) -> tuple[int, int]:
    begin = doc.find(BEGIN + "\n")
    end = doc.find(END, begin)
    if begin < 0 or end < 0:
        raise ValueError(f"no generated config table (the lines {BEGIN!r} … {END!r})")
    return begin + len(BEGIN) + 1, end


def _row(key: str, default: str, meaning: str) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in (f"`{key}`", default, meaning)) + " |"


def _meaning(hint: Any, meta: dict, doc: str | None = None) -> str:
    text = meta["doc"] if doc is None else doc
    allowed = choices_of(hint, meta)
    if allowed:
        text = ", ".join(f"`{a}`" for a in allowed[:-1]) + f" or `{allowed[-1]}`: {text}"
    more = meta.get("more", "")
    if more:
        text += more if more[0] in ".,;:" else " " + more
    return text


def _default(name: str, value: Any) -> str:
    readable = readable_default(name, value)
    return f"`{yaml_value(value)}`" + (f" ({readable})" if readable else "")


def _rows(obj: Any, prefix: str) -> list[tuple[str, str, str]]:
    """(key, default, meaning) for the settings of the dataclass instance `obj`, sections first as a row each."""
    out = []
    types = hints(type(obj))
    for f in fields(obj):
        kind, meta, value, path = f.metadata["kind"], f.metadata, getattr(obj, f.name), prefix + f.name
        if kind in ("key", "derived"):
            continue
        if kind == "section":
            out.append((path, "", _meaning(types[f.name], meta)))
            out += _rows(value, path + ".")
        elif kind == "keyed":
            item_type = meta["of"]
            key_name = next(g.name for g in fields(item_type) if g.metadata["kind"] == "key")
            keys = ", ".join(f"`{k}` ({doc})" for k, doc in meta["keys"].items())
            out.append((f"{path}.<{key_name}>", "", f"{_meaning(types[f.name], meta)}: {keys}"))
            item_types = hints(item_type)
            for g in fields(item_type):
                if g.metadata["kind"] != "value":
                    continue
                values = [getattr(item, g.name) for item in value.values()]
                if len(set(values)) == 1:
                    default = _default(g.name, values[0])
                else:
                    default = " / ".join(f"`{yaml_value(v)}`" for v in values) + f" ({' / '.join(value)})"
                out.append((f"{path}.<{key_name}>.{g.name}", default, _meaning(item_types[g.name], g.metadata)))
        elif kind == "flat":
            inner = hints(types[f.name])
            for n, doc in meta["docs"].items():
                out.append((prefix + n, _default(n, getattr(value, n)), _meaning(inner[n], {}, doc)))
        else:
            out.append((path, _default(f.name, value), _meaning(types[f.name], meta)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logway.gateway.config_doc", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--print", action="store_true", help="print the configuration table")
    group.add_argument("--update", metavar="PATH", help=f"rewrite the table in this file ({DOC})")
    args = parser.parse_args(argv)
    if args.print:
        sys.stdout.write(table())
        return 0
    with open(args.update, encoding="utf-8") as f:
        text = f.read()
    try:
        updated = with_table(text)
    except ValueError as exc:
        print(f"{args.update}: {exc}", file=sys.stderr)
        return 1
    if updated != text:
        with open(args.update, "w", encoding="utf-8") as f:
            f.write(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
