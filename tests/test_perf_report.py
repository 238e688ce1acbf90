"""PERF.md's Performance section for a device measurement (the recorded H100 fixture) and
for a CPU interpreter run; the `roofline` key of `opbot generate --json`; the policy's
`perf` section."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.agent.outcome import GenerateOutcome
from bot.agent.report import INTERPRETER_NOTE, PerfSection, perf_markdown, recommended
from bot.perf.peaks import DevicePeaks
from bot.policy import PolicyError, default_policy, load_policy, repository_policy
from runners.base import CaseResult, TimedCase, Timing, VerifyResult

FIXTURE = Path(__file__).parent / "data" / "perf" / "h100_matmul_fp16.json"


def _device_result() -> VerifyResult:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert "constructed fixture" in data["comment"]
    return VerifyResult.from_json(data["result"])


def _cpu_result() -> VerifyResult:
    timing = Timing(device="cpu", shapes=[[1024, 1024]], trials=5, candidate_ms=812.0,
                    candidate_min_ms=800.0, candidate_max_ms=830.0, reference_ms=2.5,
                    speedup=2.5 / 812.0, note="CPU interpreter", method="wall_clock",
                    warmup=1)
    case = CaseResult(name="shape0-float32", shapes=[[1024, 1024]], dtypes=["float32"],
                      seed=0, passed=True, max_abs_err=1e-6, max_rel_err=1e-6)
    return VerifyResult(status="passed", reasons=[], cases=[case], stages=[], device="cpu",
                        timing=timing)


def _section(result: VerifyResult, backend: str = "triton") -> PerfSection:
    return PerfSection(backend=backend, title=backend.title(), generator="offline",
                       attempts=1, result=result)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_device_perf_md_shows_method_rows_chart_and_source() -> None:
    text = perf_markdown("matmul", [_section(_device_result())])
    lines = _lines(text)
    assert ("Measured with do_bench: N=100 trials after 25 warm-up run(s); spread 3.1% "
            "((p80 - p20) / median of the candidate's samples); re-measured 1 time(s) for a "
            "wider spread than the policy allows. Device: NVIDIA H100 80GB HBM3 (cuda:0). "
            "SM clock 1980 MHz, memory clock 2619 MHz, 41 C at the start (nvidia-smi).") in lines
    assert ("| perf | 4096x4096, 4096x4096 | float16 | 0.215 | 0.19 | 0.192 | 0.88x | 0.89x | "
            "468.2 | 639.3 | 64.6% | compute |") in lines
    assert ("| shape0-float16 | 1024x1024, 1024x1024 | float16 | 0.0105 | 0.0098 | 0.0101 | "
            "0.93x | 0.96x | 599.2 | 204.5 | 20.7% | compute |") in lines
    assert "```mermaid" in lines
    assert "xychart-beta" in lines
    assert sum(line.startswith("    bar [") for line in lines) == 3
    assert '    title "NVIDIA H100 80GB HBM3 ms per shape"' in lines
    peaks = next(line for line in lines if line.startswith("Peaks: "))
    assert peaks.startswith("Peaks: NVIDIA H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU "
                            "datasheet, https://")
    assert "Percentages are of: FP16 989.5 TFLOP/s." in peaks
    assert INTERPRETER_NOTE not in text


def test_cpu_perf_md_keeps_the_honest_table_and_shows_no_chart() -> None:
    text = perf_markdown("matmul", [_section(_cpu_result())])
    lines = _lines(text)
    assert "| candidate | 812.000 | 800.000 | 830.000 |" in lines
    assert "| reference (PyTorch eager) | 2.500 | | |" in lines
    assert ("Shapes: 1024x1024. Trials: 5. Device: cpu. Reference / candidate: 0.00308x."
            in lines)
    assert INTERPRETER_NOTE in lines
    assert "say nothing about how fast the kernel runs on a device" in INTERPRETER_NOTE
    for absent in ("```mermaid", "Peaks:", "TFLOP/s", "% of peak", "Measured with"):
        assert absent not in text


def test_a_device_run_without_rows_still_gets_its_summary_and_a_chart() -> None:
    result = _device_result()
    assert result.timing is not None
    timing = replace(result.timing, rows=[])
    text = perf_markdown("matmul", [_section(replace(result, timing=timing))])
    assert "| candidate | 0.215 | 0.211 | 0.229 |" in text
    assert "bar [0.2150, 0.0000, 0.0000]" in text
    assert "| case | shapes | dtype |" not in text


def test_compile_that_did_not_run_says_why() -> None:
    result = _device_result()
    assert result.timing is not None
    timing = replace(result.timing, compile_ms=None,
                     compile_note="torch.compile failed: no inductor backend for this device",
                     rows=[replace(row, compile_ms=None) for row in result.timing.rows])
    text = perf_markdown("matmul", [_section(replace(result, timing=timing))])
    assert ("torch.compile: not measured (torch.compile failed: no inductor backend for this "
            "device).") in text
    assert "| 0.88x | - | 468.2 |" in text


def test_policy_peaks_reach_the_report() -> None:
    mine = {"H100": DevicePeaks("lab H100", 3000.0, {"float16": 800.0}, source="our sheet")}
    text = perf_markdown("matmul", [_section(_device_result())], peaks=mine)
    assert "Peaks: the policy's perf.peaks: our sheet." in text
    assert "| 79.9% | compute |" in text  # 639.25 of 800 TFLOP/s


def test_the_comparison_still_recommends_by_median() -> None:
    fast = _device_result()
    assert fast.timing is not None
    slow = replace(fast, timing=replace(fast.timing, candidate_ms=0.5))
    sections = [_section(slow, "ascendc"), _section(fast, "triton")]
    assert recommended(sections) == "triton"
    text = perf_markdown("matmul", sections)
    assert "Recommended: **triton**, the faster verified one." in text
    assert text.count("```mermaid") == 2  # each backend's section has its chart


def _outcome(result: VerifyResult) -> GenerateOutcome:
    return GenerateOutcome(op="matmul", status="passed", attempts=1, backend="triton",
                           out=None, verification=result)


def test_json_roofline_on_a_device() -> None:
    data = _outcome(_device_result()).to_json()
    roof = data["roofline"]
    assert roof["device"] == "NVIDIA H100 80GB HBM3"
    assert roof["peak_source"].startswith("NVIDIA H100 SXM5 80GB: ")
    first = roof["rows"][0]
    assert set(first) == {"case", "gbps", "tflops", "intensity", "bound", "percent_of_peak",
                          "speedup_eager", "speedup_compile", "implausible", "flagged"}
    assert first["case"] == "perf"
    assert first["bound"] == "compute"
    assert first["percent_of_peak"] == pytest.approx(64.60, abs=0.01)
    assert first["speedup_eager"] == pytest.approx(0.190 / 0.215)
    json.dumps(data)  # plain JSON all the way down


def test_json_roofline_is_null_on_the_cpu_and_other_keys_stay() -> None:
    data = _outcome(_cpu_result()).to_json()
    assert data["roofline"] is None
    for key in ("op", "status", "attempts", "backend", "out", "cases", "perf", "reasons",
                "tokens", "stopped_because", "unsupported_ops", "message", "notes", "device",
                "warnings", "transcript", "tuning", "best_attempt"):
        assert key in data
    assert GenerateOutcome.from_json(data).verification is not None


# -- the policy's perf section ---------------------------------------------------------------


def test_perf_policy_defaults() -> None:
    perf = default_policy().perf
    assert perf.max_spread == pytest.approx(0.10)
    assert perf.peak_overrides() == {}


def test_perf_policy_peaks_become_overrides() -> None:
    policy = load_policy('perf:\n  max_spread: 0.05\n  peaks:\n    "Ascend910B3": '
                         '{memory_gbps: 1600, tflops: {float16: 313}, source: "lab sheet"}\n')
    assert policy.perf.max_spread == pytest.approx(0.05)
    peaks = policy.perf.peak_overrides()["Ascend910B3"]
    assert peaks.memory_gbps == 1600.0
    assert peaks.flops_peak("float16") == 313.0
    assert peaks.source == "lab sheet"


@pytest.mark.parametrize(("text", "message"), [
    ("perf:\n  max_spread: 0\n", "perf.max_spread: 0 is less than the minimum of 0.01"),
    ("perf:\n  peaks:\n    H100: {tflops: {float8: 1}}\n", "perf.peaks.H100.tflops"),
    ("perf:\n  peaks:\n    H100: {memory_gbps: -5}\n", "perf.peaks.H100.memory_gbps"),
])
def test_bad_perf_settings_name_the_field(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace(".", r"\.")):
        load_policy(text)


def test_a_repository_may_choose_its_spread_but_not_the_peaks() -> None:
    found = repository_policy(default_policy(), 'perf:\n  max_spread: 0.2\n  peaks:\n'
                                                '    H100: {memory_gbps: 99999}\n')
    assert found.policy.perf.max_spread == pytest.approx(0.2)
    assert found.policy.perf.peaks == ()
    assert any(note.startswith("perf.peaks: a device's peaks are the operator's")
               for note in found.refused)


def test_the_policys_spread_reaches_every_verification_it_starts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bot.cli import _apply_policy
    from runners.base import MAX_SPREAD_VARIABLE, VerifyRequest

    monkeypatch.delenv(MAX_SPREAD_VARIABLE, raising=False)
    assert VerifyRequest(reference=tmp_path, candidate=tmp_path).max_spread == 0.10
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("perf:\n  max_spread: 0.25\n", encoding="utf-8")
    _apply_policy(policy_file)
    assert VerifyRequest(reference=tmp_path, candidate=tmp_path).max_spread == 0.25


@pytest.mark.parametrize("value", ["abc", "0", "7", "nan", ""])
def test_a_spread_variable_out_of_range_falls_back_to_the_default(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from runners.base import MAX_SPREAD_VARIABLE, default_max_spread

    monkeypatch.setenv(MAX_SPREAD_VARIABLE, value)
    assert default_max_spread() == 0.10


def test_the_policys_peaks_reach_the_pull_request_body() -> None:
    from bot.jobs import pull_request_body
    from bot.spec import load_spec

    spec = load_spec(Path(__file__).parent.parent / "examples" / "ops" / "relu" / "op.yaml")
    outcome = GenerateOutcome(op="relu", status="passed", attempts=1, backend="triton",
                              out=None, verification=_device_result())
    policy = load_policy('perf:\n  peaks:\n    "H100": {memory_gbps: 1000, tflops: '
                         '{float16: 500}, source: "our own lab sheet"}\n')
    body = pull_request_body(spec, outcome, head_sha="0" * 40, issue=None, policy=policy)
    assert "our own lab sheet" in body
    assert "our own lab sheet" not in pull_request_body(spec, outcome, head_sha="0" * 40,
                                                        issue=None, policy=None)
    assert "NVIDIA H100 Tensor Core GPU datasheet" in pull_request_body(
        spec, outcome, head_sha="0" * 40, issue=None, policy=None)


# -- untrusted text, implausible timings, non-finite numbers (attack16) ---------------------

# What a hostile reference worker or candidate could answer: a fence, raw HTML, a mention,
# an issue link, table pipes and an unclosed HTML comment.
EVIL = "x\n```\n</details><img src=x onerror=alert(1)> @octocat #1 | col |\n<!-- "


def _timed_case(name: str = "perf", candidate_ms: float = 1.0, eager_ms: float = 2.0,
                dtypes: tuple[str, ...] = ("torch.float32",), bytes_moved: int = 1 << 26,
                flops: int = 1 << 20) -> TimedCase:
    shapes = [[4096, 4096]]
    return TimedCase(name=name, input_shapes=shapes, input_dtypes=list(dtypes),
                     output_shapes=shapes, output_dtypes=list(dtypes),
                     candidate_ms=candidate_ms, eager_ms=eager_ms, compile_ms=None,
                     spread=0.01, bytes_moved=bytes_moved, flops=flops)


def _timed_result(rows: list[TimedCase], device: str = "cuda:0",
                  name: str = "NVIDIA H100 80GB HBM3", clock: str = "clocks ok",
                  cases: list[CaseResult] | None = None,
                  warnings: tuple[str, ...] = ()) -> VerifyResult:
    first = rows[0]
    timing = Timing(device=device, shapes=[[4096, 4096]], trials=100,
                    candidate_ms=first.candidate_ms, candidate_min_ms=first.candidate_ms,
                    candidate_max_ms=first.candidate_ms, reference_ms=first.eager_ms,
                    speedup=first.eager_ms / first.candidate_ms, method="do_bench",
                    warmup=10, spread=0.01, device_name=name, clock_note=clock, rows=rows)
    main = CaseResult("main", [[4096, 4096]], ["float32"], 1, True, 0.0, 0.0)
    return VerifyResult(status="passed", reasons=[], cases=cases or [main], stages=[],
                        device=device, warnings=list(warnings), timing=timing, seed=1)


def _hostile_result() -> VerifyResult:
    return _timed_result([_timed_case(name=EVIL, dtypes=(EVIL[:40],))],
                         device="cuda:0" + EVIL, name="H100" + EVIL, clock=EVIL,
                         cases=[CaseResult(EVIL, [[1]], [EVIL], 1, True)], warnings=(EVIL,))


def _assert_inert(text: str) -> None:
    """No raw HTML, comment opener, mention or fence from EVIL, and every table row keeps
    its columns (an unescaped | would add one)."""
    assert not re.search(r"(?<!\\)<(img|/details|!--)", text)  # \< is a literal <
    assert "@octocat" not in text
    fences = [line for line in text.splitlines() if line.startswith("```")]
    assert all(line in {"```mermaid", "```", "```sh"} for line in fences)
    assert len(fences) % 2 == 0
    table: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in table}
        assert len(widths) <= 1, table
        table = []


def test_hostile_worker_text_stays_inert_in_perf_md() -> None:
    text = perf_markdown("op", [_section(_hostile_result())])
    _assert_inert(text)
    assert "\uff20octocat" in text  # still readable, just not a mention
    assert max(len(line) for line in text.splitlines()) < 2000


def test_hostile_worker_text_stays_inert_in_the_pull_request_body() -> None:
    from bot.jobs import pull_request_body
    from bot.spec import load_spec

    spec = load_spec(Path(__file__).parent.parent / "examples" / "ops" / "relu" / "op.yaml")
    outcome = GenerateOutcome(op="relu", status="passed", attempts=1, backend="triton",
                              out=None, verification=_hostile_result(), notes=[EVIL])
    body = pull_request_body(spec, outcome, head_sha="0" * 40, issue=3)
    marker, rest = body.split("\n", 1)
    assert marker.startswith("<!-- ")
    assert marker.endswith(" -->")
    _assert_inert(rest)


def test_a_device_name_without_a_length_cap_is_cut() -> None:
    result = _timed_result([_timed_case()], name="H" * 100_000)
    text = perf_markdown("op", [_section(result)])
    assert "H" * 400 not in text
    assert max(len(line) for line in text.splitlines()) < 2000


def test_above_the_peak_is_flagged_in_perf_md_and_json() -> None:
    liar = _timed_result([_timed_case(candidate_ms=1e-4, bytes_moved=1 << 30, flops=0),
                          _timed_case(name="honest")])
    text = perf_markdown("op", [_section(liar)])
    (row,) = [line for line in text.splitlines() if line.startswith("| perf |")]
    assert "implausible: above the device's peak; check the timing" in row
    assert "flagged for human review" in row
    assert "**Flagged for human review**: perf ran above" in text
    (honest,) = [line for line in text.splitlines() if line.startswith("| honest |")]
    assert "implausible" not in honest
    assert "flagged" not in honest
    rows = _outcome(liar).to_json()["roofline"]["rows"]
    assert [row["implausible"] for row in rows] == [True, False]
    assert [row["flagged"] for row in rows] == [True, False]


def test_a_speedup_over_ten_is_flagged_without_a_peak() -> None:
    fast = _timed_result([_timed_case(candidate_ms=0.1, eager_ms=5.0)], name="Unknown GPU")
    text = perf_markdown("op", [_section(fast)])
    (row,) = [line for line in text.splitlines() if line.startswith("| perf |")]
    assert "50.00x (**flagged for human review**)" in row


def test_an_int8_kernel_is_not_held_to_a_float_peak() -> None:
    int8 = _timed_result([_timed_case(dtypes=("torch.int8",), bytes_moved=1 << 20,
                                      flops=2 * 4096**3, candidate_ms=0.01, eager_ms=0.02)])
    text = perf_markdown("op", [_section(int8)])
    (row,) = [line for line in text.splitlines() if line.startswith("| perf |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "int8"
    assert cells[10] == "-"
    assert "TF32" not in text


def test_to_json_writes_no_nan_or_infinity() -> None:
    rows = [_timed_case(eager_ms=float("nan")), _timed_case(name="b", eager_ms=float("inf"))]
    result = _timed_result(rows)
    assert result.timing is not None
    result = replace(result, timing=replace(result.timing, reference_ms=float("nan")))
    text = json.dumps(_outcome(result).to_json(), allow_nan=False)
    assert json.loads(text)["perf"]["reference_ms"] is None
