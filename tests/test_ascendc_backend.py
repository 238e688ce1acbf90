"""The Ascend C backend: honest answers without CANN, structured failures from a runner's
logs, and (on an Ascend runner, `pytest -m npu`) a real build and run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.ascendc import backend as backend_module
from runners.ascendc.backend import (
    AscendCBackend,
    StepOutcome,
    Toolchain,
    detect_toolchain,
    parse_junit,
    resolve_package,
    toolchain_from,
)
from runners.ascendc.package import PackageError, Step, build_plan
from runners.base import CaseSpec, InputCase, VerifyRequest
from tests.support import DATA, REFS
from tests.support_ascend import RecordingStepRunner

GOLDEN = DATA / "ascendc_golden"
FOUND = Toolchain(True, "", "/opt/cann", "8.3.RC1", "legacy")


def _package(tmp_path: Path, generation: str = "legacy", op: str = "gelu") -> Path:
    """An op folder as a pull request adds it: the golden package and a reference."""
    folder = tmp_path / "ops" / op
    shutil.copytree(GOLDEN / generation / op, folder)
    shutil.copy(REFS / "kb_02_gelu.py", folder / "reference.py")
    return folder


def _request(folder: Path, **extra: object) -> VerifyRequest:
    return VerifyRequest(reference=folder / "reference.py", candidate=folder,
                         backend="ascendc", **extra)  # type: ignore[arg-type]


JUNIT_FAIL = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_gelu_npu" name="test_npu_matches_reference[shape0-float32]">
<failure message="AssertionError: Tensor-likes are not close!">Mismatched elements: 3 / 520573
</failure></testcase>
<testcase classname="tests.test_gelu_npu" name="test_npu_matches_reference[tail1-float32]"/>
</testsuite></testsuites>"""
JUNIT_SKIPPED = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="t" name="test_npu_matches_reference[shape0-float32]">
<skipped message="no NPU is visible"/></testcase></testsuite></testsuites>"""
COMPILE_ERROR = """[ 50%] Building CXX object CMakeFiles/gelu_kernels.dir/gelu_kernel.cpp.o
/runner/ops/gelu/ascendc/gelu_kernel.cpp:97:9: error: use of undeclared identifier 'Sigmoidx'
        AscendC::Sigmoidx(y0, x0, count);
        ^
1 error generated.
make[2]: *** [CMakeFiles/gelu_kernels.dir/build.make:76: gelu_kernel.cpp.o] Error 1
"""


def _backend(runner: Callable[[Step, Path], StepOutcome],
             toolchain: Toolchain = FOUND) -> AscendCBackend:
    return AscendCBackend(detect=lambda: toolchain, runner=runner, soc="Ascend910B3",
                          npu_arch="dav-2201")


# --------------------------------------------------------------------------- no CANN here


def test_without_cann_the_backend_is_unavailable_with_a_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH"):
        monkeypatch.delenv(name, raising=False)
    toolchain = detect_toolchain()
    if toolchain.found:
        pytest.skip("this machine has CANN and torch_npu")
    availability = AscendCBackend().availability()
    assert availability.available is False
    assert availability.device == "none"
    assert "CANN" in availability.reason or "torch_npu" in availability.reason


def test_without_cann_verify_fails_the_build_check_and_never_raises(tmp_path: Path,
                                                                     monkeypatch:
                                                                     pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    if detect_toolchain().found:
        pytest.skip("this machine has CANN and torch_npu")
    backend = AscendCBackend()
    for candidate in (_package(tmp_path), tmp_path / "missing"):
        result = backend.verify(_request(candidate))
        assert result.status == "failed"
        assert [reason.check for reason in result.reasons] == ["build"]
        assert result.reasons[0].message == backend.availability().reason
        assert result.stages[0].stage == "build"


def test_a_missing_detection_module_is_a_reason_not_a_crash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_module, "_optional_module", lambda name: None)
    toolchain = detect_toolchain()
    assert not toolchain.found
    assert "detect.py" in toolchain.reason


def test_a_crashing_detection_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(backend_module, "_optional_module",
                        lambda name: SimpleNamespace(detect_cann=explode))
    assert "RuntimeError: boom" in detect_toolchain().reason


def test_toolchain_from_a_detection_result() -> None:
    missing = toolchain_from(SimpleNamespace(found=False, problems=["ASCEND_HOME_PATH unset"]),
                             torch_npu_found=False)
    assert not missing.found
    assert "ASCEND_HOME_PATH unset" in missing.reason
    no_torch_npu = toolchain_from(SimpleNamespace(found=True, home="/c", version="9.0.0",
                                                  generation="asc"), torch_npu_found=False)
    assert not no_torch_npu.found
    assert "torch_npu is not installed" in no_torch_npu.reason
    ready = toolchain_from(SimpleNamespace(found=True, home="/c", version="9.0.0",
                                           generation="asc"), torch_npu_found=True)
    assert ready == Toolchain(True, "", "/c", "9.0.0", "asc")


# --------------------------------------------------------------------------- with a runner


def test_a_compile_error_becomes_a_located_build_failure(tmp_path: Path) -> None:
    runner = RecordingStepRunner({"build": (2, COMPILE_ERROR)})
    result = _backend(runner).verify(_request(_package(tmp_path)))
    assert result.status == "failed"
    failure = result.reasons[0]
    assert failure.check == "build"
    assert "Sigmoidx" in failure.message
    assert failure.message.startswith("build failed (exit status 2)")
    assert failure.location is not None
    assert failure.location.file.endswith("gelu_kernel.cpp")
    assert failure.location.line == 97
    assert failure.details["step"] == "build"
    assert "Sigmoidx" in (failure.log_tail or "")
    assert [step.name for step in runner.steps] == ["clean-cache", "configure", "build"]


def test_the_build_runs_the_plan_in_the_package_folder(tmp_path: Path) -> None:
    runner = RecordingStepRunner()
    folder = _package(tmp_path)
    result = _backend(runner).verify(_request(folder))
    assert result.status == "passed", result.to_json()
    assert [step.name for step in runner.steps] == ["clean-cache", "configure", "build", "test"]
    configure = runner.steps[1].argv
    assert "-DASCEND_CANN_PACKAGE_PATH=/opt/cann" in configure
    assert "-DSOC_VERSION=Ascend910B3" in configure
    test = runner.steps[3]
    assert test.env["OPBOT_REFERENCE"] == str((folder / "reference.py").resolve())
    assert test.env["OPBOT_ASCENDC_LIB"] == "build-npu/libgelu_ops.so"
    assert [case.name for case in result.cases] == ["shape0-float32", "tail33-float16"]
    assert result.warnings == []  # the golden package lints clean


def test_failing_cases_become_value_failures(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    case = CaseSpec(name="shape0-float32", seed=3,
                    inputs=[InputCase(kind="tensor", shape=[127, 4099], dtype="float32")])
    runner = RecordingStepRunner(junit=JUNIT_FAIL)
    result = _backend(runner).verify(_request(folder, cases=[case]))
    assert result.status == "failed"
    assert [reason.check for reason in result.reasons] == ["values"]
    assert result.reasons[0].case == "shape0-float32"
    first = result.cases[0]
    assert (first.passed, first.shapes, first.dtypes, first.seed) == (
        False, [[127, 4099]], ["float32"], 3)
    cases_file = Path(runner.steps[-1].env["OPBOT_ASCENDC_CASES"])
    assert json.loads(cases_file.read_text())[0]["name"] == "shape0-float32"


def test_tests_that_all_skip_are_a_failure(tmp_path: Path) -> None:
    result = _backend(RecordingStepRunner(junit=JUNIT_SKIPPED)).verify(_request(_package(tmp_path)))
    assert result.status == "failed"
    assert result.reasons[0].check == "run"
    assert "no NPU is visible" in result.reasons[0].message


def test_a_missing_report_and_a_timeout_are_reported(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    result = _backend(RecordingStepRunner(junit=None)).verify(_request(folder))
    assert result.reasons[0].check == "run"
    timed_out = _backend(RecordingStepRunner({"build": (124, "...")})).verify(_request(folder))
    assert timed_out.reasons[0].check == "timeout"


def test_a_package_for_the_other_generation_is_refused(tmp_path: Path) -> None:
    asc = Toolchain(True, "", "/opt/cann", "9.0.0", "asc")
    result = _backend(RecordingStepRunner(), asc).verify(_request(_package(tmp_path, "legacy")))
    assert result.reasons[0].check == "build"
    assert "regenerate it for asc" in result.reasons[0].message


def test_not_a_package_is_a_load_failure(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text("class ModelNew: pass\n")
    result = _backend(RecordingStepRunner()).verify(_request(tmp_path))
    assert result.reasons[0].check == "load"
    with pytest.raises(PackageError):
        resolve_package(tmp_path)


def test_timing_comes_from_the_benchmark(tmp_path: Path) -> None:
    bench = json.dumps({"op": "gelu", "shapes": [[1000003]], "trials": 100,
                        "candidate_ms": 0.02, "candidate_min_ms": 0.019,
                        "candidate_max_ms": 0.03, "reference_ms": 0.05, "speedup": 2.5})
    runner = RecordingStepRunner(bench="warming up\n" + bench)
    result = _backend(runner).verify(_request(_package(tmp_path), time_it=True))
    assert result.status == "passed"
    assert result.timing is not None
    assert (result.timing.candidate_ms, result.timing.speedup) == (0.02, 2.5)
    assert runner.steps[-1].argv[-1] == "bench_gelu.py"


def test_lint_findings_travel_as_warnings(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    kernel = folder / "ascendc" / "gelu_kernel.cpp"
    kernel.write_text('#include "inner_interface/inner_kernel_operator_intf.h"\n'
                      + kernel.read_text())
    leftover = folder / "ascendc" / "build-npu" / "CMakeFiles" / "probe.cpp"
    leftover.parent.mkdir(parents=True)
    leftover.write_text('#include "impl/kernel_operator_vec_binary_impl.h"\n')
    result = _backend(RecordingStepRunner()).verify(_request(folder))
    assert any("[header]" in warning for warning in result.warnings)
    assert not any("probe.cpp" in warning for warning in result.warnings)  # build output
    assert "[header]" in _backend(RecordingStepRunner()).lint(folder)


def test_parse_junit_keeps_case_ids() -> None:
    report = parse_junit(JUNIT_FAIL)
    assert [(case.name, case.passed) for case in report.cases] == [
        ("shape0-float32", False), ("tail1-float32", True)]
    assert report.failures[0].check == "values"


@pytest.mark.parametrize("generation", ["legacy", "asc"])
@pytest.mark.parametrize("mode", ["npu", "cpu", "profile"])
def test_build_plans_per_generation_and_mode(generation: str, mode: str) -> None:
    plan = build_plan("gelu", generation, mode,  # type: ignore[arg-type]
                      entries=["gelu_float32"])
    configure = plan.step("configure").argv
    assert all(isinstance(arg, str) for step in plan.steps for arg in step.argv)
    assert ("-DRUN_MODE=" + ("cpu" if mode == "cpu" else "npu") in configure) == \
        (generation == "legacy")
    assert any(arg.startswith("-DCMAKE_ASC_ARCHITECTURES=") for arg in configure) == \
        (generation == "asc")
    assert ("-DCMAKE_ASC_RUN_MODE=cpu" in configure) == (generation == "asc" and mode == "cpu")
    last = plan.steps[-1]
    if mode == "profile":
        assert last.argv[:2] == (("msprof", "op") if generation == "legacy"
                                 else ("msopprof", "--output=prof"))
        assert "--warm-up=20" in last.argv
    else:
        assert last.argv[1:3] == ("-m", "pytest")


# --------------------------------------------------------------------------- real NPU


@pytest.mark.npu
def test_the_golden_gelu_package_builds_and_passes_on_an_npu(tmp_path: Path) -> None:
    backend = AscendCBackend()
    availability = backend.availability()
    if not availability.available:
        pytest.skip(f"no Ascend toolchain here: {availability.reason}")
    generation = backend.toolchain().generation or "legacy"
    result = backend.verify(_request(_package(tmp_path, generation), time_it=True))
    assert result.status == "passed", json.dumps(result.to_json(), indent=2)
    assert result.cases
    assert result.timing is not None
