"""An operator package must take the reference's parameters: one that bakes the example's
weight into the kernel (and declares no `params`) would be right only for that weight."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import EXAMPLES, require_cpu_model, run_opbot

ON = {"OPBOT_ASCENDC_REAL_CHECKS": "1"}


@pytest.fixture(scope="module")
def rms_norm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_cpu_model()
    out = tmp_path_factory.mktemp("rms") / "rms_norm"
    run = run_opbot("generate", str(EXAMPLES / "rms_norm" / "op.yaml"), "--backend", "ascendc",
                    "--llm", "offline", "--out", str(out), "--json", env=ON)
    assert run.json()["status"] == "passed", run.stdout[-2000:]
    return out


def _baked(package: Path) -> None:
    """The weight dropped from the kernel's arguments and computed in UB instead."""
    kernel = package / "ascendc" / "rms_norm_kernel.cpp"
    text = kernel.read_text(encoding="utf-8")
    edits = [("GM_ADDR x, GM_ADDR weight, GM_ADDR out,", "GM_ADDR x, GM_ADDR out,"),
             ("        paramGm0_.SetGlobalBuffer((__gm__ float*)weight, rowLength);\n", ""),
             ("AscendC::DataCopyPad(loaded[0 * rowStride_], paramGm0_, copyParams, padParams);",
              "for (uint32_t i = 0; i < rowLength_; ++i) { loaded.SetValue(i, 0.5f + "
              "static_cast<float>(i) * (1.0f / 999.0f)); }"),
             ("op.Init(x, weight, out,", "op.Init(x, out,")]
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    kernel.write_text(text, encoding="utf-8")
    manifest = package / "ascendc" / "opbot.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["params"] = []
    manifest.write_text(json.dumps(data), encoding="utf-8")


def test_a_package_with_the_weight_baked_in_fails(rms_norm: Path, tmp_path: Path) -> None:
    package = tmp_path / "baked"
    shutil.copytree(rms_norm, package)
    _baked(package)
    run = run_opbot("verify", str(EXAMPLES / "rms_norm" / "op.yaml"), str(package),
                    "--backend", "ascendc", "--json", env=ON)
    assert "Traceback" not in run.stdout + run.stderr
    result = run.json()
    assert run.code == 1
    reason = result["reasons"][0]
    assert reason["check"] == "init", reason
    assert "the reference has parameters (weight) and the package does not take them" in \
        reason["message"]


def test_the_package_that_takes_its_weight_passes(rms_norm: Path) -> None:
    run = run_opbot("verify", str(EXAMPLES / "rms_norm" / "op.yaml"), str(rms_norm),
                    "--backend", "ascendc", "--json", env=ON)
    assert run.json()["status"] == "passed"
