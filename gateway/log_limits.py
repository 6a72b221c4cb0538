"""`RepeatLimiter`: a logging filter that bounds how often one message is logged, so a client cannot fill the log
— a storm of connections past the limits, of failed authentications or TLS handshakes, of peers of another user
on a relay socket each log a line per attempt.

Messages are told apart by logger, level and format string (`record.msg`, before its arguments), so the lines one
message logs for many peers count together. Each message may log `limit` lines per `WINDOW` seconds; the lines
past that are counted, not written, and the next line of that message that is written says how many were left
out ("… (12,345 more like this were not logged)"). `limit` 0 turns the filter off. `suppressed` counts the lines
left out per level name (the metric `logway_log_lines_suppressed_total`).

`install(limit)` puts one limiter on the root logger's handlers (`logway serve` does, after `basicConfig`);
`LIMITER` is the one installed, for the metrics.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

__all__ = ["RepeatLimiter", "install", "LIMITER", "WINDOW"]

#: Seconds over which each message's lines are counted.
WINDOW = 10.0
#: Distinct messages remembered at most (their templates are the gateway's own: a few hundred at most).
MAX_MESSAGES = 4096


class RepeatLimiter(logging.Filter):
    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.limit = limit
        self.clock = clock
        #: (logger, level, template) -> [window start, lines written in it, lines left out since the last written]
        self._seen: dict[tuple, list] = {}
        self.suppressed: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        verdict = getattr(record, "_repeat_verdict", None)  # (decided by another handler's filter already)
        if verdict is None:
            verdict = record._repeat_verdict = self._decide(record)
        return verdict

    def _decide(self, record: logging.LogRecord) -> bool:
        if self.limit <= 0:
            return True
        key = (record.name, record.levelno, record.msg if isinstance(record.msg, str) else type(record.msg))
        now = self.clock()
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= MAX_MESSAGES:
                self._seen.clear()
            seen = self._seen[key] = [now, 0, 0]
        elif now - seen[0] >= WINDOW:
            seen[0], seen[1] = now, 0
        if seen[1] >= self.limit:
            seen[2] += 1
            self.suppressed[record.levelname] = self.suppressed.get(record.levelname, 0) + 1
            return False
        seen[1] += 1
        if seen[2]:
            try:
                message = record.getMessage()
            except Exception:  # a bad log call: the handler reports it as it would have
                return True
            record.msg, record.args = f"{message} ({seen[2]:,} more like this were not logged)", None
            seen[2] = 0
        return True


#: The limiter `install` put on the root logger's handlers, if any.
LIMITER: RepeatLimiter | None = None


def install(limit: int) -> RepeatLimiter:
    """Put a `RepeatLimiter(limit)` on every handler of the root logger (replacing one installed before)."""
    global LIMITER
    limiter = RepeatLimiter(limit)
    for handler in logging.getLogger().handlers:
        if LIMITER is not None:
            handler.removeFilter(LIMITER)
        handler.addFilter(limiter)
    LIMITER = limiter
    return limiter
