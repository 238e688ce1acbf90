"""Warm workers: one pre-imported fork server per role, so a verification skips the start.

A cold verification starts two sandboxed processes, each paying its interpreter start and
the torch/triton import (seconds). Here each role (reference, candidate) has one
long-lived server, started once with the same bubblewrap confinement as a cold worker
(no network, read-only root, cleared environment, rlimits, a pids cgroup) in a sandbox of
its own: a candidate never shares a sandbox, a PID namespace or a folder with a reference.
The server imports torch, triton and the harness, then forks one child per verification;
the child becomes an ordinary worker (`runners.harness.__main__.run_role`) on pipes the
judge made, so the judge's side (`Worker`, its watchdog and deadlines) is unchanged.

The server drops every capability first (bwrap run by root leaves the sandbox all of them
in its user namespace). Per child: a session of its own, non-dumpable (no sibling reads
its memory or environ through /proc), the policy's rlimits, a pids cgroup of its own where
one can be made (it joins through a descriptor the judge opened), the judge's environment
for it (HOME, TMPDIR, TRITON_CACHE_DIR in a fresh folder), every other descriptor closed.

The spool: the server's sandbox sees one host folder as its /tmp (its only writable
path). Before a verification the judge copies into it the files the worker must read that
live under the host's /tmp (elsewhere the read-only root shows them at their own path), at
the same path, so the worker sees exactly the paths a cold worker sees; it makes the
child's empty work folder there. After the verification the child's whole tree is killed
(its cgroup, and the server, a child subreaper, kills every process of its namespace but
itself), the server wipes what the child left in its own /dev, and the judge empties the
spool: the next child starts from a clean fork and a clean folder. One verification at a
time uses a server pair; a concurrent one runs cold. A server that died (a candidate can
kill it: it runs as the same user in the same sandbox) is restarted, and the verification
that found it dead runs cold, with a warning. A long-lived process lends its servers to the
opbot processes it starts (runners/warm_broker.py). See docs/threat-model.md, "Warm
workers".

The server side runs as `python -m runners.warm ROLE CONTROL_FD`.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import importlib
import json
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import types
import weakref
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from runners import collector
from runners.pids_cgroup import PidsCgroup
from runners.sandbox import (
    IsolatedChild,
    ProcessOutcome,
    SandboxPolicy,
    apply_limits,
    descendants,
    open_log,
    read_tail_fd,
    release_child,
    remove_tree,
    sandbox_environment,
    start_isolated,
)

ENV_SWITCH = "OPBOT_WARM_WORKERS"
ROLES = ("reference", "candidate")  # a verification's pair
GENERATOR = "generator"  # the offline generator (bot.agent.offline), started when first used
SERVER_ROLES = (*ROLES, GENERATOR)
# What a generator child runs: a module's `main()`, by name (runners never imports bot).
_GENERATOR_ENTRY = ("bot.agent.offline.__main__", "main")
_GENERATOR_WARM_UP = ("bot.agent.offline.__main__", "warm_up")  # once, before any fork
_SANDBOX_TMP = Path("/tmp")  # noqa: S108 - the sandbox's /tmp: the server's spool
_SERVER_INDUCTOR_CACHE = "/dev/shm/opbot-warm-server-inductor"  # noqa: S108 - the sandbox's
_MAX_CONTROL_BYTES = 1 << 20
_MAX_FDS = 8
_HELLO_TIMEOUT_S = 15.0  # a fork and a few system calls; a stopped server misses it
_END_TIMEOUT_S = 15.0
_REAP_ROUNDS_S = 5.0
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522


class WarmUnavailableError(Exception):
    """The warm server cannot serve this verification (dead, stopped, broken)."""


# -- the control channel: JSON datagrams with descriptors ------------------------------------


def _send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode("utf-8")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] \
        if fds else []
    sock.sendmsg([data], ancillary)


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int], int | None]:
    """One message (None at EOF), the descriptors it carried, and the sender's pid as this
    process sees it (SO_PASSCRED), when the kernel attached it."""
    space = socket.CMSG_SPACE(_MAX_FDS * 4) + socket.CMSG_SPACE(12)
    data, ancillary, _, _ = sock.recvmsg(_MAX_CONTROL_BYTES, space)
    fds: list[int] = []
    pid = None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += array.array("i", payload[:len(payload) - len(payload) % 4]).tolist()
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("3i", payload[:12])[0]
    if not data:
        return None, fds, pid
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):  # garbage, or nesting deep enough to exhaust json
        message = {}
    return message if isinstance(message, dict) else {}, fds, pid


# -- the judge's side ---------------------------------------------------------------------------


def _package_root() -> Path:
    import runners

    return Path(runners.__file__).resolve().parent.parent


@dataclass
class ChildPipes:
    """What the judge's Worker uses of a process: the channel's two ends, and its pid."""

    stdin: IO[bytes]
    stdout: IO[bytes]
    pid: int


@dataclass
class WarmChild:
    """One forked worker, with the interface the judge uses from `IsolatedChild`."""

    process: ChildPipes
    server: WarmServer
    started: float
    policy: SandboxPolicy
    log_fd: int
    cgroup: PidsCgroup | None = None
    sandboxed: bool = True
    # Its work folder, as the judge sees it (in the spool) and as the child sees it.
    workdir: Path | None = None
    inside: Path | None = None
    _killed_because: str | None = field(default=None, init=False, repr=False)
    _outcome: ProcessOutcome | None = field(default=None, init=False, repr=False)

    def check_tree(self) -> str | None:
        """The watchdog (every ~0.2 s): more processes than the policy allows ends it."""
        if self._killed_because is not None or self._outcome is not None:
            return self._killed_because
        limit = self.policy.processes
        if self.cgroup is not None:
            grown = self.cgroup.limit_hits() > 0 or len(self.cgroup.members()) > limit
        else:
            grown = descendants(self.process.pid) > limit
        if grown:
            self.kill()
            self._killed_because = f"more than {limit} processes (a fork bomb?)"
        return self._killed_because

    def kill(self) -> None:
        """SIGKILL the child's session and cgroup; idempotent, never raises. What escaped
        both comes back to the server (a subreaper), which kills it in `finish`."""
        if self._outcome is not None:
            return
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.cgroup is not None:
            for pid in self.cgroup.members():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def finish(self, *, timed_out: bool = False,
               killed_because: str | None = None) -> ProcessOutcome:
        """Kill the child's whole tree, have the server reap it (or kill the server when it
        does not answer), close the pipes, read the log's tail. Idempotent."""
        if self._outcome is not None:
            return self._outcome
        self.kill()
        returncode = self.server.end_child()
        tail = release_child(self.cgroup, (self.process.stdin, self.process.stdout),
                             self.log_fd)
        self._outcome = ProcessOutcome(
            returncode=returncode, timed_out=timed_out,
            seconds=time.monotonic() - self.started, log_tail=tail, sandboxed=True,
            killed_because=killed_because or self._killed_because)
        return self._outcome


class WarmServer:
    """One role's fork server: its sandbox, its spool folder and its control socket."""

    def __init__(self, role: str, python: str, policy: SandboxPolicy) -> None:
        self.role = role
        self.python = python
        self.policy = policy
        self.root = Path(tempfile.mkdtemp(prefix=f"opbot-warm-{role}-"))
        self.spool = self.root / "tmp"  # the sandbox's /tmp
        self.spool.mkdir(mode=0o700)
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.ready = False
        try:
            self.process: IsolatedChild = start_isolated(
                [python, "-m", "runners.warm", role, str(theirs.fileno())],
                cwd=self.spool, env=sandbox_environment(_SANDBOX_TMP, {
                    "PYTHONPATH": str(_package_root()),
                    # What torch's import caches goes to the sandbox's own /dev/shm (wiped
                    # after every child), not into the spool the judge stages and empties.
                    "TORCHINDUCTOR_CACHE_DIR": _SERVER_INDUCTOR_CACHE}),
                log_path=self.root / "server.log", policy=policy,
                readable=[_package_root()], pass_fds=[theirs.fileno()], work_as_tmp=True)
        except BaseException:
            self._control.close()
            remove_tree(self.root)
            raise
        finally:
            theirs.close()
        # Its folder goes at exit even when nobody calls close() (the server itself dies
        # with its launcher thread: --die-with-parent).
        self._remove_root = weakref.finalize(self, remove_tree, self.root)
        # Paths bound read-only under the sandbox's /tmp (the venv, opbot): their mount
        # points live in the spool and stay when it is emptied.
        self._bound = _bound_under_tmp([_package_root(), Path(sys.prefix),
                                        Path(sys.base_prefix), Path(python).parent])

    def alive(self) -> bool:
        return self.process.process.poll() is None

    def wait_ready(self, timeout_s: float) -> None:
        """Until the server has imported everything; WarmUnavailableError otherwise."""
        if self.ready:
            return
        message, _, _ = self._receive_within(timeout_s)
        if message.get("op") != "ready":
            raise WarmUnavailableError(f"the {self.role} server did not start: "
                                       f"{self.log_tail()[-300:]}")
        self.ready = True

    def spawn(self, *, workdir_name: str, log_path: Path) -> WarmChild:
        """Fork one worker in a fresh folder of the spool, with its channel on new pipes."""
        inside = _SANDBOX_TMP / workdir_name
        (self.spool / workdir_name).mkdir(mode=0o700)
        env = sandbox_environment(inside, {"PYTHONPATH": str(_package_root()),
                                           "TMPDIR": str(inside),
                                           "TORCHINDUCTOR_CACHE_DIR": str(inside / ".inductor")})
        to_child, from_judge = os.pipe()
        from_child, to_judge = os.pipe()
        log_fd = open_log(log_path)
        cgroup = PidsCgroup.create(self.policy.processes)
        given = [to_child, to_judge, log_fd] + ([cgroup.procs_fd] if cgroup else [])
        started = time.monotonic()
        try:
            _send(self._control, {"op": "spawn", "role": self.role, "cwd": str(inside),
                                  "env": env, "policy": self.policy.to_json(),
                                  "cgroup": cgroup is not None}, given)
            message, _, pid = self._receive_within(_HELLO_TIMEOUT_S)
            if message.get("op") == "refused":
                raise WarmUnavailableError(f"the {self.role} server refused to fork: "
                                           f"{str(message.get('why'))[:200]}")
            if message.get("op") != "child" or pid is None:
                raise WarmUnavailableError(f"the {self.role} server answered "
                                           f"{str(message)[:100]} to a spawn")
        except (WarmUnavailableError, OSError) as exc:
            for fd in (from_judge, from_child, log_fd):
                os.close(fd)
            if cgroup is not None:
                cgroup.close()
            self.stop()
            raise WarmUnavailableError(str(exc)) from None
        finally:
            os.close(to_child)
            os.close(to_judge)
        pipes = ChildPipes(stdin=os.fdopen(from_judge, "wb", buffering=0),
                           stdout=os.fdopen(from_child, "rb", buffering=0), pid=pid)
        return WarmChild(process=pipes, server=self, started=started, policy=self.policy,
                         log_fd=log_fd, cgroup=cgroup, workdir=self.spool / workdir_name,
                         inside=inside)

    def end_child(self) -> int | None:
        """Have the server kill and reap everything but itself; the child's exit status
        (negative: the signal). A server that does not answer is stopped."""
        if not self.alive():
            self.stop()
            return -signal.SIGKILL  # its namespace went with it, the child included
        try:
            _send(self._control, {"op": "end"})
            message, _, _ = self._receive_within(_END_TIMEOUT_S)
        except (WarmUnavailableError, OSError):
            self.stop()
            return -signal.SIGKILL
        status = message.get("status")
        return status if isinstance(status, int) else None

    def empty_spool(self) -> None:
        """Remove everything the last verification put or left in the spool."""
        with contextlib.suppress(OSError), os.scandir(self.spool) as entries:
            for entry in entries:
                if entry.name not in self._bound:
                    remove_tree(self.spool / entry.name)

    def stage(self, paths: Sequence[Path]) -> None:
        """Copy the files under the host's /tmp that the worker must read into the spool,
        at the same path (elsewhere the sandbox's read-only root shows them)."""
        tmp = _SANDBOX_TMP.resolve()
        for path in paths:
            source = path.resolve()
            if not source.exists() or not source.is_relative_to(tmp):
                continue
            relative = source.relative_to(tmp)
            if relative.parts and relative.parts[0] in self._bound:
                continue  # bound read-only already
            target = self.spool / relative
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)

    def log_tail(self) -> str:
        return read_tail_fd(self.process.log_fd)

    def stop(self) -> None:
        """Kill the server's sandbox (every child with it) and forget it; idempotent."""
        self.ready = False
        with contextlib.suppress(OSError):
            self._control.close()
        self.process.finish()

    def close(self) -> None:
        self.stop()
        self._remove_root()

    def _receive_within(self, timeout_s: float) -> tuple[dict[str, Any], list[int], int | None]:
        self._control.settimeout(timeout_s)
        try:
            message, fds, pid = _receive(self._control)
        except (TimeoutError, OSError) as exc:
            raise WarmUnavailableError(f"the {self.role} server did not answer "
                                       f"({type(exc).__name__})") from None
        for fd in fds:  # the server sends none; never keep what arrives
            os.close(fd)
        if message is None:
            raise WarmUnavailableError(f"the {self.role} server is gone")
        return message, fds, pid


def _bound_under_tmp(paths: Sequence[Path]) -> frozenset[str]:
    tmp = _SANDBOX_TMP.resolve()
    names = set()
    for path in paths:
        resolved = path.resolve()
        if resolved.is_relative_to(tmp) and resolved != tmp:
            names.add(resolved.relative_to(tmp).parts[0])
    return frozenset(names)


@dataclass
class WarmLease:
    """One verification's use of a server pair; warnings say what ran cold and why."""

    workers: WarmWorkers
    name: str
    warnings: list[str] = field(default_factory=list)
    broken: str | None = None  # why nothing of this verification runs warm

    def spawn(self, role: str, *, log_path: Path, deadline: float) -> WarmChild | None:
        """A warm worker of `role`, or None (the caller starts a cold one; a warning says
        why). A dead or broken server is restarted for the next verification."""
        if self.broken is not None:
            return None
        server = self.workers.servers.get(role)
        try:
            if server is None or not server.alive():
                raise WarmUnavailableError(f"the {role} server had stopped")
            server.wait_ready(max(1.0, deadline - time.monotonic()))
            child = server.spawn(workdir_name=f"{self.name}-{role}", log_path=log_path)
        except WarmUnavailableError as exc:
            self.warnings.append(f"warm worker unavailable ({exc}); the {role} ran cold and "
                                 "its server was restarted")
            self.workers.restart(role)
            return None
        self.workers.forks += 1
        return child


class WarmWorkers:
    """The reference and candidate servers of one long-lived process (started lazily)."""

    def __init__(self, python: str | None = None, policy: SandboxPolicy | None = None) -> None:
        self.python = python or sys.executable
        self.policy = policy or SandboxPolicy.from_environment()
        self.servers: dict[str, WarmServer] = {}
        self._lock = threading.Lock()
        self._count = 0
        self.forks = 0  # workers forked so far (what ran warm)
        # bwrap dies with the thread that started it (--die-with-parent is PDEATHSIG, which
        # follows the thread): servers start from this one, alive as long as the pool.
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opbot-warm")

    def start(self, roles: Sequence[str] = ROLES) -> None:
        """Start the servers of `roles` (a verification's pair unless said); idempotent."""
        for role in roles:
            if role not in self.servers:
                self.servers[role] = self._launch(role)

    def restart(self, role: str) -> None:
        old = self.servers.pop(role, None)
        if old is not None:
            old.close()
        with contextlib.suppress(Exception):  # the next lease tries again and says why
            self.servers[role] = self._launch(role)

    def _launch(self, role: str) -> WarmServer:
        return self._launcher.submit(WarmServer, role, self.python, self.policy).result()

    @contextlib.contextmanager
    def lease(self, readable: Mapping[str, Sequence[Path]]) -> Iterator[WarmLease | None]:
        """The pair for one verification, its files staged (`readable` per role); None
        while another verification holds it (the caller runs cold)."""
        if not self._lock.acquire(blocking=False):
            yield None
            return
        try:
            self._count += 1
            lease = WarmLease(self, f"opbot-work-{self._count}-{os.urandom(4).hex()}")
            try:
                self.start(list(readable))  # SandboxUnavailableError goes up: cold alike
                for role, paths in readable.items():
                    server = self.servers.get(role)
                    if server is not None:
                        server.empty_spool()
                        server.stage(paths)
            except OSError as exc:  # a full disk, an unreadable input: cold says it better
                lease.broken = f"warm workers unavailable ({exc}); this verification ran cold"
                lease.warnings.append(lease.broken)
            try:
                yield lease
            finally:
                for server in self.servers.values():
                    server.empty_spool()
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            for server in self.servers.values():
                server.close()
            self.servers.clear()
        self._launcher.shutdown(wait=False)


_enabled = False


def enable() -> None:
    """Verifications of this process go through warm workers (a long-lived process)."""
    global _enabled  # noqa: PLW0603 - one switch per process, like the environment's
    _enabled = True


@contextlib.contextmanager
def warm_for_this_process() -> Iterator[None]:
    """Within: this process's verifications go warm, as after `enable()`; afterwards the
    switch is as it was (the test suite's corpora share one pool per test process)."""
    global _enabled  # noqa: PLW0603 - the same switch as enable()'s
    before = _enabled
    _enabled = True
    try:
        yield
    finally:
        _enabled = before


def switched_on() -> bool:
    """This process's switch: `enable()` or OPBOT_WARM_WORKERS=1 (runners/warm_pool.py
    decides with it which pool a verification uses)."""
    return _enabled or os.environ.get(ENV_SWITCH) == "1"


class WarmPool(Protocol):
    """What a verification needs of warm workers: a lease, or None (run cold)."""

    def lease(self, readable: Mapping[str, Sequence[Path]]
              ) -> contextlib.AbstractContextManager[WarmLease | None]:
        ...


# -- the server's side (inside its sandbox) --------------------------------------------------


def _prctl(option: int, value: int, *, check: bool = True) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0 and check:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _drop_capabilities() -> None:
    """Hold no capability, now or after an exec. bwrap started by root leaves the sandbox
    all of them in its user namespace: CAP_SYS_PTRACE there would let a child read or
    trace this server (and its later children) whatever their dumpable flag says."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text(encoding="ascii"))
    for capability in range(last + 1):  # the bounding set: what an exec as uid 0 regains
        _prctl(_PR_CAPBSET_DROP, capability, check=False)  # EPERM: none to drop
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, check=False)
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    empty = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: two words each
    if libc.capset(header, empty) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _interpreted() -> bool | None:
    """Whether the workers will run Triton's CPU interpreter, as `select_device` decides it
    (on the CPU it sets TRITON_INTERPRET=1 whatever the environment said), without
    initializing a device (a CUDA runtime initialized here would not survive the fork:
    torch's NVML check does not initialize it). None: an NPU host, torch_npu decides."""
    import torch

    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        cuda = torch.cuda.is_available()
    finally:
        del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
    if cuda:
        return False
    return None if any(Path("/dev").glob("davinci*")) else True


def _preimport(role: str) -> None:
    """What every worker needs, imported once (nothing that starts a thread or a device).
    Triton reads TRITON_INTERPRET on its first import: it is set first, as the workers'
    `select_device` will set it; where that is unknown (an NPU host) triton waits."""
    import torch  # noqa: F401

    interpreted = _interpreted()
    if interpreted is None:
        return  # the harness imports triton (through torch's own modules): it waits too
    if interpreted:
        os.environ["TRITON_INTERPRET"] = "1"
    if role == GENERATOR:
        # The generator's registry imports every backend (and triton with them).
        with contextlib.suppress(Exception):  # a child pays what failed here, nothing worse
            # Tracing the reference (torch.export): its first trace in a process costs
            # about a second more than the next ones, paid here once, on the meta device
            # (no compute: no thread starts that the fork would break).
            module, function = _GENERATOR_WARM_UP
            getattr(importlib.import_module(module), function)()
        _warm_up_estimate()  # the generator plans scaled shapes as the reference worker does
        return
    import runners.harness.candidate_worker
    import runners.harness.reference_worker  # noqa: F401

    with contextlib.suppress(ImportError):
        import triton
        import triton.language  # noqa: F401
    _warm_up_estimate()


def _warm_up_estimate() -> None:
    """The reference worker's first work estimate imports ~800 modules (sympy, torch's flop
    counter): seconds every child would pay. Done once here, on the meta device only (no
    compute, so no thread pool the fork would break), with a throwaway model."""
    import torch

    from runners.harness import scaling

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x @ x, dim=-1) + x

    module = types.ModuleType("opbot_warm_up")
    module.Model = Model  # type: ignore[attr-defined]
    module.get_inputs = lambda: [torch.empty(4, 4)]  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):  # a cold child pays the imports, nothing worse
        scaling.plan_for_reference(module, [], [])


# Every resource limit this platform has: a child may lower any of its server's.
_RLIMIT_NAMES = {getattr(resource, name): name for name in sorted(dir(resource))
                 if name.startswith("RLIMIT_")}
_RLIMITS = tuple(sorted(_RLIMIT_NAMES))


@dataclass(frozen=True)
class _Standing:
    """What a child of the same uid can lower of its server (prlimit, setpriority,
    sched_setaffinity on os.getppid(): no capability needed to lower), and every later fork
    would inherit: an honest candidate's MemoryError, slow timings. The server, holding no
    capability, cannot raise most of it back."""

    limits: tuple[tuple[int, int, int], ...]  # (resource, soft, hard)
    nice: int
    affinity: frozenset[int]
    oom_score_adj: str

    @classmethod
    def now(cls) -> _Standing:
        return cls(limits=tuple((which, *resource.getrlimit(which)) for which in _RLIMITS),
                   nice=os.getpriority(os.PRIO_PROCESS, 0),
                   affinity=frozenset(os.sched_getaffinity(0)),
                   oom_score_adj=_read_oom_score_adj())


def _read_oom_score_adj() -> str:
    try:
        return Path("/proc/self/oom_score_adj").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _restore(original: _Standing) -> str | None:
    """Put back what a child changed of this server's standing that it can put back (its
    CPU affinity); None when all is as at the start, else what stays changed (the server
    then refuses to fork: the judge restarts it and that verification runs cold)."""
    current = _Standing.now()
    if current.affinity != original.affinity:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, original.affinity)
    current = _Standing.now()
    changed = [f"{_RLIMIT_NAMES[which]} {was[0]}/{was[1]} -> {soft}/{hard}"
               for (which, soft, hard), (_, *was) in zip(current.limits, original.limits,
                                                         strict=True) if [soft, hard] != was]
    if current.nice != original.nice:
        changed.append(f"niceness {original.nice} -> {current.nice}")
    if current.affinity != original.affinity:
        changed.append("CPU affinity")
    if current.oom_score_adj != original.oom_score_adj:
        changed.append("oom_score_adj")
    return "; ".join(changed) or None


def _changed_standing(original: _Standing) -> str | None:
    """`_restore`, where failing to even look (a lowered RLIMIT_AS: MemoryError) is a
    change too."""
    try:
        return _restore(original)
    except (MemoryError, OSError) as exc:
        return f"cannot check its limits ({type(exc).__name__})"


def _other_pids() -> list[int]:
    own = {1, os.getpid()}  # bwrap's init, this server
    names = [entry.name for entry in Path("/proc").iterdir()]
    return [int(name) for name in names if name.isdigit() and int(name) not in own]


def _kill_all_children(child: int | None) -> int | None:
    """SIGKILL every process of the namespace but the init and this server, reaping them
    (orphans come back here: a subreaper) until none is left; the child's exit status."""
    status: int | None = None
    deadline = time.monotonic() + _REAP_ROUNDS_S
    while time.monotonic() < deadline:
        for pid in _other_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                status = os.waitstatus_to_exitcode(raw)
        if not _other_pids():
            break
        time.sleep(0.01)
    return status


def _child_status(child: int | None) -> int | None:
    if child is None:
        return None
    with contextlib.suppress(ChildProcessError):
        pid, raw = os.waitpid(child, os.WNOHANG)
        if pid == child:
            return os.waitstatus_to_exitcode(raw)
    return None


def _wipe_dev(before: frozenset[str]) -> None:
    """What a child left in the sandbox's own /dev (a tmpfs: /dev/shm and new entries)."""
    with contextlib.suppress(OSError):
        for entry in Path("/dev/shm").iterdir():  # noqa: S108 - the sandbox's own
            remove_tree(entry)
    with contextlib.suppress(OSError):
        for name in {entry.name for entry in Path("/dev").iterdir()} - before:
            remove_tree(Path("/dev") / name)


def _as_own_folder(cwd: str) -> None:
    """What the server resolved at its start, resolved again for the child's own folder, as a
    cold `python -m` run in it would: the import path's first entry (the server's was the
    spool, the sandbox's /tmp) and tempfile's cached folder (TMPDIR changed)."""
    if sys.path:
        sys.path[0] = cwd
    importlib.invalidate_caches()
    tempfile.tempdir = None


def _become_child(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: confine, take the channel, be the worker. Never returns."""
    code = 70
    try:
        os.setsid()
        _prctl(_PR_SET_DUMPABLE, 0)
        if request.get("cgroup") and len(fds) > 3:
            with contextlib.suppress(OSError):  # else the server's cgroup still caps it
                os.write(fds[3], b"0")  # its own pids cgroup, before anything else forks
        apply_limits(SandboxPolicy(**{key: value for key, value in request["policy"].items()
                                      if key in SandboxPolicy.__dataclass_fields__}))
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        sock.send(json.dumps({"op": "child"}).encode())  # the judge reads our pid off it
        sock.close()
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.umask(0o077)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update({str(key): str(value) for key, value in request["env"].items()})
        _as_own_folder(str(request["cwd"]))
        role = str(request["role"])
        if role == GENERATOR:
            module, function = _GENERATOR_ENTRY
            sys.argv = [module]
            code = int(getattr(importlib.import_module(module), function)())
        else:
            sys.argv = ["runners.harness", role]
            from runners.harness.__main__ import run_role

            code = run_role(role)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - whatever happens, never return into the server
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(code)


def serve(role: str, control_fd: int) -> int:
    """The server loop: fork a worker on `spawn`, kill and reap everything on `end`."""
    _drop_capabilities()  # before anything else: its children inherit none
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    sock = socket.socket(fileno=control_fd)
    collector.tune()  # the children inherit it
    _preimport(role)
    collector.settle_before_forks()
    standing = _Standing.now()  # as it starts serving: every fork must inherit this
    dev_before = frozenset(entry.name for entry in Path("/dev").iterdir())
    sock.send(json.dumps({"op": "ready"}).encode())
    child: int | None = None
    while True:
        message, fds, _ = _receive(sock)
        if message is None:  # the judge is gone
            _kill_all_children(child)
            return 0
        if message.get("op") == "spawn" and message.get("role") == role and len(fds) >= 3:
            _kill_all_children(child)  # never two children at once
            changed = _changed_standing(standing)
            if changed is not None:  # a child lowered what every later one would inherit
                with contextlib.suppress(OSError):
                    sock.send(json.dumps({"op": "refused", "why": changed}).encode())
                return 1
            child = os.fork()
            if child == 0:
                _become_child(sock, message, fds)
        elif message.get("op") == "end":
            status = _child_status(child)
            killed = _kill_all_children(child)
            _wipe_dev(dev_before)
            sock.send(json.dumps({"op": "ended", "status": status if status is not None
                                  else killed}).encode())
            child = None
        for fd in fds:
            os.close(fd)


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in SERVER_ROLES or not sys.argv[2].isdigit():
        print("usage: python -m runners.warm reference|candidate|generator CONTROL_FD",
              file=sys.stderr)
        return 2
    return serve(sys.argv[1], int(sys.argv[2]))


if __name__ == "__main__":
    sys.exit(main())
