"""Running a step: a command with a timeout, within the check's wall-clock budget."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout every step runs in
# A step that would get less than this is skipped (and said so) rather than started only
# to be killed; the summary itself needs a moment at the end.
MIN_STEP_S = 20.0
SUMMARY_RESERVE_S = 5.0
TAIL_CHARS = 600


class GpuCheckError(Exception):
    """The check cannot run on this machine; the message says what to do."""


@dataclass(frozen=True)
class CommandResult:
    code: int | None  # None: stopped at its timeout
    stdout: str
    stderr: str
    seconds: float


CommandRunner = Callable[[Sequence[str], float, Mapping[str, str]], CommandResult]


def run_command(command: Sequence[str], timeout_s: float, env: Mapping[str, str]
                ) -> CommandResult:
    """COMMAND in ROOT; at its timeout its whole process group is killed (a harness worker
    must not outlive the step that started it)."""
    started = time.monotonic()
    with subprocess.Popen(list(command), cwd=ROOT, env=dict(env), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout_s)
            code: int | None = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            code = None
    return CommandResult(code, stdout, stderr, time.monotonic() - started)


@dataclass
class Budget:
    """The wall-clock budget of the whole check; the clock is injectable for tests."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return self.seconds - SUMMARY_RESERVE_S - self.elapsed()

    def allowance(self, cap_s: float) -> float | None:
        """Seconds the next step may run: its own cap or what is left, whichever is less;
        None when too little is left to start it."""
        left = self.left()
        return None if left < MIN_STEP_S else min(cap_s, left)


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for every step: TRITON_INTERPRET unset, so kernels run on the GPU."""
    env = dict(os.environ if base is None else base)
    env.pop("TRITON_INTERPRET", None)
    return env


def tail(text: str) -> str:
    return text.strip()[-TAIL_CHARS:]
