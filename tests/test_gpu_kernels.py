"""Every example operator's offline Triton kernel, verified on a CUDA GPU through the real
harness with timing on (issue 16: timed by triton.testing.do_bench, one row per shape).

Run on a GPU machine with `pytest -m gpu` (scripts/gpu-check does); skipped without CUDA.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bot.agent.offline.run import generate_in_worker
from bot.spec import load_spec
from bot.verification import verify_candidate
from tests.support import EXAMPLES

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (torch.cuda.is_available() is False here)"),
]

SPECS = sorted(EXAMPLES.glob("*/op.yaml"))


@pytest.fixture(autouse=True)
def _kernels_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py sets TRITON_INTERPRET=1 for the CPU suite, and the harness's worker
    # inherits it: unset, the kernels compile for the GPU instead of being interpreted.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def _offline_kernel(spec_path: Path, folder: Path) -> Path:
    spec = load_spec(spec_path)
    assert spec.reference_path is not None
    drafted = generate_in_worker(spec.reference_path, op_name=spec.name,
                                 init_args=None if spec.init_args is None
                                 else list(spec.init_args), cases=spec.cases())
    assert drafted.status == "generated", drafted.reason
    kernel = folder / f"{spec.name}.py"
    kernel.write_text(drafted.source, encoding="utf-8")
    return kernel


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.parent.name)
def test_offline_kernel_verifies_and_is_timed_on_cuda(spec_path: Path, tmp_path: Path) -> None:
    kernel = _offline_kernel(spec_path, tmp_path)
    result = verify_candidate(spec_path, kernel, backend="triton", time_it=True)
    assert result.passed, [reason.to_json() for reason in result.reasons]
    assert result.device.startswith("cuda"), result.device
    timing = result.timing
    assert timing is not None
    assert timing.method == "do_bench"
    assert timing.rows, "one timed row per shape, the perf case first"
    assert timing.candidate_ms > 0
    assert timing.reference_ms > 0
    assert all(row.candidate_ms > 0 and row.eager_ms > 0 for row in timing.rows)
