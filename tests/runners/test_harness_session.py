"""Whole-harness behaviour on small purpose-built references and candidates."""

from __future__ import annotations

import ast
from pathlib import Path

from triton.compiler.errors import CompilationError

from runners.harness.loading import as_user_error
from tests.support import reference_source, run_opbot

_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def fill(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {expression}, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        fill[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''


def _files(tmp_path: Path, forward: str, expression: str) -> tuple[Path, Path]:
    reference = tmp_path / "reference.py"
    reference.write_text(reference_source(forward, "torch.randn(64, 100)"), encoding="utf-8")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(_KERNEL.format(expression=expression), encoding="utf-8")
    return reference, candidate


def test_low_signal_inputs_are_strengthened_so_zeros_fail(tmp_path: Path) -> None:
    reference, zeros = _files(tmp_path, "x * 1e-7", "x * 0.0")
    result = run_opbot("verify", str(reference), str(zeros), "--json").json()
    assert result["status"] == "failed"
    assert "values" in {reason["check"] for reason in result["reasons"]}
    honest = tmp_path / "honest.py"
    honest.write_text(_KERNEL.format(expression="x * 1e-7"), encoding="utf-8")
    run = run_opbot("verify", str(reference), str(honest), "--json")
    result = run.json()
    assert result["status"] == "passed", result["reasons"]
    assert any("scaled" in case["note"] for case in result["cases"])


def test_a_reference_that_ignores_its_inputs_is_flagged(tmp_path: Path) -> None:
    reference, constant = _files(tmp_path, "torch.ones_like(x)", "x * 0.0 + 1.0")
    result = run_opbot("verify", str(reference), str(constant), "--json").json()
    assert result["status"] == "passed"
    assert any("does not depend on the inputs" in warning for warning in result["warnings"])


def test_signed_inputs_catch_a_kernel_that_assumes_non_negative(tmp_path: Path) -> None:
    reference = tmp_path / "reference.py"
    reference.write_text(reference_source("torch.relu(x)", "torch.rand(64, 100)"),
                         encoding="utf-8")
    identity = tmp_path / "identity.py"
    identity.write_text(_KERNEL.format(expression="x"), encoding="utf-8")
    result = run_opbot("verify", str(reference), str(identity), "--json").json()
    assert result["status"] == "failed"
    failing = {reason["case"] for reason in result["reasons"] if reason["check"] == "values"}
    assert failing
    assert "main" not in failing  # get_inputs() alone (rand >= 0) would have passed it


def test_compile_errors_map_to_the_kernel_file_line(tmp_path: Path) -> None:
    candidate = tmp_path / "kernel.py"
    candidate.write_text(_KERNEL.format(expression="x"), encoding="utf-8")
    source = candidate.read_text(encoding="utf-8")
    kernel_source = source[source.index("def fill"):source.index("class ModelNew")]
    node = ast.parse("x").body[0]
    node.lineno, node.col_offset = 4, 4  # the `x = tl.load(...)` line, counted from `def`
    error = CompilationError(kernel_source, node, "unsupported pointer type")
    located = as_user_error(error, candidate)
    assert located.location is not None
    lines = source.splitlines()
    assert lines[located.location.line - 1].strip().startswith("x = tl.load")
    assert "unsupported pointer type" in located.message
