"""Timing through the whole harness on the CPU (issue 16): the wall-clock path with its one
row, and a candidate whose worker lies about its own timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.base import VerifyRequest, VerifyResult
from runners.triton import TritonBackend
from tests.support import reference_source

_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        double[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
'''

# The candidate's module runs in its worker's process: it can rewrite the worker's answer to
# the judge's `time` request, and send a bare NaN past the worker's JSON encoding.
_LIAR = '''

import json as _json
import sys as _sys

_worker = _sys.modules["runners.harness.candidate_worker"]
_wire = _sys.modules["runners.harness.wire"]


class _LaxJson:
    loads = staticmethod(_json.loads)

    @staticmethod
    def dumps(value, **options):
        options["allow_nan"] = True
        return _json.dumps(value, **options)


_wire.json = _LaxJson
# The worker's channel turns non-finite floats into strings: not this one's.
_sys.modules["runners.harness.worker"].json_safe = lambda value: value


def _claimed(self, request):
    figure = {claim}
    return {{"kind": "timed", "median_ms": figure, "min_ms": figure, "max_ms": figure,
             "p20_ms": figure, "p80_ms": figure, "trials": 2, "warmup": 0, "remeasured": 0,
             "too_wide": False}}


_worker.CandidateSession.time = _claimed
'''


def _verify(tmp_path: Path, candidate_source: str) -> VerifyResult:
    reference = tmp_path / "reference.py"
    reference.write_text(reference_source("x * 2.0", "torch.randn(32, 100)"), encoding="utf-8")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(candidate_source, encoding="utf-8")
    # No static scan: it would flag the liar's tampering before any timing is asked for, and
    # this test is about what the judge does with the answer itself.
    return TritonBackend().verify(VerifyRequest(reference=reference, candidate=candidate,
                                                time_it=True, static_scan=False, timeout_s=120))


def test_the_cpu_interpreter_times_one_row_by_wall_clock(tmp_path: Path) -> None:
    result = _verify(tmp_path, _KERNEL)
    assert result.passed, [reason.to_json() for reason in result.reasons]
    timing = result.timing
    assert timing is not None
    assert (timing.method, timing.trials, timing.warmup, timing.remeasured) == (
        "wall_clock", 2, 0, 0)
    assert timing.note.startswith("CPU interpreter: these timings say nothing about device speed")
    assert timing.compile_ms is None
    assert timing.compile_note.startswith("torch.compile not attempted on the CPU interpreter")
    assert timing.clock_note == "CPU interpreter: no device clocks"
    assert timing.spread is not None
    assert timing.spread >= 0
    [row] = timing.rows
    assert (row.input_shapes, row.input_dtypes) == ([[32, 100]], ["float32"])
    assert (row.output_shapes, row.output_dtypes) == ([[32, 100]], ["float32"])
    assert (row.candidate_ms, row.eager_ms) == (timing.candidate_ms, timing.reference_ms)
    assert row.compile_ms is None
    assert timing.speedup == pytest.approx(timing.reference_ms / timing.candidate_ms)


@pytest.mark.slow
@pytest.mark.parametrize("claim", ["0.0", "float('nan')"])
def test_a_worker_lying_about_its_timing_gets_none(tmp_path: Path, claim: str) -> None:
    result = _verify(tmp_path, _KERNEL + _LIAR.format(claim=claim))
    # Its values are right, so it passes; its claimed speed is not believed.
    assert result.passed, [reason.to_json() for reason in result.reasons]
    assert result.timing is None
    [stage] = [stage for stage in result.stages if stage.stage == "time"]
    assert not stage.ok
    assert stage.note.startswith("the candidate's timing was refused: min_ms = ")
    assert "not a plausible time" in stage.note
    assert any(warning.startswith("timing: the candidate's timing was refused")
               for warning in result.warnings)


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (torch.cuda.is_available() is "
                    "False here)")
def test_a_gpu_times_several_shapes_by_do_bench_with_both_baselines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py sets TRITON_INTERPRET=1 for the CPU suite; the workers inherit it.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    reference = tmp_path / "reference.py"
    reference.write_text(reference_source("x * 2.0", "torch.randn(512, 4096)"),
                         encoding="utf-8")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(_KERNEL, encoding="utf-8")
    result = TritonBackend().verify(VerifyRequest(reference=reference, candidate=candidate,
                                                  time_it=True))
    assert result.passed, [reason.to_json() for reason in result.reasons]
    timing = result.timing
    assert timing is not None
    assert timing.method == "do_bench"
    assert timing.trials > 10  # do_bench's 100 ms of runs
    assert timing.warmup > 1
    assert timing.spread is not None
    assert timing.device_name
    assert timing.clock_note  # read, or "clocks not readable (...)" where the sandbox hides it
    # The perf case first, then the larger correctness shapes (a tail case of 512x4096 is
    # well over 64K elements); torch.compile timed, or its reason given.
    assert timing.rows[0].name == "main"
    assert len(timing.rows) >= 2
    assert timing.compile_ms is not None or timing.compile_note.startswith("torch.compile")
    for row in timing.rows:
        assert row.candidate_ms > 0
        assert row.eager_ms > 0
        rows, columns = row.input_shapes[0]
        # x * 2.0 in float32: every element read once and written once.
        assert row.bytes_moved in (None, 2 * 4 * rows * columns)
