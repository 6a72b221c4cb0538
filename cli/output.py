"""What every `logway` command prints, in one form: tables and results as text for people, or JSON lines for
scripts (`--json`).

- Text: a table is a header line of column names, then one tab-separated row per item (a table with no rows is its
  header alone); an action's result is one sentence. A cell holds no tab or newline: `cell()` writes them, a
  backslash and other control characters as escapes (`\\t`, `\\n`, `\\\\`, `\\x1b`), and bytes that are not UTF-8
  as `\\xNN`; a missing value is `-`.
- `--json`: one JSON object per line — per table row (the header's names as keys), or an action's result.
- Times are ISO 8601 in UTC with their zone (`2025-05-01T12:00:00.000Z`); `--json` also gives the milliseconds
  since the epoch.

Errors are one `logway: …` line on stderr (`fail`), never a table.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, TextIO

import orjson

__all__ = ["Output", "OutputClosed", "cell", "fail", "iso_time", "text_or_hex"]

_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}


def fail(message: str, status: int = 1) -> int:
    """Print `logway: message` on stderr as one line (a YAML parser's message spans several: joined); `status`."""
    print("logway: " + " ".join(str(message).split()), file=sys.stderr)
    return status


def cell(value: Any) -> str:
    """A table cell: `-` for None or "", text with its tabs, newlines and control characters escaped, bytes as
    UTF-8 text where they are, `\\xNN` where not."""
    if value is None or value == "" or value == b"":
        return "-"
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", "surrogateescape")  # a byte that is not UTF-8: a lone surrogate
    text = str(value)
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_ESCAPES.get(ch) or (ch if ch.isprintable() else _escape(ord(ch))) for ch in text)


def _escape(code: int) -> str:
    if 0xDC80 <= code <= 0xDCFF:  # (surrogateescape) the byte code - 0xDC00 of a value that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def iso_time(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 in UTC, `2025-05-01T12:00:00.000Z`; None stays None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def text_or_hex(data: bytes | None, name: str) -> dict[str, Any]:
    """A key, value or header value for JSON: `{name: text}` when the bytes are UTF-8, else `{name + "_hex": …}`
    (`{name: None}` for no value)."""
    if data is None:
        return {name: None}
    try:
        return {name: bytes(data).decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_hex": bytes(data).hex()}


class Output:
    """Where a command's tables and results go: text on `stream`, or JSON lines with `json_lines`."""

    def __init__(self, json_lines: bool = False, stream: TextIO | None = None, *, live: bool = False) -> None:
        """`live`: every line is flushed as it is written (a command that follows a log as it grows)."""
        self.json_lines = json_lines
        self.stream = stream or sys.stdout
        self.live = live
        self._columns: Sequence[str] | None = None

    def header(self, columns: Sequence[str]) -> None:
        """Start a table: its header line (text only); the rows follow with `row`."""
        self._columns = columns
        if not self.json_lines:
            self._write("\t".join(columns))

    def row(self, *values: Any, **extra: Any) -> None:
        """One row of the current table; `extra` goes into its JSON object only (e.g. raw milliseconds)."""
        if self.json_lines:
            self._write(orjson.dumps(dict(zip(self._columns, values)) | extra).decode())
        else:
            self._write("\t".join(cell(v) for v in values))

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        self.header(columns)
        for values in rows:
            self.row(*values)

    def result(self, sentence: str, **fields: Any) -> None:
        """An action's outcome: the sentence, or with `--json` the fields as one object."""
        self._write(orjson.dumps(fields).decode() if self.json_lines else sentence)

    def record(self, data: dict[str, Any]) -> None:
        """A JSON object as it is (with `--json`: a consumed record carries nested headers)."""
        self._write(orjson.dumps(data).decode())

    def _write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            if self.live:
                self.stream.flush()
        except BrokenPipeError:  # (not the gateway's connection: an OSError of our own output)
            raise OutputClosed from None


class OutputClosed(Exception):
    """Whoever reads our output stopped (`logway consume … | head`): the command ends, quietly."""
