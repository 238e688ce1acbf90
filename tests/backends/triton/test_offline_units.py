"""The Triton offline generator: planning (fusion) and the kernel file for a job."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bot.agent.backends.triton.offline import generate_offline
from bot.agent.backends.triton.offline.plan import make_plan
from bot.agent.offline.graph import lower_program
from bot.agent.offline.job import OfflineJob
from bot.agent.offline.trace import export_reference
from runners.base import CaseSpec, InputCase
from tests.support import reference_source


class _Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class _LinearGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x)) * 2.0


class _Chain(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * y[None, :] + 1.0).sigmoid()


def _plan_kinds(module: torch.nn.Module, *inputs: torch.Tensor) -> list[str]:
    plan = make_plan(lower_program(export_reference(module, inputs)))
    return [kernel.kind for kernel in plan.kernels]


def test_an_elementwise_chain_is_one_kernel() -> None:
    assert _plan_kinds(_Chain(), torch.randn(8, 16), torch.randn(16)) == ["pointwise"]


def test_softmax_is_two_row_reductions_and_a_normalisation() -> None:
    assert _plan_kinds(_Softmax(), torch.randn(8, 16)) == ["reduce", "reduce", "pointwise"]


def test_bias_and_activation_fuse_into_the_matmul_epilogue() -> None:
    assert _plan_kinds(_LinearGelu(), torch.randn(8, 32)) == ["matmul"]


def _write(tmp_path: Path, body: str, inputs: str) -> Path:
    path = tmp_path / "reference.py"
    path.write_text(reference_source(body, inputs), encoding="utf-8")
    return path


def test_unsupported_ops_are_named_not_their_consumers(tmp_path: Path) -> None:
    reference = _write(tmp_path, "torch.cumsum(x, dim=1) * 2 + 1", "torch.randn(4, 8)")
    result = generate_offline(OfflineJob(reference, "scan"))
    assert result.status == "unsupported"
    assert result.unsupported_ops == ["aten.cumsum.default"]


def test_a_reference_that_fails_is_an_error_not_unsupported(tmp_path: Path) -> None:
    reference = _write(tmp_path, "x.no_such_method()", "torch.randn(4, 8)")
    result = generate_offline(OfflineJob(reference, "broken"))
    assert result.status == "error"
    assert "no_such_method" in result.reason


def test_one_kernel_set_per_traced_signature(tmp_path: Path) -> None:
    reference = _write(tmp_path, "torch.tanh(x) * 3", "torch.randn(4, 8)")
    cases = [CaseSpec("2d", [InputCase("tensor", [4, 8])], 0),
             CaseSpec("1d", [InputCase("tensor", [9])], 1),
             CaseSpec("2d-half", [InputCase("tensor", [4, 8], dtype="float16")], 2)]
    result = generate_offline(OfflineJob(reference, "tanh3", cases=cases))
    assert result.status == "generated"
    assert len(result.kernels) == 3
    assert "_VARIANTS = {" in result.source
    namespace: dict[str, object] = {}
    exec(compile(result.source, str(tmp_path / "kernel.py"), "exec"), namespace)
    model = namespace["ModelNew"]()  # type: ignore[operator]
    for shape in ((5, 3), (11,)):
        values = torch.randn(shape)
        torch.testing.assert_close(model(values), torch.tanh(values) * 3)
    with pytest.raises(ValueError, match="no kernels"):
        model(torch.randn(2, 2, 2))
