"""Warm servers lent across processes (runners/warm_broker.py): an `opbot` process started
with OPBOT_WARM_BROKER borrows its starter's servers; strangers and sandboxes cannot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.sandbox import SandboxPolicy, run_isolated, sandbox_environment, sandbox_status
from runners.warm_broker import BROKER_VARIABLE, Broker, BrokerClient
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
    first = BrokerClient(broker.name, sys.executable, policy)
    second = BrokerClient(broker.name, sys.executable, policy)
    with first.lease({"reference": [RELU]}) as held:
        assert held is not None
        with second.lease({"reference": [RELU]}) as refused:
            assert refused is None


def test_a_stranger_or_a_wrong_python_gets_nothing(broker: Broker) -> None:
    policy = SandboxPolicy.from_environment()
    with BrokerClient(broker.name, "/usr/bin/python3-not-ours", policy).lease(
            {"reference": [RELU]}) as lease:
        assert lease is None
    with BrokerClient("opbot-warm-no-such-broker", sys.executable, policy).lease(
            {"reference": [RELU]}) as lease:
        assert lease is None
    system_python = Path("/usr/bin/python3")  # one that user `nobody` may run
    if os.geteuid() != 0 or not system_python.is_file():
        pytest.skip("another user's process needs root and /usr/bin/python3 to start here")
    script = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        f"s.connect('\\0' + {broker.name!r})\n"
        "s.send(b'{\"op\": \"lease\", \"roles\": [\"reference\"]}')\n"
        "s.settimeout(10)\n"
        "try:\n"
        "    print(repr(s.recv(65536)))\n"
        "except ConnectionResetError:\n"
        "    print('reset')\n")
    before = broker.leases
    completed = subprocess.run([str(system_python), "-c", script], capture_output=True,
                               text=True, timeout=60, user=65534, group=65534, cwd="/",
                               check=False)
    assert completed.stdout.strip() in ("b''", "reset"), (completed.stdout, completed.stderr)
    assert broker.leases == before


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
