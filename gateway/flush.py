"""`Flush`: the durability policies a gateway may run under (`storage.flush`) and what each promises — a module of
its own, so that the configuration (which the command-line tools load) and the group committer (`durability.py`)
share it without the one importing the other.
"""

from __future__ import annotations

import enum

__all__ = ["Flush"]


class Flush(enum.StrEnum):
    """When an acknowledged write reaches the disk (`storage.flush`). An acknowledgement is a produce answer, an
    offset-commit answer or a CreateTopics/DeleteTopics answer; docs/durability.md is the full statement.

    - `NONE`: acknowledged once written to the OS. A process crash (kill -9, OOM kill, a bug) loses nothing
      acknowledged (the page cache outlives the process); a power cut or kernel crash may lose whatever the OS had
      not yet written back.
    - `INTERVAL` (the default): as `NONE`, and every partition and the offset store are fdatasynced every
      `storage.flush_interval_ms`; a power cut loses at most what was acknowledged in the last interval (plus the
      time one sync takes), per partition only the newest records, never one in the middle.
    - `ALWAYS`: a produce or commit is acknowledged only after fdatasync of what it wrote and fsync of every
      directory it depends on, with group commit (`durability.GroupCommitter`: one sync covers every waiting write);
      readers see only synced records. Nothing acknowledged is lost, even to a power cut.

    Under every policy the log stays readable, contiguous and free of torn data after a crash, and topic creation
    and deletion are durable when answered. Being a `StrEnum`, a member equals its text (`Flush.ALWAYS == "always"`).
    """

    NONE = "none"
    INTERVAL = "interval"
    ALWAYS = "always"
