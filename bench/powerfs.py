"""A file system that forgets what was never synced: the power-loss layer behind `logway bench powerloss` and
tests/e2e/test_powerfs.py, tests/e2e/test_powerloss.py.

`PowerFS` is a FUSE passthrough (mfusepy over libfuse3) over a backing directory. Beside the live files it keeps a
model of what a power cut would leave, as POSIX promises durability — the strict reading of fsync(2) that
Jepsen's LazyFS also takes:

- a file's data and size are durable only as of its last fsync/fdatasync;
- a directory entry (create, mkdir, rename, unlink, rmdir) is durable only once that directory was fsynced; a
  rename changes two directories and each side becomes durable with its own directory's fsync;
- `cut` rolls the backing directory back to that durable state, as a power cut and a reboot would.

What a cut does with what was never synced is chosen per cut:
- data="lose": unsynced data is gone (file contents and sizes as of their last sync);
- data="pages": each 4 KiB page written since the last sync independently did or did not reach the disk, and the
  file's size is its synced or its live one: torn tails, holes of zeros, a later page without an earlier one;
- data="garbage": as "pages", but pages that did not reach the disk read as random bytes where the file grew (the
  stale blocks of a file system that persisted the size before the data);
- entries="durable": directories hold exactly their synced entries; entries="random": each unsynced change of a
  directory entry independently did or did not persist (file systems also write metadata on their own).

Why FUSE rather than a shim of the `os` calls in the gateway: the gateway runs unmodified in its own process and
every call reaches the layer whether or not the storage code routes it through a helper (`open()`, `mmap`,
`sendfile`, `shutil`, `os.replace` …), so a forgotten fsync cannot hide from it.

A failing device, too (`fail`, `heal`): from a `fail` on, the chosen calls (`FAULT_OPS`: reads, writes, syncs of
files or directories, opens, truncations, reservations), optionally only on files whose path matches a pattern,
fail with the chosen errno (EIO by default) — each failure counted in the stats as `faults` — until `heal`. What
failed changed nothing, neither the files nor the model: a failed write wrote nothing and a failed sync made
nothing durable. As on Linux, what was written to a file before a sync of it failed is lost to the next cut even
after later syncs succeed (the kernel marks the pages it could not write clean; reads still see them until then):
what a program acknowledged after a failed sync is safe only if it did not depend on those bytes.

Processes: `python -m logway.bench.powerfs BACKING MOUNTPOINT` is the daemon (one FUSE thread, single-threaded,
plus a control thread answering one JSON line per command on stdin: `stats`, `cut`, `fault`). `PowerFSMount`
drives it from the test or benchmark: `start()`, `cut(...)` (the caller has stopped every process using the mount:
a power cut kills everything), `fail(...)` and `heal()` (at any moment, processes running), `stop()`. Nothing here
is used by the gateway itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fnmatch
import json
import logging
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("logway.bench.powerfs")

PAGE = 4096
#: Bytes copied per read while syncing a file into its durable shadow or writing a cut's image.
COPY_CHUNK = 1 << 20
DATA_MODES = ("lose", "pages", "garbage")
ENTRY_MODES = ("durable", "random")
#: The calls a fault can fail: "fsync" is fsync(2) and fdatasync(2) of a file, "fsyncdir" of a directory, "open"
#: opening and creating files, "truncate" ftruncate(2) and truncate(2), "fallocate" reserving blocks.
FAULT_OPS = ("read", "write", "fsync", "fsyncdir", "open", "truncate", "fallocate")
_FALLOC_FL_KEEP_SIZE = 1


def fuse_problem() -> str | None:
    """Why a PowerFS cannot be mounted here, or None when it can (the tests skip, or fail in CI, with this)."""
    if not sys.platform.startswith("linux"):
        return "the power-loss file system needs Linux (FUSE)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian package fuse3)"
    try:
        import mfusepy  # noqa: F401  (loads libfuse3 through ctypes)
    except ImportError:
        return "the Python package mfusepy is missing (pip install mfusepy)"
    except (OSError, AttributeError) as exc:
        return f"libfuse3 cannot be loaded ({exc}); install the Debian package fuse3"
    return None


# ---------------------------------------------------------------------------------------------------- the model
@dataclass(slots=True)
class Node:
    """One file or directory, as the model knows it (stable across renames)."""

    id: int
    is_dir: bool
    path: str | None  # live path relative to the backing root ("" = the root); None once removed
    original: bool = False  # durable content = the backing file as found at mount (no shadow copy yet)
    shadow: bool = False  # durable content is in the shadow file of this node
    dirty: list = field(default_factory=list)  # [start, end) byte ranges changed since the last sync


@dataclass(frozen=True, slots=True)
class Fault:
    """Which calls fail (`FAULT_OPS`), on which files (an fnmatch pattern of the path relative to the mount, `*`
    matching across `/`; None: every file) and with which errno."""

    ops: frozenset[str]
    paths: str | None = None
    errno: int = errno.EIO

    def hits(self, op: str, rel: str | None) -> bool:
        return op in self.ops and (self.paths is None or (rel is not None and fnmatch.fnmatchcase(rel, self.paths)))


@dataclass(slots=True)
class CutReport:
    """What one cut left behind."""

    files: int = 0
    dirs: int = 0
    unsynced_files: int = 0  # files whose live content differed from their durable content
    bytes_dropped: int = 0  # live bytes that did not survive (by size)
    pages_kept: int = 0  # unsynced pages that reached the "disk" (data=pages/garbage)
    pages_garbage: int = 0  # unsynced pages that read back as random bytes (data=garbage)
    entries_reverted: int = 0  # unsynced entry changes undone
    entries_kept: int = 0  # unsynced entry changes that persisted anyway (entries=random)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


class PowerFS:
    """The FUSE operations (an mfusepy `Operations`) and the durability model. Thread-safe through one lock:
    FUSE calls come from the FUSE thread, `cut` and `stats` from the control thread."""

    use_ns = True
    flag_nopath = True  # read/write/fsync/release get the file handle only: no path lookups per call
    flag_nullpath_ok = True

    def __init__(self, root: str, shadow_dir: str) -> None:
        self.root = os.path.abspath(root)
        self.shadow_dir = shadow_dir
        os.makedirs(shadow_dir, exist_ok=True)
        self._mutex = threading.Lock()
        self.frozen = False
        self.fault: Fault | None = None  # the calls that fail for now (`set_fault`)
        self.nodes: dict[int, Node] = {}
        self.ids: dict[str, int] = {}  # live relative path -> node id
        self.dentries: dict[int, dict[str, int]] = {}  # durable entries of each directory
        self.handles: dict[int, tuple[int, Node]] = {}  # fh -> (backing fd, node)
        self._next_id = 1
        self._next_fh = 1
        self.counters = {"write": 0, "bytes_written": 0, "fsync": 0, "fdatasync": 0, "fsyncdir": 0,
                         "create": 0, "mkdir": 0, "rename": 0, "unlink": 0, "rmdir": 0, "truncate": 0,
                         "fallocate": 0, "faults": 0}
        self._scan("", is_dir=True)

    # -- model helpers -------------------------------------------------------------------------------------
    def _scan(self, rel: str, *, is_dir: bool) -> Node:
        """Adopt what exists at mount: all of it is durable, as found."""
        node = self._new_node(rel, is_dir)
        if is_dir:
            entries = {}
            for name in os.listdir(self._full(rel)):
                child_rel = f"{rel}/{name}" if rel else name
                child_is_dir = stat.S_ISDIR(os.lstat(self._full(child_rel)).st_mode)
                entries[name] = self._scan(child_rel, is_dir=child_is_dir).id
            self.dentries[node.id] = entries
        else:
            node.original = True
        return node

    def _new_node(self, rel: str, is_dir: bool) -> Node:
        node = Node(self._next_id, is_dir, rel)
        self._next_id += 1
        self.nodes[node.id] = node
        self.ids[rel] = node.id
        return node

    def _full(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    @staticmethod
    def _rel(path: str) -> str:
        return path.strip("/")

    def _node(self, path: str) -> Node:
        node_id = self.ids.get(self._rel(path))
        if node_id is None:
            raise OSError(errno.ENOENT, "no such entry")
        return self.nodes[node_id]

    def _shadow_path(self, node: Node) -> str:
        return os.path.join(self.shadow_dir, str(node.id))

    def _before_change(self, node: Node) -> None:
        """A file about to change for the first time since mount: keep its original content as the durable one."""
        if node.original:
            shutil.copyfile(self._full(node.path), self._shadow_path(node))
            node.original = False
            node.shadow = True

    def _preserve(self, node: Node) -> None:
        """A name about to go away: a never-changed file keeps its content durable through a hard link."""
        if node.original and not node.is_dir:
            os.link(self._full(node.path), self._shadow_path(node))
            node.original = False
            node.shadow = True

    def _live_entries(self, node: Node) -> dict[str, int]:
        if node.path is None:
            return {}
        prefix = f"{node.path}/" if node.path else ""
        return {name: self.ids[prefix + name] for name in os.listdir(self._full(node.path))}

    def _sync_file(self, fd: int, node: Node) -> None:
        if node.original and not node.dirty:
            return
        size = os.fstat(fd).st_size
        with open(self._shadow_path(node), "r+b" if node.shadow else "w+b") as shadow:
            shadow.truncate(size)
            for start, end in _merge(node.dirty):
                pos, end = start, min(end, size)
                while pos < end:
                    chunk = os.pread(fd, min(COPY_CHUNK, end - pos), pos)
                    if not chunk:
                        break
                    shadow.seek(pos)
                    shadow.write(chunk)
                    pos += len(chunk)
        node.shadow = True
        node.original = False
        node.dirty = []

    def _check_fault(self, op: str, rel: str | None) -> None:
        """Fail `op` on the file at `rel` if the fault set for now says so (before it changes anything)."""
        fault = self.fault
        if fault is not None and fault.hits(op, rel):
            self.counters["faults"] += 1
            raise OSError(fault.errno, os.strerror(fault.errno))

    # -- FUSE operations -----------------------------------------------------------------------------------
    def _op(fn: Callable) -> Callable:  # noqa: N805 — a decorator used in the class body
        def locked(self, *args):
            with self._mutex:
                if self.frozen:
                    raise OSError(errno.EIO, "the power is off")
                return fn(self, *args)
        locked.__name__ = fn.__name__
        return locked

    def init_with_config(self, conn_info, config) -> None:
        if config is not None:
            config.hard_remove = 1  # an unlinked open file is unlinked, not renamed to .fuse_hidden*
            config.nullpath_ok = 1

    @_op
    def getattr(self, path, fh=None):
        if fh is not None and fh in self.handles:
            st = os.fstat(self.handles[fh][0])
        elif path is None:
            raise OSError(errno.EBADF, "no path and no handle")
        else:
            st = os.lstat(self._full(self._rel(path)))
        return {"st_mode": st.st_mode, "st_nlink": st.st_nlink, "st_size": st.st_size, "st_uid": st.st_uid,
                "st_gid": st.st_gid, "st_blocks": st.st_blocks, "st_atime": st.st_atime_ns,
                "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    @_op
    def access(self, path, amode):
        return 0

    @_op
    def statfs(self, path):
        sv = os.statvfs(self.root)
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                                            "f_ffree", "f_favail", "f_namemax")}

    @_op
    def readdir(self, path, fh):
        node = self.nodes.get(fh) or self._node(path)
        return [".", ".."] + os.listdir(self._full(node.path))

    @_op
    def opendir(self, path):
        return self._node(path).id  # the directory's fh is its node id: fsyncdir finds it after a rename

    def releasedir(self, path, fh):
        return 0

    @_op
    def fsyncdir(self, path, datasync, fh):
        node = self.nodes.get(fh) or self._node(path)
        self._check_fault("fsyncdir", node.path)
        self.dentries[node.id] = self._live_entries(node)
        self.counters["fsyncdir"] += 1
        return 0

    @_op
    def mkdir(self, path, mode):
        rel = self._rel(path)
        os.mkdir(self._full(rel), mode)
        node = self._new_node(rel, True)
        self.dentries[node.id] = {}
        self.counters["mkdir"] += 1
        return 0

    @_op
    def rmdir(self, path):
        rel = self._rel(path)
        node = self._node(path)
        os.rmdir(self._full(rel))
        del self.ids[rel]
        node.path = None
        self.counters["rmdir"] += 1
        return 0

    def _open_fh(self, rel: str, node: Node, flags: int) -> int:
        self._check_fault("open", rel)
        fd = os.open(self._full(rel), os.O_RDWR)
        if flags & os.O_TRUNC:
            self._truncate(fd, node, 0)
        fh = self._next_fh
        self._next_fh += 1
        self.handles[fh] = (fd, node)
        return fh

    @_op
    def create(self, path, mode, flags):
        rel = self._rel(path)
        if rel in self.ids:
            return self._open_fh(rel, self.nodes[self.ids[rel]], flags)
        self._check_fault("open", rel)
        fd = os.open(self._full(rel), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        os.close(fd)
        self.counters["create"] += 1
        return self._open_fh(rel, self._new_node(rel, False), 0)

    @_op
    def open(self, path, flags):
        rel = self._rel(path)
        return self._open_fh(rel, self._node(path), flags)

    @_op
    def read(self, path, size, offset, fh):
        fd, node = self.handles[fh]
        self._check_fault("read", node.path)
        return os.pread(fd, size, offset)

    @_op
    def write(self, path, data, offset, fh):
        fd, node = self.handles[fh]
        self._check_fault("write", node.path)
        self._before_change(node)
        written = os.pwrite(fd, data, offset)
        node.dirty.append((offset, offset + written))
        self.counters["write"] += 1
        self.counters["bytes_written"] += written
        return written

    def _truncate(self, fd: int, node: Node, length: int) -> None:
        self._check_fault("truncate", node.path)
        size = os.fstat(fd).st_size
        if size != length:
            self._before_change(node)
            node.dirty.append((min(size, length), max(size, length)))
        os.ftruncate(fd, length)
        self.counters["truncate"] += 1

    @_op
    def truncate(self, path, length, fh=None):
        if fh is not None and fh in self.handles:
            fd, node = self.handles[fh]
            self._truncate(fd, node, length)
            return 0
        rel = self._rel(path)
        fd = os.open(self._full(rel), os.O_RDWR)
        try:
            self._truncate(fd, self._node(path), length)
        finally:
            os.close(fd)
        return 0

    @_op
    def fallocate(self, path, mode, offset, size, fh):
        fd, node = self.handles[fh]
        self._check_fault("fallocate", node.path)
        before = os.fstat(fd).st_size
        if not mode & _FALLOC_FL_KEEP_SIZE and offset + size > before:
            self._before_change(node)
            node.dirty.append((before, offset + size))
        if _libc_fallocate(fd, mode, offset, size) != 0:
            return -ctypes.get_errno()
        self.counters["fallocate"] += 1
        return 0

    @_op
    def fsync(self, path, datasync, fh):
        fd, node = self.handles[fh]
        try:
            self._check_fault("fsync", node.path)
        except OSError:
            # As Linux does: the pages the failed sync could not write are marked clean all the same, so what was
            # written before it never reaches the disk — no later sync writes it — unless it is written again.
            node.dirty = []
            raise
        self._sync_file(fd, node)
        self.counters["fdatasync" if datasync else "fsync"] += 1
        return 0

    def flush(self, path, fh):
        return 0

    @_op
    def release(self, path, fh):
        fd, _ = self.handles.pop(fh)
        os.close(fd)
        return 0

    @_op
    def unlink(self, path):
        rel = self._rel(path)
        node = self._node(path)
        self._preserve(node)
        os.unlink(self._full(rel))
        del self.ids[rel]
        node.path = None
        self.counters["unlink"] += 1
        return 0

    @_op
    def rename(self, old, new):
        old_rel, new_rel = self._rel(old), self._rel(new)
        moving = self._node(old)
        replaced = self.ids.get(new_rel)
        if replaced is not None and replaced != moving.id:
            self._preserve(self.nodes[replaced])
        os.rename(self._full(old_rel), self._full(new_rel))
        if replaced is not None and replaced != moving.id:
            self.nodes[replaced].path = None
        prefix = old_rel + "/"
        for rel in [r for r in self.ids if r == old_rel or r.startswith(prefix)]:
            node_id = self.ids.pop(rel)
            moved = new_rel + rel[len(old_rel):]
            self.ids[moved] = node_id
            self.nodes[node_id].path = moved
        self.counters["rename"] += 1
        return 0

    @_op
    def chmod(self, path, mode):
        os.chmod(self._full(self._rel(path)), mode)
        return 0

    @_op
    def chown(self, path, uid, gid):
        os.chown(self._full(self._rel(path)), uid, gid)
        return 0

    @_op
    def utimens(self, path, times=None):
        os.utime(self._full(self._rel(path)), ns=times)
        return 0

    # -- control -------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        with self._mutex:
            return dict(self.counters)

    def set_fault(self, fault: Fault | None) -> None:
        """From now on, fail what `fault` names (None: nothing fails any more)."""
        with self._mutex:
            self.fault = fault

    def cut(self, data: str = "lose", entries: str = "durable", seed: int = 0) -> CutReport:
        """Freeze (every later call fails with EIO) and rewrite the backing directory as its durable state."""
        if data not in DATA_MODES or entries not in ENTRY_MODES:
            raise ValueError(f"cut modes: data in {DATA_MODES}, entries in {ENTRY_MODES}")
        with self._mutex:
            self.frozen = True
            for fd, _ in self.handles.values():
                os.close(fd)
            self.handles.clear()
            report = CutReport()
            tag = uuid.uuid4().hex[:8]
            image = f"{self.root}.cut-{tag}"
            os.mkdir(image)
            _Image(self, random.Random(seed), data, entries, report).build(self.nodes[self.ids[""]], image)
            old = f"{self.root}.old-{tag}"
            os.rename(self.root, old)
            os.rename(image, self.root)
            shutil.rmtree(old)
            shutil.rmtree(self.shadow_dir, ignore_errors=True)
            return report


class _Image:
    """Writes the durable state of a PowerFS (plus what the cut's modes let survive) into a new directory."""

    def __init__(self, fs: PowerFS, rnd: random.Random, data: str, entries: str, report: CutReport) -> None:
        self.fs, self.rnd, self.data, self.entries, self.report = fs, rnd, data, entries, report
        self._building: set[int] = set()

    def build(self, directory: Node, out: str) -> None:
        if directory.id in self._building:
            return  # a directory durably inside itself (independent renames on both sides): nothing more to write
        self._building.add(directory.id)
        self.report.dirs += 1
        durable = self.fs.dentries.get(directory.id, {})
        live = self.fs._live_entries(directory)
        chosen = dict(durable)
        for name in sorted(set(durable) | set(live)):
            was, now = durable.get(name), live.get(name)
            if was == now:
                continue
            if self.entries == "random" and self.rnd.random() < 0.5:
                self.report.entries_kept += 1
                if now is None:
                    chosen.pop(name, None)
                else:
                    chosen[name] = now
            else:
                self.report.entries_reverted += 1
        for name, node_id in sorted(chosen.items()):
            node = self.fs.nodes[node_id]
            dest = os.path.join(out, name)
            if node.is_dir:
                os.mkdir(dest)
                self.build(node, dest)
            else:
                self.write_file(node, dest)
        self._building.discard(directory.id)

    def write_file(self, node: Node, dest: str) -> None:
        fs, report = self.fs, self.report
        report.files += 1
        if node.shadow:
            source = fs._shadow_path(node)
        elif node.original:
            source = fs._full(node.path)
        else:
            source = None  # created since mount and never synced: empty
        durable_size = os.path.getsize(source) if source else 0
        live = fs._full(node.path) if node.path is not None and node.dirty else None
        live_size = os.path.getsize(live) if live else durable_size
        if live is None:
            if source:
                os.link(source, dest)  # both old trees go away after the cut: share the blocks
            else:
                open(dest, "wb").close()
            return
        report.unsynced_files += 1
        if self.data == "lose":
            size = durable_size
            if source:
                shutil.copyfile(source, dest)
            else:
                open(dest, "wb").close()
            report.bytes_dropped += max(live_size - size, 0)
            return
        size = self.rnd.choice((durable_size, live_size))  # did the size reach the disk?
        with open(dest, "w+b") as out:
            if source:
                with open(source, "rb") as src:
                    shutil.copyfileobj(src, out, COPY_CHUNK)
            out.truncate(size)
            pages = sorted({p for start, end in _merge(node.dirty) for p in range(start // PAGE, -(-end // PAGE))})
            with open(live, "rb") as lf:
                for page in pages:
                    start = page * PAGE
                    if start >= size:
                        break
                    end = min(start + PAGE, size)
                    if self.rnd.random() < 0.5:
                        lf.seek(start)
                        chunk = lf.read(end - start)
                        out.seek(start)
                        out.write(chunk)
                        report.pages_kept += 1
                    elif self.data == "garbage" and end > durable_size:
                        lo = max(start, durable_size)
                        out.seek(lo)
                        out.write(self.rnd.randbytes(end - lo))
                        report.pages_garbage += 1
        report.bytes_dropped += max(live_size - size, 0)


def _merge(ranges: list) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _libc_fallocate = _libc.fallocate
    _libc_fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    _libc_fallocate.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover — Linux-only tool
    def _libc_fallocate(fd, mode, offset, length):
        ctypes.set_errno(errno.EOPNOTSUPP)
        return -1


# ---------------------------------------------------------------------------------------------- the daemon
def _control_loop(fs: PowerFS, ready: threading.Event) -> None:
    """Answer one JSON line per command line on stdin: {"op": "stats"}, {"op": "fault", "ops", "paths", "errno"}
    (no ops: heal) or {"op": "cut", "data", "entries", "seed"} (after which the daemon exits). EOF on stdin ends nothing: the controller unmounts."""
    ready.wait()
    out = sys.stdout
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            if cmd["op"] == "stats":
                answer: dict = {"stats": fs.stats()}
            elif cmd["op"] == "fault":
                ops = frozenset(cmd.get("ops") or ())
                if not ops <= set(FAULT_OPS):
                    raise ValueError(f"fault ops must be among {FAULT_OPS}, not {sorted(ops - set(FAULT_OPS))}")
                code = getattr(errno, cmd.get("errno", "EIO"))
                fs.set_fault(Fault(ops, cmd.get("paths"), code) if ops else None)
                answer = {"stats": fs.stats()}
            elif cmd["op"] == "cut":
                answer = {"cut": fs.cut(cmd.get("data", "lose"), cmd.get("entries", "durable"),
                                        int(cmd.get("seed", 0))).as_dict(), "stats": fs.stats()}
            else:
                answer = {"error": f"unknown op {cmd['op']!r}"}
        except Exception as exc:  # reported to the controller, which raises it
            log.exception("control command failed")
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), file=out, flush=True)
        if "cut" in answer:
            # The power is off: end at once. The kernel aborts the connection, so files still open through the
            # mount fail (ENOTCONN) instead of keeping a lazy unmount waiting for them to close.
            os._exit(0)


def serve(backing: str, mountpoint: str) -> None:
    """Mount a PowerFS of `backing` at `mountpoint` and serve it until unmounted (the daemon's main)."""
    from mfusepy import FUSE

    class _FUSE(FUSE):
        def truncate_fuse_3(self, path, length, fip):
            # mfusepy drops the file handle of ftruncate(2); with nullpath_ok the path is None then.
            fh = fip.contents.fh if fip else None
            return self.operations.truncate(None if path is None else path.decode(self.encoding, self.errors),
                                            length, fh)

    shadow = os.path.abspath(backing).rstrip("/") + ".powerfs-shadow"
    shutil.rmtree(shadow, ignore_errors=True)
    fs = PowerFS(backing, shadow)
    ready = threading.Event()
    init = fs.init_with_config

    def init_and_announce(conn_info, config):
        init(conn_info, config)
        ready.set()

    fs.init_with_config = init_and_announce
    threading.Thread(target=_control_loop, args=(fs, ready), daemon=True, name="powerfs-control").start()
    try:
        _FUSE(fs, mountpoint, foreground=True, nothreads=True, fsname="powerfs", default_permissions=True)
    finally:
        shutil.rmtree(shadow, ignore_errors=True)


# ------------------------------------------------------------------------------------------ the controller
class PowerFSError(RuntimeError):
    """The power-loss file system could not be mounted or did not answer."""


class PowerFSMount:
    """A PowerFS daemon of `backing` mounted at `mountpoint`; `cut()` is a power cut and a reboot.

    The mount is empty at first if `backing` is; `path` is where programs under test put their files."""

    def __init__(self, backing: str, mountpoint: str, *, log_path: str | None = None,
                 start_timeout: float = 20.0) -> None:
        self.backing = os.path.abspath(backing)
        self.path = os.path.abspath(mountpoint)
        self.log_path = log_path or self.backing.rstrip("/") + ".powerfs.log"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.cuts = 0

    def start(self) -> "PowerFSMount":
        problem = fuse_problem()
        if problem:
            raise PowerFSError(problem)
        os.makedirs(self.backing, exist_ok=True)
        if not os.path.isdir(self.path) and os.path.lexists(self.path):
            self._unmount()  # a mount left behind by a daemon that died
        os.makedirs(self.path, exist_ok=True)
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "logway.bench.powerfs", self.backing, self.path],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         bufsize=1)
        answer = self._read(self.start_timeout)
        if not answer.get("ready"):
            self._unmount()
            raise PowerFSError(f"the power-loss file system did not start: {answer}")
        return self

    def _read(self, timeout: float) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            tail = self._log_tail()
            self._unmount()
            raise PowerFSError(f"the power-loss file system did not answer in {timeout:.0f} s: {tail}")
        return json.loads(result[0])

    def _command(self, cmd: dict, timeout: float = 300.0) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            raise PowerFSError("the power-loss file system is not running")
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        answer = self._read(timeout)
        if "error" in answer:
            raise PowerFSError(answer["error"])
        return answer

    def stats(self) -> dict[str, int]:
        """Calls seen since this mount: writes, fsyncs, fdatasyncs, directory fsyncs, renames …"""
        return self._command({"op": "stats"})["stats"]

    def fail(self, *ops: str, paths: str | None = None, error: str = "EIO") -> None:
        """From now on `ops` (of `FAULT_OPS`; every one when none is named) fail with errno `error` (its name) on
        the files whose path relative to the mount matches `paths` (fnmatch; every file when None), until `heal` —
        processes using the mount keep running, and see a failing device."""
        self._command({"op": "fault", "ops": list(ops or FAULT_OPS), "paths": paths, "errno": error})

    def heal(self) -> None:
        """Nothing fails any more (what failed before stays failed: nothing is retried here)."""
        self._command({"op": "fault", "ops": []})

    def cut(self, *, data: str = "lose", entries: str = "durable", seed: int = 0) -> dict:
        """Cut the power: drop (or tear) everything unsynced, unmount, mount again. Every process using the mount
        must be stopped first (a power cut stops them too). Returns the CutReport fields and the mount's stats."""
        answer = self._command({"op": "cut", "data": data, "entries": entries, "seed": seed})
        self._unmount()
        self.cuts += 1
        self.start()
        return {**answer["cut"], **{f"calls_{k}": v for k, v in answer["stats"].items()}}

    def _unmount(self) -> None:
        # Not guarded by os.path.ismount: a frozen (cut) or dead daemon fails the stat that ismount needs.
        tool = ["fusermount3", "-u", "-z", self.path] if shutil.which("fusermount3") else ["umount", "-l", self.path]
        subprocess.run(tool, check=False, capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self.proc = None

    def stop(self) -> None:
        """Unmount without a cut (what was written stays, synced or not)."""
        self._unmount()

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return " | ".join(f.read().decode(errors="replace").splitlines()[-5:])
        except OSError:
            return ""

    def __enter__(self) -> "PowerFSMount":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m logway.bench.powerfs BACKING MOUNTPOINT", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="powerfs: %(levelname)s %(message)s")
    serve(args[0], args[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
