"""The offline generator's shared half: tracing with symbolic sizes, sizes as Python, the
job and result that cross the worker boundary, and the worker asking the registry."""

from __future__ import annotations

import json
from pathlib import Path

import sympy
import torch

from bot.agent.offline import __main__ as worker
from bot.agent.offline.graph import lower_program
from bot.agent.offline.job import OfflineJob, OfflineResult
from bot.agent.offline.sizes import python_size
from bot.agent.offline.trace import export_reference
from runners.base import CaseSpec, InputCase


class _Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def test_sizes_stay_symbolic() -> None:
    program = export_reference(_Softmax(), [torch.randn(8, 16)])
    graph = lower_program(program)
    assert all(isinstance(size, sympy.Symbol) for size in graph.inputs[0].shape)


def test_python_sizes() -> None:
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    assert python_size(sympy.Integer(7)) == "7"
    assert python_size(s0 * s1) in ("(size_s0 * size_s1)", "(size_s1 * size_s0)")
    assert python_size(s0 + 1) in ("(1 + size_s0)", "(size_s0 + 1)")


def _job() -> OfflineJob:
    cases = [CaseSpec("half", [InputCase("tensor", [4, 8], dtype="float16"),
                               InputCase("value", value=0.5)], 3)]
    return OfflineJob(Path("ref.py"), "gelu", init_args=[2], cases=cases,
                      options={"generation": "asc"})


def test_a_job_survives_its_trip_through_json() -> None:
    job = _job()
    again = OfflineJob.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job
    assert again.option("generation", "legacy") == "asc"
    assert again.option("missing", "fallback") == "fallback"


def test_a_result_survives_its_trip_through_json() -> None:
    result = OfflineResult(status="generated", files={"ascendc/k.cpp": "// k"}, kernels=["k"])
    assert OfflineResult.from_json(json.loads(json.dumps(result.to_json()))) == result


class _RecordingBackend:
    def __init__(self) -> None:
        self.jobs: list[OfflineJob] = []

    def generate_offline(self, job: OfflineJob) -> OfflineResult:
        self.jobs.append(job)
        return OfflineResult(status="unsupported", unsupported_ops=["aten.cumsum.default"])


def test_the_worker_hands_the_job_to_the_named_backend() -> None:
    backend = _RecordingBackend()
    asked: list[str] = []

    def lookup(name: str) -> _RecordingBackend:
        asked.append(name)
        return backend

    answer = worker.answer({"backend": "somewhere", "job": _job().to_json()}, lookup)
    assert asked == ["somewhere"]
    assert backend.jobs == [_job()]
    assert answer["status"] == "unsupported"
    assert answer["unsupported_ops"] == ["aten.cumsum.default"]


def test_a_generator_bug_is_an_error_result_not_a_crash() -> None:
    def lookup(name: str) -> _RecordingBackend:
        raise RuntimeError(f"no {name} here")

    answer = worker.answer({"backend": "nowhere", "job": _job().to_json()}, lookup)
    assert answer["status"] == "error"
    assert "RuntimeError: no nowhere here" in answer["reason"]
