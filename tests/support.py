"""Paths and helpers shared by the tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
REFS = DATA / "refs"
CANDIDATES = DATA / "candidates"
EXAMPLES = REPO / "examples" / "ops"


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_opbot(*args: str, cwd: Path | None = None, timeout: float = 600.0,
              env: dict[str, str] | None = None) -> CliRun:
    """`opbot ARGS` in a fresh process, as a user would run it."""
    completed = subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=cwd or REPO, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})}, check=False)
    return CliRun(completed.returncode, completed.stdout, completed.stderr)


def run_opbot_here(*args: str, env: dict[str, str] | None = None) -> CliRun:
    """`opbot ARGS` in this test process, its verifications through the warm workers the
    process shares (runners/warm.py): the same command line, output and exit code as
    `run_opbot`, without a process start and two worker imports per case (the corpora).
    An exception that escapes the command shows as a traceback on stderr, as it would."""
    import traceback

    from click.testing import CliRunner

    from bot.cli import main
    from runners.warm import warm_for_this_process

    with warm_for_this_process():
        result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return CliRun(result.exit_code, result.stdout, stderr)


@contextmanager
def loopback_listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's loopback: (its port, what any connection sent). A
    sandboxed candidate must never reach it."""
    received: list[bytes] = []
    stop = threading.Event()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)

        def accept() -> None:
            while not stop.is_set():
                try:
                    connection, _ = listener.accept()
                except OSError:
                    continue
                with connection:
                    received.append(connection.recv(100) or b"connected")

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield listener.getsockname()[1], received
        finally:
            stop.set()
            thread.join(timeout=5)


def reference_source(forward: str, inputs: str, prelude: str = "") -> str:
    """A small KernelBench-format reference: `return <forward>` on get_inputs() = [<inputs>]."""
    return (f"import torch\n{prelude}\n\nclass Model(torch.nn.Module):\n"
            f"    def forward(self, x):\n        return {forward}\n\n\n"
            f"def get_inputs():\n    return [{inputs}]\n\n\n"
            "def get_init_inputs():\n    return []\n")


def require_cpu_model() -> None:
    """Skip, with the reason, where the Ascend C CPU model cannot run (no real sources)."""
    import pytest

    from runners.ascendc.cpu_verify import SWITCH, cpu_model_availability

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SWITCH, "1")
        availability = cpu_model_availability()
    if not availability.available:
        pytest.skip(f"no CPU model here: {availability.reason}")
