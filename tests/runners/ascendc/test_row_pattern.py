"""The row pattern of Ascend C packages (runners/ascendc/rows.py), without CANN:

- both generations render (kernel with the tree reduce, row tiling header, a binding that
  takes the parameters, twins taking the row length) and lint clean;
- the Python mirror of the row tiling covers every row once for the examples' shapes,
  odd row lengths and more rows than cores, and agrees with the C++ header (g++);
- a row too long for UB is refused with the numbers, by the mirror and by the header;
- the manifest carries the pattern, the parameters and per-output layouts; the shim's
  ModelNew holds the parameters under their names and refuses names it cannot hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runners.ascendc.lint import lint_package
from runners.ascendc.package import (
    KernelBody,
    Manifest,
    PackageError,
    PackageRequest,
    ParamSpec,
    render_package,
)
from runners.ascendc.shim import model_new_source
from runners.ascendc.tiling import (
    RowTilingConfig,
    check_row_tiling,
    plan_rows,
    row_fit_problem,
)

BODY = KernelBody(compute=("ReduceRow(t0, x0, count, false);", "Broadcast(s0, t0, count);",
                           "AscendC::Mul(y0, x0, p0, count);"),
                  compute_slots=1, stat_slots=1, summary="test")
WEIGHT = ParamSpec("weight", (1000,))
GXX = shutil.which("g++")


def _request(generation: str = "legacy", **changes: object) -> PackageRequest:
    fields: dict[str, object] = {
        "op": "row_op", "generation": generation, "body": BODY, "inputs": ("x",),
        "dtypes": ("float32", "float16"), "pattern": "rows", "params": (WEIGHT,)}
    fields.update(changes)
    return PackageRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("generation", ["legacy", "asc"])
def test_both_generations_render_the_row_pattern(generation: str) -> None:
    files = render_package(_request(generation))
    kernel = files[f"ascendc/row_op_kernel.{'cpp' if generation == 'legacy' else 'asc'}"]
    assert "ReduceRow(" in kernel
    assert "AscendC::Add(work, work, work[width], width);" in kernel
    assert "uint32_t rows, uint32_t rowLength, uint32_t rowsPerCore, uint32_t rowStride, " \
           "uint32_t reduceLength" in kernel
    assert "paramGm0_.SetGlobalBuffer((__gm__ float*)weight, rowLength);" in kernel
    tiling = files["ascendc/row_op_tiling.h"]
    assert "inline TilingData ComputeTiling(uint64_t rows, uint64_t rowLength" in tiling
    assert "constexpr uint64_t STAT_SLOTS = 1;" in tiling
    binding = files["ascendc/op.cpp"]
    assert "row_op(Tensor x, Tensor weight) -> Tensor" in binding
    assert "a whole row (with its scratch rows) must fit in UB" in binding
    twin = files[f"ascendc/cpu_twin.{'cpp' if generation == 'legacy' else 'asc'}"]
    assert "const uint64_t rowLength = std::strtoull(argv[5], nullptr, 10);" in twin
    assert "paramBytes" in twin
    manifest = json.loads(files["ascendc/opbot.json"])
    assert manifest["pattern"] == "rows"
    assert manifest["params"] == [{"name": "weight", "shape": [1000]}]
    assert "PARAMS = ['weight']" in files["ascendc/tests/test_row_op_npu.py"]
    errors = [item.render() for item in lint_package(files) if item.severity == "error"]
    assert not errors, errors


def test_an_elementwise_package_takes_no_parameters() -> None:
    with pytest.raises(PackageError, match="rows pattern"):
        render_package(_request(pattern="elementwise"))


def test_per_row_outputs_are_in_the_manifest_but_not_rendered() -> None:
    data = json.loads(render_package(_request())["ascendc/opbot.json"])
    data.update({"outputs": 2, "output_layouts": ["input", "rows"]})
    manifest = Manifest.from_json(data)
    assert manifest.layouts() == ("input", "rows")
    assert Manifest.from_json(manifest.to_json()) == manifest
    with pytest.raises(PackageError, match="per-row outputs"):
        render_package(_request(outputs=2, output_layouts=("input", "rows")))
    with pytest.raises(PackageError, match="output_layouts"):
        Manifest.from_json({**data, "output_layouts": ["input", "columns"]})


@pytest.mark.parametrize("name", ["_parameters", "w; import os", "1x", "a" * 70, "class",
                                  "norm._buffers", "a..b", "weight\n"])
def test_a_hostile_parameter_name_is_refused(name: str) -> None:
    data = json.loads(render_package(_request())["ascendc/opbot.json"])
    data["params"] = [{"name": name, "shape": [4]}]
    with pytest.raises(PackageError):
        Manifest.from_json(data)
    with pytest.raises(PackageError):
        model_new_source("opbot_row_op", "row_op", [ParamSpec(name, (4,))])


def test_the_shim_holds_parameters_under_their_names() -> None:
    params = [WEIGHT, ParamSpec("norm.bias", (1000,))]  # a submodule's, as nn.LayerNorm has
    source = model_new_source("opbot_row_op", "row_op", params)
    assert "self.weight = torch.nn.Parameter(torch.zeros((1000,)))" in source
    assert "torch.ops.opbot_row_op.row_op(*tensors, self.weight, self.norm.bias)" in source
    namespace: dict[str, object] = {}
    import torch

    exec(compile(source, "shim", "exec"), {"torch": torch}, namespace)
    model = namespace["ModelNew"](1000, 1e-6)  # type: ignore[operator]
    # The judge loads the reference's values under these keys (load_state_dict).
    assert list(model.state_dict()) == ["weight", "norm.bias"]


# --------------------------------------------------------------------------- tiling


@pytest.mark.parametrize(("rows", "length", "dtype_bytes"), [
    (256, 1024, 4), (1000, 37, 4), (33, 4099, 4),  # softmax's shapes
    (256, 1000, 2), (37, 1000, 2), (6, 1000, 4),  # rms_norm's (2 x 3 x 1000: 6 rows)
    (1, 1, 4), (97, 33, 2), (65, 17, 4),
])
@pytest.mark.parametrize("cores", [8, 40, 48])
def test_rows_are_dealt_to_the_cores_once(rows: int, length: int, dtype_bytes: int,
                                          cores: int) -> None:
    config = RowTilingConfig(rows=rows, row_length=length, dtype_bytes=dtype_bytes,
                             cores=cores, params=1, compute_slots=2, stat_slots=4)
    plan = plan_rows(config)
    assert plan.block_dim == min(cores, -(-rows // plan.rows_per_core))
    assert plan.block_dim <= cores
    assert (plan.block_dim - 1) * plan.rows_per_core < rows
    assert plan.row_stride % 16 == 0
    assert plan.row_stride >= length
    assert plan.reduce_length >= max(length, 8)
    assert plan.reduce_length & (plan.reduce_length - 1) == 0
    assert check_row_tiling(config, plan) == []


def test_the_checker_finds_a_plan_that_drops_rows() -> None:
    config = RowTilingConfig(rows=1000, row_length=37, dtype_bytes=4, cores=40)
    plan = plan_rows(config)
    short = type(plan)(plan.block_dim, plan.rows_per_core - 1, plan.row_stride,
                       plan.reduce_length)
    assert any("cover" in item for item in check_row_tiling(config, short))
    unaligned = type(plan)(plan.block_dim, plan.rows_per_core, 37, plan.reduce_length)
    assert any("rowStride" in item for item in check_row_tiling(config, unaligned))


def test_a_row_too_long_for_ub_is_refused() -> None:
    config = RowTilingConfig(rows=4, row_length=100_000, dtype_bytes=4, cores=40,
                             compute_slots=2, stat_slots=1)
    problem = row_fit_problem(config)
    assert problem is not None
    assert "a row of 100000 elements" in problem
    assert "rows up to" in problem
    assert plan_rows(config).block_dim == 0
    assert check_row_tiling(config, plan_rows(config)) == [problem]


_DRIVER = """
#include <cstdio>
#include "row_op_tiling.h"
int main()
{
    const unsigned long long cases[][4] = {%s};
    for (const auto& item : cases) {
        const auto t = row_op_tiling::ComputeTiling(item[0], item[1], item[2], item[3], 196608);
        std::printf("%%u %%u %%u %%u\\n", t.blockDim, t.rowsPerCore, t.rowStride, t.reduceLength);
    }
    return 0;
}
"""


@pytest.mark.skipif(GXX is None, reason="g++ is not installed")
def test_the_cpp_header_agrees_with_the_mirror(tmp_path: Path) -> None:
    files = render_package(_request())
    (tmp_path / "row_op_tiling.h").write_text(files["ascendc/row_op_tiling.h"])
    cases = [(256, 1024, 4, 40), (1000, 37, 4, 40), (33, 4099, 4, 40), (37, 1000, 2, 8),
             (1, 1, 2, 48), (3, 60_000, 4, 40), (2, 40_000, 2, 40)]
    (tmp_path / "main.cpp").write_text(_DRIVER % ", ".join(
        "{" + ", ".join(map(str, case)) + "}" for case in cases))
    subprocess.run([str(GXX), "-std=c++17", "-I", str(tmp_path), str(tmp_path / "main.cpp"),
                    "-o", str(tmp_path / "main")], check=True, timeout=120)
    lines = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True,
                           text=True, timeout=60).stdout.split("\n")
    for (rows, length, dtype_bytes, cores), line in zip(cases, lines, strict=False):
        plan = plan_rows(RowTilingConfig(rows=rows, row_length=length, dtype_bytes=dtype_bytes,
                                         cores=cores, params=1, compute_slots=1, stat_slots=1))
        expected = (f"{plan.block_dim} {plan.rows_per_core} {plan.row_stride} "
                    f"{plan.reduce_length}")
        assert line == expected, (rows, length, dtype_bytes)
    assert lines[5].startswith("0 ")  # 60000 float32 elements do not fit in one UB


@pytest.mark.skipif(os.environ.get("OPBOT_ASCENDC_REAL_TORCH") != "1" or GXX is None,
                    reason="slow (torch headers): set OPBOT_ASCENDC_REAL_TORCH=1")
def test_the_row_binding_compiles_against_the_real_torch_headers(tmp_path: Path) -> None:
    """The legacy binding (the ASC one includes its kernel, which needs bisheng's
    <<<>>> or the real headers: the CPU-model tests cover that kernel)."""
    import torch

    from runners.ascendc.package import write_package
    from tests.runners.ascendc.test_ascendc_package import _binding_check

    write_package(render_package(_request()), tmp_path)
    include = Path(torch.__file__).parent / "include"
    flags = [f"-I{include}", f"-I{include / 'torch/csrc/api/include'}",
             "-Wno-c++20-extensions", "-Wno-unused-parameter"]
    result = _binding_check("legacy", tmp_path / "ascendc", flags)
    assert result.returncode == 0, result.stderr
