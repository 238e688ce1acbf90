"""Tuning candidates for Ascend C packages: the knobs the generated tiling exposes, the
cost model that ranks them, and packages whose tiling no knob can be read from.

The variants of the golden packages are checked like a runner would: each passes the
static checks, changes nothing but its knob lines, and (with g++) its host tiling agrees
with the Python mirror and its CPU twin still computes what torch does."""

from __future__ import annotations

import difflib
import math
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from bot.agent.backends.ascendc.checks import LARGE_PROBLEM, constants, static_check
from bot.agent.backends.ascendc.skeleton import Skeleton, skeleton_from_package
from bot.agent.backends.ascendc.tuning import TilingVariant, tiling_variants
from runners.ascendc.package import TAIL_SIZES
from runners.ascendc.tiling import (
    TilingConfig,
    TilingPlan,
    check_tiling,
    estimate_time,
    plan_tiling,
    scratch_bytes,
)
from tests.support import DATA

GOLDEN = DATA / "ascendc_golden"
STUBS = DATA / "ascendc_stubs"
GENERATIONS = ("asc", "legacy")
OPS = ("add", "gelu", "relu")
SIZES = [127 * 4099, *TAIL_SIZES, LARGE_PROBLEM]
KNOBS = ("BUFFER_NUM", "MAX_TILE_LENGTH", "MAX_CORES")
UNTUNED = "no tile cap, all cores, double buffer"
GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ is not installed")


def _read_package(generation: str, op: str) -> Skeleton:
    root = GOLDEN / generation / op
    files = {path.relative_to(root).as_posix(): path.read_text()
             for path in sorted(root.rglob("*")) if path.is_file()}
    return skeleton_from_package(files)


@pytest.fixture(scope="module")
def goldens() -> dict[tuple[str, str], Skeleton]:
    return {(generation, op): _read_package(generation, op)
            for generation in GENERATIONS for op in OPS}


@pytest.fixture(scope="module")
def every_variant(goldens: dict[tuple[str, str], Skeleton]
                  ) -> dict[tuple[str, str], list[TilingVariant]]:
    """The first sixteen variants of each golden package."""
    return {key: tiling_variants(skeleton, SIZES, limit=16)
            for key, skeleton in goldens.items()}


@pytest.fixture(scope="module")
def all_knobs(every_variant: dict[tuple[str, str], list[TilingVariant]]
              ) -> dict[str, TilingVariant]:
    """For legacy add and gelu, the best variant that turns all three knobs at once."""
    return {op: next(item for item in every_variant[("legacy", op)]
                     if item.label.startswith("tile cap ") and "core cap" in item.label
                     and "single buffer" in item.label)
            for op in ("add", "gelu")}


def _changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _is_knob_line(line: str) -> bool:
    """A knob's constant, or one of the two ComputeTiling lines a cap clips."""
    return any(knob in line for knob in KNOBS) or line.strip(" +-") in (
        "uint64_t blocks = Min(Min(cores, MAX_BLOCK_DIM), units);",
        "tiling.tileLength = static_cast<uint32_t>(Min(maxTile, blockLength));")


def _with_file(skeleton: Skeleton, name: str, text: str) -> Skeleton:
    return replace(skeleton, files={**skeleton.files, f"ascendc/{name}": text})


def _header_name(skeleton: Skeleton) -> str:
    return skeleton.writable[1]


# --------------------------------------------------------------------------- the variants


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", OPS)
def test_golden_packages_get_ranked_variants(
        every_variant: dict[tuple[str, str], list[TilingVariant]], generation: str,
        op: str) -> None:
    variants = every_variant[(generation, op)]
    assert len(variants) >= 4
    estimates = [variant.estimate for variant in variants]
    assert estimates == sorted(estimates)
    assert all(math.isfinite(value) and value > 0 for value in estimates)
    labels = [variant.label for variant in variants]
    assert len(set(labels)) == len(labels)
    assert UNTUNED not in labels  # the current configuration is no candidate
    assert all("\n" not in variant.detail and variant.detail for variant in variants)


def test_both_generations_get_the_same_variants(
        every_variant: dict[tuple[str, str], list[TilingVariant]]) -> None:
    """The tiling header is one template for both toolchains: so is its tuning."""
    for op in OPS:
        asc, legacy = every_variant[("asc", op)], every_variant[("legacy", op)]
        assert [(item.label, item.estimate) for item in asc] == \
            [(item.label, item.estimate) for item in legacy]


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", OPS)
def test_variants_change_only_the_knob_lines(
        goldens: dict[tuple[str, str], Skeleton],
        every_variant: dict[tuple[str, str], list[TilingVariant]], generation: str,
        op: str) -> None:
    skeleton = goldens[(generation, op)]
    header, kernel = (f"ascendc/{_header_name(skeleton)}", f"ascendc/{skeleton.kernel_name}")
    for variant in every_variant[(generation, op)]:
        assert variant.files.keys() == skeleton.files.keys()
        changed = {path for path in skeleton.files
                   if variant.files[path] != skeleton.files[path]}
        assert changed <= {header, kernel}, variant.label
        assert header in changed
        assert (kernel in changed) == ("single buffer" in variant.label), variant.label
        for path in changed:
            lines = _changed_lines(skeleton.files[path], variant.files[path])
            assert lines
            assert all(_is_knob_line(line) for line in lines), lines


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", ["add", "gelu"])
def test_variants_pass_the_static_checks(
        goldens: dict[tuple[str, str], Skeleton],
        every_variant: dict[tuple[str, str], list[TilingVariant]], generation: str,
        op: str) -> None:
    skeleton = goldens[(generation, op)]
    for variant in every_variant[(generation, op)]:
        verdict = static_check(replace(skeleton, files=variant.files), SIZES)
        assert verdict.ok, verdict.feedback()


def test_the_limit_is_respected_and_the_ranking_is_deterministic(
        goldens: dict[tuple[str, str], Skeleton],
        every_variant: dict[tuple[str, str], list[TilingVariant]]) -> None:
    skeleton = goldens[("legacy", "gelu")]
    best = tiling_variants(skeleton, SIZES)
    assert len(best) == 4
    assert best == tiling_variants(skeleton, SIZES)
    assert best == every_variant[("legacy", "gelu")][:4]
    assert len(every_variant[("legacy", "gelu")]) == 16
    assert tiling_variants(skeleton, SIZES, limit=2) == best[:2]
    assert tiling_variants(skeleton, SIZES, limit=0) == []
    assert tiling_variants(skeleton, list(reversed(SIZES))) == best


def test_a_tuned_package_excludes_its_own_configuration_and_can_go_back(
        goldens: dict[tuple[str, str], Skeleton],
        every_variant: dict[tuple[str, str], list[TilingVariant]]) -> None:
    """Tuning a tuned package: its knobs are the current ones, and undoing them restores
    the generated files byte for byte, at the inverse estimate."""
    skeleton = goldens[("asc", "add")]
    for tuned in (every_variant[("asc", "add")][0], every_variant[("asc", "add")][-1]):
        again = tiling_variants(replace(skeleton, files=tuned.files), SIZES, limit=1000)
        labels = [item.label for item in again]
        assert tuned.label not in labels
        undo = again[labels.index(UNTUNED)]
        assert undo.files == dict(skeleton.files)
        assert math.isclose(undo.estimate * tuned.estimate, 1.0, rel_tol=1e-9)


def test_a_variant_with_all_three_knobs_reads_well(
        all_knobs: dict[str, TilingVariant], goldens: dict[tuple[str, str], Skeleton]) -> None:
    skeleton = goldens[("legacy", "add")]
    variant = all_knobs["add"]
    header = variant.files[f"ascendc/{_header_name(skeleton)}"]
    values = constants(header)
    assert values["BUFFER_NUM"] == 1
    assert f"tile cap {values['MAX_TILE_LENGTH']}" in variant.label
    assert f"core cap {values['MAX_CORES']}" in variant.label
    assert "Min(Min(Min(cores, MAX_CORES), MAX_BLOCK_DIM), units)" in header
    assert "Min(Min(maxTile, MAX_TILE_LENGTH), blockLength)" in header
    assert "BUFFER_NUM 2 -> 1" in variant.detail
    assert "MAX_CORES unset ->" in variant.detail


# --------------------------------------------------------------------------- unknown layouts


def _edited_header(skeleton: Skeleton, old: str, new: str) -> Skeleton:
    name = _header_name(skeleton)
    text = skeleton.text(name)
    assert old in text
    return _with_file(skeleton, name, text.replace(old, new, 1))


@pytest.mark.parametrize(("old", "new"), [
    # A model's own ComputeTiling: the simulator does not mirror it.
    ("Min(maxTile, blockLength)", "blockLength"),
    ("uint64_t blocks = Min(Min(cores, MAX_BLOCK_DIM), units);",
     "uint64_t blocks = Min(cores, units);"),
    # A model's own constants.
    ("constexpr uint64_t BUFFER_NUM = 2;", "constexpr uint64_t kBufferCount = 2;"),
    ("constexpr uint64_t COMPUTE_SLOTS = 3;", "constexpr uint64_t SCRATCH = 3;"),
    # A cap declared but never applied.
    ("constexpr uint64_t COMPUTE_SLOTS = 3;",
     "constexpr uint64_t COMPUTE_SLOTS = 3;\nconstexpr uint64_t MAX_CORES = 8;"),
    # The same logic, but a different function around it.
    ("return tiling;\n}\n\n}", "tiling.blockDim = tiling.blockDim > 1 ? tiling.blockDim : 1;"
                               "\n    return tiling;\n}\n\n}"),
])
def test_headers_that_are_not_the_template_get_no_variants(
        goldens: dict[tuple[str, str], Skeleton], old: str, new: str) -> None:
    skeleton = _edited_header(goldens[("legacy", "gelu")], old, new)
    assert tiling_variants(skeleton, SIZES) == []


def test_comments_and_layout_do_not_hide_the_template(
        goldens: dict[tuple[str, str], Skeleton]) -> None:
    skeleton = _edited_header(goldens[("legacy", "gelu")], "// double buffering, as in the kernel",
                              "//   a model's own remark")
    assert tiling_variants(skeleton, SIZES)


def test_a_kernel_without_a_buffer_constant_keeps_its_buffers(
        goldens: dict[tuple[str, str], Skeleton]) -> None:
    """Queues sized with a literal: BUFFER_NUM cannot be tuned, the header's caps can."""
    skeleton = goldens[("legacy", "add")]
    kernel = skeleton.text(skeleton.kernel_name)
    literal = re.sub(r"InitBuffer\((\w+), BUFFER_NUM,", r"InitBuffer(\1, 2,", kernel)
    assert literal != kernel
    edited = _with_file(skeleton, skeleton.kernel_name, literal)
    variants = tiling_variants(edited, SIZES, limit=1000)
    assert variants
    assert all("double buffer" in item.label for item in variants)
    assert all(item.files[f"ascendc/{skeleton.kernel_name}"] == literal for item in variants)


def test_no_sizes_or_a_broken_current_tiling_get_no_variants(
        goldens: dict[tuple[str, str], Skeleton]) -> None:
    skeleton = goldens[("asc", "relu")]
    assert tiling_variants(skeleton, []) == []
    assert tiling_variants(skeleton, [0]) == []
    # A header that leaves no room in UB: nothing to tune until the agent fixes it.
    starved = _edited_header(skeleton, "8 * 1024 + 256;", "192 * 1024 - 64;")
    assert tiling_variants(starved, SIZES) == []


# --------------------------------------------------------------------------- the cost model


def _gelu_config(total: int, cores: int, *, buffer_num: int = 2, tile_cap: int | None = None,
                 core_cap: int | None = None) -> TilingConfig:
    return TilingConfig(total=total, dtype_bytes=4, cores=cores, queues=2,
                        buffer_num=buffer_num, tile_cap=tile_cap, core_cap=core_cap,
                        scratch_bytes_per_element=scratch_bytes(3, inputs=1, outputs=1,
                                                                dtype_bytes=4))


def _time(config: TilingConfig, plan: TilingPlan | None = None, ops: int = 24) -> float:
    return estimate_time(config, plan or plan_tiling(config), vector_ops=ops)


def test_all_cores_beat_one_for_a_large_problem() -> None:
    one, many = _time(_gelu_config(LARGE_PROBLEM, 1)), _time(_gelu_config(LARGE_PROBLEM, 48))
    assert many * 10 < one


def test_tiny_problems_do_not_need_many_cores() -> None:
    for total in (1, 33, 64, 256):
        few = _time(_gelu_config(total, 48, core_cap=1))
        assert few <= _time(_gelu_config(total, 48)), total


def test_the_slowest_core_sets_the_time() -> None:
    config = _gelu_config(8 * 4096, 8)
    balanced = plan_tiling(config)
    assert balanced == TilingPlan(8, 4096, 4096)
    # Seven cores of 4688 elements, each with a second, short tile.
    lopsided = TilingPlan(block_dim=7, block_length=4688, tile_length=4096)
    assert check_tiling(config, lopsided).ok
    assert _time(config, lopsided) > _time(config, balanced)


def test_double_buffering_hides_compute_behind_copies() -> None:
    single = _gelu_config(LARGE_PROBLEM, 48, buffer_num=1, tile_cap=4096)
    double = _gelu_config(LARGE_PROBLEM, 48, buffer_num=2, tile_cap=4096)
    assert plan_tiling(single) == plan_tiling(double)
    assert _time(double) < _time(single)


def test_short_tiles_pay_their_latency_on_large_problems() -> None:
    capped = _gelu_config(LARGE_PROBLEM, 48, tile_cap=1024)
    assert _time(capped) > _time(_gelu_config(LARGE_PROBLEM, 48))


def test_plans_that_launch_nothing() -> None:
    assert estimate_time(_gelu_config(0, 8), TilingPlan(0, 0, 0), vector_ops=1) == 0.0
    assert estimate_time(_gelu_config(100, 8), TilingPlan(0, 0, 0), vector_ops=1) == math.inf


@pytest.mark.parametrize("total", [1, 31, 33, 1000, 4099, 65537, 1000003, 2**24 + 3])
@pytest.mark.parametrize(("tile_cap", "core_cap"), [(1024, None), (None, 7), (2048, 24),
                                                    (16384, 1)])
def test_capped_plans_break_no_rule(total: int, tile_cap: int | None,
                                    core_cap: int | None) -> None:
    for dtype_bytes in (2, 4):
        config = TilingConfig(total=total, dtype_bytes=dtype_bytes, cores=48, queues=3,
                              tile_cap=tile_cap, core_cap=core_cap)
        report = check_tiling(config, plan_tiling(config))
        assert report.ok, report.feedback()
        assert report.plan.block_dim <= (core_cap or 48)
        assert report.plan.tile_length <= (tile_cap or report.plan.tile_length)


# --------------------------------------------------------------------------- with g++


def _gxx(args: list[str], cwd: Path) -> None:
    assert GXX is not None
    run = subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", *args], cwd=cwd,
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def _write(files: dict[str, str], root: Path) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "ascendc"


_DRIVER = """#include <cstdio>
#include "{op}_tiling.h"
int main() {{
    unsigned long long total, bytes, cores, ub;
    while (std::scanf("%llu %llu %llu %llu", &total, &bytes, &cores, &ub) == 4) {{
        const {op}_tiling::TilingData t = {op}_tiling::ComputeTiling(total, bytes, cores, ub);
        std::printf("%u %u %u\\n", t.blockDim, t.blockLength, t.tileLength);
    }}
}}
"""


def _host_plans(folder: Path, op: str, problems: list[tuple[int, int, int, int]]) -> list[str]:
    (folder / "driver.cpp").write_text(_DRIVER.format(op=op))
    _gxx(["-O1", "driver.cpp", "-o", "driver"], folder)
    stdin = "".join(" ".join(map(str, problem)) + "\n" for problem in problems)
    return subprocess.run([str(folder / "driver")], input=stdin, capture_output=True,
                          text=True, check=True).stdout.splitlines()


@needs_gxx
@pytest.mark.parametrize("op", ["add", "gelu"])
def test_tuned_headers_agree_with_the_simulator(
        goldens: dict[tuple[str, str], Skeleton],
        every_variant: dict[tuple[str, str], list[TilingVariant]],
        all_knobs: dict[str, TilingVariant], op: str, tmp_path: Path) -> None:
    skeleton = goldens[("legacy", op)]
    variants = every_variant[("legacy", op)]
    problems = [(total, dtype_bytes, cores, 192 * 1024)
                for total in (1, 31, 33, 1000, 4099, 65537, 1000003, 2**24 + 3)
                for dtype_bytes in (2, 4) for cores in (1, 7, 40, 48)]
    for index, variant in enumerate([*variants[:4], all_knobs[op]]):
        folder = _write(variant.files, tmp_path / str(index))
        header = constants((folder / f"{op}_tiling.h").read_text())
        for (total, dtype_bytes, cores, ub), line in zip(
                problems, _host_plans(folder, op, problems), strict=True):
            config = TilingConfig(
                total=total, dtype_bytes=dtype_bytes, cores=cores, ub_bytes=ub,
                buffer_num=header["BUFFER_NUM"], queues=len(skeleton.inputs) + 1,
                scratch_bytes_per_element=scratch_bytes(header["COMPUTE_SLOTS"],
                                                        inputs=len(skeleton.inputs),
                                                        outputs=1, dtype_bytes=dtype_bytes),
                tile_cap=header.get("MAX_TILE_LENGTH"), core_cap=header.get("MAX_CORES"))
            plan = plan_tiling(config)
            assert line.split() == [str(plan.block_dim), str(plan.block_length),
                                    str(plan.tile_length)], (variant.label, total, cores)


def _twin(folder: Path, kernel: str) -> Path:
    includes = [f"-I{STUBS / 'kernel'}", f"-I{STUBS / 'host'}", f"-I{folder}"]
    _gxx(["-O1", *includes, "cpu_twin.cpp", kernel, "-o", "twin"], folder)
    return folder / "twin"


def _run_twin(twin: Path, inputs: list[np.ndarray], cores: int) -> np.ndarray:
    folder = twin.parent
    paths = []
    for index, array in enumerate(inputs):
        path = folder / f"in{index}.bin"
        array.tofile(path)
        paths.append(str(path))
    out = folder / "out0.bin"
    dtype = str(inputs[0].dtype)
    run = subprocess.run([str(twin), dtype, str(inputs[0].size), str(cores), str(192 * 1024),
                          *paths, str(out)], capture_output=True, text=True, check=False,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return np.fromfile(out, dtype=inputs[0].dtype)


def _reference(op: str, inputs: list[np.ndarray]) -> np.ndarray:
    tensors = [torch.from_numpy(array).float() for array in inputs]
    result = tensors[0] + tensors[1] if op == "add" else torch.nn.functional.gelu(tensors[0])
    return result.to(torch.from_numpy(inputs[0]).dtype).numpy()


@needs_gxx
@pytest.mark.parametrize("op", ["add", "gelu"])
def test_a_tuned_cpu_twin_still_computes_what_torch_does(
        goldens: dict[tuple[str, str], Skeleton],
        all_knobs: dict[str, TilingVariant], op: str, tmp_path: Path) -> None:
    """Single buffering, a tile cap and a core cap at once, on the stub kernel API (which
    checks UB use, queue balance and copy bounds)."""
    skeleton = goldens[("legacy", op)]
    folder = _write(all_knobs[op].files, tmp_path)
    twin = _twin(folder, skeleton.kernel_name)
    generator = np.random.default_rng(5)
    for dtype, atol, rtol in ((np.float32, 1e-5, 1.3e-6), (np.float16, 1e-5, 1e-3)):
        for size in (1, 33, 4099, 70001):
            inputs = [(generator.standard_normal(size) * 3).astype(dtype)
                      for _ in skeleton.inputs]
            for cores in (7, 48):
                actual = _run_twin(twin, inputs, cores)
                np.testing.assert_allclose(actual.astype(np.float64),
                                           _reference(op, inputs).astype(np.float64),
                                           atol=atol, rtol=rtol)
