"""The Ascend C backend: honest answers without CANN, structured failures from a runner's
build logs, a built package verified by the judge through opbot's shim (the same topology as
every backend), and (on an Ascend runner, `pytest -m npu`) a real build and run."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePath
from types import SimpleNamespace

import pytest
import torch

from runners.ascendc import backend as backend_module
from runners.ascendc.backend import (
    AscendCBackend,
    Toolchain,
    detect_toolchain,
    resolve_package,
    toolchain_from,
)
from runners.ascendc.detect import CannInfo, machine_arch
from runners.ascendc.package import PackageError, Step, build_plan
from runners.ascendc.shim import SHIM_NAME, shim_source
from runners.ascendc.steps import StepOutcome, run_step, step_failure
from runners.base import (
    CaseResult,
    CaseSpec,
    Failure,
    InputCase,
    SourceLocation,
    StageResult,
    Timing,
    Tolerance,
    VerifyRequest,
    VerifyResult,
)
from runners.sandbox import find_bwrap
from tests.support import DATA, REFS, REPO
from tests.support_ascend import PASSED, RecordingJudge, RecordingStepRunner, read, real_sample

GOLDEN = DATA / "ascendc_golden"
FOUND = Toolchain(True, "", "/opt/cann", "8.3.RC1", "legacy")
LIBRARY = "build-npu/libgelu_ops.so"


def _package(tmp_path: Path, generation: str = "legacy", op: str = "gelu") -> Path:
    """An op folder as a pull request adds it: the golden package and a reference."""
    folder = tmp_path / "ops" / op
    shutil.copytree(GOLDEN / generation / op, folder)
    shutil.copy(REFS / "kb_02_gelu.py", folder / "reference.py")
    return folder


def real(relative: str) -> str:
    """A real toolchain output from the shared samples (skips where they are absent)."""
    return read(real_sample(relative))


def _request(folder: Path, **extra: object) -> VerifyRequest:
    return VerifyRequest(reference=folder / "reference.py", candidate=folder,
                         backend="ascendc", **extra)  # type: ignore[arg-type]


COMPILE_ERROR = """[ 50%] Building CXX object CMakeFiles/gelu_kernels.dir/gelu_kernel.cpp.o
/runner/ops/gelu/ascendc/gelu_kernel.cpp:97:9: error: use of undeclared identifier 'Sigmoidx'
        AscendC::Sigmoidx(y0, x0, count);
        ^
1 error generated.
make[2]: *** [CMakeFiles/gelu_kernels.dir/build.make:76: gelu_kernel.cpp.o] Error 1
"""
def _backend(runner: Callable[[Step, Path], StepOutcome], toolchain: Toolchain = FOUND,
             judge: Callable[[VerifyRequest], VerifyResult] | None = None) -> AscendCBackend:
    return AscendCBackend(detect=lambda: toolchain, runner=runner, soc="Ascend910B3",
                          npu_arch="dav-2201", judge=judge or RecordingJudge())


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


@pytest.mark.parametrize("error", [ImportError("No module named 'acl'"), RuntimeError("boom")])
def test_a_crashing_detection_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch,
                                                      error: Exception) -> None:
    def explode() -> None:
        raise error

    monkeypatch.setattr(backend_module, "detect_cann", explode)
    toolchain = detect_toolchain()
    assert not toolchain.found
    assert f"{type(error).__name__}: {error}" in toolchain.reason


def test_toolchain_from_a_detection_result() -> None:
    missing = toolchain_from(CannInfo(found=False, problems=["ASCEND_HOME_PATH unset"]),
                             torch_npu_found=False)
    assert not missing.found
    assert "ASCEND_HOME_PATH unset" in missing.reason
    no_torch_npu = toolchain_from(CannInfo(found=True, home="/c", version="9.0.0",
                                           generation="asc"), torch_npu_found=False)
    assert not no_torch_npu.found
    assert "torch_npu is not installed" in no_torch_npu.reason
    ready = toolchain_from(CannInfo(found=True, home="/c", version="9.0.0",
                                    generation="asc"), torch_npu_found=True)
    assert ready == Toolchain(True, "", "/c", "9.0.0", "asc")


# --------------------------------------------------------------------------- with a runner


def test_a_compile_error_becomes_a_located_build_failure(tmp_path: Path) -> None:
    runner, judge = RecordingStepRunner({"build": (2, COMPILE_ERROR)}), RecordingJudge()
    result = _backend(runner, judge=judge).verify(_request(_package(tmp_path)))
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
    assert judge.requests == []  # a failed build is never judged


def test_after_the_build_the_judge_verifies_the_shim(tmp_path: Path) -> None:
    runner, judge = RecordingStepRunner(), RecordingJudge()
    folder = _package(tmp_path)
    case = CaseSpec(name="shape0-float32", seed=3,
                    inputs=[InputCase(kind="tensor", shape=[127, 4099], dtype="float32")])
    request = _request(folder, cases=[case], init_args=[], seed=1234, timeout_s=77.0,
                       tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)})
    result = _backend(runner, judge=judge).verify(request)
    assert result.status == "passed", result.to_json()
    # The build steps only: the package's own pytest and benchmark are not the verdict.
    assert [step.name for step in runner.steps] == ["clean-cache", "configure", "build"]
    configure = runner.steps[1].argv
    assert "-DASCEND_CANN_PACKAGE_PATH=/opt/cann" in configure
    assert "-DSOC_VERSION=Ascend910B3" in configure
    [judged] = judge.requests
    shim = folder / "ascendc" / "build-npu" / SHIM_NAME
    assert judged == replace(request, candidate=shim, backend="ascendc", static_scan=False,
                             readable=(shim.parent,), expects_kernel_launches=False,
                             package_ops=True, compiles_on_first_launch=False)
    text = judge.shims[0]
    library = str((folder / "ascendc" / LIBRARY).resolve())
    assert f"torch.ops.load_library({library!r})" in text
    assert "return torch.ops.opbot_gelu.gelu(*tensors)" in text
    assert "isinstance(value, torch.Tensor)" in text  # the tensors only, as the NPU test
    tree = ast.parse(text)
    assert [node.name for node in tree.body if isinstance(node, ast.ClassDef)] == ["ModelNew"]
    # The verdict is the judge's, after the build's stage.
    assert result.cases == PASSED.cases
    assert (result.device, result.seed) == ("npu (Ascend)", 7)
    assert [(stage.stage, stage.ok) for stage in result.stages] == [("build", True),
                                                                    ("check", True)]
    assert result.warnings == []  # the golden package lints clean


def test_the_shim_calls_the_operator_as_the_npu_test_does(tmp_path: Path) -> None:
    library = tmp_path / "build-npu" / "libgelu_ops.so"
    namespace: dict[str, object] = {}
    loaded: list[str] = []
    calls: list[tuple[object, ...]] = []
    fake_torch = SimpleNamespace(
        Tensor=torch.Tensor, nn=torch.nn,
        ops=SimpleNamespace(load_library=loaded.append,
                            opbot_gelu=SimpleNamespace(gelu=lambda *args: calls.append(args))))
    source = shim_source("opbot_gelu", "gelu", library).replace("import torch\n", "")
    exec(compile(source, "shim", "exec"), {"torch": fake_torch}, namespace)
    model = namespace["ModelNew"](3, "unused")  # type: ignore[operator]
    x, y = torch.ones(2), torch.zeros(2)
    model(x, 0.5, y)
    assert loaded == [str(library.resolve())]
    assert len(calls) == 1
    assert calls[0][0] is x
    assert calls[0][1] is y


@pytest.mark.parametrize("failure", [
    Failure(check="values", case="main", output=0, message="output 0: 9 of 10 values differ"),
    Failure(check="crash", message="the candidate's worker died of SIGSEGV"),
    Failure(check="timeout", message="no verdict within 77 s"),
])
def test_the_judges_failures_pass_through(tmp_path: Path, failure: Failure) -> None:
    verdict = VerifyResult(status="failed", reasons=[failure], cases=[
        CaseResult("main", [[16, 16384]], ["float32"], 11, False)],
        stages=[StageResult("check", False, 0.1)], device="npu (Ascend)",
        warnings=["a judge warning"], seed=5)
    result = _backend(RecordingStepRunner(), judge=RecordingJudge(verdict)).verify(
        _request(_package(tmp_path)))
    assert result.status == "failed"
    assert result.reasons == [failure]
    assert result.cases == verdict.cases
    assert result.warnings == ["a judge warning"]
    assert result.stages[0].stage == "build"
    assert result.stages[0].ok


JUDGED = Timing(device="npu (Ascend)", shapes=[[16, 16384]], trials=50, candidate_ms=0.02,
                candidate_min_ms=0.019, candidate_max_ms=0.03, reference_ms=0.05,
                speedup=2.5, note="device_events, median of 50 after 5 warm-up")
NO_PROFILER = (127, "[Errno 2] No such file or directory: 'msprof'")


def test_timing_comes_from_the_judge(tmp_path: Path) -> None:
    timing = JUDGED
    judge = RecordingJudge(replace(PASSED, timing=timing,
                                   stages=[*PASSED.stages, StageResult("time", True, 1.0)]))
    runner = RecordingStepRunner({"profile": NO_PROFILER})
    result = _backend(runner, judge=judge).verify(_request(_package(tmp_path), time_it=True))
    assert result.status == "passed"
    assert result.timing == timing
    assert judge.requests[0].time_it is True
    # Then the package's benchmark under the profiler: here no profiler, so no profile.
    assert [stage.stage for stage in result.stages] == ["build", "check", "time", "time"]
    assert not result.stages[-1].ok
    assert "time" not in [step.name for step in runner.steps]  # no benchmark step
    assert [step.name for step in runner.steps][-1] == "profile"
    assert result.warnings[-1].startswith("no kernel profile: profile failed (not found)")


# --------------------------------------------------------------------------- the device's words

BENCH_JSON = json.dumps({"op": "topk_custom", "device": "npu", "shapes": [[4096, 64]],
                         "dtype": "float32", "trials": 100, "candidate_ms": 0.16,
                         "candidate_min_ms": 0.155, "candidate_max_ms": 0.2,
                         "reference_ms": 0.48, "speedup": 3.0})


def _package_of_kernel(tmp_path: Path, kernel: str) -> Path:
    """The golden package whose manifest names `kernel` (the real samples' kernel)."""
    folder = _package(tmp_path)
    manifest = folder / "ascendc" / "opbot.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "entries": {"float32": kernel}}))
    return folder


def test_the_profile_gives_the_kernels_device_time_and_bottleneck(tmp_path: Path) -> None:
    """Real msprof op outputs (OpBasicInfo, PipeUtilization, console) left by the profile
    step join the judge's Timing."""
    runner = RecordingStepRunner(
        {"profile": (0, real("msprof/neo-pan-msprof-op-console.txt") + BENCH_JSON + "\n")},
        profile_files={
            "prof/OPPROF_20250928085610_QJFCRNITGIYOFIZI/OpBasicInfo.csv":
                real("msprof/hammingdist-topk-OpBasicInfo.csv"),
            "prof/OPPROF_20250928085610_QJFCRNITGIYOFIZI/PipeUtilization.csv":
                real("msprof/hammingdist-topk-PipeUtilization-no-bw-cols.csv")})
    judge = RecordingJudge(replace(PASSED, timing=JUDGED))
    folder = _package_of_kernel(tmp_path, "topk_custom")
    result = _backend(runner, judge=judge).verify(_request(folder, time_it=True))
    assert result.status == "passed", result.to_json()
    timing = result.timing
    assert timing is not None
    assert (timing.candidate_ms, timing.reference_ms) == (0.02, 0.05)  # the judge's
    assert timing.kernel_us == pytest.approx(155.740005)
    assert timing.bottleneck == "aiv_vec"
    assert "msprof: topk_custom_0 155.74 us per launch" in timing.note
    assert "bound by aiv_vec (70% of core time)" in timing.note
    profile = runner.steps[-1]
    assert profile.name == "profile"
    assert "--kernel-name=topk_custom" in profile.argv
    assert profile.env["OPBOT_REFERENCE"] == str((folder / "reference.py").resolve())
    assert (result.stages[-1].stage, result.stages[-1].ok) == ("time", True)


def test_without_the_judges_timing_the_benchmark_gives_it(tmp_path: Path) -> None:
    """Whole-application msprof (op_summary) and the benchmark's JSON, no judge timing."""
    runner = RecordingStepRunner(
        {"profile": (0, "bench: warm-up\n" + BENCH_JSON + "\n")},
        profile_files={"prof/PROF_001/mindstudio_profiler_output/op_summary_001.csv":
                       real("msprof/neo-pan-real_cann_minimal-op_summary_001.csv")})
    folder = _package_of_kernel(tmp_path, "sanitized_kernel")
    result = _backend(runner, judge=RecordingJudge()).verify(_request(folder, time_it=True))
    timing = result.timing
    assert timing is not None
    assert (timing.candidate_ms, timing.candidate_min_ms, timing.reference_ms) == (
        0.16, 0.155, 0.48)
    assert timing.speedup == pytest.approx(3.0)
    assert timing.shapes == [[4096, 64]]
    assert timing.device == "npu (Ascend)"
    assert timing.kernel_us == pytest.approx((42399.12 + 42058.48) / 2)
    assert timing.bottleneck == "aiv_scalar"
    assert timing.note.startswith("the package's benchmark")


def test_stale_profiles_are_not_read(tmp_path: Path) -> None:
    folder = _package_of_kernel(tmp_path, "topk_custom")
    stale = folder / "ascendc" / "prof" / "OPPROF_1" / "OpBasicInfo.csv"
    stale.parent.mkdir(parents=True)
    stale.write_text(real("msprof/hammingdist-topk-OpBasicInfo.csv"))
    runner = RecordingStepRunner({"profile": (0, BENCH_JSON)})
    result = _backend(runner, judge=RecordingJudge()).verify(_request(folder, time_it=True))
    assert result.timing is not None
    assert result.timing.kernel_us is None
    assert "no kernel launch" in result.stages[-1].note
    assert "msprof did not finish" in result.stages[-1].note  # its console said nothing


def test_a_device_error_in_the_benchmark_fails_the_verdict(tmp_path: Path) -> None:
    log = real("runtime/ptoas-a3-aivec-ub-out-of-bounds-507035.txt")
    runner = RecordingStepRunner({"profile": (1, log)})
    result = _backend(runner, judge=RecordingJudge()).verify(
        _request(_package(tmp_path), time_it=True))
    assert result.status == "failed"
    [failure] = result.reasons
    assert failure.check == "run"
    assert failure.message.startswith("profile failed at run time (exit status 1): "
                                      "runtime error 507035: vector core exception")
    assert "the ub address out of bounds" in failure.message
    assert "aivec core 14" in failure.message
    assert "Hint: A vector instruction touched UB outside its buffers" in failure.message
    assert failure.location is not None
    assert (PurePath(failure.location.file).name, failure.location.line) == ("main.cpp", 92)
    runtime = failure.details["runtime"]
    assert (runtime["code"], runtime["core_id"], runtime["environmental"]) == (507035, 14, False)
    assert runtime["error_ids"] == ["EZ9999"]
    assert failure.details["step"] == "profile"
    assert result.cases == PASSED.cases  # the judge's cases stay
    assert (result.stages[-1].stage, result.stages[-1].ok) == ("time", False)


def test_a_busy_machine_only_costs_the_profile(tmp_path: Path) -> None:
    log = real("runtime/ptoas-aclInit-500000-EL0005-resource-busy.txt")
    result = _backend(RecordingStepRunner({"profile": (1, log)}),
                      judge=RecordingJudge(replace(PASSED, timing=JUDGED))).verify(
        _request(_package(tmp_path), time_it=True))
    assert result.status == "passed"
    assert result.timing == JUDGED
    assert "runtime error 500000" in result.warnings[-1]
    assert "The machine failed, not the kernel" in result.warnings[-1]


def test_the_judges_run_failures_carry_the_devices_account(tmp_path: Path) -> None:
    """A forward that faulted on the NPU: the judge's failure (located in opbot's shim)
    gets the runtime parser's meaning, hint and the failed call's site."""
    folder = _package(tmp_path)
    shim = folder / "ascendc" / "build-npu" / SHIM_NAME
    log = real("runtime/ptoas-a3-aicore-timeout-507014.txt")
    failure = Failure(check="run", case="main", message="RuntimeError: ACL stream synchronize "
                      "failed", location=SourceLocation(str(shim), 25), log_tail=log)
    verdict = replace(PASSED, status="failed", reasons=[failure])
    result = _backend(RecordingStepRunner(), judge=RecordingJudge(verdict)).verify(
        _request(folder))
    [reason] = result.reasons
    assert reason.check == "run"
    assert reason.case == "main"
    assert reason.message.startswith("RuntimeError: ACL stream synchronize failed; the device "
                                     "says: runtime error 507014: AI Core timeout")
    assert "Hint: The kernel never finished" in reason.message
    assert reason.location is not None
    assert (PurePath(reason.location.file).name, reason.location.line) == ("main.cpp", 84)
    assert reason.details["runtime"]["code"] == 507014
    assert reason.log_tail == log


def test_the_judges_failures_without_a_device_error_stay_as_they_are(tmp_path: Path) -> None:
    log = real("runtime/torch-npu-ERR00100-vector-core-507035.txt")
    located = Failure(check="run", message="RuntimeError: NPU function error",
                      location=SourceLocation("/somewhere/user.py", 3), log_tail=log)
    plain = Failure(check="run", message="RuntimeError: shape mismatch")
    values = Failure(check="values", message=log)
    verdict = replace(PASSED, status="failed", reasons=[located, plain, values])
    result = _backend(RecordingStepRunner(), judge=RecordingJudge(verdict)).verify(
        _request(_package(tmp_path)))
    explained, kept, compared = result.reasons
    assert "the device says: runtime error 507035: vector core exception" in explained.message
    assert explained.location == located.location  # not opbot's shim: kept
    assert (kept, compared) == (plain, values)


@pytest.mark.parametrize("sample", [
    "runtime/torch-npu-AclrtSynchronizeStreamWithTimeout-507011.txt",
    "runtime/llama-cpp-cann-EE1001-context-null.txt",
])
def test_a_step_that_fails_at_run_time_is_a_run_failure(sample: str) -> None:
    step = Step("test", ("python3", "-m", "pytest"))
    failure = step_failure(step, StepOutcome("test", 1, 3.0, real(sample)))
    assert failure.check == "run"
    assert failure.message.startswith("test failed at run time (exit status 1): runtime error")
    assert failure.details["runtime"]["code"] in (507011, 107002)
    compiled = step_failure(Step("build", ("cmake",)), StepOutcome("build", 2, 1.0,
                                                                   COMPILE_ERROR))
    assert compiled.check == "build"


def test_a_build_that_leaves_no_library_is_a_build_failure(tmp_path: Path) -> None:
    def runner(step: Step, cwd: Path) -> StepOutcome:
        return StepOutcome(step.name, 0, 0.1, "ok")

    judge = RecordingJudge()
    result = _backend(runner, judge=judge).verify(_request(_package(tmp_path)))
    assert [reason.check for reason in result.reasons] == ["build"]
    assert LIBRARY in result.reasons[0].message
    assert judge.requests == []


def test_a_timeout_is_reported_and_never_judged(tmp_path: Path) -> None:
    judge = RecordingJudge()
    result = _backend(RecordingStepRunner({"build": (124, "...")}), judge=judge).verify(
        _request(_package(tmp_path)))
    assert result.reasons[0].check == "timeout"
    assert judge.requests == []


def test_a_judge_that_raises_is_a_verdict_not_a_crash(tmp_path: Path) -> None:
    def explode(request: VerifyRequest) -> VerifyResult:
        raise RuntimeError("boom")

    result = _backend(RecordingStepRunner(), judge=explode).verify(_request(_package(tmp_path)))
    assert result.status == "failed"
    assert result.reasons[0].check == "crash"
    assert "RuntimeError: boom" in result.reasons[0].message


def test_a_manifest_cannot_put_code_into_the_shim(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    manifest = folder / "ascendc" / "opbot.json"
    data = json.loads(manifest.read_text())
    judge = RecordingJudge()
    for namespace in ("aten", "opbot_gelu.gelu(x)\nimport os\n#"):
        manifest.write_text(json.dumps({**data, "namespace": namespace}))
        result = _backend(RecordingStepRunner(), judge=judge).verify(_request(folder))
        assert [reason.check for reason in result.reasons] == ["load"]
        assert "opbot_<name>" in result.reasons[0].message
    assert judge.requests == []
    with pytest.raises(PackageError):
        shim_source("opbot_gelu", "gelu(x); import os", Path("lib.so"))


def test_the_shim_replaces_what_the_build_left_at_its_name(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    target = tmp_path / "elsewhere.py"
    target.write_text("untouched\n")
    shim = folder / "ascendc" / "build-npu" / SHIM_NAME
    shim.parent.mkdir(parents=True)
    shim.symlink_to(target)
    judge = RecordingJudge()
    assert _backend(RecordingStepRunner(), judge=judge).verify(_request(folder)).passed
    assert target.read_text() == "untouched\n"
    assert not shim.is_symlink()
    assert "class ModelNew" in judge.shims[0]


def test_an_asc_package_is_refused_before_the_asc_language(tmp_path: Path) -> None:
    result = _backend(RecordingStepRunner(), FOUND).verify(_request(_package(tmp_path, "asc")))
    assert result.reasons[0].check == "build"
    assert "predates the ASC language" in result.reasons[0].message
    assert "regenerate it for legacy" in result.reasons[0].message


def _toolkit(root: Path, ascendc_dir: str | None) -> Path:
    home = root / "cann"
    (home / "x86_64-linux").mkdir(parents=True)
    if ascendc_dir is not None:
        (home / ascendc_dir).mkdir(parents=True)
        (home / ascendc_dir / "ascendc.cmake").write_text("# ascendc_library\n")
    return home


def test_a_legacy_package_builds_on_cann_9_where_ascendc_cmake_ships(tmp_path: Path) -> None:
    """CANN 9 prefers ASC but still ships ascendc.cmake: a legacy package is built there."""
    home = _toolkit(tmp_path, f"{machine_arch()}-linux/tikcpp/ascendc_kernel_cmake")
    cann9 = Toolchain(True, "", str(home), "9.0.0", "asc")
    runner = RecordingStepRunner()
    result = _backend(runner, cann9).verify(_request(_package(tmp_path, "legacy")))
    assert result.status == "passed", result.to_json()
    configure = next(step for step in runner.steps if step.name == "configure")
    assert f"-DASCEND_CANN_PACKAGE_PATH={home}" in configure.argv


def test_a_legacy_package_is_refused_where_no_layout_holds_ascendc_cmake(
        tmp_path: Path) -> None:
    home = _toolkit(tmp_path, None)
    cann9 = Toolchain(True, "", str(home), "9.1.0", "asc")
    result = _backend(RecordingStepRunner(), cann9).verify(_request(_package(tmp_path, "legacy")))
    message = result.reasons[0].message
    assert result.reasons[0].check == "build"
    assert "has no ascendc.cmake" in message
    assert str(home / "compiler/tikcpp/ascendc_kernel_cmake") in message
    assert "regenerate it for asc" in message


def test_not_a_package_is_a_load_failure(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text("class ModelNew: pass\n")
    result = _backend(RecordingStepRunner()).verify(_request(tmp_path))
    assert result.reasons[0].check == "load"
    with pytest.raises(PackageError):
        resolve_package(tmp_path)


def test_lint_findings_travel_as_warnings(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    kernel = folder / "ascendc" / "gelu_kernel.cpp"
    kernel.write_text('#include "inner_interface/inner_kernel_operator_intf.h"\n'
                      + kernel.read_text())
    leftover = folder / "ascendc" / "build-npu" / "CMakeFiles" / "probe.cpp"
    leftover.parent.mkdir(parents=True)
    leftover.write_text('#include "impl/kernel_operator_vec_binary_impl.h"\n')
    judge = RecordingJudge(replace(PASSED, warnings=["from the judge"]))
    result = _backend(RecordingStepRunner(), judge=judge).verify(_request(folder))
    assert any("[header]" in warning for warning in result.warnings)
    assert result.warnings[-1] == "from the judge"
    assert not any("probe.cpp" in warning for warning in result.warnings)  # build output
    assert "[header]" in _backend(RecordingStepRunner()).lint(folder)


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


# --------------------------------------------------------------------------- the real judge

# A stand-in for a built package: torch.ops.opbot_gelu.gelu in plain C++ loops on the CPU (no
# ATen compute), registered as the package's op.cpp registers its NPU kernel.
FAKE_LIBRARY = r"""
#include <cmath>
#include <torch/library.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

namespace {
template <typename T>
void loop(const at::Tensor& in, at::Tensor& out) {
    const T* src = in.data_ptr<T>();
    T* dst = out.data_ptr<T>();
    for (int64_t i = 0; i < in.numel(); ++i) {
        float x = static_cast<float>(src[i]);
        dst[i] = static_cast<T>(OPBOT_SCALE * 0.5f * x * (1.0f + std::erf(x * 0.70710678f)));
    }
}

at::Tensor gelu(const at::Tensor& x) {
    at::Tensor in = x.contiguous();
    at::Tensor out = at::empty_like(in);
    switch (in.scalar_type()) {
        case at::kFloat: loop<float>(in, out); break;
        case at::kHalf: loop<at::Half>(in, out); break;
        case at::kBFloat16: loop<at::BFloat16>(in, out); break;
        default: TORCH_CHECK(false, "gelu: unsupported dtype ", in.scalar_type());
    }
    return out;
}
}  // namespace

TORCH_LIBRARY(opbot_gelu, m) { m.def("gelu(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(opbot_gelu, CPU, m) { m.impl("gelu", &gelu); }
"""


@pytest.fixture(scope="module")
def fake_libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stand-in built twice, in parallel: right, and 1% off ("wrong")."""
    compiler = shutil.which("g++") or shutil.which("c++")
    include = Path(torch.__file__).parent / "include"
    if compiler is None or not (include / "torch" / "library.h").is_file():
        pytest.skip("needs a C++ compiler and torch's headers to build a stand-in library")
    folder = tmp_path_factory.mktemp("fake-ascendc-library")
    (folder / "gelu.cpp").write_text(FAKE_LIBRARY)
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"
    builds = {}
    for name, scale in (("right", "1.0f"), ("wrong", "1.01f")):
        builds[name] = subprocess.Popen(
            [compiler, "-O1", "-std=c++17", "-w", "-shared", "-fPIC", abi,
             f"-DOPBOT_SCALE={scale}", f"-I{include}", str(folder / "gelu.cpp"),
             f"-L{Path(torch.__file__).parent / 'lib'}", "-ltorch_cpu", "-lc10",
             "-o", str(folder / f"{name}.so")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, process in builds.items():
        output, _ = process.communicate(timeout=600)
        if process.returncode != 0:
            pytest.skip(f"the stand-in library did not build ({name}): {output[-500:]}")
    return {name: folder / f"{name}.so" for name in builds}


@pytest.mark.parametrize("variant", ["right", "wrong"])
def test_the_judge_verifies_a_built_package_through_the_shim(
        tmp_path: Path, fake_libraries: dict[str, Path], variant: str) -> None:
    """End to end, without CANN: the judge's workers, sandbox, guard and comparison on a
    package whose build leaves a library registering torch.ops.opbot_gelu.gelu."""
    folder = _package(tmp_path)
    backend = AscendCBackend(detect=lambda: FOUND, runner=RecordingStepRunner(
        source=fake_libraries[variant]), soc="Ascend910B3", npu_arch="dav-2201")
    result = backend.verify(_request(folder, time_it=variant == "right", timeout_s=240.0))
    checks = {reason.check for reason in result.reasons}
    if variant == "right":
        assert result.status == "passed", result.to_json()
        assert result.cases
        assert all(case.passed for case in result.cases)
        assert result.timing is not None
    else:
        assert result.status == "failed"
        assert checks == {"values"}, result.to_json()
    assert result.stages[0].stage == "build"


# --------------------------------------------------------------------------- real NPU


@pytest.mark.npu
def test_the_golden_gelu_package_builds_and_passes_on_an_npu(tmp_path: Path) -> None:
    backend = AscendCBackend()
    availability = backend.availability()
    if not availability.available:
        pytest.skip(f"no Ascend toolchain here: {availability.reason}")
    generation = backend.toolchain().generation or "legacy"
    folder = _package(tmp_path, generation)
    result = backend.verify(_request(folder, time_it=True))
    assert result.status == "passed", json.dumps(result.to_json(), indent=2)
    assert result.device.startswith("npu")
    assert result.stages[0].stage == "build"
    assert result.cases
    assert result.timing is not None
    assert (folder / "ascendc" / "build-npu" / SHIM_NAME).is_file()


# --------------------------------------------------------------------------- the sandboxed step

PROBE = """
import json, os, pathlib, sys
wrote = []
for outside in sys.argv[1:3]:
    try:
        pathlib.Path(outside).write_text("escaped")
        wrote.append(outside)
    except OSError:
        pass
pathlib.Path("prof").mkdir()
pathlib.Path("prof/OpBasicInfo.csv").write_text("written")
print(json.dumps({"token": os.environ.get("GITHUB_TOKEN"), "lib": os.environ.get("OPBOT_LIB"),
                  "reference": pathlib.Path(sys.argv[3]).read_text(), "wrote": wrote}))
"""


def test_a_step_that_runs_the_packages_code_runs_in_the_sandbox(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if find_bwrap() is None:
        pytest.skip("needs bubblewrap (the sandbox)")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_the_package")
    package = tmp_path / "ops" / "gelu" / "ascendc"
    package.mkdir(parents=True)
    reference = tmp_path / "elsewhere" / "reference.py"
    reference.parent.mkdir()
    reference.write_text("class Model: pass\n")
    beside = tmp_path / "outside.txt"  # under the sandbox's private /tmp: never the host's
    checkout = REPO / ".opbot-sandbox-probe"  # under the read-only root
    step = Step("profile", (sys.executable, "-c", PROBE, str(beside), str(checkout),
                            str(reference)),
                env={"OPBOT_LIB": "build-npu/libgelu_ops.so"}, timeout_s=120.0,
                runs_package_code=True, readable=(str(reference),))
    try:
        outcome = run_step(step, package)
        assert not checkout.exists()
    finally:
        checkout.unlink(missing_ok=True)
    assert outcome.ok, outcome.output
    seen = json.loads(outcome.output.strip().splitlines()[-1])
    assert seen["token"] is None  # secrets stay out
    assert seen["lib"] == "build-npu/libgelu_ops.so"  # the step's own variables pass
    assert seen["reference"] == "class Model: pass\n"
    if not REPO.resolve().is_relative_to("/tmp"):
        # A checkout under /tmp lies in the sandbox's private /tmp: writable there, and
        # still never on the host (checked above).
        assert str(checkout) not in seen["wrote"]
    assert not beside.exists()
    assert (package / "prof" / "OpBasicInfo.csv").read_text() == "written"
