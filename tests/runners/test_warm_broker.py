"""Warm servers lent across processes (runners/warm_broker.py): an `opbot` process started
with OPBOT_WARM_BROKER borrows its starter's servers; strangers and sandboxes cannot."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from runners.sandbox import SandboxPolicy, run_isolated, sandbox_environment, sandbox_status
from runners.warm_broker import BROKER_VARIABLE, Broker, BrokerClient, _policy_json
from tests.support import CANDIDATES, REPO, CliRun

pytestmark = pytest.mark.skipif(not sandbox_status().works,
                                reason="warm servers run in bubblewrap, which cannot start here")

RELU = CANDIDATES / "refs" / "relu.py"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    lender = Broker()
    yield lender
    lender.close()


def _opbot(broker: Broker, *args: str) -> CliRun:
    completed = subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=REPO, capture_output=True, text=True,
        timeout=300, env={**os.environ, **broker.environment()}, check=False)
    return CliRun(completed.returncode, completed.stdout, completed.stderr)


@pytest.mark.parametrize(("candidate", "status"), [
    ("relu__good_tutorial.py", "passed"), ("relu__bad_values_no_tail_mask.py", "failed")])
def test_a_child_opbot_borrows_the_servers_and_judges_as_cold(
        broker: Broker, candidate: str, status: str) -> None:
    before = broker.leases
    run = _opbot(broker, "verify", str(RELU), str(CANDIDATES / candidate), "--json")
    data = run.json()
    assert data["status"] == status, data["reasons"]
    assert broker.leases == before + 1  # its reference and candidate were lent, not started
    assert not [item for item in data["warnings"] if "warm" in item], data["warnings"]


def test_a_borrower_killed_mid_verification_leaves_nothing_behind(broker: Broker) -> None:
    # The borrower dies with a child forked in each server: the broker restarts both, and
    # the next borrower gets a clean pair.
    hang = CANDIDATES / "relu__bad_timeout_infinite_loop.py"
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "verify", str(RELU), str(hang), "--json"], cwd=REPO,
        env={**os.environ, **broker.environment()}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    granted = broker.leases
    while broker.leases == granted and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # into the hanging case
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    run = _opbot(broker, "verify", str(RELU), str(CANDIDATES / "relu__good_tutorial.py"),
                 "--json")
    assert run.json()["status"] == "passed"
    assert broker.leases >= granted + 2


def test_every_set_busy_means_the_borrower_runs_cold(broker: Broker) -> None:
    policy = SandboxPolicy.from_environment()
    first = BrokerClient(broker.name, sys.executable, policy, broker.token)
    second = BrokerClient(broker.name, sys.executable, policy, broker.token)
    with first.lease({"reference": [RELU]}) as held:
        assert held is not None
        with second.lease({"reference": [RELU]}) as refused:
            assert refused is None


@pytest.mark.parametrize("asks", ["wrong python", "no token", "wrong token", "network",
                                  "unsandboxed", "ill-typed policy", "no such broker"])
def test_a_lease_asked_wrongly_is_refused(broker: Broker, asks: str) -> None:
    policy = SandboxPolicy.from_environment()
    name, python, token = broker.name, sys.executable, broker.token
    if asks == "wrong python":
        python = "/usr/bin/python3-not-ours"
    elif asks == "no token":
        token = ""
    elif asks == "wrong token":
        token = token[:-1] + ("0" if token[-1] != "0" else "1")
    elif asks == "network":
        policy = replace(policy, network=True)  # its sandbox could reach the socket
    elif asks == "unsandboxed":
        policy = replace(policy, allow_unsandboxed=True)
    elif asks == "ill-typed policy":
        policy = replace(policy, cpu_seconds="3600")  # type: ignore[arg-type]
    elif asks == "no such broker":
        name = "opbot-warm-no-such-broker"
    before = broker.leases
    with BrokerClient(name, python, policy, token).lease({"reference": [RELU]}) as lease:
        assert lease is None
    assert broker.leases == before


def test_another_user_gets_nothing(broker: Broker) -> None:
    system_python = Path("/usr/bin/python3")  # one that user `nobody` may run
    if os.geteuid() != 0 or not system_python.is_file():
        pytest.skip("another user's process needs root and /usr/bin/python3 to start here")
    script = (
        "import json, socket\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        f"s.connect('\\0' + {broker.name!r})\n"
        "try:\n"
        f"    ask = {{'op': 'lease', 'roles': ['reference'], 'token': {broker.token!r}}}\n"
        "    s.send(json.dumps(ask).encode())\n"
        "    s.settimeout(10)\n"
        "    print(repr(s.recv(65536)))\n"
        "except (ConnectionResetError, BrokenPipeError):\n"
        "    print('closed')\n")
    before = broker.leases
    completed = subprocess.run([str(system_python), "-c", script], capture_output=True,
                               text=True, timeout=60, user=65534, group=65534, cwd="/",
                               check=False)
    assert completed.stdout.strip() in ("b''", "closed"), (completed.stdout, completed.stderr)
    assert broker.leases == before


def test_a_child_left_running_at_the_end_of_a_lease_is_ended(broker: Broker,
                                                             tmp_path: Path) -> None:
    client = BrokerClient(broker.name, sys.executable, SandboxPolicy.from_environment(),
                          broker.token)
    with client.lease({"reference": [RELU]}) as lease:
        assert lease is not None
        child = lease.spawn("reference", log_path=tmp_path / "log",
                            deadline=time.monotonic() + 60)
        assert child is not None
        pid = child.process.pid
        assert Path(f"/proc/{pid}").exists()
        # The borrower says it is done without ending its child.
    deadline = time.monotonic() + 20
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()


def test_a_garbled_return_restarts_the_servers(broker: Broker) -> None:
    client = BrokerClient(broker.name, sys.executable, SandboxPolicy.from_environment(),
                          broker.token)
    with client.lease({"reference": [RELU]}) as lease:
        assert lease is not None
        before = _server_pid(lease.workers.servers["reference"])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    connection.connect("\0" + broker.name)
    with connection:
        connection.send(json.dumps({"op": "lease", "roles": ["reference"],
                                    "python": sys.executable, "token": broker.token,
                                    "policy": _policy_json(SandboxPolicy.from_environment())}
                                   ).encode())
        connection.settimeout(120)
        granted, ancillary, _, _ = connection.recvmsg(1 << 20, socket.CMSG_SPACE(64))
        for _, _, data in ancillary:
            for fd in struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4]):
                os.close(fd)
        assert json.loads(granted)["op"] == "granted"
        connection.send(b"[" * 200_000)  # garbage for "done"
    time.sleep(1)
    with client.lease({"reference": [RELU]}) as lease:
        assert lease is not None
        after = _server_pid(lease.workers.servers["reference"])
    assert after != before  # a new server


def _server_pid(server: object) -> int:
    """The pid behind a borrowed server's pidfd (its sandbox's bwrap)."""
    pidfd = server._pidfd  # type: ignore[attr-defined]
    info = Path(f"/proc/self/fdinfo/{pidfd}").read_text(encoding="ascii")
    return int(next(line.split()[1] for line in info.splitlines() if line.startswith("Pid:")))


def test_a_sandbox_cannot_reach_the_broker(broker: Broker, tmp_path: Path) -> None:
    # Even told its name: the sandbox has its own network namespace, where the abstract
    # socket does not exist.
    work = tmp_path / "work"
    work.mkdir()
    script = ("import socket\n"
              "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
              "try:\n"
              f"    s.connect('\\0' + {broker.name!r})\n"
              "    print('REACHED')\n"
              "except OSError as exc:\n"
              "    print('refused', type(exc).__name__)\n")
    outcome = run_isolated([sys.executable, "-c", script], cwd=work, timeout_s=60,
                           log_path=tmp_path / "log", env=sandbox_environment(work))
    assert "refused ConnectionRefusedError" in outcome.log_tail, outcome.log_tail
    assert "REACHED" not in outcome.log_tail
    assert BROKER_VARIABLE not in sandbox_environment(work)
