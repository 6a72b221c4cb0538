"""`RepeatLimiter` (gateway/log_limits.py) on a real logger and handler, with a clock the test moves."""

from __future__ import annotations

import logging

import pytest

from logway.gateway.log_limits import WINDOW, RepeatLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def logged():
    clock = Clock()
    limiter = RepeatLimiter(3, clock)
    handlers = [Lines(), Lines()]  # two handlers: one decision per line, whatever the handler count
    log = logging.getLogger("logway.test.limits")
    log.propagate = False
    log.setLevel(logging.INFO)
    for handler in handlers:
        handler.addFilter(limiter)
        log.addHandler(handler)
    yield log, clock, limiter, [h.lines for h in handlers]
    for handler in handlers:
        log.removeHandler(handler)


def test_a_message_logs_its_limit_per_window_and_then_says_how_many_it_left_out(logged):
    log, clock, limiter, (lines, other) = logged
    for peer in range(10):
        log.warning("%s: connection limit reached", f"127.0.0.1:{peer}")
    log.info("%s: closing", "peer")  # another message: its own budget
    assert lines == ["127.0.0.1:0: connection limit reached", "127.0.0.1:1: connection limit reached",
                     "127.0.0.1:2: connection limit reached", "peer: closing"]
    assert other == lines and limiter.suppressed == {"WARNING": 7}
    clock.now += WINDOW - 0.1
    log.warning("%s: connection limit reached", "late")
    assert len(lines) == 4 and limiter.suppressed == {"WARNING": 8}  # still the same window
    clock.now += 0.1
    log.warning("%s: connection limit reached", "next")
    assert lines[-1] == "next: connection limit reached (8 more like this were not logged)"
    log.warning("%s: connection limit reached", "again")
    assert lines[-1] == "again: connection limit reached"  # the count was said once
    assert other == lines


def test_the_same_text_at_another_level_or_logger_counts_apart(logged):
    log, clock, limiter, (lines, _) = logged
    for _ in range(5):
        log.warning("disk full")
        log.error("disk full")
    assert lines.count("disk full") == 6 and limiter.suppressed == {"WARNING": 2, "ERROR": 2}


def test_limit_zero_logs_everything(logged):
    log, clock, limiter, (lines, _) = logged
    limiter.limit = 0
    for _ in range(50):
        log.warning("again")
    assert len(lines) == 50 and limiter.suppressed == {}


def test_a_bad_log_call_past_the_limit_does_not_raise_at_the_call_site():
    """The line that carries the count formats the message first; a call whose arguments do not fit its format is
    let through to the handler (which reports it as logging does), not raised where it was logged."""
    clock = Clock()
    limiter = RepeatLimiter(1, clock)

    def record(arg):
        return logging.LogRecord("logway.test.bad", logging.WARNING, __file__, 1, "count %d", (arg,), None)

    assert limiter.filter(record(1)) and not limiter.filter(record(2))  # the second one is left out
    clock.now += WINDOW
    bad = record("not a number")
    assert limiter.filter(bad) is True and bad.msg == "count %d"  # untouched: the handler's error to report
