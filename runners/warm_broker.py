"""Warm workers lent across processes: a long-lived process (a test session, `opbot serve`)
keeps the warm servers, and the short-lived `opbot` processes it starts borrow them.

A job's generation step is a fresh `opbot generate` process (it must not hold the forge's
credentials), so its own warm servers would cost what they save: every worker it starts
pays the interpreter start and the torch import. With OPBOT_WARM_BROKER naming a broker,
its verifications lease the broker's servers instead, and fork from them as warm workers do
(runners/warm.py): the same sandboxes, the same per-child confinement and clean-up.

The lease hands over descriptors, not work: for each role, the server's control socket and
a pidfd of its sandbox, with its spool folder. The borrower stages, spawns, ends and empties
exactly as the owner would; the broker only decides who holds a server set, and restarts a
server the borrower found broken or left behind mid-verification (it disconnected without
saying it was done). One borrower per server set; a borrower that finds every set busy, or
no broker, runs its workers cold.

The broker listens on an abstract Unix socket: it has no file to find, and a sandbox
(its own network namespace) cannot reach it at all. It answers only processes of its own
user (SO_PEERCRED), which could start the same sandboxes themselves.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import select
import socket
import struct
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from runners.sandbox import SandboxPolicy
from runners.warm import (
    ROLES,
    SERVER_ROLES,
    WarmLease,
    WarmServer,
    WarmWorkers,
    _receive,
    _send,
)

BROKER_VARIABLE = "OPBOT_WARM_BROKER"  # "<socket name> <token>"
_GRANT_TIMEOUT_S = 120.0  # the first lease waits for the servers' imports
_RETURN_TIMEOUT_S = 30.0  # the broker ends what was left and empties the spools
_LEASE_LIMIT_S = 4 * 3600.0  # past this a borrower is gone for good: its servers restart
_POOL_SIZE = 1  # server sets per policy: each holds a torch-importing process per role
_MAX_POLICIES = 4
_OWN_NAMES: set[str] = set()  # the brokers this process runs


def _policy_json(policy: SandboxPolicy) -> dict[str, Any]:
    return {**policy.to_json(), "extra_devices": list(policy.extra_devices)}


_POLICY_TYPES: dict[str, tuple[type, ...]] = {
    "allow_unsandboxed": (bool,), "network": (bool,), "cpu_seconds": (int,),
    "memory_bytes": (int, type(None)), "file_bytes": (int,), "processes": (int,),
    "devices": (bool,)}


def _policy_from(data: object) -> SandboxPolicy | None:
    """The borrower's policy when every field has its exact type; never one that lets the
    sandbox onto the network or runs without one (those sets are not lent)."""
    if not isinstance(data, dict) or set(data) - {*_POLICY_TYPES, "extra_devices"}:
        return None
    fields: dict[str, Any] = {}
    for key, kinds in _POLICY_TYPES.items():
        if key in data:
            value = data[key]
            if type(value) not in kinds or (type(value) is int and value < 0):
                return None
            fields[key] = value
    devices = data.get("extra_devices", [])
    if not isinstance(devices, list) or not all(type(item) is str for item in devices):
        return None
    policy = SandboxPolicy(**fields, extra_devices=tuple(devices))
    return None if policy.network or policy.allow_unsandboxed else policy


# -- the owner's side ------------------------------------------------------------------------


class Broker:
    """Lends this process's warm server sets to the opbot processes it starts."""

    def __init__(self, python: str | None = None, pool_size: int = _POOL_SIZE) -> None:
        self.python = python or sys.executable
        self.pool_size = pool_size
        self.name = f"opbot-warm-{os.getpid()}-{secrets.token_hex(8)}"
        # The name is visible to anyone on the host (/proc/net/unix), a sandbox with the
        # network policy included; the token travels only in opbot's own environment,
        # which sandboxes never get.
        self.token = secrets.token_hex(16)
        _OWN_NAMES.add(self.name)
        self.leases = 0  # granted so far
        self._sets: dict[SandboxPolicy, list[WarmWorkers]] = {}
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind("\0" + self.name)
        self._listener.listen(16)
        self._closed = False
        threading.Thread(target=self._accept, name="opbot-warm-broker", daemon=True).start()

    def environment(self) -> dict[str, str]:
        """What a child process needs to borrow from this broker."""
        return {BROKER_VARIABLE: f"{self.name} {self.token}"}

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sets in self._sets.values():
                for workers in sets:
                    workers.close()
            self._sets.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            if not _same_user(connection):
                return
            connection.settimeout(10.0)
            try:
                message, fds, _ = _receive(connection)
            except OSError:
                return
            for fd in fds:
                os.close(fd)
            if not message or message.get("op") != "lease" or not hmac.compare_digest(
                    str(message.get("token", "")).encode(), self.token.encode()):
                return
            picked = self._pick(message)
            if picked is None:
                with contextlib.suppress(OSError):
                    _send(connection, {"op": "busy"})
                return
            workers, roles = picked
            try:
                self._lend(connection, workers, roles)
            except Exception:  # noqa: BLE001 - one borrower's mess never stops the broker
                _restart(workers, roles)
            finally:
                with self._lock:
                    self._busy.discard(id(workers))
            with contextlib.suppress(OSError):
                # Taken back: the borrower's next lease (its verification after its
                # generation) finds the set free, not busy.
                _send(connection, {"op": "returned"})

    def _pick(self, message: dict[str, Any]) -> tuple[WarmWorkers, list[str]] | None:
        """A free server set for the borrower's python and policy (made when missing)."""
        roles = message.get("roles")
        policy = _policy_from(message.get("policy"))
        if (policy is None or message.get("python") != self.python
                or not isinstance(roles, list) or not roles
                or not all(role in SERVER_ROLES for role in roles)):
            return None
        with self._lock:
            sets = self._sets.get(policy)
            if sets is None:
                if len(self._sets) >= _MAX_POLICIES:
                    return None
                sets = self._sets[policy] = []
            free = next((item for item in sets if id(item) not in self._busy), None)
            if free is None and len(sets) < self.pool_size:
                free = WarmWorkers(self.python, policy)
                sets.append(free)
            if free is None:
                return None
            self._busy.add(id(free))
        return free, [str(role) for role in dict.fromkeys(roles)]

    def _lend(self, connection: socket.socket, workers: WarmWorkers, roles: list[str]) -> None:
        """Hand the servers over, wait until the borrower is done, take them back."""
        pidfds: list[int] = []
        try:
            workers.start(roles)
            servers = [workers.servers[role] for role in roles]
            for server in servers:
                server.wait_ready(_GRANT_TIMEOUT_S)
                pidfds.append(os.pidfd_open(server.process.process.pid))
            description = [{"role": server.role, "spool": str(server.spool),
                            "bound": sorted(server._bound)} for server in servers]
            fds = [fd for server, pidfd in zip(servers, pidfds, strict=True)
                   for fd in (server._control.fileno(), pidfd)]
            connection.settimeout(_LEASE_LIMIT_S)
            _send(connection, {"op": "granted", "servers": description}, fds)
            self.leases += 1
            message, fds_back, _ = _receive(connection)  # blocks for the verification
            for fd in fds_back:
                os.close(fd)
        finally:
            for fd in pidfds:
                os.close(fd)
        listed = message.get("broken") if message is not None else None
        if message is None or message.get("op") != "done" or not isinstance(listed, list):
            _restart(workers, roles)  # it left mid-verification: a child may still run
            return
        for role in roles:
            kept = workers.servers.get(role)
            if role in listed or kept is None or not kept.alive():
                _restart(workers, [role])
                continue
            kept.end_child()  # whatever the borrower left running goes before the next one
            kept.empty_spool()


def _restart(workers: WarmWorkers, roles: Sequence[str]) -> None:
    for role in roles:
        with contextlib.suppress(Exception):
            workers.restart(role)


def _same_user(connection: socket.socket) -> bool:
    try:
        raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return False
    _, uid, _ = struct.unpack("3i", raw)
    return bool(uid == os.getuid())


# -- the borrower's side ----------------------------------------------------------------------


class BorrowedServer(WarmServer):
    """A broker's server, used through its control socket for one lease."""

    def __init__(self, role: str, policy: SandboxPolicy, control: socket.socket, *,
                 pidfd: int, spool: Path, bound: Sequence[str]) -> None:
        # Not WarmServer.__init__: the server runs already, in the broker's process tree.
        self.role = role
        self.policy = policy
        self.spool = spool
        self._control = control
        self._pidfd = pidfd
        self._bound = frozenset(bound)
        self.ready = True
        self.broken = False

    def alive(self) -> bool:
        if self.broken:
            return False
        try:
            readable, _, _ = select.select([self._pidfd], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable  # a pidfd turns readable when its process has exited

    def stop(self) -> None:
        """Give up on it: the broker restarts it when the lease ends."""
        self.broken = True
        self.ready = False

    def close(self) -> None:
        self.stop()

    def log_tail(self) -> str:
        return "(the broker's server: its log stays with the broker)"

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self._control.close()
        with contextlib.suppress(OSError):
            os.close(self._pidfd)


class BorrowedWorkers:
    """What a `WarmLease` needs of its pool, for the borrowed servers of one lease."""

    def __init__(self, servers: dict[str, BorrowedServer]) -> None:
        self.servers: dict[str, BorrowedServer] = servers
        self.forks = 0

    def restart(self, role: str) -> None:
        """Given up on for this lease; the broker restarts it when the lease ends."""
        server = self.servers.get(role)
        if server is not None:
            server.stop()

    def broken(self) -> list[str]:
        return [role for role, server in self.servers.items() if server.broken]


class BrokerClient:
    """Leases a broker's servers; the same `lease` as `WarmWorkers`, None when it cannot."""

    def __init__(self, name: str, python: str, policy: SandboxPolicy, token: str = "") -> None:
        self.name = name
        self.token = token
        self.python = python
        self.policy = policy
        self.forks = 0

    @contextlib.contextmanager
    def lease(self, readable: Mapping[str, Sequence[Path]]) -> Iterator[WarmLease | None]:
        roles = [role for role in readable if role in SERVER_ROLES] or list(ROLES)
        connection = self._connect()
        if connection is None:
            yield None
            return
        with connection:
            workers = self._granted(connection, roles)
            if workers is None:
                yield None
                return
            lease = WarmLease(workers,  # type: ignore[arg-type]  # the pool's interface
                              f"opbot-work-b{os.getpid()}-{secrets.token_hex(4)}")
            try:
                try:
                    for role, paths in readable.items():
                        server = workers.servers.get(role)
                        if server is not None:
                            server.empty_spool()
                            server.stage(paths)
                except OSError as exc:
                    lease.broken = f"warm workers unavailable ({exc}); this verification ran cold"
                    lease.warnings.append(lease.broken)
                yield lease
            finally:
                self.forks += workers.forks
                for server in workers.servers.values():
                    if not server.broken:
                        server.empty_spool()
                with contextlib.suppress(OSError):
                    _send(connection, {"op": "done", "broken": workers.broken()})
                    connection.settimeout(_RETURN_TIMEOUT_S)
                    _receive(connection)  # "returned"
                for server in workers.servers.values():
                    server.release()

    def _connect(self) -> socket.socket | None:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect("\0" + self.name)
        except OSError:
            connection.close()
            return None
        return connection

    def _granted(self, connection: socket.socket, roles: list[str]) -> BorrowedWorkers | None:
        try:
            connection.settimeout(_GRANT_TIMEOUT_S)
            _send(connection, {"op": "lease", "roles": roles, "python": self.python,
                               "policy": _policy_json(self.policy), "token": self.token})
            message, fds, _ = _receive(connection)
        except OSError:
            return None
        described = message.get("servers") if message and message.get("op") == "granted" \
            else None
        if not isinstance(described, list) or len(fds) != 2 * len(described) or not all(
                isinstance(item, dict) and item.get("role") in roles for item in described):
            for fd in fds:
                os.close(fd)
            return None
        servers: dict[str, BorrowedServer] = {}
        for index, item in enumerate(described):
            control = socket.socket(fileno=fds[2 * index])
            servers[str(item["role"])] = BorrowedServer(
                str(item["role"]), self.policy, control, pidfd=fds[2 * index + 1],
                spool=Path(str(item["spool"])),
                bound=[str(name) for name in item.get("bound") or []])
        return BorrowedWorkers(servers)


def client_from_environment(python: str, policy: SandboxPolicy) -> BrokerClient | None:
    """A client of the broker OPBOT_WARM_BROKER names ("NAME TOKEN"), if any and not this
    process's own (its owner uses its warm workers directly)."""
    name, _, token = os.environ.get(BROKER_VARIABLE, "").strip().partition(" ")
    if not name or len(name) > 100 or not name.isprintable() or name in _OWN_NAMES:
        return None
    return BrokerClient(name, python, policy, token.strip())
