"""The offline Ascend C generator on the row pattern (softmax, RMSNorm), end to end.

Without the CPU model: the generator lowers both references to row kernels (RMSNorm takes
its weight as a parameter), and refuses a row too long for UB with the numbers. With the
CPU model (OPBOT_ASCENDC_REAL_CHECKS=1 and the real devkit sources): `opbot generate`
passes on it, and kernels that skip the max subtraction or ignore the weight fail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.agent.backends.ascendc.offline.generator import (
    Generated,
    PackageOptions,
    generate_from_reference,
)
from bot.agent.backends.ascendc.offline.lower import Unsupported
from bot.spec import load_spec
from runners.ascendc.lint import lint_package
from tests.support import EXAMPLES, require_cpu_model, run_opbot

ON = {"OPBOT_ASCENDC_REAL_CHECKS": "1"}
# The examples of the row family: layer_norm's parameters belong to a submodule
# (norm.weight, norm.bias), rms_norm's to the module itself.
ROW_OPS = ("softmax", "log_softmax", "rms_norm", "layer_norm")


def _generate(op: str, generation: str = "legacy",
              shapes: list[list[int]] | None = None) -> Generated | Unsupported:
    spec = load_spec(EXAMPLES / op / "op.yaml")
    cases = spec.cases()
    if shapes is not None:
        for case in cases:
            for item in case.inputs:
                if getattr(item, "kind", "") == "tensor":
                    object.__setattr__(item, "shape", tuple(shapes[0]))
    options = PackageOptions(generation="asc" if generation == "asc" else "legacy")
    return generate_from_reference(EXAMPLES / op / "reference.py", op, cases=cases,
                                   init_args=spec.init_args, options=options)


@pytest.mark.parametrize("generation", ["legacy", "asc"])
def test_softmax_lowers_to_a_row_kernel(generation: str) -> None:
    result = _generate("softmax", generation)
    assert isinstance(result, Generated), result
    manifest = json.loads(result.files["ascendc/opbot.json"])
    assert manifest["pattern"] == "rows"
    assert manifest["params"] == []
    kernel = next(text for name, text in result.files.items() if "_kernel." in name)
    assert "ReduceRow(t0, x0, count, true);" in kernel  # the row max first
    assert "AscendC::Sub(" in kernel
    assert "AscendC::Exp(" in kernel
    assert "ReduceRow(t0, s0, count, false);" in kernel
    errors = [item for item in lint_package(result.files) if item.severity == "error"]
    assert not errors, [item.render() for item in errors]


def test_layer_norm_takes_a_submodules_parameters() -> None:
    result = _generate("layer_norm")
    assert isinstance(result, Generated), result
    manifest = json.loads(result.files["ascendc/opbot.json"])
    assert manifest["params"] == [{"name": "norm.weight", "shape": [1000]},
                                  {"name": "norm.bias", "shape": [1000]}]
    assert "layer_norm(Tensor x, Tensor norm_weight, Tensor norm_bias) -> Tensor" in \
        result.files["ascendc/op.cpp"]


def test_rms_norm_takes_its_weight_as_a_parameter() -> None:
    result = _generate("rms_norm")
    assert isinstance(result, Generated), result
    assert result.dtypes == ("float32", "float16")
    manifest = json.loads(result.files["ascendc/opbot.json"])
    assert manifest["params"] == [{"name": "weight", "shape": [1000]}]
    kernel = result.files["ascendc/rms_norm_kernel.cpp"]
    assert "AscendC::Mul(y0, s1, p0, count);" in kernel  # the weight, read as float32
    assert "1e-06f" in kernel  # eps from the module
    binding = result.files["ascendc/op.cpp"]
    assert "rms_norm(Tensor x, Tensor weight) -> Tensor" in binding
    assert "ParamRow(\"weight\", weight" in binding


def test_a_row_too_long_for_ub_is_refused_with_the_numbers() -> None:
    result = _generate("softmax", shapes=[[4, 200_000]])
    assert isinstance(result, Unsupported)
    assert "row too long for UB" in result.ops
    assert "a row of 200000 elements" in result.reason
    assert "rows up to" in result.reason
    assert "B are usable" in result.reason


# --------------------------------------------------------------------------- CPU model


def _json(stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each op generated once with `opbot generate` on the CPU model: (folder, JSON)."""
    require_cpu_model()
    out = tmp_path_factory.mktemp("rows")
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for op in ROW_OPS:
        run = run_opbot("generate", str(EXAMPLES / op / "op.yaml"), "--backend", "ascendc",
                        "--llm", "offline", "--json", "--out", str(out / op), env=ON,
                        timeout=1200)
        assert "Traceback" not in run.stderr, run.stderr[-2000:]
        result = _json(run.stdout)
        assert run.code == 0, (result.get("reasons"), run.stderr[-2000:])
        found[op] = (out / op, result)
    return found


@pytest.mark.parametrize("op", ROW_OPS)
def test_generate_passes_on_the_cpu_model(op: str, packages: dict[str, Any]) -> None:
    folder, result = packages[op]
    assert result["status"] == "passed"
    assert result["device"].startswith("cpu-model (asc-devkit ")
    spec = load_spec(EXAMPLES / op / "op.yaml")
    shapes = {tuple(shape) for item in spec.inputs or () for shape in item.shapes}
    seen = {tuple(case["shapes"][0]) for case in result["cases"]}
    assert shapes <= seen  # every spec shape, odd row lengths and more rows than cores
    assert all(case["passed"] for case in result["cases"])
    assert json.loads((folder / "ascendc" / "opbot.json").read_text())["pattern"] == "rows"


def _verify(op: str, folder: Path, tmp_path: Path, edit: tuple[str, str]) -> dict[str, Any]:
    copy = tmp_path / op
    shutil.copytree(folder, copy)
    kernel = copy / "ascendc" / f"{op}_kernel.cpp"
    text = kernel.read_text(encoding="utf-8")
    assert edit[0] in text
    kernel.write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    run = run_opbot("verify", str(EXAMPLES / op / "op.yaml"), str(copy), "--backend",
                    "ascendc", "--json", env=ON, timeout=1200)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    result = _json(run.stdout)
    assert run.code == 1, result
    return result


@pytest.mark.parametrize(("op", "edit"), [
    # softmax without the max subtraction: exp(100) overflows float32.
    ("softmax", ("AscendC::Sub(s1, x0, s0, count);", "AscendC::Muls(s1, x0, 1.0f, count);")),
    # RMSNorm that ignores its weight (linspace(0.5, 1.5), not ones).
    ("rms_norm", ("AscendC::Mul(y0, s1, p0, count);", "AscendC::Muls(y0, s1, 1.0f, count);")),
    # LayerNorm without its bias (linspace(-0.5, 0.5), not zeros).
    ("layer_norm", ("AscendC::Add(y0, s0, p1, count);", "AscendC::Muls(y0, s0, 1.0f, count);")),
])
def test_a_wrong_row_kernel_fails(op: str, edit: tuple[str, str], packages: dict[str, Any],
                                  tmp_path: Path) -> None:
    folder, _ = packages[op]
    result = _verify(op, folder, tmp_path, edit)
    assert result["status"] == "failed"
    assert any(reason["check"] in ("mismatch", "values", "nan", "correctness", "allclose")
               or "mismatch" in reason["message"].lower() or "nan" in reason["message"].lower()
               for reason in result["reasons"]), result["reasons"]


def test_the_static_check_simulates_the_row_tiling() -> None:
    from bot.agent.backends.ascendc.checks import static_check
    from bot.agent.backends.ascendc.skeleton import skeleton_from_package

    result = _generate("rms_norm")
    assert isinstance(result, Generated)
    skeleton = skeleton_from_package(result.files)
    assert skeleton.pattern == "rows"
    assert skeleton.params == ("weight",)
    assert static_check(skeleton, [], [(256, 1000), (6, 1000)]).ok
    too_long = static_check(skeleton, [], [(2, 90_000)])
    assert not too_long.ok
    assert "rows up to" in too_long.feedback()
    header = "ascendc/rms_norm_tiling.h"
    changed = skeleton.compose({"rms_norm_tiling.h": result.files[header].replace(
        "STAT_SLOTS = 4;", "STAT_SLOTS = 1;")})
    verdict = static_check(changed, [], [(256, 1000)])
    assert any("STAT_SLOTS = 1, but the kernel uses 4" in item for item in verdict.errors)


def test_the_prompt_gives_the_row_contract_and_a_row_example() -> None:
    from bot.agent.backends.ascendc.prompts import first_request, system_prompt

    assert "rows: reduce over the last dimension" in system_prompt("legacy")
    text = first_request("rms_norm", "class Model: ...", inputs=["x"], outputs=1,
                         dtypes=["float32"], generation="legacy", files={}, has_draft=False,
                         pattern="rows", params=["weight"])
    assert "the rows pattern" in text
    assert "rms_norm_float32(GM_ADDR x, GM_ADDR weight, GM_ADDR out, uint32_t rows" in text
    assert "(rows: softmax)" in text
    assert "ReduceRow(" in text
    elementwise = first_request("gelu", "class Model: ...", inputs=["x"], outputs=1,
                                dtypes=["float32"], generation="legacy", files={},
                                has_draft=False)
    assert "(elementwise: exact GELU)" in elementwise
    assert "ReduceRow(" not in elementwise


# An operator package must take the reference's parameters: one that bakes the example's
# weight into the kernel (and declares no `params`) would be right only for that weight.


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


def test_a_package_with_the_weight_baked_in_fails(packages: dict[str, Any],
                                                  tmp_path: Path) -> None:
    package = tmp_path / "baked"
    shutil.copytree(packages["rms_norm"][0], package)
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


def test_the_package_that_takes_its_weight_passes(packages: dict[str, Any]) -> None:
    run = run_opbot("verify", str(EXAMPLES / "rms_norm" / "op.yaml"), str(packages["rms_norm"][0]),
                    "--backend", "ascendc", "--json", env=ON)
    assert run.json()["status"] == "passed"
