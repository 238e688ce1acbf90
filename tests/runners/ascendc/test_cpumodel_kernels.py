"""Whole kernels on the CPU model: the golden packages of both generations (the ASC one
compiled as C++) against torch on 8 and 40 blocks, and the ways a run fails (a tile too big
for UB, a block that crashes, an intrinsic the model lacks), each reported with its cause,
never a crash of the caller.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from runners.ascendc.cpumodel import (
    CpuModelError,
    ProgramBuild,
    build_program,
    cpu_model_status,
    run_numpy,
    run_program,
)
from tests.support import DATA

STATUS = cpu_model_status()
pytestmark = pytest.mark.skipif(not STATUS.available, reason=f"CPU model: {STATUS.reason}")
GOLDEN = DATA / "ascendc_golden" / "legacy"
GENERATIONS = ("legacy", "asc")


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.float()).to(x.dtype)


# op -> (inputs, reference, atol for float16, exact)
OPS: dict[str, tuple[int, Callable[..., torch.Tensor], float, bool]] = {
    "relu": (1, torch.relu, 0.0, True),
    "add": (2, torch.add, 0.0, True),
    "gelu": (1, _gelu, 2e-3, False),
}


def _package(generation: str, op: str) -> Path:
    return DATA / "ascendc_golden" / generation / op / "ascendc"


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProgramBuild]:
    """Legacy builds by op name (the failure tests use them), ASC ones as "asc/<op>"."""
    built = {}
    for generation in GENERATIONS:
        for op in OPS:
            key = op if generation == "legacy" else f"asc/{op}"
            built[key] = build_program(_package(generation, op),
                                       tmp_path_factory.mktemp(key.replace("/", "-")))
            assert built[key].ok, built[key].log[-3000:]
    return built


@pytest.mark.parametrize("cores", [8, 40])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("generation", GENERATIONS)
def test_golden_kernels_match_torch(programs: dict[str, ProgramBuild], generation: str,
                                    op: str, dtype: str, cores: int) -> None:
    inputs, reference, half_atol, exact = OPS[op]
    rng = np.random.default_rng(cores)
    # Not a multiple of 32 bytes, not a multiple of the cores: tails everywhere.
    arrays = [(rng.standard_normal(30011) * 3).astype(dtype) for _ in range(inputs)]
    program = programs[op if generation == "legacy" else f"asc/{op}"].program
    assert program is not None
    (got,) = run_numpy(_package(generation, op), program, dtype, arrays, cores)
    want = reference(*(torch.from_numpy(array) for array in arrays)).numpy()
    if exact:
        assert np.array_equal(got, want)
    else:
        atol = half_atol if dtype == "float16" else 1e-5
        np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == "float16" else 1e-5,
                                   atol=atol)


def test_a_tile_too_big_for_ub_fails_with_the_real_api_check(
        programs: dict[str, ProgramBuild], tmp_path: Path) -> None:
    """The twin sizes tiles from the UB size it is told; 800000 bytes is more than the real
    TPipe accepts, and the devkit's own check in InitBuffer stops every block."""
    elements = 1 << 20
    source = tmp_path / "x.bin"
    np.ones(elements, np.float32).tofile(source)
    program = programs["relu"].program
    assert program is not None
    run = run_program(program, dtype="float32", inputs=[source], outputs=[tmp_path / "y.bin"],
                      elements=elements, cores=8, ub_bytes=800000)
    assert not run.ok
    assert run.blocks == 8
    assert run.succeeded == 0
    assert run.errors[0].startswith("InitBuffer: buffer length is"), run.errors
    assert "less than or equal to 196608" in run.errors[0]
    with pytest.raises(CpuModelError, match="8 of 8 blocks failed: InitBuffer: buffer length"):
        run_numpy(GOLDEN / "relu" / "ascendc", program, "float32",
                  [np.ones(elements, np.float32)], ub_bytes=800000)


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the golden relu package with one line of its kernel changed."""
    folder = tmp_path / "relu" / "ascendc"
    shutil.copytree(GOLDEN / "relu" / "ascendc", folder)
    kernel = folder / "relu_kernel.cpp"
    text = kernel.read_text()
    assert old in text
    kernel.write_text(text.replace(old, new))
    return folder


def test_a_block_that_crashes_is_reported_failed(tmp_path: Path) -> None:
    # Block 1 writes its output far past its GM buffer (into unmapped memory).
    folder = _variant(tmp_path, "outGm0_.SetGlobalBuffer((__gm__ T*)out + start, length_);",
                      "outGm0_.SetGlobalBuffer((__gm__ T*)out + start + "
                      "(AscendC::GetBlockIdx() == 1 ? (1ULL << 34) : 0), length_);")
    built = build_program(folder, tmp_path / "build")
    assert built.ok, built.log[-3000:]
    assert built.program is not None
    source = tmp_path / "x.bin"
    np.ones(4096, np.float32).tofile(source)
    run = run_program(built.program, dtype="float32", inputs=[source],
                      outputs=[tmp_path / "y.bin"], elements=4096, cores=8)
    assert not run.ok
    assert run.blocks == 8
    assert run.succeeded == 7
    assert any("SIGSEGV" in error for error in run.errors), run.errors
    with pytest.raises(CpuModelError, match=r"1 of 8 blocks failed.*SIGSEGV"):
        run_numpy(folder, built.program, "float32", [np.ones(4096, np.float32)])


def test_an_intrinsic_the_model_lacks_is_unsupported_by_name(tmp_path: Path) -> None:
    # WholeReduceSum is a real API; its intrinsic (vcadd) has no CPU semantics here.
    folder = _variant(tmp_path, "AscendC::Relu(y0, x0, count);",
                      "AscendC::WholeReduceSum<float>(y0, x0, 64, 1, 1, 1, 8);")
    built = build_program(folder, tmp_path / "build")
    assert not built.ok
    assert built.program is None
    assert built.unsupported == ["vcadd"], built.log[-2000:]


def test_run_numpy_checks_its_arguments(programs: dict[str, ProgramBuild]) -> None:
    program = programs["add"].program
    assert program is not None
    add = GOLDEN / "add" / "ascendc"
    with pytest.raises(CpuModelError, match="takes 2 inputs"):
        run_numpy(add, program, "float32", [np.ones(8, np.float32)])
    with pytest.raises(CpuModelError, match="no 'complex64' arrays"):
        run_numpy(add, program, "complex64", [np.ones(8), np.ones(8)])
    empty = run_numpy(add, program, "float32", [np.ones(0, np.float32)] * 2)
    assert empty[0].shape == (0,)


def test_run_numpy_runs_unsandboxed_too(programs: dict[str, ProgramBuild]) -> None:
    """Inside the judge's sandbox the worker runs the program as a plain child."""
    program = programs["relu"].program
    assert program is not None
    x = np.linspace(-4, 4, 1000, dtype=np.float32).reshape(10, 100)
    (got,) = run_numpy(GOLDEN / "relu" / "ascendc", program, "float32", [x], 8,
                       sandboxed=False)
    assert got.shape == (10, 100)
    assert np.array_equal(got, np.maximum(x, 0))


# Every API the offline generator emits (bot/agent/backends/ascendc/offline/rules.py), in
# one chain through the real Level-2 implementations (counter-mode masks, scalar forms).
CHAIN = """AscendC::Abs(y0, x0, count);
        AscendC::Adds(y0, y0, 1.0f, count);
        AscendC::Ln(y0, y0, count);
        AscendC::Sqrt(y0, y0, count);
        AscendC::Muls(y0, y0, 2.0f, count);
        AscendC::Exp(y0, y0, count);
        AscendC::Maxs(y0, y0, 1.5f, count);
        AscendC::Mins(y0, y0, 20.0f, count);
        AscendC::Sub(y0, y0, x0, count);
        AscendC::Mul(y0, y0, x0, count);
        AscendC::Add(y0, y0, x0, count);
        AscendC::Max(y0, y0, x0, count);
        AscendC::Min(y0, y0, x0, count);
        AscendC::LeakyRelu(y0, y0, 0.25f, count);
        AscendC::Div(y0, y0, x0, count);
        AscendC::Duplicate(x0, 3.0f, count);
        AscendC::Add(y0, y0, x0, count);
        AscendC::Relu(y0, y0, count);"""


def _chain_reference(x: np.ndarray) -> np.ndarray:
    f = np.float32
    y = np.log((np.abs(x) + f(1)).astype(np.float64)).astype(f)
    y = np.exp((np.sqrt(y) * f(2)).astype(np.float64)).astype(f)
    y = np.minimum(np.maximum(y, f(1.5)), f(20))
    y = np.minimum(np.maximum((y - x) * x + x, x), x)
    y = np.where(y >= 0, y, y * f(0.25)) / x
    return np.maximum(y + f(3), f(0))


def test_the_offline_generators_apis_compute_like_numpy(tmp_path: Path) -> None:
    folder = _variant(tmp_path, "AscendC::Relu(y0, x0, count);", CHAIN)
    built = build_program(folder, tmp_path / "build")
    assert built.ok, built.log[-3000:]
    assert built.program is not None
    x = (np.random.default_rng(3).standard_normal(5001) * 2).astype(np.float32)
    for dtype, rtol in (("float32", 1e-6), ("float16", 2e-3)):
        values = x.astype(dtype)
        (got,) = run_numpy(folder, built.program, dtype, [values], 8)
        # float16 is widened to float32 in UB, computed there, narrowed at the end.
        want = _chain_reference(values.astype(np.float32)).astype(dtype)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol,
                                   atol=1e-6 if dtype == "float32" else 1e-3)
