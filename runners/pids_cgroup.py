"""A kernel-enforced process cap for one sandboxed child: a pids cgroup of its own.

RLIMIT_NPROC does not bind root, the usual user in a container, and a fork bomb grows
exponentially: between two looks of the sandbox's watchdog it can take every PID the
machine has, and then the bot's own forks (and every other job's) fail with EAGAIN. Where
this process may create cgroups (root, a writable pids hierarchy: cgroup v1's `pids`
controller, or v2 with `pids` enabled for our subtree), each child joins a fresh cgroup
whose `pids.max` stops the bomb in the kernel. Elsewhere `create` returns None and the
RLIMIT_NPROC (non-root) and the watchdog remain; containers get docker's `--pids-limit`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_PREFIX = "opbot-"
_names = itertools.count()


def _own_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """This process's cgroup path in the v1 `pids` hierarchy and in the v2 one."""
    v1 = v2 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "pids" in controllers.split(","):
            v1 = path
    return v1, v2


def _candidate_folders(root: Path) -> list[Path]:
    """Where a child cgroup of ours could go, the v1 pids hierarchy first."""
    try:
        own = (Path("/proc/self/cgroup")).read_text(encoding="utf-8")
    except OSError:
        return []
    v1, v2 = _own_paths(own)
    folders = []
    if v1 is not None:
        folders.append(root / "pids" / v1.lstrip("/"))
    if v2 is not None:
        for mount in (root, root / "unified"):
            if (mount / "cgroup.controllers").exists():
                folders.append(mount / v2.lstrip("/"))
    return folders


def _sweep(parent: Path) -> None:
    """Remove empty cgroups a dead opbot process left (rmdir refuses non-empty ones)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name[len(_PREFIX):].split("-", 1)[0]
            if not entry.name.startswith(_PREFIX) or not owner.isdigit():
                continue
            if int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


@dataclass
class PidsCgroup:
    """One child's cgroup: join it between fork and exec, `close` it at the end."""

    path: Path
    procs_fd: int  # cgroup.procs, opened by the parent so the child only writes

    @classmethod
    def create(cls, limit: int, root: Path = CGROUP_ROOT) -> PidsCgroup | None:
        """A fresh cgroup capped at `limit` processes; None where none can be made."""
        if os.geteuid() != 0:
            return None
        for parent in _candidate_folders(root):
            _sweep(parent)
            path = parent / f"{_PREFIX}{os.getpid()}-{next(_names)}"
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                if not (path / "pids.max").exists():  # not a cgroupfs, or no pids controller
                    raise FileNotFoundError(path / "pids.max")
                (path / "pids.max").write_text(str(limit), encoding="ascii")
                fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            return cls(path=path, procs_fd=fd)
        return None

    def join(self) -> None:
        """Move the calling process in (runs in the child before exec; never raises)."""
        with contextlib.suppress(OSError):
            os.write(self.procs_fd, b"0")

    def limit_hits(self) -> int:
        """How often a fork failed at the cap (pids.events `max`); 0 when unreadable."""
        try:
            text = (self.path / "pids.events").read_text(encoding="ascii")
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "max" and value.strip().isdigit():
                return int(value)
        return 0

    def members(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            return []
        return [int(word) for word in text.split() if word.isdigit()]

    def close(self, timeout_s: float = 10.0) -> None:
        """Kill whatever is still inside, then remove the cgroup; idempotent, never raises."""
        with contextlib.suppress(OSError):
            os.close(self.procs_fd)
        self.procs_fd = -1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1", encoding="ascii")  # v2, 5.14+
            for pid in self.members():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)  # members still exiting


def process_cap() -> str:
    """What stops a fork bomb here: "cgroup" (the kernel, per child), "rlimit"
    (RLIMIT_NPROC, which binds non-root users), or "watchdog" (counting only: root
    without a writable pids cgroup, e.g. in a container, where docker's --pids-limit
    must do it)."""
    if os.geteuid() != 0:
        return "rlimit"
    cgroup = PidsCgroup.create(1)
    if cgroup is None:
        return "watchdog"
    cgroup.close()
    return "cgroup"
