"""What a runner backend tells the judge about its kernels travels on the VerifyRequest:
the judge and its workers ask the request, never the backend's name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runners import triton as triton_module
from runners.base import CaseSpec, InputCase, Tolerance, VerifyRequest, VerifyResult
from runners.harness.candidate_worker import CandidateSession
from runners.triton import TritonBackend
from runners.verify import _guard_failures

RECORD: dict[str, Any] = {"computed": {}, "launches": 0, "mutated": []}


def _request(tmp_path: Path, **extra: Any) -> VerifyRequest:
    case = CaseSpec(name="main", seed=3, inputs=[
        InputCase(kind="tensor", shape=[4, 5], dtype="float16", init="rand", low=-1.0),
        InputCase(kind="value", value=0.5)])
    return VerifyRequest(reference=tmp_path / "reference.py", candidate=tmp_path / "model.py",
                         cases=[case], init_args=[3, [1, 2]],
                         tolerances={"float16": Tolerance(atol=1e-3, rtol=1e-3)},
                         perf_case=case, time_it=True, **extra)


def test_a_plain_request_is_judged_as_strictly_as_a_triton_one(tmp_path: Path) -> None:
    request = VerifyRequest(reference=tmp_path / "r.py", candidate=tmp_path / "c.py")
    assert request.expects_kernel_launches is True
    assert request.package_ops is False
    assert request.compiles_on_first_launch is True


@pytest.mark.parametrize("traits", [
    {},
    {"expects_kernel_launches": False, "package_ops": True, "compiles_on_first_launch": False},
])
def test_the_request_round_trips_through_json(tmp_path: Path, traits: dict[str, bool]) -> None:
    request = _request(tmp_path, **traits)
    back = VerifyRequest.from_json(request.to_json())
    # Absolute paths travel (the worker runs elsewhere); the parent's own fields stay home.
    assert back == replace(request, reference=request.reference.resolve(),
                           candidate=request.candidate.resolve())


def test_an_older_json_takes_the_defaults(tmp_path: Path) -> None:
    data = _request(tmp_path, package_ops=True).to_json()
    for key in ("expects_kernel_launches", "package_ops", "compiles_on_first_launch"):
        del data[key]
    back = VerifyRequest.from_json(data)
    assert (back.expects_kernel_launches, back.package_ops, back.compiles_on_first_launch) == (
        True, False, True)


def test_no_launch_is_a_failure_only_where_launches_are_expected() -> None:
    [failure] = _guard_failures("main", RECORD, expects_kernel_launches=True)
    assert failure.check == "no_kernel"
    assert _guard_failures("main", RECORD, expects_kernel_launches=False) == []


@pytest.mark.parametrize("package_ops", [True, False])
def test_the_candidate_worker_lets_package_ops_through_when_asked(tmp_path: Path,
                                                                   package_ops: bool) -> None:
    session = CandidateSession(tmp_path / "c.py", "cpu", package_ops=package_ops)
    assert session.guard.package_ops is package_ops


def test_the_triton_backend_says_how_its_kernels_run(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[VerifyRequest] = []

    def judge(request: VerifyRequest) -> VerifyResult:
        judged.append(request)
        return VerifyResult(status="passed", reasons=[], cases=[], stages=[])

    monkeypatch.setattr(triton_module, "run_harness", judge)
    request = _request(tmp_path, expects_kernel_launches=False, package_ops=True,
                       compiles_on_first_launch=False)
    TritonBackend().verify(request)
    assert judged == [replace(request, expects_kernel_launches=True, package_ops=False,
                              compiles_on_first_launch=True)]
