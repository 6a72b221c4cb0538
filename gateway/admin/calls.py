"""Counting the function calls of the gateway's event-loop thread: a benchmark aid, off unless the configuration
asks for it (`count_calls: true`, which `logway bench requests --count-calls` sets).

Timings on a shared VM move by tens of percent from one run to the next; the number of function calls a request
costs does not (it changes only with the code path), so it is what a before/after comparison of a small change can
rely on. `sys.setprofile` sees every call of a Python function and of a C function ("call" and "c_call" events) in
the thread that installs it — the trio thread: work in worker threads (syncs, large reads) is not counted. The hook
itself is a Python function run for every call and return: a gateway counting calls is several times slower, and
its CPU figures say nothing. Exposed as `logway_python_calls_total`, only while counting.
"""

from __future__ import annotations

import sys

__all__ = ["CallCounter"]


class CallCounter:
    """Counts the calls of the thread that `start()`ed it, until `stop()`."""

    def __init__(self) -> None:
        self._count = [0]

    @property
    def calls(self) -> int:
        return self._count[0]

    def start(self) -> None:
        count = self._count

        def hook(frame, event, arg) -> None:
            if event == "call" or event == "c_call":
                count[0] += 1

        sys.setprofile(hook)

    def stop(self) -> None:
        sys.setprofile(None)
