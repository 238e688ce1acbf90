"""The Ascend C tuning phase inside the one agent loop: tiling variants ranked by the
simulator, each verified and timed on the runner (a scripted stand-in here), the fastest
verified package kept and the table written to PERF.md."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.agent.loop import generate
from bot.agent.outcome import Budget
from bot.spec import load_spec
from tests.agent.test_backend_contract import ScriptedRunner
from tests.support import EXAMPLES


def _generate(tmp_path: Path, runner: ScriptedRunner, tuning_attempts: int = 2) -> Path:
    folder = tmp_path / "gelu"
    shutil.copytree(EXAMPLES / "gelu", folder)
    out = tmp_path / "out"
    outcome = generate(load_spec(folder / "op.yaml"), backend="ascendc", out=out,
                       progress=lambda _message: None,
                       budget=Budget(tuning_attempts=tuning_attempts), timeout_s=60.0,
                       runners={"ascendc": runner})
    assert outcome.status == "passed", outcome.message
    return out


def test_a_faster_tiling_variant_is_kept_and_tabled(tmp_path: Path) -> None:
    # Any tuned header (it names its knobs) runs faster than the generated one.
    runner = ScriptedRunner(speeds={"MAX_CORES": 0.7, "MAX_TILE_LENGTH": 0.7,
                                    "one buffer per queue": 0.7})
    out = _generate(tmp_path, runner)
    timed = [request for request in runner.requests if request.time_it]
    assert len(timed) == 3  # the draft, then the two best-ranked variants
    tiling = (out / "ascendc" / "gelu_tiling.h").read_text(encoding="utf-8") + \
        (out / "ascendc" / "gelu_kernel.cpp").read_text(encoding="utf-8")
    assert any(mark in tiling for mark in ("MAX_CORES", "MAX_TILE_LENGTH",
                                           "one buffer per queue"))
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert "## Tuning" in perf
    table = perf[perf.index("## Tuning"):]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith("| as drafted |")
    assert rows[1].rstrip().endswith("|  |")
    assert sum(row.rstrip().endswith("| yes |") for row in rows) == 1
    assert "0.7" in perf


def test_slower_variants_leave_the_drafted_package(tmp_path: Path) -> None:
    runner = ScriptedRunner(speeds={"MAX_CORES": 9.0, "MAX_TILE_LENGTH": 9.0,
                                    "one buffer per queue": 9.0})
    out = _generate(tmp_path, runner)
    header = (out / "ascendc" / "gelu_tiling.h").read_text(encoding="utf-8")
    assert "MAX_CORES" not in header
    assert "MAX_TILE_LENGTH" not in header
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert "| as drafted |" in perf
    assert perf.count("| yes |") == 1
    as_drafted = next(line for line in perf.splitlines() if line.startswith("| as drafted |"))
    assert as_drafted.rstrip().endswith("| yes |")


def test_no_tuning_budget_times_nothing_more(tmp_path: Path) -> None:
    runner = ScriptedRunner()
    out = _generate(tmp_path, runner, tuning_attempts=0)
    assert len(runner.requests) == 1
    assert "## Tuning" not in (out / "PERF.md").read_text(encoding="utf-8")
