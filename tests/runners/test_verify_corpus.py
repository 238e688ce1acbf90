"""`opbot verify` on the adversarial corpus: every cheat caught by its check, every honest
kernel accepted. Each candidate's first line says what the harness must conclude:
`# expect: passed` or `# expect: failed <check>`. The corpus runs the command in this test
process through its warm workers (`run_opbot_here`); the tests below it run `opbot` as a
user does, in a process of its own with cold workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import CANDIDATES, run_opbot, run_opbot_here

# The limit for a candidate that never returns: warm workers load it in well under a
# second, so the case it hangs in is named long before this.
HANG_TIMEOUT_S = "10"


def _expectation(candidate: Path) -> tuple[str, str | None]:
    first = candidate.read_text(encoding="utf-8").splitlines()[0]
    words = first.split("expect:", 1)[1].split()
    return words[0], (words[1] if len(words) > 1 else None)


def _corpus() -> list[object]:
    params = []
    for candidate in sorted(CANDIDATES.glob("*.py")):
        status, check = _expectation(candidate)
        reference = CANDIDATES / "refs" / f"{candidate.name.split('__')[0]}.py"
        params.append(pytest.param(reference, candidate, status, check, id=candidate.stem))
    return params


@pytest.mark.parametrize(("reference", "candidate", "status", "check"), _corpus())
def test_verdict_names_the_check(reference: Path, candidate: Path, status: str,
                                 check: str | None) -> None:
    # A candidate expected to hang needs only a limit to reach, not the one the others need
    # on a busy machine: each second here is a second of a CI worker.
    limit = HANG_TIMEOUT_S if check == "timeout" else "30"
    run = run_opbot_here("verify", str(reference), str(candidate), "--backend", "triton",
                         "--json", "--timeout", limit)
    assert "Traceback" not in run.stderr
    result = run.json()
    assert result["status"] == status, result["reasons"]
    assert run.code == (0 if status == "passed" else 1)
    checks = {reason["check"] for reason in result["reasons"]}
    if status == "passed":
        assert checks == set()
        assert result["cases"]
        assert all(case["passed"] for case in result["cases"])
        # Odd sizes and a fresh-input repeat are among the cases, not only the real shapes.
        assert any(case["name"].startswith("tail") for case in result["cases"])
    else:
        assert check in checks, result["reasons"]
        for reason in result["reasons"]:
            assert reason["message"]


def test_value_failures_carry_the_numbers() -> None:
    run = run_opbot("verify", str(CANDIDATES / "refs" / "relu.py"),
                    str(CANDIDATES / "relu__bad_values_no_tail_mask.py"), "--json")
    reason = next(item for item in run.json()["reasons"] if item["check"] == "values")
    details = reason["details"]
    assert reason["case"]
    assert reason["output"] == 0
    assert details["max_abs_err"] > 0
    assert details["mismatches"] > 0
    assert details["first_mismatches"][0]["index"]
    # The mismatches sit in the tail: past the last full 1024-element block of the flat
    # tensor, so in its last rows (where untouched memory happens to hold relu(x), say 0 for
    # a negative x, the value passes: which columns differ is chance).
    (first_row, last_row, rows), (_, _, cols) = details["mismatch_index_ranges"]
    tail_start = details["total"] // 1024 * 1024
    assert details["total"] == rows * cols
    assert first_row >= tail_start // cols
    assert last_row == rows - 1
    row, col = details["first_mismatches"][0]["index"]
    assert row * cols + col >= tail_start


def test_run_errors_point_at_the_kernel_line() -> None:
    candidate = CANDIDATES / "relu__bad_run_interpreter_error.py"
    run = run_opbot("verify", str(CANDIDATES / "refs" / "relu.py"), str(candidate), "--json")
    reason = next(item for item in run.json()["reasons"] if item["check"] == "run")
    location = reason["location"]
    assert Path(location["file"]).name == candidate.name
    assert "tl.arange" in location["source_line"]
    lines = candidate.read_text(encoding="utf-8").splitlines()
    assert "tl.arange" in lines[location["line"] - 1]
    assert "power of 2" in reason["message"]


def test_human_output_lists_cases_and_reasons() -> None:
    run = run_opbot("verify", str(CANDIDATES / "refs" / "softmax.py"),
                    str(CANDIDATES / "softmax__bad_torch_op_partial_sum.py"))
    assert run.code == 1
    assert "failed" in run.stdout
    assert "torch_op" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr


@pytest.mark.parametrize(("candidate", "check"), [
    ("relu__bad_crash_segfault.py", "crash"), ("relu__bad_timeout_infinite_loop.py", "timeout")])
def test_a_crash_or_a_hang_names_the_case_it_was_running(candidate: str, check: str) -> None:
    run = run_opbot_here("verify", str(CANDIDATES / "refs" / "relu.py"),
                         str(CANDIDATES / candidate), "--json", "--timeout", HANG_TIMEOUT_S)
    result = run.json()
    reason = next(item for item in result["reasons"] if item["check"] == check)
    assert reason.get("case"), reason
    running = [case for case in result["cases"] if case["name"] == reason["case"]]
    assert len(running) == 1
    assert running[0]["shapes"]
    assert not running[0]["passed"]
