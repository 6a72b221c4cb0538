"""A function run in a forked child as another user ("nobody", uid and gid 65534): for the checks that tell the
gateway's own processes from other users' (the workers' relay sockets, `logway.gateway.cluster.relays`). Switching users
needs root — CI runs as root; elsewhere the tests that use this are skipped with `WHY_NOT`."""

from __future__ import annotations

import os
import select
import time

OTHER_UID = 65534
CAN_SWITCH = os.geteuid() == 0
WHY_NOT = "running as another user needs root (CI runs as root): the relay sockets' user check is not exercised"


class OtherUser:
    """`fn(tell, *args)` running in a child process as OTHER_UID; `tell(text)` sends the parent one line, which
    `heard()` returns. The child exits when `fn` returns (status 0) or raises (status 1)."""

    def __init__(self, fn, *args) -> None:
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: nothing of the parent's (pytest, trio) runs past this point
            status = 1
            try:
                os.close(read)
                os.setgroups([])
                os.setgid(OTHER_UID)
                os.setuid(OTHER_UID)
                out = os.fdopen(write, "w", buffering=1)
                fn(lambda text: out.write(text + "\n"), *args)
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        self._pipe = os.fdopen(read)

    def heard(self, timeout: float = 10) -> str:
        """The child's next line ("" when it exited without one, or said nothing in `timeout` seconds)."""
        ready, _, _ = select.select([self._pipe], [], [], timeout)
        return self._pipe.readline().rstrip("\n") if ready else ""

    def wait(self, timeout: float = 10) -> int:
        """The child's exit status (it is killed after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while self.heard(max(deadline - time.monotonic(), 0)):  # until its end of the pipe closes: it exited
            pass
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            os.kill(self.pid, 9)
            pid, status = os.waitpid(self.pid, 0)
        self._pipe.close()
        return os.waitstatus_to_exitcode(status)
