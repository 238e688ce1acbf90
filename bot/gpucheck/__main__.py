"""`python -m bot.gpucheck` (what scripts/gpu-check runs)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from bot.gpucheck.checks import (
    DEFAULT_OP_TIMEOUT_S,
    DEFAULT_PYTEST_TIMEOUT_S,
    example_ops,
    gpu_test_files,
    run_checks,
)
from bot.gpucheck.environment import (
    DEFAULT_INDEX_URL,
    index_reachable,
    install,
    installable,
    installed_versions,
    machine_problem,
    make_venv,
    missing_requirements,
    package_source,
    prepare_wheels,
    probe_machine,
    project_requirements,
)
from bot.gpucheck.steps import (
    MIN_STEP_S,
    ROOT,
    Budget,
    CommandRunner,
    GpuCheckError,
    run_command,
)
from bot.gpucheck.summary import render_markdown, summary, write_summary

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2
DEFAULT_BUDGET_S = 480.0  # the issue: under 8 minutes on one GPU


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= MIN_STEP_S:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"at least {MIN_STEP_S:g} seconds, not {text}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/gpu-check",
        description="The GPU check: pytest -m gpu and opbot generate --backend triton on "
        "every example operator, on a machine whose Python has CUDA torch and triton.")
    parser.add_argument("--out", type=Path, default=Path("gpu-check-out"),
                        help="where gpu-check.json, gpu-check.md and the packages go")
    parser.add_argument("--wheels", type=Path, default=None,
                        help="install missing requirements from this folder only (no index)")
    parser.add_argument("--prepare-wheels", type=Path, default=None, metavar="DIR",
                        help="on a connected machine: download opbot's requirements except "
                        "torch and triton into DIR, then stop (run it with the GPU machine's "
                        "Python version and platform, or set PIP_PYTHON_VERSION and "
                        "PIP_PLATFORM with PIP_ONLY_BINARY=:all:)")
    parser.add_argument("--no-venv", action="store_true",
                        help="install into this Python instead of a .venv-gpu venv over it")
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-gpu",
                        help="the venv's folder")
    parser.add_argument("--ops", default="", help="comma-separated example operators "
                        "(default: all of examples/ops)")
    parser.add_argument("--budget", type=_seconds, default=DEFAULT_BUDGET_S,
                        help="wall-clock seconds for everything, setup included "
                        "(default: %(default)s)")
    parser.add_argument("--op-timeout", type=_seconds, default=DEFAULT_OP_TIMEOUT_S,
                        help="seconds one operator's generate may take (default: %(default)s)")
    parser.add_argument("--pytest-timeout", type=_seconds, default=DEFAULT_PYTEST_TIMEOUT_S,
                        help="seconds pytest -m gpu may take (default: %(default)s)")
    return parser.parse_args(argv)


def check(args: argparse.Namespace, run: CommandRunner = run_command) -> int:
    budget = Budget(args.budget)
    machine = probe_machine(sys.executable, run)
    problem = machine_problem(machine, sys.executable)
    if problem:
        raise GpuCheckError(problem)
    specs = example_ops(ROOT, [name for name in args.ops.split(",") if name])
    python = sys.executable if _in_place(args) else make_venv(
        sys.executable, args.venv.resolve(), run, min(120.0, budget.left()))
    wanted = installable(project_requirements(ROOT / "pyproject.toml"))
    found = installed_versions(python, [item.name for item in wanted], run)
    missing = missing_requirements(wanted, found)
    index = os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX_URL
    source = package_source(args.wheels, missing, reachable=lambda: index_reachable(index))
    setup = install(python, missing, source, run, budget)
    out = args.out.resolve()
    checks = run_checks(specs, gpu_test_files(ROOT), python=python, out=out / "packages",
                        budget=budget, run=run, op_timeout_s=args.op_timeout,
                        pytest_timeout_s=args.pytest_timeout)
    report = summary(checks, machine, wall_s=budget.elapsed(), budget_s=args.budget,
                     setup=setup)
    as_json, as_markdown = write_summary(report, out)
    print(render_markdown(report))
    print(f"written: {as_json}, {as_markdown}")
    return EXIT_OK if report["passed"] else EXIT_FAILED


def _in_place(args: argparse.Namespace) -> bool:
    """Install into this Python itself: when asked, or when it is a venv already (a venv
    made from it would see its base interpreter's packages, not this one's torch)."""
    if args.no_venv:
        return True
    if sys.prefix != sys.base_prefix:
        print(f"gpu-check: {sys.prefix} is a venv already: installing into it")
        return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.prepare_wheels is not None:
            prepare_wheels(args.prepare_wheels.resolve())
            return EXIT_OK
        return check(args)
    except GpuCheckError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except OSError as exc:  # an unwritable --out or wheel folder
        print(f"gpu-check: {exc.strerror or exc} ({exc.filename or '-'})", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
