"""What the benchmarks read about a process from Linux's /proc: resident memory, its peak, CPU time, a gateway's
processes (its workers), its open files; the disk a directory's files take; and the descriptor limit a benchmark
with many connections raises for itself."""

from __future__ import annotations

import os
import resource

__all__ = ["rss_mib", "proc_status_mib", "proc_cpu_times", "proc_cpu_seconds", "child_pids", "process_alive",
           "gateway_processes", "raise_fd_limit", "open_files", "allocated_bytes"]


def proc_status_mib(pid: int | str, key: str) -> float:
    """A `Vm…` line of /proc/<pid>/status in MiB (VmRSS: resident now, VmHWM: peak resident); NaN if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib(pid: int | None = None) -> float:
    """Current resident set size in MiB of `pid` (default: this process)."""
    return proc_status_mib(pid or "self", "VmRSS")


def _stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, …: `proc(5)`'s fields 3 on). Raises
    OSError when the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def proc_cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process (/proc/<pid>/stat): its own code and the kernel's work for it."""
    fields = _stat(pid)
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (/proc/<pid>/stat)."""
    return sum(proc_cpu_times(pid))


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a supervisor's workers): a scan of /proc (its per-task `children`
    files are not on every kernel)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat(entry)[1]) == pid:
                    found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass  # gone meanwhile
    return found


def process_alive(pid: int) -> bool:
    """The process exists and has not exited (a zombie waiting to be reaped counts as exited)."""
    try:
        return _stat(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def gateway_processes(pid: int) -> dict[str, int]:
    """The gateway's processes by role: {"gateway": pid} for one process; {"supervisor": pid, "worker 0": ...,
    "worker 1": ...} when it supervises workers (its children, named by their LOGWAY_WORKER)."""
    found = {}
    for child in child_pids(pid):
        try:
            with open(f"/proc/{child}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except (OSError, ValueError):
            continue
        role = env.get(b"LOGWAY_WORKER")
        if role:
            found[f"worker {role.split(b'/')[0].decode()}"] = child
    if not found:
        return {"gateway": pid}
    return {"supervisor": pid, **dict(sorted(found.items()))}


def summed_mib(pids, key: str = "VmRSS") -> float:
    """A `Vm…` figure of /proc/<pid>/status summed over `pids` (a gateway's processes: one, or the supervisor and
    its workers, `gateway_processes`)."""
    return sum(proc_status_mib(pid, key) for pid in pids)


def raise_fd_limit(need: int, who: str = "logway bench") -> None:
    """Raise this process's RLIMIT_NOFILE soft limit to `need` descriptors (exits if the hard limit is lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"{who}: {need} descriptors needed, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def open_files(pid: int) -> list[str]:
    """What each open descriptor of a process names (/proc/<pid>/fd): paths, `socket:[…]`, `pipe:[…]`, …"""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return found


def allocated_bytes(path: str) -> int:
    """The disk blocks the files under `path` take (st_blocks, so blocks reserved past a file's end count), in
    bytes."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total
