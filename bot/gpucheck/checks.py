"""The checks: `opbot generate` on every example operator, then `pytest -m gpu`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.gpucheck.steps import (
    ROOT,
    Budget,
    CommandRunner,
    GpuCheckError,
    child_environment,
    run_command,
    tail,
)

DEFAULT_OP_TIMEOUT_S = 150.0
DEFAULT_PYTEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class OpRun:
    op: str
    status: str  # the answer's status, or "timeout" / "error" / "skipped"
    seconds: float = 0.0
    note: str = ""
    answer: dict[str, Any] | None = None  # `opbot generate --json`'s object


@dataclass(frozen=True)
class PytestRun:
    status: str  # "passed" | "failed" | "timeout" | "skipped" | "no tests"
    summary: str
    seconds: float = 0.0


def example_ops(root: Path, names: Sequence[str] = ()) -> list[Path]:
    specs = sorted((root / "examples" / "ops").glob("*/op.yaml"))
    if names:
        unknown = sorted(set(names) - {spec.parent.name for spec in specs})
        if unknown:
            raise GpuCheckError(f"no example operator named {', '.join(unknown)}")
        specs = [spec for spec in specs if spec.parent.name in names]
    return specs


def gpu_test_files(root: Path) -> list[Path]:
    """Test files that mark tests `gpu`: run alone, so collection needs no dev extras."""
    return sorted(path for path in (root / "tests").rglob("test_*.py")
                  if "tests/data" not in path.as_posix()
                  and "mark.gpu" in path.read_text(encoding="utf-8", errors="replace"))


def generate_op(spec: Path, python: str, out: Path, timeout_s: float,
                run: CommandRunner) -> OpRun:
    op = spec.parent.name
    command = [python, "-m", "bot", "generate", str(spec), "--backend", "triton",
               "--llm", "offline", "--json", "--out", str(out / op)]
    result = run(command, timeout_s, child_environment())
    if result.code is None:
        return OpRun(op, "timeout", result.seconds, f"stopped after {timeout_s:.0f} s")
    try:
        answer = json.loads(result.stdout)
    except ValueError:
        return OpRun(op, "error", result.seconds, tail(result.stderr) or "no JSON answer")
    if not isinstance(answer, dict):
        return OpRun(op, "error", result.seconds, "the answer is not a JSON object")
    return OpRun(op, str(answer.get("status", "error")), result.seconds,
                 tail(str(answer.get("message") or "")), answer)


def run_pytest(python: str, files: Sequence[Path], timeout_s: float,
               run: CommandRunner) -> PytestRun:
    if not files:
        return PytestRun("no tests", "no test file marks tests gpu")
    command = [python, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
               *(str(path.relative_to(ROOT)) for path in files)]
    result = run(command, timeout_s, child_environment())
    if result.code is None:
        return PytestRun("timeout", f"stopped after {timeout_s:.0f} s", result.seconds)
    status = "passed" if result.code == 0 else "failed"
    return PytestRun(status, pytest_summary_line(result.stdout), result.seconds)


def pytest_summary_line(stdout: str) -> str:
    """pytest's closing line ("8 passed, 1 skipped in 41.2s"), without its = rulers."""
    lines = [line.strip().strip("=").strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


@dataclass(frozen=True)
class Checks:
    ops: list[OpRun]
    pytest: PytestRun
    skipped: list[str]  # what the budget left out, in words


def run_checks(specs: Sequence[Path], test_files: Sequence[Path], *, python: str, out: Path,
               budget: Budget, run: CommandRunner = run_command,
               op_timeout_s: float = DEFAULT_OP_TIMEOUT_S,
               pytest_timeout_s: float = DEFAULT_PYTEST_TIMEOUT_S) -> Checks:
    """The operators first (the table is what a reader came for), then `pytest -m gpu`;
    each step gets its cap or what is left, and what no longer fits is skipped."""
    ops, skipped = [], []
    for spec in specs:
        allowance = budget.allowance(op_timeout_s)
        if allowance is None:
            ops.append(OpRun(spec.parent.name, "skipped", note="the budget ran out"))
            continue
        ops.append(generate_op(spec, python, out, allowance, run))
    left_out = [item.op for item in ops if item.status == "skipped"]
    if left_out:
        skipped.append(f"opbot generate for {', '.join(left_out)}")
    allowance = budget.allowance(pytest_timeout_s)
    if allowance is None:
        pytest = PytestRun("skipped", "not run: the budget ran out")
        skipped.append("pytest -m gpu")
    else:
        pytest = run_pytest(python, test_files, allowance, run)
    return Checks(ops, pytest, skipped)
