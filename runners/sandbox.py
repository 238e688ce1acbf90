"""Runs untrusted work (references, candidates, generators) in a child process.

The child gets a cleared environment (an allowlist; never a token, key or secret), its own
process group (so a fork bomb or a stray grandchild dies with it), resource limits (no core
files, capped file size) and a wall-clock timeout. Its stdout and stderr go to a log file
rather than a pipe, so a candidate that prints gigabytes cannot block or flood the parent.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Variables a build or a run legitimately needs; everything else is dropped.
_ENV_ALLOWLIST = {
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME",
    "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CC", "CXX",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "ASCEND_RT_VISIBLE_DEVICES",
}
_ENV_ALLOWED_PREFIXES = ("LC_", "TRITON_", "ASCEND_", "ASCEND", "TORCH_", "NPU_", "CANN_")
# Names that mark a credential; dropped even when a prefix above would admit them.
_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")

LOG_TAIL_CHARS = 4000
_MAX_FILE_BYTES = 512 * 1024 * 1024


def child_environment(extra: Mapping[str, str] | None = None,
                      source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child sees: the allowlisted variables of `source`, plus `extra`."""
    base = os.environ if source is None else source
    env: dict[str, str] = {}
    for name, value in base.items():
        upper = name.upper()
        if any(marker in upper for marker in _SECRET_MARKERS):
            continue
        if name in _ENV_ALLOWLIST or name.startswith(_ENV_ALLOWED_PREFIXES):
            env[name] = value
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class ProcessOutcome:
    """How a child process ended."""

    returncode: int | None
    timed_out: bool
    seconds: float
    log_tail: str

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def _limit_resources() -> None:
    # Runs in the child between fork and exec: no core dumps, no runaway files.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_MAX_FILE_BYTES, _MAX_FILE_BYTES))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def read_tail(path: Path, limit: int = LOG_TAIL_CHARS) -> str:
    """The last `limit` characters of a log file, decoded leniently."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            handle.seek(max(0, size - limit * 4))
            data = handle.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def run_isolated(argv: Sequence[str], *, cwd: Path, timeout_s: float, log_path: Path,
                 env: Mapping[str, str], stdin_data: str | None = None) -> ProcessOutcome:
    """Run `argv` in its own process group; kill the whole group at the end or on timeout.

    `stdin_data` is written to the child's stdin and the pipe closed: the way to hand a
    child what its environment and command line must not show.
    """
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env),
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE, stdout=log,
            # The parent runs no threads of its own while it forks here.
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_limit_resources,  # noqa: PLW1509
        )
        timed_out = False
        try:
            if stdin_data is not None and process.stdin is not None:
                try:
                    process.stdin.write(stdin_data.encode("utf-8"))
                    process.stdin.close()
                except BrokenPipeError:
                    pass  # the child died before reading: its exit status tells why
            returncode: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid)
            returncode = process.wait()
        # Grandchildren a candidate left behind die with their group.
        _kill_group(process.pid)
    return ProcessOutcome(returncode=returncode, timed_out=timed_out,
                          seconds=time.monotonic() - started, log_tail=read_tail(log_path))
