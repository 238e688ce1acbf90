"""The issue's acceptance commands on a machine without CANN, as a user runs them:

- `opbot generate examples/ops/<op>/op.yaml --backend ascendc --llm offline --json` ends
  `passed`, its device naming the CPU model and the devkit's commit (gelu, relu, add);
- `opbot verify REF PACKAGE --backend ascendc --json` type-checks the package against the
  real headers and runs it on the CPU model: a good package exits 0; an API that does not
  exist, a queue on `QuePosition::GM`, a changed coefficient each exit 1 `failed`, with the
  real compiler's file:line or the comparison's figures, and never a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import DATA, EXAMPLES, require_cpu_model, run_opbot

ON = {"OPBOT_ASCENDC_REAL_CHECKS": "1"}
GOLDEN_GELU = DATA / "ascendc_golden" / "legacy" / "gelu"


@pytest.fixture(scope="module", autouse=True)
def _cpu_model_here() -> None:
    require_cpu_model()


def _json(stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("op", ["gelu", "relu", "add"])
def test_generate_passes_on_the_cpu_model(op: str, tmp_path: Path) -> None:
    run = run_opbot("generate", str(EXAMPLES / op / "op.yaml"), "--backend", "ascendc",
                    "--llm", "offline", "--json", "--out", str(tmp_path / op), env=ON)
    assert "Traceback" not in run.stderr
    result = _json(run.stdout)
    assert run.code == 0, (result.get("message"), result.get("reasons"), run.stderr[-2000:])
    assert result["status"] == "passed"
    assert result["device"].startswith("cpu-model (asc-devkit ")
    assert "npu" not in result["device"].split(";")[0].lower()
    assert len(result["cases"]) >= 6
    assert all(case["passed"] for case in result["cases"])
    assert (tmp_path / op / "ascendc" / "opbot.json").is_file()


def _package(tmp_path: Path, edit: tuple[str, str] | None = None) -> Path:
    folder = tmp_path / "gelu"
    shutil.copytree(GOLDEN_GELU, folder)
    if edit is not None:
        kernel = folder / "ascendc" / "gelu_kernel.cpp"
        text = kernel.read_text(encoding="utf-8")
        assert edit[0] in text
        kernel.write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    return folder


def _verify(package: Path) -> tuple[int, dict[str, Any], str]:
    run = run_opbot("verify", str(EXAMPLES / "gelu" / "op.yaml"), str(package), "--backend",
                    "ascendc", "--json", env=ON)
    assert "Traceback" not in run.stdout + run.stderr
    return run.code, _json(run.stdout), run.stderr


def _tree(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*")}


def test_verify_a_good_package_exits_0(tmp_path: Path) -> None:
    package = _package(tmp_path)
    before = _tree(package)
    code, result, stderr = _verify(package)
    assert _tree(package) == before  # the build happens in opbot's own folder
    assert code == 0, (result["reasons"], stderr[-2000:])
    assert result["status"] == "passed"
    assert result["device"].startswith("cpu-model")
    assert any("CPU model" in warning for warning in result["warnings"])


@pytest.mark.parametrize(("edit", "expected"), [
    (("AscendC::Muls(s1, s0", "AscendC::Mulss(s1, s0"), "Muls"),
    (("TQue<AscendC::QuePosition::VECIN, BUFFER_NUM>",
      "TQue<AscendC::QuePosition::GM, BUFFER_NUM>"), ""),
], ids=["api-that-does-not-exist", "queue-on-GM"])
def test_verify_reports_the_real_compilers_error(tmp_path: Path, edit: tuple[str, str],
                                                 expected: str) -> None:
    code, result, _ = _verify(_package(tmp_path, edit))
    assert code == 1
    assert result["status"] == "failed"
    reason = result["reasons"][0]
    assert reason["check"] == "build"
    location = reason.get("location") or {}
    assert location.get("file", "").endswith("gelu_kernel.cpp"), reason
    assert isinstance(location.get("line"), int)
    assert "real Ascend C headers" in reason["message"]
    assert expected in reason["message"]


def test_verify_a_changed_coefficient_fails_on_the_values(tmp_path: Path) -> None:
    code, result, _ = _verify(_package(tmp_path, ("0.3275911f", "0.3375911f")))
    assert code == 1
    assert result["status"] == "failed"
    failed = [case for case in result["cases"] if not case["passed"]]
    assert failed
    assert failed[0]["max_abs_err"] > 1e-3
    assert result["device"].startswith("cpu-model")


def test_a_package_with_a_link_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    package = _package(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (package / "ascendc" / "build-cpumodel").symlink_to(elsewhere)
    code, result, _ = _verify(package)
    assert code == 1
    assert result["reasons"][0]["check"] == "load"
    assert "symbolic links" in result["reasons"][0]["message"]
    assert list(elsewhere.iterdir()) == []
