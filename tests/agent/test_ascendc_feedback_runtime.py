"""What the model reads about an Ascend C package: device failures with the ACL code's
meaning and hint, g++ errors at the user's line, and the profiler's figures."""

from __future__ import annotations

import pytest

from bot.agent.backends.ascendc.feedback import (
    ascendc_feedback,
    ascendc_timing_feedback,
    build_feedback,
    profile_lines,
    runtime_feedback,
)
from bot.agent.report import PerfSection, perf_markdown
from runners.ascendc.package import Step
from runners.ascendc.runtime_errors import with_runtime_cause
from runners.ascendc.steps import StepOutcome, step_failure
from runners.base import Failure, SourceLocation, Timing, VerifyResult
from tests.support_ascend import fixture, read

UB_OOB = "runtime/aclrtSynchronizeStream-aivec-ub-out-of-bounds-507035.txt"
MAIN = "\n".join(f"// line {n}" for n in range(1, 131)) + \
    "\n    CHECK_ACL(aclrtSynchronizeStream(stream));\n"
KERNEL = "\n".join(["#include \"kernel_operator.h\""] + [""] * 11 + [
    "        AscendC::Add(zLocal, xLocal, yLocal, TILE_LENGTH);"])


def _result(*reasons: Failure) -> VerifyResult:
    return VerifyResult(status="failed", reasons=list(reasons), cases=[], stages=[],
                        device="Ascend910B3")


def test_runtime_failure_of_a_step_names_the_acl_code_meaning_and_hint() -> None:
    failure = step_failure(Step("test", ("python3", "test_rowmax.py"), runs_package_code=True),
                           StepOutcome("test", 1, 3.0, read(fixture(UB_OOB))))
    assert failure.check == "run"
    text = ascendc_feedback(_result(failure), {"ascendc/main.cpp": MAIN})
    assert "ACL error 507035: vector core exception; VEC instruction error: the ub address " \
        "out of bounds" in text
    assert "hint: A vector instruction touched UB outside its buffers" in text
    assert "aivec core 22" in text
    assert "at line 131 of main.cpp: CHECK_ACL(aclrtSynchronizeStream(stream));" in text
    assert "device log:" in text
    said = text.split("device log:")[0]
    assert said.count("the ub address out of bounds") == 1  # said once, not per layer


def test_judges_crash_with_only_a_log_still_gets_the_code_meaning() -> None:
    """A failure whose runtime account sits only in its log (no parsed details)."""
    crash = Failure(check="crash", message="the worker died (exit status 1)",
                    log_tail="noise\n" * 50 + read(fixture(UB_OOB)))
    text = runtime_feedback(crash, {})
    assert text is not None
    assert text.startswith("[crash] the worker died (exit status 1)")
    assert "ACL error 507035: vector core exception" in text
    # The runner's enrichment (with_runtime_cause) does not make it say the meaning twice.
    enriched = with_runtime_cause(crash)
    again = runtime_feedback(enriched, {})
    assert again is not None
    assert again.split("device log:")[0].count("vector core exception") == 1


def test_environmental_failure_says_not_to_touch_the_kernel() -> None:
    busy = Failure(check="init", message="aclInit failed",
                   log_tail=read(fixture("runtime/aclInit-500000-EL0005-resource-busy.txt")))
    text = runtime_feedback(busy, {})
    assert text is not None
    assert "not the kernel's" in text


def test_value_failures_are_left_to_the_shared_feedback() -> None:
    values = Failure(check="values", message="mismatch", case="c0", output=0,
                     details={"max_abs_err": 1.0, "max_rel_err": 1.0, "mismatches": 3,
                              "total": 8, "atol": 1e-3, "rtol": 1e-3})
    assert runtime_feedback(values, {}) is None
    assert "max abs error 1" in ascendc_feedback(_result(values), {})


def test_gxx_error_in_devkit_header_reports_the_users_line() -> None:
    log = read(fixture("gnu/gxx-add-int8-static-assert-in-devkit-header-utf8-quotes.txt"))
    failure = Failure(check="build", message="type-check failed (exit status 1)", log_tail=log)
    text = build_feedback(failure, {"ascendc/op_kernel/add_custom.cpp": KERNEL})
    lines = text.splitlines()
    assert lines[1] == ("add_custom.cpp:13: error: static assertion failed: Failed to check "
                        "dtype in Add, current api support dtype combination is src and dst "
                        "both: half / float / int16_t / int32_t.")
    assert lines[2] == "    AscendC::Add(zLocal, xLocal, yLocal, TILE_LENGTH);"
    assert lines[3].startswith("    (reported inside kernel_operator_vec_binary_impl.h:7:64: ")
    assert "hint: A CANN API rejected this call" in text
    assert "(+1 follow-on error(s) from this one: add_custom.cpp:13: 'signed char'" in text


def test_link_and_cmake_errors_reach_the_model_without_a_source_line() -> None:
    for name, expected in (
            ("gnu/ld-multiple-definition-cannot-find-lascendcl.txt",
             "ld: error: cannot find -lascendcl"),
            ("gnu/cmake-find-package-ASC-no-config.txt", "CMakeLists.txt:3: error: By not"),
            ("gnu/ld-debug-undefined-reference-collect2.txt",
             "main.cpp:8: error: undefined reference to 'add_custom_do'")):
        failure = Failure(check="build", message="build failed", log_tail=read(fixture(name)))
        text = build_feedback(failure, {})
        assert expected in text, (name, text)
        assert "collect2" not in text


PROFILED = Timing(device="Ascend910B3", shapes=[[4096]], trials=100, candidate_ms=0.05,
                  candidate_min_ms=0.048, candidate_max_ms=0.06, reference_ms=0.1, speedup=2.0,
                  note="the package's benchmark (NPU events, median); msprof: gelu_custom 12.40 "
                  "us per launch on the device (median of 5, 12.10-12.90 us, block dim 8); "
                  "bound by aiv_mte2 (61% of core time)",
                  kernel_us=12.4, bottleneck="aiv_mte2")


def test_timing_feedback_carries_the_profile_figures() -> None:
    text = ascendc_timing_feedback(PROFILED)
    assert "gelu_custom 12.40 us per launch on the device" in text
    assert "bound by aiv_mte2 (61% of core time)" in text
    assert "Bottleneck: the aiv_mte2 pipe: GM->UB loads dominate" in text
    assert text.splitlines()[-1].startswith("Make it faster")
    # Without the runner's note: the bare figures.
    bare = profile_lines(Timing(**{**PROFILED.__dict__, "note": ""}))
    assert bare[0] == ("Profiler (msprof): the kernel itself takes 12.40 us per launch on the "
                       "device (median).")


def test_perf_md_keeps_the_profile_figures() -> None:
    result = VerifyResult(status="passed", reasons=[], cases=[], stages=[],
                          device="Ascend910B3", timing=PROFILED)
    markdown = perf_markdown("gelu", [PerfSection(backend="ascendc", title="Ascend C",
                                                  generator="offline", attempts=1,
                                                  result=result, notes=profile_lines(PROFILED))])
    assert "12.40 us per launch" in markdown
    assert "aiv_mte2" in markdown


def test_a_crash_without_a_device_account_keeps_its_first_error_line() -> None:
    log = "start\n" + "progress line\n" * 400 + "ValueError: tiling length must be > 0\n" + \
        "progress line\n" * 400 + "worker exited\n"
    crash = Failure(check="crash", message="the worker died (exit status 1)", log_tail=log)
    text = ascendc_feedback(_result(crash), {})
    assert "ValueError: tiling length must be > 0" in text
    assert "worker exited" in text


# What the CPU model's blocks print when the real API's checks stop them (the shim's line is
# where Python saw the failure: nothing the model can fix).
_SHIM = SourceLocation("/tmp/opbot-cpumodel-x/opbot_cpu_candidate.py", 16,
                       "outputs = run_tensors('/tmp/opbot-cpumodel-x/program', tensors)")


@pytest.mark.parametrize(("printed", "hint"), [
    ("[ERROR] offset is 4096, which can not be larger than data len 312",
     "tile length and the tiling header's are out of step"),
    ("[ERROR] tensor size needs to be at least 448 bytes, while current tensor size is only "
     "224 bytes", "a half tile used as float"),
    ("[ERROR] buffer length is 100, which should be times of 32 Bytes", "multiples of 32"),
])
def test_cpu_model_api_checks_get_the_usual_cause(printed: str, hint: str) -> None:
    failure = Failure(check="run", case="main", location=_SHIM,
                      message=f"1 of 40 blocks failed: {printed}", log_tail=printed)
    text = ascendc_feedback(_result(failure), {"ascendc/gelu_kernel.cpp": KERNEL})
    assert f"Hint: {hint}" in text or hint in text
    assert "opbot_cpu_candidate.py" not in text  # opbot's own line is no lead
    assert "/tmp/opbot-cpumodel" not in text.split("log (end)")[0]
    assert printed.split("] ")[1] in text


def test_a_location_in_the_package_is_kept() -> None:
    failure = Failure(check="run", case="main", message="boom",
                      location=SourceLocation("/x/attempt-1/ascendc/gelu_kernel.cpp", 13))
    text = ascendc_feedback(_result(failure), {"ascendc/gelu_kernel.cpp": KERNEL})
    assert "at line 13 of gelu_kernel.cpp: AscendC::Add(zLocal, xLocal, yLocal" in text
    assert "Hint:" not in text
